//! The integration tests of ksmith-probe, in one test binary (one link per crate).

mod common;
mod defaults;
mod observed;
mod ray;
mod resume;
mod sandbox;
mod sizing;
mod stage;
mod watchdog;
