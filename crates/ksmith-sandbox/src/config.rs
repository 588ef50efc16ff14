//! The `[sandbox]` section of the configuration, read by the probe and the evaluator.

use serde::{Deserialize, Serialize};

/// How untrusted code is confined (`[sandbox]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxConfig {
    /// Refuse to run untrusted code when any part of the sandbox cannot be set up (bubblewrap
    /// missing, user namespaces disabled, no pids cgroup as root...); false: run with the parts
    /// that work and warn about the rest.
    pub require: bool,
    /// Size of each child's private tmpfs, its only writable place, in MiB (evaluator children
    /// get their memory limit on top: the harness writes trial inputs and outputs there).
    pub disk_mb: u64,
    /// The bubblewrap binary; empty: `KSMITH_BWRAP`, `bwrap` on PATH, then the one
    /// `scripts/setup-bwrap.sh` unpacked under `~/.cache/ksmith/bwrap`.
    pub bwrap: String,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            require: true,
            disk_mb: 256,
            bwrap: String::new(),
        }
    }
}

/// A `[sandbox]` value that is out of range.
#[derive(Debug, thiserror::Error)]
#[error("config [sandbox].{key}: {message}")]
pub struct ConfigError {
    /// The key.
    pub key: &'static str,
    /// What is wrong with it.
    pub message: String,
}

impl SandboxConfig {
    /// Checks every value (no I/O).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(16..=1 << 20).contains(&self.disk_mb) {
            return Err(ConfigError {
                key: "disk_mb",
                message: format!("must be in 16..=1048576 MiB, got {}", self.disk_mb),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_a_tiny_disk_is_named() {
        SandboxConfig::default().validate().unwrap();
        assert!(
            SandboxConfig::default().require,
            "untrusted code runs only in the whole sandbox unless the config opts out"
        );
        let err = SandboxConfig {
            disk_mb: 1,
            ..Default::default()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(err.contains("[sandbox].disk_mb"), "{err}");
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let err = serde_json::from_str::<SandboxConfig>(r#"{"requires": true}"#).unwrap_err();
        assert!(err.to_string().contains("requires"), "{err}");
    }
}
