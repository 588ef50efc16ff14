//! [`Launch`]: the command that starts a worker inside the sandbox, and the embedded launcher.

use std::path::Path;
use std::process::Command;

use crate::config::SandboxConfig;

/// Variables of this process's environment a worker (and its children) may see; every other
/// one (API keys, tokens, credentials) is dropped. The launcher applies the same list
/// (`ENV_PASSED` in `python/ksmith/confine/policy.py`; a test keeps them equal).
pub const ENV_PASSED: &[&str] = &[
    "PATH",
    "LANG",
    "LC_ALL",
    "TZ",
    "LD_LIBRARY_PATH",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_HOME",
    "TRITON_LIBCUDA_PATH",
    "TRITON_PTXAS_PATH",
    "KSMITH_CHILD_THREADS",
    "KSMITH_EVAL_TRACE",
];

/// The launcher and per-child confinement (`python/ksmith/confine`) and what the probe runner
/// and the evaluator worker both use (`python/ksmith/shared`), as paths under a runtime folder on
/// `PYTHONPATH` and their text. Each stage writes them next to its own package.
pub const PYTHON_FILES: &[(&str, &str)] = &[
    (
        "ksmith/confine/__init__.py",
        include_str!("../../../python/ksmith/confine/__init__.py"),
    ),
    (
        "ksmith/confine/__main__.py",
        include_str!("../../../python/ksmith/confine/__main__.py"),
    ),
    (
        "ksmith/confine/cgroups.py",
        include_str!("../../../python/ksmith/confine/cgroups.py"),
    ),
    (
        "ksmith/confine/child.py",
        include_str!("../../../python/ksmith/confine/child.py"),
    ),
    (
        "ksmith/confine/jail.py",
        include_str!("../../../python/ksmith/confine/jail.py"),
    ),
    (
        "ksmith/confine/launch.py",
        include_str!("../../../python/ksmith/confine/launch.py"),
    ),
    (
        "ksmith/confine/policy.py",
        include_str!("../../../python/ksmith/confine/policy.py"),
    ),
    (
        "ksmith/confine/seccomp.py",
        include_str!("../../../python/ksmith/confine/seccomp.py"),
    ),
    (
        "ksmith/confine/syscalls.py",
        include_str!("../../../python/ksmith/confine/syscalls.py"),
    ),
    (
        "ksmith/shared/__init__.py",
        include_str!("../../../python/ksmith/shared/__init__.py"),
    ),
    (
        "ksmith/shared/constants.py",
        include_str!("../../../python/ksmith/shared/constants.py"),
    ),
    (
        "ksmith/shared/gpu_peaks.json",
        include_str!("../../../python/ksmith/shared/gpu_peaks.json"),
    ),
    (
        "ksmith/shared/outputs.py",
        include_str!("../../../python/ksmith/shared/outputs.py"),
    ),
    (
        "ksmith/shared/versions.json",
        include_str!("../../../python/ksmith/shared/versions.json"),
    ),
    (
        "ksmith/shared/versions.py",
        include_str!("../../../python/ksmith/shared/versions.py"),
    ),
];

/// How one worker is sandboxed.
#[derive(Debug, Clone)]
pub struct Launch<'a> {
    /// The `[sandbox]` section.
    pub config: &'a SandboxConfig,
    /// The worker's scratch folder: a tmpfs at this path inside the sandbox (the children's
    /// workspaces go there); created here too, for a worker that runs without bubblewrap.
    pub scratch: &'a Path,
    /// Processes (threads included) each child may have at once.
    pub max_processes: u32,
    /// The worker and its children get the NVIDIA device nodes.
    pub gpu: bool,
}

impl Launch<'_> {
    /// The policy the launcher takes (`--policy`, see `ksmith.confine.policy.Policy`).
    pub fn policy(&self) -> serde_json::Value {
        let bwrap = if self.config.bwrap.is_empty() {
            std::env::var("KSMITH_BWRAP").unwrap_or_default()
        } else {
            self.config.bwrap.clone()
        };
        serde_json::json!({
            "require": self.config.require,
            "disk_mb": self.config.disk_mb,
            "max_processes": self.max_processes,
            "gpu": self.gpu,
            "scratch": self.scratch,
            "bwrap": bwrap,
        })
    }

    /// `python -s -m ksmith.confine --policy JSON -- args...` with only [`ENV_PASSED`] of this
    /// process's environment; the caller adds its own variables (`PYTHONPATH`...), pipes and
    /// working folder. The launcher replaces itself with bubblewrap, so the child's pid and
    /// kill reach the sandbox.
    pub fn command(&self, python: &Path, args: &[&str]) -> std::io::Result<Command> {
        std::fs::create_dir_all(self.scratch)?;
        let mut command = Command::new(python);
        command.env_clear();
        for key in ENV_PASSED {
            if let Some(value) = std::env::var_os(key) {
                command.env(key, value);
            }
        }
        command
            .args(["-s", "-m", "ksmith.confine", "--policy"])
            .arg(self.policy().to_string())
            .arg("--")
            .args(args);
        Ok(command)
    }
}

/// What the worker's sandbox could not set up, from its hello (`sandbox.missing`).
pub fn missing(sandbox: &serde_json::Map<String, serde_json::Value>) -> Vec<String> {
    sandbox
        .get("missing")
        .and_then(|m| m.as_array())
        .map(|items| {
            items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn python_file(rel: &str) -> &'static str {
        PYTHON_FILES
            .iter()
            .find(|(r, _)| *r == rel)
            .map(|(_, text)| *text)
            .expect("embedded")
    }

    /// A module added to either package but not embedded would only fail at run time.
    #[test]
    fn every_file_of_the_confine_and_shared_packages_is_embedded() {
        let mut names = Vec::new();
        for package in ["confine", "shared"] {
            let dir = format!(
                "{}/../../python/ksmith/{package}",
                env!("CARGO_MANIFEST_DIR")
            );
            for e in std::fs::read_dir(dir).unwrap() {
                let name = e.unwrap().file_name().to_string_lossy().into_owned();
                if name.ends_with(".py") || name.ends_with(".json") {
                    names.push(format!("ksmith/{package}/{name}"));
                }
            }
        }
        names.sort();
        let mut embedded: Vec<String> = PYTHON_FILES.iter().map(|(r, _)| r.to_string()).collect();
        embedded.sort();
        assert_eq!(names, embedded);
    }

    /// The launcher drops what this side does not pass, and the other way round: one list.
    #[test]
    fn the_environment_allow_list_is_the_launchers() {
        let text = python_file("ksmith/confine/policy.py");
        let start = text
            .find("ENV_PASSED = (")
            .expect("ENV_PASSED in policy.py");
        let end = start + text[start..].find(')').expect("closing parenthesis");
        let names: Vec<&str> = text[start..end].split('"').skip(1).step_by(2).collect();
        assert_eq!(names, ENV_PASSED);
    }

    #[test]
    fn the_command_passes_only_allowed_variables_and_the_policy() {
        let scratch = tempfile::tempdir().unwrap();
        let cfg = SandboxConfig {
            require: true,
            disk_mb: 64,
            bwrap: "/opt/bwrap".into(),
        };
        let launch = Launch {
            config: &cfg,
            scratch: &scratch.path().join("s"),
            max_processes: 7,
            gpu: true,
        };
        let command = launch
            .command(
                Path::new("/usr/bin/python3"),
                &["-m", "ksmith.probe.worker"],
            )
            .unwrap();
        assert!(scratch.path().join("s").is_dir());
        let args: Vec<String> = command
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(&args[..4], ["-s", "-m", "ksmith.confine", "--policy"]);
        assert_eq!(&args[5..], ["--", "-m", "ksmith.probe.worker"]);
        let policy: serde_json::Value = serde_json::from_str(&args[4]).unwrap();
        assert_eq!(policy["require"], true);
        assert_eq!(policy["disk_mb"], 64);
        assert_eq!(policy["max_processes"], 7);
        assert_eq!(policy["gpu"], true);
        assert_eq!(policy["bwrap"], "/opt/bwrap");
        for (key, _) in command.get_envs() {
            let key = key.to_string_lossy();
            assert!(ENV_PASSED.contains(&key.as_ref()), "{key} passed");
        }
    }

    #[test]
    fn missing_parts_are_read_from_the_hello() {
        let hello: serde_json::Value =
            serde_json::json!({"confined": false, "missing": ["disk limit: no tmpfs"]});
        let map = hello.as_object().unwrap();
        assert_eq!(missing(map), vec!["disk limit: no tmpfs".to_string()]);
        assert!(missing(&serde_json::Map::new()).is_empty());
    }
}
