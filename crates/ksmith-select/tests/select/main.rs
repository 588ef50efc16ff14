//! The integration tests of ksmith-select, in one test binary (one link per crate).

mod rules;
mod stage;
