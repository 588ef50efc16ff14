//! The `ksmith` binary: parses the command line and hands over to [`ksmith_cli::pipeline`].
//!
//! Exit codes: 0 success, 1 a stage failed, 2 the command line or the configuration is wrong.

use std::process::ExitCode;

use clap::Parser;
use ksmith_cli::args::Cli;
use ksmith_cli::pipeline::{self, Failure};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match pipeline::execute(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(e)) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
        Err(Failure::Stage(e)) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
