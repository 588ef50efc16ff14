//! Probe throughput and repair yield on generated KernelBench programs.
//!
//! Generates small valid programs of varied ops (linear, convolutions, pooling, norms,
//! activations, embeddings, recurrent layers, attention, matmuls, reshapes, losses, residual
//! blocks), and the same programs with deliberately wrong guessed arguments (every input a
//! float tensor of rank 2, 3 or 4 and size 4, some constructor ints set to 4, some arguments
//! missing) as a static guesser would emit them. Prints a table: modules/s (median of the repetitions, one worker per
//! core) and the yield (fraction of modules that run).
//!
//! `cargo bench -p ksmith-probe` (env: `KSMITH_BENCH_REPS`, default 3; `KSMITH_BENCH_WORKERS`,
//! default the number of cores).

mod common;

fn main() {
    common::run_bench();
}
