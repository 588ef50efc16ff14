//! The sample corpus under `data/corpus`: what extract makes of it, and that the fast
//! statement-wise program check agrees with re-parsing every whole program.
#![allow(clippy::unwrap_used)] // Tests may unwrap.

use crate::common::{corpus, corpus_files};
use ksmith_core::tables::{ModuleRow, ModuleStatus};
use ksmith_extract::{ExtractConfig, RepoInfo, extract_repo};

fn extract(repo: &str, cfg: &ExtractConfig) -> Vec<ModuleRow> {
    let files = corpus_files(repo);
    let info = RepoInfo {
        repo: repo.into(),
        ..Default::default()
    };
    extract_repo(&info, &files, cfg)
}

pub(crate) const REPOS: &[&str] = &[
    "tinyact", "normzoo", "attnlab", "convnets", "seqkit", "gplnet",
];

#[test]
fn every_repository_has_a_license_and_the_corpus_has_enough_modules() {
    let mut ok = 0;
    for repo in REPOS {
        assert!(corpus().join(repo).join("LICENSE").is_file(), "{repo}");
        if *repo != "gplnet" {
            ok += extract(repo, &ExtractConfig::default())
                .iter()
                .filter(|r| r.status == ModuleStatus::Ok)
                .count();
        }
    }
    assert!(ok >= 40, "only {ok} modules");
}

#[test]
fn the_corpus_rows_that_do_not_pass_are_the_planted_ones() {
    let mut not_ok: Vec<(String, String)> = Vec::new();
    for repo in REPOS {
        for r in extract(repo, &ExtractConfig::default()) {
            if r.status != ModuleStatus::Ok {
                // Every row that does not pass has a code, and its words start with it.
                let code = r.reason_code.expect("a reason code");
                let words = r.reason.as_deref().unwrap_or("");
                assert!(words.starts_with(code.as_str()), "{code}: {words}");
                not_ok.push((
                    format!("{repo}/{}::{}", r.path, r.class_name),
                    r.reason.unwrap(),
                ));
            }
        }
    }
    let expected = [
        ("normzoo/normzoo/base.py::NormBase", "no_forward"),
        (
            "normzoo/normzoo/extra/spectral.py::SpectralScale",
            "import_not_allowed: scipy",
        ),
        (
            "convnets/convnets/experimental.py::UsesUndefined",
            "undefined_name: fused_kernel",
        ),
        (
            "convnets/convnets/legacy.py::OldBlock",
            "syntax_error at convnets/legacy.py:7",
        ),
        ("seqkit/seqkit/base.py::SeqModule", "no_forward"),
        (
            "seqkit/seqkit/embed.py::ErfGate",
            "import_not_allowed: scipy",
        ),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(not_ok, expected);
}

#[test]
fn statement_wise_check_agrees_with_whole_program_reparse() {
    let whole = ExtractConfig {
        verify_whole_program: true,
        ..Default::default()
    };
    for repo in REPOS {
        assert_eq!(
            extract(repo, &ExtractConfig::default()),
            extract(repo, &whole),
            "{repo}"
        );
    }
}

#[test]
fn every_ok_program_of_the_corpus_compiles_with_cpython() {
    let mut programs: Vec<(String, String)> = Vec::new();
    for repo in REPOS {
        for r in extract(repo, &ExtractConfig::default()) {
            if r.status == ModuleStatus::Ok {
                programs.push((format!("{repo}::{}", r.class_name), r.program.unwrap()));
            }
        }
    }
    let texts: Vec<&str> = programs.iter().map(|(_, p)| p.as_str()).collect();
    let verdicts = crate::common::cpython::cpython_verdicts(&texts);
    for ((name, program), verdict) in programs.iter().zip(verdicts) {
        assert_eq!(verdict, None, "{name} does not compile:\n{program}");
    }
    assert!(programs.len() >= 40, "{}", programs.len());
}
