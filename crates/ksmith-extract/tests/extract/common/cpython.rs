//! CPython's own verdict on Python sources: the ground truth the extract tests compare with.
//! Shared by the unit tests of `python_rules` and the integration tests (one copy).
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

/// Runs `script` with the project's Python on `sources` (written to files `0.py`, `1.py`, ...
/// in a temporary folder, passed as `sys.argv[1]`, their count as `sys.argv[2]`); returns its
/// output lines, one per source.
fn per_source(script: &str, sources: &[&str]) -> Vec<String> {
    let python = ksmith_core::python_env::resolve_python(None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (i, src) in sources.iter().enumerate() {
        std::fs::write(dir.path().join(format!("{i}.py")), src).unwrap();
    }
    let out = std::process::Command::new(python)
        .args(["-c", script])
        .arg(dir.path())
        .arg(sources.len().to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(lines.len(), sources.len());
    lines
}

/// The line of CPython's `SyntaxError` for each source (`None` when it compiles): `compile()`
/// only, nothing runs.
pub fn cpython_verdicts(sources: &[&str]) -> Vec<Option<u32>> {
    let script = "import sys, warnings\nwarnings.simplefilter('ignore')\nfor i in range(int(sys.argv[2])):\n    src = open(f'{sys.argv[1]}/{i}.py', encoding='utf-8').read()\n    try:\n        compile(src, 'p', 'exec')\n        print('ok')\n    except SyntaxError as e:\n        print(e.lineno or 0)\n";
    per_source(script, sources)
        .iter()
        .map(|l| l.parse().ok())
        .collect()
}

/// Runs each program (our own test fixtures, never crawled code) the way KernelBench does,
/// `Model(*get_init_inputs())(*get_inputs())`, in one Python process with torch; returns the
/// error of each (`None` when it ran).
pub fn run_verdicts(sources: &[&str]) -> Vec<Option<String>> {
    let script = "import sys, torch\nfor i in range(int(sys.argv[2])):\n    ns = {'__name__': 'program'}\n    try:\n        exec(compile(open(f'{sys.argv[1]}/{i}.py', encoding='utf-8').read(), 'p', 'exec'), ns)\n        with torch.no_grad():\n            ns['Model'](*ns['get_init_inputs']())(*ns['get_inputs']())\n        print('ok')\n    except Exception as e:\n        print(repr(e).replace(chr(10), ' '))\n";
    per_source(script, sources)
        .into_iter()
        .map(|l| (l != "ok").then_some(l))
        .collect()
}
