//! Whether a stage may hand untrusted code to a worker: refused when the sandbox is incomplete
//! (the default), run with a warning said first when the configuration opts out.
//!
//! The launcher and the worker refuse on their own side before any untrusted code exists there
//! (they exit with [`EXIT_REFUSED`] and write one line starting with [`REFUSAL`]: what is missing
//! and how to fix it); [`refusal`] finds that line in what a worker that did not start wrote.
//! [`admit`] is the stage's own check of a worker's hello, before its first request.

use crate::config::SandboxConfig;

/// Exit status of a launcher or worker that refuses to run untrusted code (`EXIT_UNAVAILABLE`
/// in `python/ksmith/confine/policy.py`; a test keeps them equal).
pub const EXIT_REFUSED: i32 = 78;

/// How the line a refusing launcher or worker writes starts (`REFUSAL` in
/// `python/ksmith/confine/policy.py`; a test keeps them equal).
pub const REFUSAL: &str = "ksmith sandbox: refusing to run untrusted code: ";

/// The sandbox is incomplete and the configuration requires all of it: one line saying what is
/// missing and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// What a stage does with a worker whose hello lists `missing` parts of the sandbox: nothing
/// (`Ok(None)`: complete), refuse (the default, `[sandbox] require`), or run it after printing
/// the returned warning (`[sandbox] require = false`). `who` names the stage and what it runs
/// ("probe: crawled modules").
pub fn admit(
    config: &SandboxConfig,
    missing: &[String],
    who: &str,
) -> Result<Option<String>, Refused> {
    if missing.is_empty() {
        return Ok(None);
    }
    let what = missing.join("; ");
    if config.require {
        return Err(Refused(format!(
            "{REFUSAL}{who}: the worker started without part of the sandbox: {what} (install \
             bubblewrap with `make sandbox` or Debian's `bubblewrap` package; [sandbox] require \
             = false runs without it)"
        )));
    }
    Ok(Some(format!(
        "{who} run without part of the sandbox, as [sandbox] require = false allows: {what}"
    )))
}

/// The refusal line in `output` (a worker's stderr, or a Ray driver's that carries an actor's
/// error), when the worker stopped because the sandbox is incomplete.
pub fn refusal(output: &str) -> Option<Refused> {
    let start = output.rfind(REFUSAL)?;
    let line = output[start..]
        .lines()
        .next()
        .unwrap_or_default()
        .trim_end();
    Some(Refused(line.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy_py() -> &'static str {
        crate::PYTHON_FILES
            .iter()
            .find(|(rel, _)| *rel == "ksmith/confine/policy.py")
            .map(|(_, text)| *text)
            .expect("policy.py embedded")
    }

    #[test]
    fn the_exit_status_and_the_line_are_the_launchers() {
        let text = policy_py();
        assert!(
            text.contains(&format!("EXIT_UNAVAILABLE = {EXIT_REFUSED}\n")),
            "EXIT_UNAVAILABLE differs"
        );
        assert!(
            text.contains(&format!("REFUSAL = \"{REFUSAL}\"\n")),
            "REFUSAL differs"
        );
    }

    #[test]
    fn a_complete_sandbox_is_admitted_silently() {
        let required = SandboxConfig::default();
        assert_eq!(admit(&required, &[], "probe: crawled modules"), Ok(None));
    }

    #[test]
    fn an_incomplete_sandbox_is_refused_by_default_and_named() {
        let missing = vec!["filesystem view: bubblewrap (bwrap) is not installed".to_string()];
        let err = admit(
            &SandboxConfig::default(),
            &missing,
            "probe: crawled modules",
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with(REFUSAL), "{err}");
        assert!(err.contains("bwrap) is not installed"), "{err}");
        assert!(err.contains("make sandbox"), "{err}");
        assert!(!err.contains('\n'), "one line: {err}");
    }

    #[test]
    fn the_explicit_opt_out_runs_with_a_warning() {
        let opted_out = SandboxConfig {
            require: false,
            ..Default::default()
        };
        let missing = vec!["disk limit: no private tmpfs per child".to_string()];
        let warning = admit(&opted_out, &missing, "eval: generated kernels")
            .unwrap()
            .expect("a warning");
        assert!(warning.contains("require = false"), "{warning}");
        assert!(warning.contains("no private tmpfs"), "{warning}");
    }

    #[test]
    fn the_refusal_line_is_found_in_a_workers_output() {
        let stderr = "Traceback...\nRuntimeError: the probe worker did not start: ksmith \
                      sandbox: refusing to run untrusted code: bubblewrap is not at /nope \
                      ([sandbox] bwrap)\nmore\n";
        assert_eq!(
            refusal(stderr),
            Some(Refused(
                "ksmith sandbox: refusing to run untrusted code: bubblewrap is not at /nope \
                 ([sandbox] bwrap)"
                    .into()
            ))
        );
        assert_eq!(refusal("ImportError: no module named torch\n"), None);
    }
}
