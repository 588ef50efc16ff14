//! Probe throughput (placeholder replaced below).
fn main() {}
