//! Generated KernelBench programs and the throughput/yield measurement, shared by the
//! `probe` bench and the `probe_generated` example (which runs the same measurement where only
//! a built binary can go).
#![allow(dead_code)]

use std::time::Instant;

use ksmith_core::progress::Tracker;
use ksmith_core::tables::{ModuleRow, ModuleStatus, ProbeStatus};
use ksmith_probe::{ProbeConfig, probe_programs};

/// One generated program family: constructor parameters, forward inputs, the class body.
struct Template {
    name: &'static str,
    /// (parameter name, valid value)
    init: Vec<(&'static str, String)>,
    /// valid input expressions
    inputs: Vec<String>,
    /// the forward parameters
    forward_params: &'static str,
    /// `__init__` body and `forward` body
    init_body: String,
    forward_body: String,
}

fn templates(v: usize) -> Vec<Template> {
    let c = [3, 8, 16, 32, 12, 6][v % 6];
    let h = [16, 20, 24, 12, 28, 32][v % 6];
    let f = [16, 32, 64, 48, 24, 40][v % 6];
    let o = [8, 10, 12, 20, 6, 16][v % 6];
    let k = [3, 5, 3, 1, 3, 5][v % 6];
    let b = [2, 4, 8, 3, 5, 6][v % 6];
    let t = |s: &str| s.to_string();
    vec![
        Template {
            name: "linear_relu",
            init: vec![
                ("in_features", f.to_string()),
                ("out_features", o.to_string()),
            ],
            inputs: vec![format!("torch.rand({b}, {f})")],
            forward_params: "x",
            init_body: t("self.fc = nn.Linear(in_features, out_features)"),
            forward_body: t("return torch.relu(self.fc(x))"),
        },
        Template {
            name: "mlp",
            init: vec![("dim", f.to_string()), ("hidden", (2 * f).to_string())],
            inputs: vec![format!("torch.rand({b}, 7, {f})")],
            forward_params: "x",
            init_body: t(
                "self.net = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))",
            ),
            forward_body: t("return self.net(x) + x"),
        },
        Template {
            name: "conv2d_bn_relu",
            init: vec![
                ("in_channels", c.to_string()),
                ("out_channels", o.to_string()),
                ("kernel_size", k.to_string()),
            ],
            inputs: vec![format!("torch.rand({b}, {c}, {h}, {h})")],
            forward_params: "x",
            init_body: t(
                "self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)\n        self.bn = nn.BatchNorm2d(out_channels)",
            ),
            forward_body: t("return torch.relu(self.bn(self.conv(x)))"),
        },
        Template {
            name: "conv1d",
            init: vec![
                ("in_channels", c.to_string()),
                ("out_channels", o.to_string()),
            ],
            inputs: vec![format!("torch.rand({b}, {c}, {})", 4 * h)],
            forward_params: "x",
            init_body: t("self.conv = nn.Conv1d(in_channels, out_channels, 3, padding=1)"),
            forward_body: t("return torch.tanh(self.conv(x))"),
        },
        Template {
            name: "conv3d",
            init: vec![
                ("in_channels", c.to_string()),
                ("out_channels", o.to_string()),
            ],
            inputs: vec![format!("torch.rand(2, {c}, 6, 8, 8)")],
            forward_params: "x",
            init_body: t("self.conv = nn.Conv3d(in_channels, out_channels, 3)"),
            forward_body: t("return self.conv(x).sigmoid()"),
        },
        Template {
            name: "conv_transpose",
            init: vec![
                ("in_channels", c.to_string()),
                ("out_channels", o.to_string()),
            ],
            inputs: vec![format!("torch.rand({b}, {c}, {h}, {h})")],
            forward_params: "x",
            init_body: t("self.up = nn.ConvTranspose2d(in_channels, out_channels, 2, stride=2)"),
            forward_body: t("return self.up(x)"),
        },
        Template {
            name: "maxpool",
            init: vec![("kernel", "2".to_string())],
            inputs: vec![format!("torch.rand({b}, {c}, {h}, {h})")],
            forward_params: "x",
            init_body: t("self.pool = nn.MaxPool2d(kernel)"),
            forward_body: t("return self.pool(x)"),
        },
        Template {
            name: "avgpool_flatten_linear",
            init: vec![("channels", c.to_string()), ("classes", o.to_string())],
            inputs: vec![format!("torch.rand({b}, {c}, {h}, {h})")],
            forward_params: "x",
            init_body: t(
                "self.pool = nn.AdaptiveAvgPool2d(1)\n        self.fc = nn.Linear(channels, classes)",
            ),
            forward_body: t("return self.fc(self.pool(x).flatten(1))"),
        },
        Template {
            name: "layernorm",
            init: vec![("dim", f.to_string())],
            inputs: vec![format!("torch.rand({b}, 5, {f})")],
            forward_params: "x",
            init_body: t("self.norm = nn.LayerNorm(dim)"),
            forward_body: t("return self.norm(x)"),
        },
        Template {
            name: "groupnorm",
            init: vec![
                ("groups", "2".to_string()),
                ("channels", (2 * c).to_string()),
            ],
            inputs: vec![format!("torch.rand({b}, {}, {h}, {h})", 2 * c)],
            forward_params: "x",
            init_body: t("self.norm = nn.GroupNorm(groups, channels)"),
            forward_body: t("return self.norm(x)"),
        },
        Template {
            name: "instancenorm",
            init: vec![("channels", c.to_string())],
            inputs: vec![format!("torch.rand({b}, {c}, {h}, {h})")],
            forward_params: "x",
            init_body: t("self.norm = nn.InstanceNorm2d(channels, affine=True)"),
            forward_body: t("return self.norm(x)"),
        },
        Template {
            name: "softmax_scale",
            init: vec![("scale", "0.5".to_string())],
            inputs: vec![format!("torch.rand({b}, {f})")],
            forward_params: "x",
            init_body: t("self.scale = scale"),
            forward_body: t("return torch.softmax(x * self.scale, dim=-1)"),
        },
        Template {
            name: "embedding",
            init: vec![
                ("num_embeddings", (10 * o).to_string()),
                ("embedding_dim", f.to_string()),
            ],
            inputs: vec![format!("torch.randint(0, {}, ({b}, 7))", 10 * o)],
            forward_params: "tokens",
            init_body: t("self.emb = nn.Embedding(num_embeddings, embedding_dim)"),
            forward_body: t("return self.emb(tokens).mean(dim=1)"),
        },
        Template {
            name: "lstm",
            init: vec![
                ("input_size", f.to_string()),
                ("hidden_size", o.to_string()),
            ],
            inputs: vec![format!("torch.rand({b}, 6, {f})")],
            forward_params: "x",
            init_body: t("self.rnn = nn.LSTM(input_size, hidden_size, batch_first=True)"),
            forward_body: t("out, _ = self.rnn(x)\n        return out[:, -1]"),
        },
        Template {
            name: "gru",
            init: vec![
                ("input_size", f.to_string()),
                ("hidden_size", o.to_string()),
            ],
            inputs: vec![format!("torch.rand(6, {b}, {f})")],
            forward_params: "x",
            init_body: t("self.rnn = nn.GRU(input_size, hidden_size)"),
            forward_body: t("return self.rnn(x)[0]"),
        },
        Template {
            name: "attention",
            init: vec![("embed_dim", f.to_string()), ("num_heads", "4".to_string())],
            inputs: vec![format!("torch.rand({b}, 9, {f})")],
            forward_params: "x",
            init_body: t(
                "self.attn = nn.MultiheadAttention(embed_dim, num_heads, batch_first=True)",
            ),
            forward_body: t("return self.attn(x, x, x)[0]"),
        },
        Template {
            name: "bmm",
            init: vec![],
            inputs: vec![
                format!("torch.rand({b}, {o}, {f})"),
                format!("torch.rand({b}, {f}, {c})"),
            ],
            forward_params: "a, b",
            init_body: t("pass"),
            forward_body: t("return torch.bmm(a, b)"),
        },
        Template {
            name: "matmul_add",
            init: vec![],
            inputs: vec![
                format!("torch.rand({o}, {f})"),
                format!("torch.rand({f}, {c})"),
                format!("torch.rand({o}, {c})"),
            ],
            forward_params: "a, b, bias",
            init_body: t("pass"),
            forward_body: t("return a @ b + bias"),
        },
        Template {
            name: "view_heads",
            init: vec![("heads", "4".to_string())],
            inputs: vec![format!("torch.rand({b}, 10, {f})")],
            forward_params: "x",
            init_body: t("self.heads = heads"),
            forward_body: t(
                "bsz, n, d = x.shape\n        return x.view(bsz, n, self.heads, d // self.heads).transpose(1, 2).contiguous()",
            ),
        },
        Template {
            name: "mse_loss",
            init: vec![],
            inputs: vec![
                format!("torch.rand({b}, {f})"),
                format!("torch.rand({b}, {f})"),
            ],
            forward_params: "pred, target",
            init_body: t("self.loss = nn.MSELoss()"),
            forward_body: t("return self.loss(pred, target)"),
        },
        Template {
            name: "cross_entropy",
            init: vec![],
            inputs: vec![
                format!("torch.rand({b}, {o})"),
                format!("torch.randint(0, {o}, ({b},))"),
            ],
            forward_params: "logits, labels",
            init_body: t("pass"),
            forward_body: t("return F.cross_entropy(logits, labels)"),
        },
        Template {
            name: "residual_block",
            init: vec![("channels", c.to_string())],
            inputs: vec![format!("torch.rand({b}, {c}, {h}, {h})")],
            forward_params: "x",
            init_body: t(
                "self.c1 = nn.Conv2d(channels, channels, 3, padding=1)\n        self.c2 = nn.Conv2d(channels, channels, 3, padding=1)",
            ),
            forward_body: t("return torch.relu(x + self.c2(torch.relu(self.c1(x))))"),
        },
        Template {
            name: "gated_elementwise",
            init: vec![],
            inputs: vec![
                format!("torch.rand({b}, {f})"),
                format!("torch.rand({b}, {f})"),
            ],
            forward_params: "x, gate",
            init_body: t("pass"),
            forward_body: t("return x * torch.sigmoid(gate) - 0.5 * x.clamp(min=0.1)"),
        },
        Template {
            name: "pixel_shuffle",
            init: vec![("factor", "2".to_string())],
            inputs: vec![format!("torch.rand({b}, {}, {h}, {h})", 4 * c)],
            forward_params: "x",
            init_body: t("self.ps = nn.PixelShuffle(factor)"),
            forward_body: t("return self.ps(x)"),
        },
        Template {
            name: "cumsum_norm",
            init: vec![],
            inputs: vec![format!("torch.rand({b}, {f})")],
            forward_params: "x",
            init_body: t("pass"),
            forward_body: t("return torch.cumsum(x, dim=1) / x.sum(dim=1, keepdim=True)"),
        },
    ]
}

fn render(t: &Template, init: &[String], inputs: &[String]) -> String {
    let params: Vec<&str> = t.init.iter().map(|(n, _)| *n).collect();
    let sig = if params.is_empty() {
        String::new()
    } else {
        format!(", {}", params.join(", "))
    };
    format!(
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n\
         class Model(nn.Module):\n    def __init__(self{sig}):\n        super().__init__()\n        {}\n\n\
         \x20   def forward(self, {}):\n        {}\n\n\n\
         def get_inputs():\n    return [{}]\n\n\n\
         def get_init_inputs():\n    return [{}]\n",
        t.init_body,
        t.forward_params,
        t.forward_body,
        inputs.join(", "),
        init.join(", ")
    )
}

/// The repository name of the bench's own programs.
pub(crate) const BENCH_REPO: &str = "bench/generated";

/// A trivial module (one per worker: what starting the workers costs).
pub(crate) fn trivial_program() -> String {
    "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n        \
     return x + 1\n\n\ndef get_inputs():\n    return [torch.rand(2, 2)]\n\n\ndef get_init_inputs():\n    \
     return []\n"
        .to_string()
}

/// A runnable module row holding `program`.
pub(crate) fn module_row(id: &str, program: String) -> ModuleRow {
    module(id.to_string(), program)
}

fn module(id: String, program: String) -> ModuleRow {
    ModuleRow {
        id,
        repo: BENCH_REPO.into(),
        commit: "0".repeat(40),
        path: "gen.py".into(),
        class_name: "Model".into(),
        line: 1,
        status: ModuleStatus::Ok,
        reason: None,
        reason_code: None,
        lines: program.lines().count() as u32,
        program: Some(program),
        deps: vec![],
        imports: vec![],
        license: None,
        stars: None,
        arg_sources: Vec::new(),
    }
}

/// The valid set and the set with wrong guesses.
pub(crate) fn generate(variants: usize) -> (Vec<ModuleRow>, Vec<ModuleRow>) {
    let mut valid = Vec::new();
    let mut wrong = Vec::new();
    for v in 0..variants {
        for t in templates(v) {
            let init: Vec<String> = t.init.iter().map(|(_, x)| x.clone()).collect();
            valid.push(module(
                format!("{}-{v}", t.name),
                render(&t, &init, &t.inputs),
            ));
            // A static guesser: every input a float tensor of size 4 in each dimension, 4-D,
            // 2-D or 3-D by variant; ints 4 in every other variant; in every third variant the
            // last constructor argument is missing.
            let rank = [4, 2, 3][v % 3];
            let guessed_inputs: Vec<String> = t
                .inputs
                .iter()
                .map(|_| format!("torch.rand({})", vec!["4"; rank].join(", ")))
                .collect();
            let mut guessed_init: Vec<String> = t
                .init
                .iter()
                .map(|(_, x)| {
                    if v % 2 == 1 && x.parse::<i64>().is_ok() {
                        "4".to_string()
                    } else {
                        x.clone()
                    }
                })
                .collect();
            if v % 3 == 2 && !guessed_init.is_empty() {
                guessed_init.pop();
            }
            wrong.push(module(
                format!("{}-{v}-guessed", t.name),
                render(&t, &guessed_init, &guessed_inputs),
            ));
        }
    }
    (valid, wrong)
}

pub(crate) struct Measure {
    pub(crate) modules: usize,
    pub(crate) secs: Vec<f64>,
    pub(crate) ok: usize,
    pub(crate) statuses: String,
    pub(crate) repaired: usize,
}

pub(crate) fn measure(
    set: &[ModuleRow],
    workers: usize,
    reps: usize,
    cfg: &ProbeConfig,
) -> Measure {
    let refs: Vec<&ModuleRow> = set.iter().collect();
    let mut secs = Vec::new();
    let mut last = None;
    for _ in 0..reps {
        let t0 = Instant::now();
        let out = probe_programs(&refs, cfg, workers, None, &Tracker::hidden()).expect("probe run");
        secs.push(t0.elapsed().as_secs_f64());
        last = Some(out);
    }
    let out = last.expect("at least one repetition");
    let mut counts = std::collections::BTreeMap::new();
    for r in &out.rows {
        *counts
            .entry(format!("{:?}", r.status).to_lowercase())
            .or_insert(0usize) += 1;
    }
    let ok = out
        .rows
        .iter()
        .filter(|r| r.status == ProbeStatus::Ok)
        .count();
    let repaired = out
        .rows
        .iter()
        .filter(|r| r.status == ProbeStatus::Ok && !r.repair_steps.is_empty())
        .count();
    if std::env::var_os("KSMITH_BENCH_VERBOSE").is_some() {
        for r in out.rows.iter().filter(|r| r.status != ProbeStatus::Ok) {
            eprintln!(
                "{} {:?} {:?} {:?}",
                r.module_id, r.status, r.error_message, r.repair_steps
            );
        }
    }
    Measure {
        modules: set.len(),
        secs,
        ok,
        statuses: counts
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", "),
        repaired,
    }
}

pub(crate) fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s[s.len() / 2]
}

/// Runs both sets and prints the table.
pub(crate) fn run_bench() {
    let reps: usize = std::env::var("KSMITH_BENCH_REPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3)
        .max(1);
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let workers: usize = std::env::var("KSMITH_BENCH_WORKERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(cores);
    let (valid, wrong) = generate(6);
    let cfg = ProbeConfig::default();
    // Workers importing torch: a run of one trivial module per worker.
    let start_set: Vec<ModuleRow> = valid.iter().take(workers).cloned().collect();
    let start = measure(&start_set, workers, reps, &cfg);
    let start_s = median(&start.secs);
    println!(
        "probe bench: {cores} cores, {workers} workers, {reps} repetitions (median); \
         worker start ({} modules): {start_s:.2} s",
        start_set.len()
    );
    println!(
        "{:<20} {:>7} {:>9} {:>10} {:>13} {:>7} {:>9}  statuses",
        "set", "modules", "median s", "modules/s", "w/o start /s", "yield", "repaired"
    );
    for (name, set) in [("valid (generated)", &valid), ("wrong guesses", &wrong)] {
        let m = measure(set, workers, reps, &cfg);
        let med = median(&m.secs);
        let steady = (m.modules - start_set.len()) as f64 / (med - start_s).max(1e-9);
        println!(
            "{:<20} {:>7} {:>9.2} {:>10.1} {:>13.1} {:>6.1}% {:>9}  {}",
            name,
            m.modules,
            med,
            m.modules as f64 / med,
            steady,
            100.0 * m.ok as f64 / m.modules as f64,
            m.repaired,
            m.statuses
        );
    }
}
