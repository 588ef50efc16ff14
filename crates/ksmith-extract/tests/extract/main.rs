//! The integration tests of ksmith-extract, in one test binary (one link per crate).

mod class_params;
mod common;
mod corpus;
mod features;
mod hostile;
mod imports;
mod members;
mod module_args;
mod module_instances;
mod snapshots;
mod stage;
