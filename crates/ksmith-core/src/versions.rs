//! The versions of what crosses between the Rust stages and the Python side, each written once
//! for Rust here and once for Python in `python/ksmith/shared/versions.json` (a test keeps them
//! equal): the probe's worker protocol, the evaluator's worker and HTTP protocol, and the ground
//! truth an exported GRPO sample carries for the trainers' reward.

/// The probe's JSON-lines protocol (`ksmith-probe` and `ksmith.probe.worker`, the Ray driver).
pub const PROBE_PROTOCOL: u32 = 1;

/// The evaluator's JSON-lines protocol and its HTTP form (`ksmith-eval`, `ksmith.evaluator`, the
/// reward's remote backend).
pub const EVAL_PROTOCOL: u32 = 1;

/// The ground-truth JSON of an exported sample (`ksmith-export` writes it, `ksmith.reward` reads
/// it and refuses versions it does not know).
pub const GROUND_TRUTH: u32 = 2;

#[cfg(test)]
mod tests {
    #[test]
    fn the_versions_are_the_ones_python_reads() {
        let file: serde_json::Value =
            serde_json::from_str(include_str!("../../../python/ksmith/shared/versions.json"))
                .unwrap();
        let expected = serde_json::json!({
            "probe_protocol": super::PROBE_PROTOCOL,
            "eval_protocol": super::EVAL_PROTOCOL,
            "ground_truth": super::GROUND_TRUTH,
        });
        assert_eq!(file, expected);
    }
}
