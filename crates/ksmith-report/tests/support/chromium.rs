//! Headless Chromium for the page tests (the report here, the review page in ksmith-review,
//! which includes this file): where the browser is and the flags every run uses.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The browser: `$KSMITH_CHROMIUM`, else `chromium` on the PATH (scripts/setup-chromium.sh
/// installs it; `make test` runs that first).
pub(crate) fn chromium() -> PathBuf {
    let path = std::env::var_os("KSMITH_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("chromium"));
    let ok = Command::new(&path)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "headless Chromium not found ({}): run scripts/setup-chromium.sh (make test does)",
        path.display()
    );
    path
}

/// The flags of a headless run with its profile in `dir`: no sandbox (containers), no GPU, no
/// network of its own.
pub(crate) fn headless_args(dir: &Path) -> Vec<String> {
    [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!(
        "--user-data-dir={}",
        dir.join("chrome-profile").display()
    )])
    .collect()
}
