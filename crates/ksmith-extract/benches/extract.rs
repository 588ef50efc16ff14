//! Extraction throughput benchmark (written next).
fn main() {}
