//! The probe bench as an example binary: `cargo run -p ksmith-probe --example probe_generated`
//! (same environment variables as `cargo bench -p ksmith-probe`). Useful to measure on another
//! machine, where only a built binary and a Python with torch are available.

#[path = "../benches/common/mod.rs"]
mod common;

fn main() {
    common::run_bench();
}
