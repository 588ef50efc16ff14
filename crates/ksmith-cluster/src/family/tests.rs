//! The labelling rules on small modules, with and without recorded ATen operators.

use super::*;

fn module(init: &[&str], forward: &[&str]) -> String {
    let mut s = String::from(
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\nclass Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n",
    );
    for l in init {
        s.push_str(&format!("        {l}\n"));
    }
    s.push_str("    def forward(self, x, y=None):\n");
    for l in forward {
        s.push_str(&format!("        {l}\n"));
    }
    s.push_str("\ndef get_inputs():\n    return [torch.randn(2, 3, 8, 8)]\n\ndef get_init_inputs():\n    return []\n");
    s
}

#[test]
fn single_operators_are_level_one_with_their_family() {
    let cases = [
        (
            module(&[], &["return torch.relu(x)"]),
            "activation",
            "single_op:relu",
        ),
        (
            module(&["self.c = nn.Conv2d(3, 8, 3)"], &["return self.c(x)"]),
            "convolution",
            "single_op:conv2d",
        ),
        (
            module(&[], &["return torch.softmax(x, dim=-1)"]),
            "softmax",
            "single_op:softmax",
        ),
        (
            module(&[], &["return x.sum(dim=1)"]),
            "reduction",
            "single_op:sum",
        ),
        (
            module(&["self.p = nn.MaxPool2d(2)"], &["return self.p(x)"]),
            "pooling",
            "single_op:maxpool2d",
        ),
        (
            module(&[], &["return F.interpolate(x, scale_factor=2)"]),
            "upsampling",
            "single_op:interpolate",
        ),
        (module(&[], &["return x @ y"]), "matmul", "single_op:@"),
        (
            module(&["self.e = nn.Embedding(10, 4)"], &["return self.e(x)"]),
            "embedding",
            "single_op:embedding",
        ),
        (
            module(&[], &["return F.dropout(x, 0.1)"]),
            "dropout",
            "single_op:dropout",
        ),
        (
            module(&[], &["return F.pad(x, (1, 1))"]),
            "padding",
            "single_op:pad",
        ),
        (
            module(&[], &["return x.permute(0, 2, 1)"]),
            "data_movement",
            "single_op:permute",
        ),
        (
            module(&[], &["return F.cosine_similarity(x, y)"]),
            "distance",
            "single_op:cosine_similarity",
        ),
        (
            module(&["self.l = nn.LayerNorm(8)"], &["return self.l(x)"]),
            "normalization",
            "single_op:layernorm",
        ),
    ];
    for (src, family, rule) in cases {
        let l = label(&src, "Model");
        assert_eq!(l.family, family, "{src}");
        assert_eq!(l.level, 1, "{l:?}");
        assert_eq!(l.level_rule, rule);
        assert!(l.family_rule.starts_with("op:"), "{l:?}");
    }
}

#[test]
fn fused_sequences_are_level_two() {
    let l = label(
        &module(
            &["self.c = nn.Conv2d(3, 8, 3)"],
            &["x = self.c(x)", "x = F.relu(x)", "return x * 2.0"],
        ),
        "M",
    );
    assert_eq!((l.family, l.level), ("convolution", 2));
    assert_eq!(l.level_rule, "fused_ops:3");
    let l = label(&module(&[], &["x = torch.exp(x)", "return x + 1.0"]), "M");
    assert_eq!((l.family, l.level), ("elementwise_fusion", 2));
    let l = label(
        &module(
            &["self.a = nn.Linear(4, 4)", "self.b = nn.Linear(4, 4)"],
            &["return self.b(F.gelu(self.a(x)))"],
        ),
        "M",
    );
    assert_eq!((l.family, l.level), ("linear_mlp", 2));
}

#[test]
fn blocks_and_networks_are_level_three() {
    let attn = module(
        &["self.q = nn.Linear(8, 8)", "self.n = nn.LayerNorm(8)"],
        &[
            "a = torch.softmax(self.q(x) @ x.transpose(-1, -2), dim=-1)",
            "return self.n(a @ x)",
        ],
    );
    let l = label(&attn, "Block");
    assert_eq!((l.family, l.level), ("transformer_block", 3));
    assert_eq!(l.family_rule, "attention+norm+linear");
    let res = module(
        &[
            "self.c1 = nn.Conv2d(8, 8, 3)",
            "self.c2 = nn.Conv2d(8, 8, 3)",
        ],
        &[
            "identity = x",
            "out = self.c2(F.relu(self.c1(x)))",
            "return out + identity",
        ],
    );
    let l = label(&res, "BasicBlock");
    assert_eq!((l.family, l.level), ("residual_block", 3));
    let rnn = module(
        &[
            "self.r = nn.LSTM(8, 8)",
            "self.o = nn.Linear(8, 2)",
            "self.e = nn.Embedding(9, 8)",
        ],
        &["h, _ = self.r(self.e(x))", "return self.o(h)"],
    );
    let l = label(&rnn, "Tagger");
    assert_eq!((l.family, l.level), ("recurrent", 3));
    assert_eq!(l.level_rule, "heavy_layers:3");
    let two = format!(
        "{}\nclass Helper(nn.Module):\n    pass\n",
        module(&[], &["return torch.relu(x)"])
    );
    assert_eq!(label(&two, "M").level_rule, "classes:2");
}

#[test]
fn losses_by_operator_or_class_name() {
    let l = label(&module(&[], &["return F.mse_loss(x, y)"]), "M");
    assert_eq!((l.family, l.family_rule.as_str()), ("loss", "op:mse_loss"));
    let l = label(&module(&[], &["return ((x - y) ** 2).mean()"]), "FocalLoss");
    assert_eq!(
        (l.family, l.family_rule.as_str()),
        ("loss", "class_name:loss")
    );
    let l = label(&module(&[], &["return x"]), "M");
    assert_eq!(
        (l.family, l.level, l.level_rule.as_str()),
        ("other", 1, "no_compute_op")
    );
}

fn ops(list: &[(&str, u64)]) -> Vec<OpCount> {
    list.iter()
        .map(|(op, count)| OpCount {
            op: format!("aten::{op}"),
            count: *count,
        })
        .collect()
}

#[test]
fn aten_operators_decide_family_and_level() {
    // (program, class, operators, family, level, level rule)
    type Case<'a> = (String, &'a str, Vec<OpCount>, &'a str, u8, &'a str);
    let cases: Vec<Case<'_>> = vec![
        (
            module(&[], &["return torch.relu(x)"]),
            "M",
            ops(&[("relu", 1)]),
            "activation",
            1,
            "aten:single_op:aten::relu",
        ),
        // A loss made of a few operators is one loss, as KernelBench counts it (level 1:
        // HingeLoss), not a fused sequence.
        (
            module(&[], &["return torch.mean(torch.clamp(1 - x * y, min=0))"]),
            "HingeLoss",
            ops(&[("mul", 1), ("rsub", 1), ("clamp", 1), ("mean", 1)]),
            "loss",
            1,
            "aten:one_loss:compute_ops:4",
        ),
        // One library call that dispatches several operators is still one operator.
        (
            module(&[], &["return F.cross_entropy(x, y)"]),
            "M",
            ops(&[("_log_softmax", 1), ("nll_loss_forward", 1)]),
            "loss",
            1,
            "static:single_call:cross_entropy+aten:compute_ops:2",
        ),
        (
            module(
                &["self.c = nn.Conv2d(3, 8, 3)", "self.b = nn.BatchNorm2d(8)"],
                &["return F.relu(self.b(self.c(x)))"],
            ),
            "ConvBNReLU",
            ops(&[
                ("convolution", 1),
                ("native_batch_norm", 1),
                ("empty", 1),
                ("relu", 1),
            ]),
            "convolution",
            2,
            "aten:fused_ops:3",
        ),
        (
            module(
                &["self.a = nn.Linear(8, 8)", "self.b = nn.Linear(8, 8)"],
                &["return self.b(F.gelu(self.a(x)))"],
            ),
            "Mlp",
            ops(&[("t", 2), ("addmm", 2), ("gelu", 1), ("view", 2)]),
            "linear_mlp",
            2,
            "aten:fused_ops:3",
        ),
        (
            module(&[], &["return x @ y"]),
            "M",
            ops(&[("expand", 2), ("view", 2), ("bmm", 1), ("_unsafe_view", 1)]),
            "matmul",
            1,
            "aten:single_op:aten::bmm",
        ),
        (
            module(
                &[
                    "self.m = nn.MultiheadAttention(8, 2)",
                    "self.n = nn.LayerNorm(8)",
                ],
                &["return self.n(self.m(x, x, x)[0] + x)"],
            ),
            "Block",
            ops(&[
                ("addmm", 4),
                ("bmm", 2),
                ("_softmax", 1),
                ("native_layer_norm", 1),
                ("add", 1),
                ("view", 8),
            ]),
            "transformer_block",
            3,
            "family:transformer_block",
        ),
        // A GRU the CPU runs as products is one recurrent layer.
        (
            module(&["self.r = nn.GRU(8, 8)"], &["return self.r(x)[0]"]),
            "M",
            ops(&[
                ("addmm", 4),
                ("sigmoid_", 6),
                ("tanh_", 3),
                ("add_", 9),
                ("mul_", 6),
                ("stack", 2),
            ]),
            "recurrent",
            1,
            "static:single_recurrent_layer",
        ),
        (
            module(&[], &["return x.view(x.size(0), -1)"]),
            "Flatten",
            ops(&[("view", 1)]),
            "data_movement",
            1,
            "aten:no_compute_op",
        ),
        (
            module(&[], &["return F.normalize(x, dim=1)"]),
            "L2Norm",
            ops(&[
                ("linalg_vector_norm", 1),
                ("clamp_min", 1),
                ("expand", 1),
                ("div", 1),
            ]),
            "normalization",
            1,
            "static:single_call:normalize+aten:compute_ops:3",
        ),
    ];
    for (src, class, aten, family, level, rule) in cases {
        let l = label_with_ops(&src, class, Some(&aten));
        assert_eq!((l.family, l.level), (family, level), "{class}: {l:?}");
        assert_eq!(l.level_rule, rule, "{class}: {l:?}");
        assert!(l.family_rule.starts_with("aten:") || l.family_rule.starts_with("static:"));
    }
}

#[test]
fn trivial_modules_are_marked_and_operators_missing_fall_back_to_static_rules() {
    let flatten = label_with_ops(
        &module(&[], &["return x.view(x.size(0), -1)"]),
        "Flatten",
        Some(&ops(&[("view", 1)])),
    );
    assert_eq!(flatten.trivial.as_deref(), Some("no_compute"));
    let wrapper = "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self, fn):\n        super().__init__()\n        self.fn = fn\n\n    def forward(self, x):\n        return self.fn(x) + x\n";
    let l = label_with_ops(wrapper, "Residual", Some(&ops(&[("add", 1)])));
    assert_eq!(l.trivial.as_deref(), Some("wrapper_of_argument"));
    let real = label_with_ops(
        &module(&[], &["return torch.relu(x) * x"]),
        "M",
        Some(&ops(&[("relu", 1), ("mul", 1)])),
    );
    assert_eq!(real.trivial, None);
    let fallback = label_with_ops(&module(&[], &["return torch.relu(x)"]), "M", None);
    assert_eq!(fallback.level_rule, "static:single_op:relu");
    assert_eq!(fallback.family_rule, "static:op:relu");
}

#[test]
fn refinements_measured_on_real_modules() {
    // (program, class, operators, family, level, family rule)
    type Case<'a> = (String, &'a str, Vec<OpCount>, &'a str, u8, &'a str);
    let cases: Vec<Case<'_>> = vec![
        // A norm next to linear layers is an MLP (two layers, the norm fusing with the one it
        // feeds: level 2, as the plain Mlp).
        (
            module(
                &[
                    "self.n = nn.LayerNorm(8)",
                    "self.a = nn.Linear(8, 8)",
                    "self.b = nn.Linear(8, 8)",
                ],
                &["return self.b(F.gelu(self.a(self.n(x))))"],
            ),
            "NormMlp",
            ops(&[
                ("native_layer_norm", 1),
                ("addmm", 2),
                ("gelu", 1),
                ("t", 2),
            ]),
            "linear_mlp",
            2,
            "aten:aten::addmm",
        ),
        // A hand-written layer norm.
        (
            module(
                &[],
                &[
                    "m = x.mean(1, keepdim=True)",
                    "v = x.var(1, keepdim=True)",
                    "return (x - m) * (v + 1e-5).rsqrt()",
                ],
            ),
            "ChanLayerNorm",
            ops(&[
                ("mean", 1),
                ("var", 1),
                ("sub", 1),
                ("add", 1),
                ("rsqrt", 1),
                ("mul", 1),
            ]),
            "normalization",
            1,
            "aten:mean_or_var+rsqrt",
        ),
        // An activation written with arithmetic.
        (
            module(&[], &["return 0.5 * x * (x + 2).clamp(min=0, max=2)"]),
            "HardMish",
            ops(&[("mul", 2), ("add", 1), ("clamp", 1)]),
            "activation",
            1,
            "static:class_name:activation",
        ),
        // A skip connection written as x = x + f(x).
        (
            module(
                &["self.n = nn.LayerNorm(8)", "self.a = nn.Linear(8, 8)"],
                &["x = x + self.a(self.n(x))", "return x"],
            ),
            "MixerBlock",
            ops(&[("native_layer_norm", 1), ("addmm", 1), ("add", 1)]),
            "residual_block",
            3,
            "static:skip_add+aten:heavy_ops",
        ),
        // x is reassigned before the add: no skip connection.
        (
            module(
                &["self.c = nn.Conv2d(3, 8, 3)", "self.b = nn.BatchNorm2d(8)"],
                &["x = self.c(x)", "x = self.b(x)", "return x + 1.0"],
            ),
            "ConvBN",
            ops(&[("convolution", 1), ("native_batch_norm", 1), ("add", 1)]),
            "convolution",
            2,
            "aten:aten::convolution",
        ),
        // A long chain of arithmetic is one fused sequence.
        (
            module(
                &[],
                &["return torch.log(torch.exp(x * 2).mean((2, 3)) + 1) * 0.5"],
            ),
            "LsePool",
            ops(&[("mul", 4), ("exp", 2), ("log", 1), ("add", 2), ("mean", 1)]),
            "reduction",
            2,
            "aten:aten::mean",
        ),
        // Attention on 2-D operands: plain products the code writes with @.
        (
            module(&[], &["return torch.softmax(x @ y.t(), dim=-1) @ y"]),
            "Attn2d",
            ops(&[("mm", 2), ("_softmax", 1), ("t", 1)]),
            "attention",
            2,
            "aten:softmax+batched_matmul",
        ),
        // Attention with its pre-norm and projections but no MLP or skip: attention, and a
        // block of layers (level 3).
        (
            module(
                &[
                    "self.n = nn.LayerNorm(8)",
                    "self.qkv = nn.Linear(8, 24)",
                    "self.o = nn.Linear(8, 8)",
                ],
                &[
                    "q, k, v = self.qkv(self.n(x)).chunk(3, dim=-1)",
                    "a = torch.softmax(q @ k.transpose(-1, -2), dim=-1)",
                    "return self.o(a @ v)",
                ],
            ),
            "Attention",
            ops(&[
                ("native_layer_norm", 1),
                ("addmm", 2),
                ("bmm", 2),
                ("_softmax", 1),
            ]),
            "attention",
            3,
            "aten:softmax+batched_matmul",
        ),
        // A loss named for what it is, without a loss operator: one loss (level 1).
        (
            module(
                &[],
                &["return torch.sum(-y * F.log_softmax(x, dim=-1), dim=-1).mean()"],
            ),
            "SoftTargetCrossEntropy",
            ops(&[
                ("_log_softmax", 1),
                ("neg", 1),
                ("mul", 1),
                ("sum", 1),
                ("mean", 1),
            ]),
            "loss",
            1,
            "static:class_name:loss",
        ),
        // An activation with its learned affine: one activation (level 1).
        (
            module(&[], &["return 0.8 * F.relu(x) ** 2 - 0.4"]),
            "StarReLU",
            ops(&[("relu", 1), ("pow", 1), ("mul", 1), ("sub", 1)]),
            "activation",
            1,
            "aten:aten::relu",
        ),
        // A skip through a projection of the input.
        (
            module(
                &[
                    "self.c1 = nn.Conv2d(8, 16, 3, padding=1)",
                    "self.c2 = nn.Conv2d(16, 16, 3, padding=1)",
                    "self.res_conv = nn.Conv2d(8, 16, 1)",
                ],
                &[
                    "h = self.c2(F.silu(self.c1(x)))",
                    "return h + self.res_conv(x)",
                ],
            ),
            "ResnetBlock",
            ops(&[("convolution", 3), ("silu", 1), ("add", 1)]),
            "residual_block",
            3,
            "static:skip_add+aten:heavy_ops",
        ),
        // A saved input replaced by its downsampled projection is still the shortcut.
        (
            module(
                &[
                    "self.c = nn.Conv2d(8, 8, 3, padding=1)",
                    "self.b = nn.BatchNorm2d(8)",
                    "self.down = None",
                ],
                &[
                    "identity = x",
                    "out = self.b(self.c(x))",
                    "if self.down is not None:",
                    "    identity = self.down(x)",
                    "out += identity",
                    "return F.relu(out)",
                ],
            ),
            "Bottleneck",
            ops(&[
                ("convolution", 1),
                ("native_batch_norm", 1),
                ("add_", 1),
                ("relu", 1),
            ]),
            "residual_block",
            3,
            "static:skip_add+aten:heavy_ops",
        ),
        // One layer with a long epilogue is one fused sequence (level 2), not a block.
        (
            module(
                &["self.p = nn.Linear(8, 16)"],
                &[
                    "m, v = self.p(x).chunk(2, dim=-1)",
                    "s = (0.5 * v).exp()",
                    "z = m + s * torch.randn_like(m)",
                    "kl = 0.5 * (v.exp() + m * m - v - 1.0)",
                    "return z, kl.sum(-1).mean()",
                ],
            ),
            "Bottleneck",
            ops(&[
                ("addmm", 1),
                ("mul", 4),
                ("exp", 2),
                ("add", 3),
                ("sub", 2),
                ("sum", 1),
                ("mean", 1),
            ]),
            "linear_mlp",
            2,
            "aten:aten::addmm",
        ),
        // Attention whose projections are convolutions: a block of layers, not an attention
        // core alone.
        (
            module(
                &[
                    "self.qkv = nn.Conv2d(8, 24, 1)",
                    "self.o = nn.Conv2d(8, 8, 1)",
                ],
                &[
                    "q, k, v = self.qkv(x).flatten(2).chunk(3, dim=1)",
                    "a = torch.softmax(q.transpose(1, 2) @ k, dim=-1)",
                    "return self.o((v @ a).view_as(x))",
                ],
            ),
            "LinearAttention",
            ops(&[("convolution", 2), ("bmm", 2), ("_softmax", 1)]),
            "attention",
            3,
            "aten:softmax+batched_matmul",
        ),
        // A loss whose name does not end in "loss".
        (
            module(
                &[],
                &["return -(y * F.logsigmoid(x) * (1 - torch.sigmoid(x)) ** 2).mean()"],
            ),
            "BinaryFocalLossWithLogits",
            ops(&[
                ("log_sigmoid_forward", 1),
                ("sigmoid", 1),
                ("rsub", 1),
                ("pow", 1),
                ("mul", 2),
                ("mean", 1),
                ("neg", 1),
            ]),
            "loss",
            1,
            "static:class_name:loss",
        ),
        // A container left empty dispatched nothing: not the pooling its code mentions.
        (
            module(
                &[
                    "self.blocks = nn.ModuleList([])",
                    "self.pool = nn.AvgPool2d(2)",
                ],
                &[
                    "for b in self.blocks:",
                    "    x = self.pool(b(x))",
                    "return x",
                ],
            ),
            "Stage",
            vec![],
            "data_movement",
            1,
            "aten:nothing_dispatched",
        ),
        // Ran, and dispatched nothing: an identity.
        (
            module(&[], &["return x"]),
            "Identity",
            vec![],
            "data_movement",
            1,
            "aten:nothing_dispatched",
        ),
    ];
    for (src, class, aten, family, level, rule) in cases {
        let l = label_with_ops(&src, class, Some(&aten));
        assert_eq!((l.family, l.level), (family, level), "{class}: {l:?}");
        assert_eq!(l.family_rule, rule, "{class}: {l:?}");
    }
    let identity = label_with_ops(&module(&[], &["return x"]), "Identity", Some(&[]));
    assert_eq!(identity.trivial.as_deref(), Some("no_compute"));
}

#[test]
fn a_forward_of_one_compute_operator_is_single_op_and_views_permutes_casts_do_not_count() {
    // SAM's PatchEmbed: one strided convolution and a permute
    let conv = module(
        &["self.proj = nn.Conv2d(3, 768, 16, stride=16)"],
        &["return self.proj(x).permute(0, 2, 3, 1)"],
    );
    let l = label_with_ops(
        &conv,
        "PatchEmbed",
        Some(&ops(&[("convolution", 1), ("permute", 1)])),
    );
    assert_eq!(l.trivial.as_deref(), Some("single_op:aten::convolution"));
    // whisper's Linear: one GEMM with its weight cast to the input's dtype, and views
    let linear = module(&[], &["return F.linear(x, self.weight.to(x.dtype))"]);
    let l = label_with_ops(
        &linear,
        "Linear",
        Some(&ops(&[
            ("_to_copy", 1),
            ("view", 1),
            ("t", 1),
            ("addmm", 1),
            ("_unsafe_view", 1),
            ("contiguous", 1),
        ])),
    );
    assert_eq!(l.trivial.as_deref(), Some("single_op:aten::addmm"));
    // a convolution and its activation is something to fuse
    let conv_relu = module(
        &["self.conv = nn.Conv2d(3, 64, 3)"],
        &["return torch.relu(self.conv(x))"],
    );
    let l = label_with_ops(
        &conv_relu,
        "ConvReLU",
        Some(&ops(&[("convolution", 1), ("relu", 1)])),
    );
    assert_eq!(l.trivial, None);
    // a scale and a concatenation: two operations (the diffusion MPCat keeps its task)
    let cat = module(&[], &["return torch.cat((x * 0.5, y), dim=1)"]);
    let l = label_with_ops(&cat, "MPCat", Some(&ops(&[("mul", 1), ("cat", 1)])));
    assert_eq!(l.trivial, None);
}
