//! The `[probe]` section of the configuration.
//!
//! What the Python runner is sent by default (seed, limits, repair search, sizing targets) is
//! defined once, in `python/ksmith/probe/defaults.json`: the runner reads it for a request that
//! leaves a value out, and [`ProbeConfig::default`] embeds it ([`RUNNER_DEFAULTS_JSON`]; tests on
//! both sides check it).

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// The runner's defaults (`python/ksmith/probe/defaults.json`).
pub const RUNNER_DEFAULTS_JSON: &str = include_str!("../../../python/ksmith/probe/defaults.json");

/// [`RUNNER_DEFAULTS_JSON`], parsed once.
fn runner_defaults() -> &'static serde_json::Value {
    static DEFAULTS: OnceLock<serde_json::Value> = OnceLock::new();
    DEFAULTS.get_or_init(|| {
        serde_json::from_str(RUNNER_DEFAULTS_JSON)
            .expect("the embedded probe defaults.json parses (tested)")
    })
}

/// The number at `key` of a defaults object (tested: every key is there, of its type).
fn number(obj: &serde_json::Value, key: &str) -> f64 {
    obj[key]
        .as_f64()
        .unwrap_or_else(|| panic!("probe defaults.json: `{key}` is a number (tested)"))
}

/// The whole number at `key` of a defaults object.
fn whole(obj: &serde_json::Value, key: &str) -> u64 {
    obj[key]
        .as_u64()
        .unwrap_or_else(|| panic!("probe defaults.json: `{key}` is a whole number (tested)"))
}

/// How modules are probed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProbeConfig {
    /// Python interpreter with torch; empty: `KSMITH_PYTHON`, then the venv of `make venv`.
    pub python: String,
    /// Worker processes (one per core); 0: the run's thread count.
    pub workers: usize,
    /// Time limit per module (repair search, verification and determinism run), in seconds.
    pub timeout_s: f64,
    /// Memory limit per module on top of the worker's own address space, in MiB.
    pub memory_mb: u64,
    /// Repair steps (runs) per restart.
    pub max_steps: u32,
    /// Restarts: the first uses the program's own inputs, then all tensor inputs 2-D, then 3-D.
    pub restarts: u32,
    /// CPU seconds of the repair search after which no new attempt starts (the attempt
    /// running goes on); the row then fails with its root cause and says so.
    pub repair_budget_s: f64,
    /// Seed of torch, random and numpy before every run.
    pub seed: u64,
    /// Bytes of stdout and stderr kept per module (more is dropped); also the file size limit.
    pub output_cap_bytes: u64,
    /// Processes a module may have at once (where a pids cgroup can be made).
    pub max_processes: u32,
    /// Seconds a worker may take to start (import torch) before it counts as broken.
    pub startup_timeout_s: f64,
    /// Seconds past `timeout_s` after which a silent worker is killed and replaced.
    pub watchdog_grace_s: f64,
    /// Probe a class again with the arguments and input shapes a model of its repository built
    /// and called it with (the model's `submodules`), and keep that row when it runs.
    pub observed_configs: bool,
    /// Ask the teacher LLM for new `get_inputs`/`get_init_inputs` when the rules fail.
    pub llm_repair: bool,
    /// Cap on the tokens of the LLM's answer.
    pub llm_max_tokens: u32,
    /// Sampling temperature of the LLM repair.
    pub llm_temperature: f64,
    /// A Ray cluster to probe on instead of local workers: `auto` (the cluster of this node),
    /// an address (`ray://host:10001`, `host:6379`), or `local` (a private one-node cluster with
    /// `workers` CPUs); empty: local workers. The table is the same either way.
    pub ray_address: String,
    /// Actors (one sandboxed worker each) on the Ray cluster; 0: one per CPU of the cluster.
    pub ray_actors: usize,
    /// Times a module whose Ray actor died is run again on another actor before its row says
    /// `crashed` (`WorkerDied`).
    pub ray_requeue: u32,
    /// The sizing step (`[probe.sizing]`).
    pub sizing: SizingConfig,
    /// The shared `[sandbox]` section (not a `[probe]` key: the CLI copies it in and checks it).
    #[serde(skip)]
    pub sandbox: ksmith_sandbox::SandboxConfig,
}

/// How runnable programs are sized for the GPU (`[probe.sizing]`; the runner's `sizing.py`).
///
/// The work target is `min_gflop` or `min_mb` of traffic within `max_memory_mb`; the search
/// aims at `aim_ms` of estimated eager time on the reference GPU, never past `max_ms`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SizingConfig {
    /// Size the programs that run (off: programs keep the probe's sizes).
    pub enabled: bool,
    /// Work target: FLOPs of one forward call, in GFLOP ...
    pub min_gflop: f64,
    /// ... or bytes its kernels read and write, in MiB.
    pub min_mb: f64,
    /// Estimated eager time on the reference GPU the search aims at, ms.
    pub aim_ms: f64,
    /// Estimated eager time never exceeded, ms.
    pub max_ms: f64,
    /// Tensor memory of one forward call never exceeded, MiB.
    pub max_memory_mb: f64,
    /// The confirming CPU run (twice, from scratch) stays under this many MFLOP ...
    pub confirm_mflop: f64,
    /// ... and this many MiB of traffic and memory.
    pub confirm_mb: f64,
    /// Where `meta` cannot run a program, the CPU search stops at this many MFLOP.
    pub cpu_max_mflop: f64,
    /// Trial runs per program at most.
    pub max_trials: u32,
    /// Seconds per program at most (within `timeout_s`; the probe's own result is kept when
    /// sizing runs out of time).
    pub budget_s: f64,
    /// How many times a structural size (a width, channels) that came from the repository (a
    /// call site, a default, a model's observed configuration) may grow; a class that reaches
    /// the work target only past it is not sized (`too_small`). 0: no bound.
    pub max_structural_scale: f64,
}

impl Default for SizingConfig {
    fn default() -> Self {
        let d = &runner_defaults()["sizing"];
        SizingConfig {
            enabled: d["enabled"]
                .as_bool()
                .expect("probe defaults.json: `sizing.enabled` is a bool (tested)"),
            min_gflop: number(d, "min_gflop"),
            min_mb: number(d, "min_mb"),
            aim_ms: number(d, "aim_ms"),
            max_ms: number(d, "max_ms"),
            max_memory_mb: number(d, "max_memory_mb"),
            confirm_mflop: number(d, "confirm_mflop"),
            confirm_mb: number(d, "confirm_mb"),
            cpu_max_mflop: number(d, "cpu_max_mflop"),
            max_trials: whole(d, "max_trials") as u32,
            budget_s: number(d, "budget_s"),
            max_structural_scale: number(d, "max_structural_scale"),
        }
    }
}

impl SizingConfig {
    /// Checks every value (no I/O).
    pub fn validate(&self) -> Result<(), Error> {
        let positive = [
            ("sizing.min_gflop", self.min_gflop),
            ("sizing.min_mb", self.min_mb),
            ("sizing.aim_ms", self.aim_ms),
            ("sizing.max_ms", self.max_ms),
            ("sizing.max_memory_mb", self.max_memory_mb),
            ("sizing.confirm_mflop", self.confirm_mflop),
            ("sizing.confirm_mb", self.confirm_mb),
            ("sizing.cpu_max_mflop", self.cpu_max_mflop),
            ("sizing.budget_s", self.budget_s),
        ];
        for (key, value) in positive {
            if !(value.is_finite() && value > 0.0) {
                return Err(Error::Config {
                    key,
                    message: "must be a positive number".into(),
                });
            }
        }
        let scale = self.max_structural_scale;
        if !(scale.is_finite() && (scale == 0.0 || scale >= 1.0)) {
            return Err(Error::Config {
                key: "sizing.max_structural_scale",
                message: format!("must be 0 (no bound) or at least 1, got {scale}"),
            });
        }
        if self.aim_ms > self.max_ms {
            return Err(Error::Config {
                key: "sizing.aim_ms",
                message: format!("must not exceed max_ms ({})", self.max_ms),
            });
        }
        if self.max_trials < 4 {
            return Err(Error::Config {
                key: "sizing.max_trials",
                message: "must be at least 4 (base, one knob, target, confirmation)".into(),
            });
        }
        Ok(())
    }
}

impl Default for ProbeConfig {
    fn default() -> Self {
        let d = runner_defaults();
        ProbeConfig {
            python: String::new(),
            workers: 0,
            timeout_s: number(d, "timeout_s"),
            memory_mb: whole(d, "memory_mb"),
            max_steps: whole(d, "max_steps") as u32,
            restarts: whole(d, "restarts") as u32,
            repair_budget_s: number(d, "repair_budget_s"),
            seed: whole(d, "seed"),
            output_cap_bytes: whole(d, "output_cap_bytes"),
            max_processes: 64,
            startup_timeout_s: 120.0,
            watchdog_grace_s: 20.0,
            observed_configs: true,
            llm_repair: false,
            llm_max_tokens: 2048,
            llm_temperature: 0.0,
            ray_address: String::new(),
            ray_actors: 0,
            ray_requeue: 2,
            sizing: SizingConfig::default(),
            sandbox: Default::default(),
        }
    }
}

impl ProbeConfig {
    /// Checks every value (no I/O).
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |key: &'static str, message: &str| {
            Err(Error::Config {
                key,
                message: message.to_string(),
            })
        };
        if !(self.timeout_s.is_finite() && self.timeout_s > 0.0 && self.timeout_s <= 86_400.0) {
            return bad("timeout_s", "must be a number of seconds in (0, 86400]");
        }
        if self.memory_mb < 256 {
            return bad(
                "memory_mb",
                "must be at least 256 (torch needs room to work)",
            );
        }
        if self.max_steps == 0 || self.max_steps > 1000 {
            return bad("max_steps", "must be in 1..=1000");
        }
        if self.restarts == 0 || self.restarts > 3 {
            return bad("restarts", "must be 1, 2 or 3 (program inputs, 2-D, 3-D)");
        }
        if !(self.repair_budget_s.is_finite() && self.repair_budget_s > 0.0) {
            return bad("repair_budget_s", "must be a positive number of seconds");
        }
        if self.output_cap_bytes < 1024 {
            return bad("output_cap_bytes", "must be at least 1024");
        }
        if self.max_processes == 0 {
            return bad("max_processes", "must be at least 1");
        }
        if !(self.startup_timeout_s.is_finite() && self.startup_timeout_s > 0.0) {
            return bad("startup_timeout_s", "must be a positive number of seconds");
        }
        if !(self.watchdog_grace_s.is_finite() && self.watchdog_grace_s > 0.0) {
            return bad("watchdog_grace_s", "must be a positive number of seconds");
        }
        if self.llm_max_tokens == 0 {
            return bad("llm_max_tokens", "must be at least 1");
        }
        if self.ray_requeue > 100 {
            return bad("ray_requeue", "must be at most 100");
        }
        if self.ray_address.trim() != self.ray_address {
            return bad("ray_address", "must not start or end with spaces");
        }
        if !(self.llm_temperature.is_finite() && (0.0..=2.0).contains(&self.llm_temperature)) {
            return bad("llm_temperature", "must be in [0, 2]");
        }
        self.sizing.validate()
    }

    /// The part of the configuration that decides the output (not the interpreter path nor
    /// the worker count), for the stage fingerprint.
    pub fn output_relevant(&self) -> ProbeConfig {
        ProbeConfig {
            python: String::new(),
            workers: 0,
            startup_timeout_s: 0.0,
            watchdog_grace_s: 0.0,
            ray_address: String::new(),
            ray_actors: 0,
            ray_requeue: 0,
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid_and_bad_values_name_their_key() {
        ProbeConfig::default().validate().unwrap();
        let cases: Vec<(ProbeConfig, &str)> = vec![
            (
                ProbeConfig {
                    timeout_s: 0.0,
                    ..Default::default()
                },
                "timeout_s",
            ),
            (
                ProbeConfig {
                    timeout_s: f64::NAN,
                    ..Default::default()
                },
                "timeout_s",
            ),
            (
                ProbeConfig {
                    memory_mb: 10,
                    ..Default::default()
                },
                "memory_mb",
            ),
            (
                ProbeConfig {
                    max_steps: 0,
                    ..Default::default()
                },
                "max_steps",
            ),
            (
                ProbeConfig {
                    restarts: 4,
                    ..Default::default()
                },
                "restarts",
            ),
            (
                ProbeConfig {
                    repair_budget_s: 0.0,
                    ..Default::default()
                },
                "repair_budget_s",
            ),
            (
                ProbeConfig {
                    output_cap_bytes: 1,
                    ..Default::default()
                },
                "output_cap_bytes",
            ),
            (
                ProbeConfig {
                    llm_temperature: 3.0,
                    ..Default::default()
                },
                "llm_temperature",
            ),
            (
                ProbeConfig {
                    sizing: SizingConfig {
                        max_structural_scale: 0.5,
                        ..Default::default()
                    },
                    ..Default::default()
                },
                "max_structural_scale",
            ),
        ];
        // 0 turns the bound off
        ProbeConfig {
            sizing: SizingConfig {
                max_structural_scale: 0.0,
                ..Default::default()
            },
            ..Default::default()
        }
        .validate()
        .unwrap();
        for (cfg, key) in cases {
            let err = cfg.validate().unwrap_err().to_string();
            assert!(err.contains(key), "{err}");
        }
    }

    #[test]
    fn unknown_keys_are_refused() {
        let err = toml_parse("timeout_s = 5\ntimeuot = 3\n").unwrap_err();
        assert!(err.contains("timeuot"), "{err}");
        let cfg = toml_parse("timeout_s = 5.0\n").unwrap();
        assert_eq!(cfg.timeout_s, 5.0);
        assert_eq!(cfg.max_steps, 16);
    }

    fn toml_parse(text: &str) -> Result<ProbeConfig, String> {
        let full = format!("[probe]\n{text}");
        let config =
            ksmith_core::config::Config::parse(&full, "test").map_err(|e| e.to_string())?;
        config
            .section::<ProbeConfig>("probe")
            .map_err(|e| e.to_string())
    }

    #[test]
    fn fingerprint_part_ignores_the_interpreter_and_worker_count() {
        let a = ProbeConfig::default();
        let b = ProbeConfig {
            python: "/usr/bin/python3".into(),
            workers: 7,
            ..Default::default()
        };
        assert_eq!(a.output_relevant(), b.output_relevant());
        let c = ProbeConfig {
            seed: 1,
            ..Default::default()
        };
        assert_ne!(a.output_relevant(), c.output_relevant());
    }
}
