//! Engine overhead per step (placeholder until the benchmark lands).
fn main() {}
