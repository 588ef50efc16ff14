//! Dedup and tasks by what runs, through the real stages (crawl, extract, the sandboxed probe
//! with its sizing, dedup, cluster) on modules written for this test: the same computation
//! written three ways (modules, `nn.functional` with its own parameters and other names, an
//! extra wrapper around an inner module) is one group and one task; a last-dim norm and a
//! channels-first one, a depthwise convolution and a dense one, a sum over rows and one over
//! columns, each pair written with the same code but its literals, are never one group.

use std::collections::HashMap;
use std::path::Path;

use ksmith_cli::stages::Stage;
use ksmith_core::table::{Table, read_table};
use ksmith_core::tables::{DedupRow, ModuleRow, ProbeRow, ProbeStatus, TaskRow};

use crate::e2e::session;

const MLP: &str = r#"import torch
import torch.nn.functional as F
from torch import nn


class MlpModules(nn.Module):
    def __init__(self, dim=64, hidden=128):
        super().__init__()
        self.fc = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x):
        return self.norm(self.act(self.fc(x)))


class MlpFunctional(nn.Module):
    def __init__(self, dim=64, hidden=128):
        super().__init__()
        self.w_in = nn.Parameter(torch.randn(hidden, dim) * dim ** -0.5)
        self.b_in = nn.Parameter(torch.zeros(hidden))
        self.scale = nn.Parameter(torch.ones(hidden))
        self.shift = nn.Parameter(torch.zeros(hidden))

    def forward(self, x):
        projected = F.gelu(F.linear(x, self.w_in, self.b_in))
        return F.layer_norm(projected, (projected.shape[-1],), self.scale, self.shift)
"#;

const WRAPPED: &str = r#"from torch import nn


class Projection(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, d_out), nn.GELU(), nn.LayerNorm(d_out))

    def forward(self, inputs):
        return self.net(inputs)


class MlpWrapped(nn.Module):
    def __init__(self, dim=64, hidden=128):
        super().__init__()
        self.inner = Projection(dim, hidden)

    def forward(self, x):
        return self.inner(x)
"#;

/// A norm over the channels, written out; `{dim}` and `{w}`/`{b}` make it a last-dim norm of
/// (B, N, C) or a channels-first one of (B, C, H, W).
const NORM: &str = r#"
class {name}(nn.Module):
    def __init__(self, channels=32, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))
        self.eps = eps

    def forward(self, x):
        u = x.mean({dim}, keepdim=True)
        s = (x - u).pow(2).mean({dim}, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.eps)
        return x * self.weight{view} + self.bias{view}
"#;

const CONV: &str = r#"
class {name}(nn.Module):
    def __init__(self, channels=32):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, groups={groups})
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))
"#;

const ENERGY: &str = r#"
class {name}(nn.Module):
    def __init__(self, eps=1.0):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        return torch.log(torch.sum(x * x, dim={dim}) + self.eps)
"#;

fn fill(template: &str, pairs: &[(&str, &str)]) -> String {
    pairs.iter().fold(template.to_string(), |t, (k, v)| {
        t.replace(&format!("{{{k}}}"), v)
    })
}

fn write_sources(root: &Path) {
    let pkg = root.join("zoo");
    std::fs::create_dir_all(&pkg).expect("mkdir");
    std::fs::write(pkg.join("__init__.py"), "").expect("write");
    std::fs::write(pkg.join("mlp.py"), MLP).expect("write");
    std::fs::write(pkg.join("wrapped.py"), WRAPPED).expect("write");
    let mut kernels = String::from("import torch\nfrom torch import nn\n");
    for (name, dim, view) in [
        ("LastDimNorm", "-1", ""),
        ("ChannelsFirstNorm", "1", "[:, None, None]"),
    ] {
        kernels += &fill(NORM, &[("name", name), ("dim", dim), ("view", view)]);
    }
    for (name, groups) in [("DenseBlock", "1"), ("DepthwiseBlock", "channels")] {
        kernels += &fill(CONV, &[("name", name), ("groups", groups)]);
    }
    for (name, dim) in [("RowEnergy", "2"), ("ColumnEnergy", "1")] {
        kernels += &fill(ENERGY, &[("name", name), ("dim", dim)]);
    }
    std::fs::write(pkg.join("kernels.py"), kernels).expect("write");
}

#[test]
fn one_computation_is_one_task_and_other_kernels_never_merge() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("zoo-src");
    write_sources(&src);
    let config = format!(
        "[[source]]\nname = \"demo/zoo\"\npath = \"{}\"\nlicense = \"MIT\"\n\n\
         [probe]\ntimeout_s = 120.0\n\n[dedup]\ncontamination = []\n\n\
         [cluster]\nmin_cluster_size = 2\nmin_samples = 1\n",
        src.display()
    );
    let s = session(dir.path(), &config);
    s.run(&[
        Stage::Crawl,
        Stage::Extract,
        Stage::Probe,
        Stage::Dedup,
        Stage::Cluster,
    ])
    .expect("stages run");
    let work = &s.ctx.workdir;
    let modules: Vec<ModuleRow> = read_table(&ModuleRow::path_in(work)).expect("modules");
    let class_of: HashMap<&str, &str> = modules
        .iter()
        .map(|m| (m.id.as_str(), m.class_name.as_str()))
        .collect();
    let probes: Vec<ProbeRow> = read_table(&ProbeRow::path_in(work)).expect("probes");
    for p in &probes {
        assert_eq!(
            p.status,
            ProbeStatus::Ok,
            "{}: {:?}",
            p.class_name,
            p.error_message
        );
        assert_eq!(p.aten_calls.len(), p.aten_trace.len(), "{}", p.class_name);
    }
    let calls = |class: &str| -> Vec<String> {
        let p = probes.iter().find(|p| p.class_name == class).expect(class);
        p.aten_calls.clone()
    };
    assert!(calls("DepthwiseBlock").iter().any(|c| c.contains(",dw")));
    assert!(calls("DenseBlock").iter().any(|c| c.contains(",dense")));
    assert!(
        calls("ChannelsFirstNorm")
            .iter()
            .any(|c| c.starts_with("aten::mean(KRK"))
    );
    assert!(calls("LastDimNorm").iter().any(|c| c == "aten::mean(KR)"));

    let dedup: Vec<DedupRow> = read_table(&DedupRow::path_in(work)).expect("dedup");
    let row = |class: &str| -> &DedupRow {
        dedup
            .iter()
            .find(|r| class_of[r.module_id.as_str()] == class)
            .expect(class)
    };
    // The three writings are one group: one survives, the others name it.
    let trio = ["MlpModules", "MlpFunctional", "MlpWrapped"];
    let kept: Vec<&str> = trio.iter().copied().filter(|c| row(c).kept).collect();
    assert_eq!(kept.len(), 1, "{:?}", trio.map(row));
    let survivor = &row(kept[0]).module_id;
    for class in trio {
        let r = row(class);
        assert!(r.kept || r.duplicate_of.as_ref() == Some(survivor), "{r:?}");
    }
    // Code alike, other kernels: every one is kept.
    for class in [
        "LastDimNorm",
        "ChannelsFirstNorm",
        "DenseBlock",
        "DepthwiseBlock",
        "RowEnergy",
        "ColumnEnergy",
    ] {
        assert!(row(class).kept, "{:?}", row(class));
    }
    // One task for the trio. `Projection` (the same computation inside `MlpWrapped`, with
    // constructor arguments the probe sized itself) is its own task exactly when its sizes make
    // another kernel problem: an arithmetic intensity more than 4 times apart.
    let tasks: Vec<TaskRow> = read_table(&TaskRow::path_in(work)).expect("tasks");
    let tasked = |class: &str| tasks.iter().any(|t| t.class_name == class);
    assert_eq!(trio.iter().filter(|c| tasked(c)).count(), 1, "{tasks:?}");
    let intensity = |class: &str| {
        let p = probes.iter().find(|p| p.class_name == class).expect(class);
        p.est_flops.expect("flops") / p.est_bytes.expect("bytes")
    };
    let (a, b) = (intensity(kept[0]), intensity("Projection"));
    let other_problem = a.max(b) > 4.0 * a.min(b);
    assert_eq!(row("Projection").kept, other_problem, "{a} {b}");
    assert_eq!(tasked("Projection"), other_problem, "{a} {b}");
}
