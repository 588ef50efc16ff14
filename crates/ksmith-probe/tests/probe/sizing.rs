//! The sizing step through the stage and the sandbox: a runnable program comes back with its
//! sizes as module-level constants, alternates and work estimates; one that cannot be sized
//! keeps the program it was verified with and says why.

use crate::common::{module, program};
use ksmith_core::context::StageContext;
use ksmith_core::table::{Table, read_table, write_table};
use ksmith_core::tables::{ModuleRow, ProbeRow, ProbeStatus, SizeReason, SizeStatus};
use ksmith_probe::{ProbeConfig, run};

fn constants(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|l| {
            let (name, value) = l.split_once(" = ")?;
            Some((name.to_string(), value.trim().parse().ok()?))
        })
        .filter(|(name, _)| name.chars().all(|c| c.is_alphanumeric() || c == '_'))
        .collect()
}

#[test]
fn runnable_programs_are_sized_and_the_rest_say_why() {
    let _workers = crate::common::workers_shared();
    let dir = tempfile::tempdir().unwrap();
    let fixed = "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def __init__(self):\n        \
                 super().__init__()\n        self.w = nn.Parameter(torch.arange(64.0).reshape(8, 8))\n\n    def forward(self, s):\n        \
                 return self.w * s\n\n\ndef get_inputs():\n    return [torch.rand(())]\n\n\ndef get_init_inputs():\n    return []\n";
    let modules = vec![
        module("wrong_conv", program("wrong_conv")),
        module("fixed", fixed.to_string()),
    ];
    write_table(&ModuleRow::path_in(dir.path()), &modules, "extract-fp").unwrap();
    let cfg = ProbeConfig {
        timeout_s: 60.0,
        ..Default::default()
    };
    let report = run(&cfg, &StageContext::for_tests(dir.path())).unwrap();
    assert_eq!(report.counters.get("size_sized"), Some(&1), "{report:?}");
    assert_eq!(report.counters.get("size_unsizable"), Some(&1));
    assert!(
        report
            .counters
            .get("setup_cpu_ms")
            .is_some_and(|&ms| ms > 0)
    );
    assert!(
        report
            .counters
            .get("runner_cpu_ms")
            .is_some_and(|&ms| ms > 0)
    );
    let rows: Vec<ProbeRow> = read_table(&ProbeRow::path_in(dir.path())).unwrap();

    let conv = &rows[0];
    assert_eq!(conv.status, ProbeStatus::Ok, "{conv:?}");
    assert_eq!(
        conv.size_status,
        Some(SizeStatus::Sized),
        "{:?}",
        conv.size_reason
    );
    let sizes: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&conv.sizes).unwrap();
    let text = conv.program.as_deref().unwrap();
    let written = constants(text);
    for (name, value) in &sizes {
        assert!(
            written.contains(&(name.clone(), value.as_u64().unwrap())),
            "{name} = {value} is a constant of the program:\n{text}"
        );
    }
    let alternates: Vec<serde_json::Map<String, serde_json::Value>> =
        serde_json::from_str(&conv.alt_sizes).unwrap();
    assert!(alternates.len() >= 2);
    for alt in &alternates {
        assert_eq!(
            alt.keys().collect::<Vec<_>>(),
            sizes.keys().collect::<Vec<_>>()
        );
        assert_ne!(alt, &sizes);
    }
    let enough = conv.est_flops.unwrap() >= 0.2e9 || conv.est_bytes.unwrap() >= 64.0 * 1048576.0;
    assert!(enough, "{conv:?}");
    let ms = conv.est_ms.unwrap();
    assert!(ms > 0.0 && ms <= 10.0, "{ms}");
    assert!(conv.peak_bytes.unwrap() <= 20 * 1024 * 1048576);
    assert_eq!(conv.sized_on.as_deref(), Some("meta"));

    let fixed_row = &rows[1];
    assert_eq!(fixed_row.status, ProbeStatus::Ok);
    assert_eq!(fixed_row.size_status, Some(SizeStatus::Unsizable));
    assert_eq!(fixed_row.size_reason_code, Some(SizeReason::NoSizeKnob));
    assert_eq!(fixed_row.program.as_deref(), Some(fixed));
    assert_eq!(
        (fixed_row.sizes.as_str(), fixed_row.alt_sizes.as_str()),
        ("{}", "[]")
    );
}
