//! Hostile input: every case ends as rows with a clear status, never a panic or an error.
#![allow(clippy::unwrap_used)] // Tests may unwrap.

use crate::common::*;
use ksmith_core::tables::ModuleStatus;
use ksmith_extract::{ExtractConfig, SourceFile, extract_repo};

const GOOD: &str = "import torch.nn as nn\n\n\nclass Good(nn.Module):\n    def forward(self, x):\n        return x + 1\n";

fn extract_bytes(
    files: Vec<(&str, Vec<u8>)>,
    cfg: &ExtractConfig,
) -> Vec<ksmith_core::tables::ModuleRow> {
    let files: Vec<SourceFile> = files
        .into_iter()
        .map(|(p, b)| SourceFile::new(p, b))
        .collect();
    extract_repo(&info(), &files, cfg)
}

fn file_row<'a>(
    rows: &'a [ksmith_core::tables::ModuleRow],
    path: &str,
) -> &'a ksmith_core::tables::ModuleRow {
    rows.iter()
        .find(|r| r.path == path)
        .unwrap_or_else(|| panic!("no row for {path}: {rows:#?}"))
}

#[test]
fn binary_and_non_utf8_files_get_a_row_and_the_rest_extracts() {
    let mut binary = b"import torch\n".to_vec();
    binary.extend([0u8, 159, 146, 150, 0, 1, 2]);
    let latin1 = b"# caf\xe9\nimport torch.nn as nn\nclass X(nn.Module):\n    pass\n".to_vec();
    let rows = extract_bytes(
        vec![
            ("bin.py", binary),
            ("latin.py", latin1),
            ("good.py", GOOD.as_bytes().to_vec()),
        ],
        &ExtractConfig::default(),
    );
    let b = file_row(&rows, "bin.py");
    assert_eq!(b.status, ModuleStatus::Failed);
    assert_eq!(b.reason.as_deref(), Some("binary_file: bin.py"));
    let l = file_row(&rows, "latin.py");
    assert_eq!(l.reason.as_deref(), Some("not_utf8: latin.py"));
    ok_program(&rows, "Good");
}

#[test]
fn garbage_text_gives_a_syntax_error_row() {
    let garbage: String = (0..2000)
        .map(|i| {
            [
                "(", "]", "class", ":", "\"\"\"", "def", "@", "lambda", "\n", "\t", "é", "{",
            ][i % 12]
        })
        .collect();
    let rows = extract(&[("garbage.py", &garbage), ("good.py", GOOD)]);
    let g = file_row(&rows, "garbage.py");
    assert_eq!(g.status, ModuleStatus::Failed);
    assert!(
        g.reason
            .as_deref()
            .unwrap()
            .starts_with("syntax_error at garbage.py:"),
        "{g:?}"
    );
    ok_program(&rows, "Good");
}

#[test]
fn files_over_the_size_limit_are_not_parsed() {
    let cfg = ExtractConfig {
        max_file_bytes: 100,
        ..Default::default()
    };
    let big = format!("{GOOD}\n# {}\n", "x".repeat(200));
    let rows = extract_with(&[("big.py", &big)], &cfg);
    let r = file_row(&rows, "big.py");
    assert_eq!(r.status, ModuleStatus::Failed);
    assert!(
        r.reason
            .as_deref()
            .unwrap()
            .starts_with("file_too_large: big.py"),
        "{r:?}"
    );
}

#[test]
fn deeply_nested_code_fails_the_class_without_overflowing() {
    let depth = 3000;
    let expr = format!("{}x{}", "(".repeat(depth), ")".repeat(depth));
    let src = format!(
        "import torch.nn as nn\n\n\nclass Deep(nn.Module):\n    def forward(self, x):\n        return {expr}\n\n\n{}",
        &GOOD["import torch.nn as nn\n\n\n".len()..]
    );
    let rows = extract(&[("deep.py", &src)]);
    let r = row(&rows, "Deep");
    assert_eq!(r.status, ModuleStatus::Failed);
    assert!(
        r.reason
            .as_deref()
            .unwrap()
            .starts_with("too_deeply_nested at deep.py:4"),
        "{r:?}"
    );
    ok_program(&rows, "Good");
}

#[test]
fn deeply_nested_blocks_fail_cleanly() {
    let mut src = String::from(
        "import torch.nn as nn\n\n\nclass Nest(nn.Module):\n    def forward(self, x):\n",
    );
    for level in 0..150 {
        src.push_str(&" ".repeat(8 + level * 2));
        src.push_str("if x is not None:\n");
    }
    src.push_str(&" ".repeat(8 + 150 * 2));
    src.push_str("return x\n");
    let rows = extract(&[("nest.py", &src)]);
    let r = row(&rows, "Nest");
    assert!(
        r.status == ModuleStatus::Ok
            || r.reason
                .as_deref()
                .unwrap()
                .starts_with("too_deeply_nested"),
        "{r:?}"
    );
}

#[test]
fn a_one_megabyte_single_line_file_is_handled() {
    // A valid but absurd line: a module with a 1 MB expression on one line.
    let terms: Vec<String> = (0..260_000).map(|i| format!("x*{}", i % 7)).collect();
    let line = terms.join("+");
    assert!(line.len() > 1_000_000);
    let src = format!(
        "import torch.nn as nn\nclass Wide(nn.Module):\n    def forward(self, x): return {line}\n"
    );
    let rows = extract(&[("wide.py", &src)]);
    // The class's row, whole or refused for its size; where the parse outlasts
    // `parse_timeout_ms` (a debug build on a loaded machine), the file's row says so.
    let r = file_row(&rows, "wide.py");
    assert!(
        (r.class_name == "Wide" && r.status == ModuleStatus::Ok)
            || r.reason.as_deref().is_some_and(|s| {
                s.starts_with("too_large")
                    || s.starts_with("too_deeply_nested at wide.py:2")
                    || s == "parse_timeout: wide.py"
            }),
        "{:?}",
        r.reason
    );
    // Pure noise on one line: a syntax error row.
    let noise = "(+".repeat(500_000);
    let rows = extract(&[("noise.py", &noise)]);
    let r = file_row(&rows, "noise.py");
    assert_eq!(r.status, ModuleStatus::Failed);
    assert!(r.reason.is_some());
}

#[test]
fn a_class_inside_an_unparsable_region_still_gets_a_row() {
    let src = "import torch.nn as nn\n\nclass Ok(nn.Module):\n    def forward(self, x):\n        return x\n\nclass Lost(nn.Module)\n    def forward(self x):\n        return x +* 2\n";
    let rows = extract(&[("lost.py", src)]);
    let lost = row(&rows, "Lost");
    assert_eq!(lost.status, ModuleStatus::Failed);
    assert!(
        lost.reason
            .as_deref()
            .unwrap()
            .starts_with("syntax_error at lost.py:"),
        "{lost:?}"
    );
}

#[test]
fn import_cycles_and_self_bases_terminate() {
    let rows = extract(&[
        (
            "a.py",
            "from b import *\nimport torch.nn as nn\n\n\nclass A(B):\n    def forward(self, x):\n        return x\n",
        ),
        ("b.py", "from a import *\n\n\nclass B(A):\n    pass\n"),
        ("c.py", "class C(C):\n    pass\n"),
    ]);
    // Neither A nor B reaches nn.Module: no rows for them, and no hang.
    assert!(rows.iter().all(|r| r.class_name != "C"), "{rows:#?}");
}

#[test]
fn dotted_and_odd_file_names_extract_and_never_stop_the_repository() {
    // Names Python cannot import: the file's classes are still extracted, nothing panics,
    // and importable files next to them keep resolving.
    let block = |name: &str| {
        format!(
            "import torch.nn as nn\nfrom .layers import scale\n\n\nclass {name}(nn.Module):\n    def forward(self, x):\n        return scale(x)\n"
        )
    };
    let files = [
        ("pkg/__init__.py", String::new()),
        (
            "pkg/layers.py",
            "def scale(x):\n    return x * 2\n".to_string(),
        ),
        ("pkg/net.v1.2.py", block("Versioned")),
        ("pkg/a..b.py", block("DoubleDot")),
        ("pkg/...py", block("OnlyDots")),
        ("pkg/.py", block("NoStem")),
        ("v1.2/model.py", GOOD.replace("Good", "InDottedFolder")),
        ("my-models/x.py", GOOD.replace("Good", "InDashedFolder")),
        ("good.py", GOOD.to_string()),
    ];
    let pairs: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let rows = extract(&pairs);
    for name in [
        "Versioned",
        "DoubleDot",
        "OnlyDots",
        "NoStem",
        "InDottedFolder",
        "InDashedFolder",
        "Good",
    ] {
        let p = ok_program(&rows, name);
        assert!(p.contains("class Model(nn.Module):"), "{name}:\n{p}");
    }
    assert!(ok_program(&rows, "Versioned").contains("def scale(x):"));
}

#[test]
fn text_cpython_refuses_fails_its_class_even_when_tree_sitter_accepts_it() {
    // Tabs and spaces mixed so that CPython raises TabError, and a method with no body: both
    // parse without an error node in tree-sitter.
    let src = "import torch.nn as nn\n\n\nclass Tabs(nn.Module):\n    def forward(self, x):\n        if x is not None:\n\t    return x\n        return x\n\n\nclass Empty(nn.Module):\n    def forward(self, x):\n        return x\n\n    def later(self):\n        # to do\n\n\nclass Fine(nn.Module):\n\tdef forward(self, x):\n\t\treturn x\n";
    let verdict = crate::common::cpython::cpython_verdicts(&[src]);
    assert!(verdict[0].is_some(), "CPython compiles it");
    let rows = extract(&[("mixed.py", src)]);
    assert_eq!(
        row(&rows, "Tabs").reason.as_deref(),
        Some("syntax_error at mixed.py:7")
    );
    assert_eq!(
        row(&rows, "Empty").reason.as_deref(),
        Some("syntax_error at mixed.py:15")
    );
    // Tabs alone, consistently: fine for CPython and for extract.
    let p = ok_program(&rows, "Fine");
    assert_eq!(
        crate::common::cpython::cpython_verdicts(&[p]),
        vec![None],
        "{p}"
    );
}

#[test]
fn mangled_corpus_files_never_reach_an_internal_error() {
    // Deterministic damage to the sample corpus: cut spans, repeat and drop lines, splice in
    // brackets, quotes, colons, tabs and dots. Every outcome must be an ordinary row.
    struct Lcg(u64);
    impl Lcg {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 33) as usize) % n.max(1)
        }
    }
    const SPLICE: &[&str] = &[
        "(",
        ")",
        "[",
        "]",
        ":",
        "\"\"\"",
        "'",
        "\t",
        "    ",
        ".",
        "\n",
        "class X(nn.Module):\n",
        "def",
        "try:\n",
        "except ImportError:\n",
        "if TYPE_CHECKING:\n",
        "*",
        "**",
        "=",
        "lambda",
        "async ",
        "\\\n",
    ];
    let mut rng = Lcg(7);
    let mut rows_seen = 0;
    for repo in crate::corpus::REPOS {
        let files = crate::common::corpus_files(repo);
        for round in 0..25 {
            let mut mangled = files.clone();
            let f = rng.below(mangled.len());
            let text = String::from_utf8_lossy(&mangled[f].bytes).into_owned();
            let mut chars: Vec<char> = text.chars().collect();
            for _ in 0..1 + round % 4 {
                let at = rng.below(chars.len() + 1);
                match rng.below(4) {
                    0 => {
                        let end = (at + rng.below(80)).min(chars.len());
                        chars.drain(at..end);
                    }
                    1 => {
                        let piece = SPLICE[rng.below(SPLICE.len())];
                        chars.splice(at..at, piece.chars());
                    }
                    2 => {
                        let end = (at + rng.below(200)).min(chars.len());
                        let copy: Vec<char> = chars[at..end].to_vec();
                        chars.splice(at..at, copy);
                    }
                    _ => chars.truncate(at),
                }
            }
            mangled[f].bytes = chars.into_iter().collect::<String>().into_bytes();
            for path in ["a..b.py", "...py", "net.v1.2.py"] {
                mangled.push(SourceFile::new(path, mangled[f].bytes.clone()));
            }
            let rows = extract_repo(&info(), &mangled, &ExtractConfig::default());
            rows_seen += rows.len();
            for r in &rows {
                let reason = r.reason.as_deref().unwrap_or("");
                assert!(
                    !reason.starts_with("internal_error"),
                    "{repo} round {round}: {reason}"
                );
            }
        }
    }
    assert!(rows_seen > 1000, "{rows_seen}");
}
