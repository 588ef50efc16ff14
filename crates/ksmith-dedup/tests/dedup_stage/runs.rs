//! What the sized programs ran (probe's `aten_calls`) decides too: the kernel method matches
//! the same computation however its code is written, and code that looks alike but runs other
//! kernels (a channels-first norm and a last-dim one, a depthwise convolution and a dense one,
//! other reduction axes) never matches, whichever method would match the code.

use super::*;

/// A KernelBench-format program around a class body (the entry class `Model`).
fn program(helpers: &str, init: &str, forward: &str) -> String {
    format!(
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n{helpers}\
         class Model(nn.Module):\n    def __init__(self, dim=64, hidden=128):\n        super().__init__()\n{init}\n\n\
         \x20   def forward(self, x):\n{forward}\n\n\
         batch_size = 16\n\ndef get_inputs():\n    return [torch.randn(batch_size, 32, 64)]\n\n\
         def get_init_inputs():\n    return [64, 128]\n"
    )
}

/// Linear, GELU and a last-dim layer norm, written four ways.
fn mlp_writings() -> Vec<(&'static str, String)> {
    vec![
        (
            "modules",
            program(
                "",
                "        self.fc = nn.Linear(dim, hidden)\n        self.act = nn.GELU()\n        self.norm = nn.LayerNorm(hidden)",
                "        return self.norm(self.act(self.fc(x)))",
            ),
        ),
        (
            "functional",
            program(
                "",
                "        self.weight = nn.Parameter(torch.randn(hidden, dim) * dim ** -0.5)\n        self.bias = nn.Parameter(torch.zeros(hidden))\n        self.gamma = nn.Parameter(torch.ones(hidden))\n        self.beta = nn.Parameter(torch.zeros(hidden))\n        self.shape = (hidden,)",
                "        h = F.linear(x, self.weight, self.bias)\n        h = F.gelu(h)\n        return F.layer_norm(h, self.shape, self.gamma, self.beta)",
            ),
        ),
        (
            "wrapped",
            program(
                "class Projection(nn.Module):\n    def __init__(self, d_in, d_out):\n        super().__init__()\n        self.net = nn.Sequential(nn.Linear(d_in, d_out), nn.GELU(), nn.LayerNorm(d_out))\n\n    def forward(self, inputs):\n        return self.net(inputs)\n\n\n",
                "        self.inner = Projection(dim, hidden)",
                "        return self.inner(x)",
            ),
        ),
        (
            "matmul",
            program(
                "",
                "        self.w = nn.Parameter(torch.randn(hidden, dim))\n        self.b = nn.Parameter(torch.zeros(hidden))\n        self.ln = nn.LayerNorm(hidden)",
                "        y = x @ self.w.t() + self.b\n        y = 0.5 * y * (1.0 + torch.erf(y / 1.4142135623730951))\n        return self.ln(y)",
            ),
        ),
    ]
}

/// What the probe records for them (`modules`, `functional` and `wrapped` dispatch alike; the
/// matmul writing runs `mm` + `add`, the same once `addmm` is split, but its GELU is written
/// out).
const MLP: &[&str] = &[
    "aten::view",
    "aten::t(w)",
    "aten::addmm(a,w)",
    "aten::_unsafe_view",
    "aten::gelu",
    "aten::native_layer_norm(KR)",
];

#[test]
fn the_same_computation_written_differently_is_one_group() {
    let dir = tempfile::tempdir().unwrap();
    let writings = mlp_writings();
    let mut modules: Vec<ModuleRow> = writings
        .iter()
        .enumerate()
        .map(|(i, (id, text))| module(id, text, Some("MIT"), Some(10 - i as i64)))
        .collect();
    let mut rng = SplitMix::new(3);
    modules.push(module(
        "unrelated",
        &synth::original(&mut rng),
        Some("MIT"),
        Some(1),
    ));
    let mut probes = ok_probes(&modules);
    for p in &mut probes[..3] {
        ran(p, MLP);
    }
    // The matmul writing computes its GELU with erf: another sequence of calls.
    ran(
        &mut probes[3],
        &[
            "aten::t(w)",
            "aten::view",
            "aten::mm(a,w)",
            "aten::_unsafe_view",
            "aten::add(b=KR)",
            "aten::mul(s)",
            "aten::div(s)",
            "aten::erf",
            "aten::add(s)",
            "aten::mul",
            "aten::native_layer_norm(KR)",
        ],
    );
    ran(
        &mut probes[4],
        &["aten::convolution(2d,k3x3,s1,p1,d1,dense)"],
    );
    for p in &mut probes {
        p.est_flops = Some(4e9);
        p.est_bytes = Some(1e8);
    }
    write_inputs(dir.path(), &modules, &probes);
    // The code alone matches none of them.
    let code_only = DedupConfig {
        kernel: false,
        ..Default::default()
    };
    let rows = run_rows(dir.path(), &code_only, 2);
    assert!(rows.values().all(|r| r.kept), "{rows:?}");
    // What they ran does.
    let rows = run_rows(dir.path(), &DedupConfig::default(), 2);
    assert!(rows["modules"].kept);
    for id in ["functional", "wrapped"] {
        assert_eq!(rows[id].method, Some(DedupMethod::Kernel), "{id}");
        assert_eq!(rows[id].duplicate_of.as_deref(), Some("modules"), "{id}");
    }
    assert!(rows["matmul"].kept && rows["unrelated"].kept);
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("reports/dedup.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(report["dropped"]["kernel"], 2);
    // `addmm` is `mm` and a broadcast `add`: with the same GELU, the matmul writing joins.
    ran(
        &mut probes[3],
        &[
            "aten::t(w)",
            "aten::view",
            "aten::mm(a,w)",
            "aten::_unsafe_view",
            "aten::add(b=KR)",
            "aten::gelu",
            "aten::native_layer_norm(KR)",
        ],
    );
    write_inputs(dir.path(), &modules, &probes);
    let rows = run_rows(dir.path(), &DedupConfig::default(), 1);
    assert_eq!(rows["matmul"].method, Some(DedupMethod::Kernel));
}

/// A norm over the channels: the last dimension of a (B, N, C) tensor, or the channels of a
/// (B, C, H, W) one (`dim` 1, a per-channel weight broadcast): the same code but its literals.
fn norm(channels_first: bool) -> String {
    let (dim, view) = if channels_first {
        ("1", ".view(1, -1, 1, 1)")
    } else {
        ("-1", ".view(1, 1, -1)")
    };
    program(
        "",
        "        self.weight = nn.Parameter(torch.ones(dim))\n        self.bias = nn.Parameter(torch.zeros(dim))\n        self.eps = 1e-6",
        &format!(
            "        u = x.mean({dim}, keepdim=True)\n        s = (x - u).pow(2).mean({dim}, keepdim=True)\n        x = (x - u) / torch.sqrt(s + self.eps)\n        return x * self.weight{view} + self.bias{view}"
        ),
    )
}

/// What the norm runs: its means along `pattern`, the statistics broadcast along `stats`, the
/// weight and bias along `affine`.
fn norm_calls(pattern: &str, stats: &str, affine: &str) -> Vec<String> {
    let mean = format!("aten::mean({pattern})");
    let centre = format!("aten::sub(b={stats})");
    let scale = format!("aten::div(b={stats})");
    let (weight, bias) = (
        format!("aten::mul(b={affine})"),
        format!("aten::add(b={affine})"),
    );
    [
        mean.as_str(),
        centre.as_str(),
        "aten::pow(s)",
        mean.as_str(),
        centre.as_str(),
        "aten::add(s)",
        "aten::sqrt",
        scale.as_str(),
        "aten::view(w)",
        weight.as_str(),
        "aten::view(w)",
        bias.as_str(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn conv(kernel: u32, groups: &str) -> String {
    let pad = kernel / 2;
    program(
        "",
        &format!(
            "        self.conv = nn.Conv2d(dim, dim, {kernel}, padding={pad}, groups={groups})\n        self.bn = nn.BatchNorm2d(dim)"
        ),
        "        return F.relu(self.bn(self.conv(x)))",
    )
}

fn conv_calls(kernel: u32, grouping: &str) -> Vec<String> {
    let pad = kernel / 2;
    [
        format!("aten::convolution(2d,k{kernel}x{kernel},s1,p{pad},d1,{grouping})"),
        "aten::native_batch_norm(RKR,train)".to_string(),
        "aten::relu".to_string(),
    ]
    .to_vec()
}

fn energy(dim: u32) -> String {
    program(
        "",
        "        self.eps = 1.0",
        &format!("        return torch.log(torch.sum(x * x, dim={dim}) + self.eps)"),
    )
}

fn energy_calls(pattern: &str) -> Vec<String> {
    [
        "aten::mul".to_string(),
        format!("aten::sum({pattern})"),
        "aten::add(s)".to_string(),
        "aten::log".to_string(),
    ]
    .to_vec()
}

#[test]
fn code_alike_that_runs_other_kernels_never_matches() {
    let dir = tempfile::tempdir().unwrap();
    // Pairs of programs whose code dedup would match, each with what its forward ran.
    let cases: Vec<(&str, String, Vec<String>)> = vec![
        ("norm-last", norm(false), norm_calls("KR", "RK", "KR")),
        ("norm-first", norm(true), norm_calls("KRKK", "RKR", "KRKK")),
        ("conv-dense", conv(3, "1"), conv_calls(3, "dense")),
        ("conv-dw", conv(3, "dim"), conv_calls(3, "dw")),
        ("sum-2", energy(2), energy_calls("KRK")),
        ("sum-1", energy(1), energy_calls("KRKK")),
        // The same code twice: its constructor arguments made one depthwise (the sized
        // program is what ran, not the source).
        ("same-dense", conv(5, "dim // 64"), conv_calls(5, "dense")),
        ("same-dw", conv(5, "dim // 64"), conv_calls(5, "dw")),
    ];
    let modules: Vec<ModuleRow> = cases
        .iter()
        .enumerate()
        .map(|(i, (id, text, _))| module(id, text, Some("MIT"), Some(100 - i as i64)))
        .collect();
    let bare = ok_probes(&modules);
    write_inputs(dir.path(), &modules, &bare);
    // Without what they ran, the code of each pair matches (by some method).
    run_rows(dir.path(), &DedupConfig::default(), 2);
    let pairs: Vec<ksmith_core::tables::DedupPairRow> =
        read_table(&ksmith_core::tables::DedupPairRow::path_in(dir.path())).unwrap();
    for pair in cases.chunks(2) {
        let ids = [pair[0].0, pair[1].0];
        assert!(
            pairs
                .iter()
                .any(|p| ids.contains(&p.module_id.as_str()) && ids.contains(&p.other.as_str())),
            "{ids:?}"
        );
    }
    let mut probes = bare.clone();
    for (p, (_, _, calls)) in probes.iter_mut().zip(&cases) {
        let calls: Vec<&str> = calls.iter().map(String::as_str).collect();
        ran(p, &calls);
    }
    write_inputs(dir.path(), &modules, &probes);
    let rows = run_rows(dir.path(), &DedupConfig::default(), 2);
    for (id, _, _) in &cases {
        assert!(rows[*id].kept, "{:?}", rows[*id]);
    }
    // Nor does any threshold on the code let them through.
    let loose = DedupConfig {
        near_threshold: 0.3,
        semantic_threshold: 0.5,
        aten_threshold: 0.3,
        ..Default::default()
    };
    let rows = run_rows(dir.path(), &loose, 2);
    for pair in cases.chunks(2) {
        let (a, b) = (&rows[pair[0].0], &rows[pair[1].0]);
        assert!(
            a.duplicate_of.as_deref() != Some(pair[1].0)
                && b.duplicate_of.as_deref() != Some(pair[0].0),
            "{a:?} {b:?}"
        );
    }
}

#[test]
fn the_same_computation_at_sizes_of_another_regime_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let writings = mlp_writings();
    let modules: Vec<ModuleRow> = writings[..3]
        .iter()
        .map(|(id, text)| module(id, text, Some("MIT"), Some(1)))
        .collect();
    let mut probes = ok_probes(&modules);
    // Intensities 40, 50 (one regime: within a factor of 4) and 2560 FLOP/byte.
    for (p, flops) in probes.iter_mut().zip([4e9, 5e9, 2.56e11]) {
        ran(p, MLP);
        p.est_flops = Some(flops);
        p.est_bytes = Some(1e8);
    }
    write_inputs(dir.path(), &modules, &probes);
    let rows = run_rows(dir.path(), &DedupConfig::default(), 1);
    let (kept, dropped) = match rows["modules"].kept {
        true => ("modules", "functional"),
        false => ("functional", "modules"),
    };
    assert!(rows[kept].kept);
    assert_eq!(rows[dropped].duplicate_of.as_deref(), Some(kept));
    assert_eq!(rows[dropped].method, Some(DedupMethod::Kernel));
    assert!(rows["wrapped"].kept);
}

#[test]
fn contamination_does_not_spread_through_the_kernel_method() {
    let dir = tempfile::tempdir().unwrap();
    let bench = dir.path().join("bench");
    std::fs::create_dir_all(&bench).unwrap();
    std::fs::write(bench.join("9_Gemm_Sigmoid_Scaling.py"), GEMM).unwrap();
    // `copy` is the problem itself (and the best survivor); `edited` shares its code, the
    // others only what it computes.
    let edited = GEMM.replace(
        "        x = x * self.scaling_factor\n",
        "        x = x * self.scaling_factor\n        x = x - 0.5\n",
    );
    let functional = program(
        "",
        "        self.weight = nn.Parameter(torch.randn(hidden, dim))\n        self.bias = nn.Parameter(torch.zeros(hidden))\n        self.scale = 2.0",
        "        return torch.sigmoid(F.linear(x, self.weight, self.bias)) * self.scale",
    );
    let sequential = program(
        "",
        "        self.net = nn.Sequential(nn.Linear(dim, hidden), nn.Sigmoid())",
        "        return self.net(x) * 2.0",
    );
    let modules = vec![
        module("copy", GEMM, Some("MIT"), Some(90)),
        module("edited", &edited, Some("MIT"), Some(50)),
        module("functional", &functional, Some("MIT"), Some(40)),
        module("sequential", &sequential, Some("MIT"), Some(30)),
    ];
    let mut probes = ok_probes(&modules);
    let calls = [
        "aten::t(w)",
        "aten::addmm(a,w)",
        "aten::sigmoid",
        "aten::mul(s)",
    ];
    for p in &mut probes {
        ran(p, &calls);
    }
    write_inputs(dir.path(), &modules, &probes);
    let cfg = DedupConfig {
        contamination: vec![bench.display().to_string()],
        ..Default::default()
    };
    let rows = run_rows(dir.path(), &cfg, 2);
    assert_eq!(rows["copy"].method, Some(DedupMethod::Contamination));
    assert_eq!(rows["edited"].method, Some(DedupMethod::Contamination));
    // The same computation written otherwise is no copy: the best of them survives and
    // takes the others, as kernel duplicates.
    assert!(rows["functional"].kept, "{:?}", rows["functional"]);
    assert_eq!(rows["sequential"].method, Some(DedupMethod::Kernel));
    assert_eq!(
        rows["sequential"].duplicate_of.as_deref(),
        Some("functional")
    );
}

/// A pre-norm attention block's calls with its norm's pattern, its out-projection's bias or
/// not.
fn attention_calls(norm: &str, bias: bool) -> Vec<String> {
    let mut calls: Vec<String> = [
        format!("aten::native_layer_norm({norm})"),
        "aten::mm(a,w)".into(),
        "aten::clone(m=0213)".into(),
        "aten::clone(m=021)".into(),
        "aten::bmm(a,a)".into(),
        "aten::mul(s)".into(),
        "aten::_softmax(KR)".into(),
        "aten::clone(m=0213)".into(),
        "aten::bmm(a,a)".into(),
        "aten::clone(m=0213)".into(),
        "aten::mm(a,w)".into(),
    ]
    .to_vec();
    if bias {
        calls.push("aten::add(b=KR)".into());
    }
    calls.push("aten::add".into());
    calls
}

/// A transformer of two blocks (attention, feed-forward); the first attention's bias or not.
fn transformer_calls(norm: &str, bias: bool) -> Vec<String> {
    let ffn: Vec<String> = [
        format!("aten::native_layer_norm({norm})"),
        "aten::addmm(a,w)".into(),
        "aten::gelu".into(),
        "aten::addmm(a,w)".into(),
        "aten::add".into(),
    ]
    .to_vec();
    [
        attention_calls(norm, bias),
        ffn.clone(),
        attention_calls(norm, false),
        ffn,
    ]
    .concat()
}

#[test]
fn modules_that_run_alike_match_however_their_code_differs() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SplitMix::new(17);
    let cases: Vec<(&str, Vec<String>)> = vec![
        ("stack", transformer_calls("KR", false)),
        // A bias more: the same kernel problem.
        ("stack-bias", transformer_calls("KR", true)),
        // Its norms over the channels of an NCHW tensor: other kernels.
        ("stack-first", transformer_calls("KRKK", false)),
        // One attention block, and the same with two more element-wise steps: on so short a
        // run, calls that disagree.
        ("attention", attention_calls("KR", false)),
        (
            "attention-tanh",
            [
                attention_calls("KR", false),
                vec!["aten::mul(s)".into(), "aten::tanh".into()],
            ]
            .concat(),
        ),
    ];
    let modules: Vec<ModuleRow> = cases
        .iter()
        .enumerate()
        .map(|(i, (id, _))| {
            module(
                id,
                &synth::original(&mut rng),
                Some("MIT"),
                Some(9 - i as i64),
            )
        })
        .collect();
    let mut probes = ok_probes(&modules);
    for (p, (_, calls)) in probes.iter_mut().zip(&cases) {
        let calls: Vec<&str> = calls.iter().map(String::as_str).collect();
        ran(p, &calls);
    }
    write_inputs(dir.path(), &modules, &probes);
    let rows = run_rows(dir.path(), &DedupConfig::default(), 2);
    assert!(rows["stack"].kept);
    let r = &rows["stack-bias"];
    assert_eq!(
        (r.method, r.duplicate_of.as_deref()),
        (Some(DedupMethod::Kernel), Some("stack"))
    );
    assert!(
        r.similarity.unwrap() >= 0.9 && r.similarity.unwrap() < 1.0,
        "{r:?}"
    );
    for id in ["stack-first", "attention", "attention-tanh"] {
        assert!(rows[id].kept, "{:?}", rows[id]);
    }
    // At sizes of another regime, the same stack is another problem.
    probes[0].est_flops = Some(1e9);
    probes[0].est_bytes = Some(1e8);
    probes[1].est_flops = Some(1e12);
    probes[1].est_bytes = Some(1e8);
    write_inputs(dir.path(), &modules, &probes);
    let rows = run_rows(dir.path(), &DedupConfig::default(), 1);
    assert!(rows["stack-bias"].kept, "{:?}", rows["stack-bias"]);
}
