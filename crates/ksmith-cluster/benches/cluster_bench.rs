//! Cluster benchmark (placeholder until written).
fn main() {}
