//! The integration tests of ksmith-cli, in one test binary (one link per crate).

mod cli;
mod decontamination;
mod default_config;
mod discover;
mod ray_refresh;
mod sandbox;
