//! Static guesses of the constructor and forward arguments, from parameter names (the
//! paritybench rules: `stride` -> 1, flags -> False, sizes -> 4, ...; dropout probabilities 0, so
//! the forward draws no random number) and a
//! few hints from the class (`b, c, h, w = x.shape`, `Conv1d`, `LSTM`, `Embedding`). The probe
//! stage repairs them by running; they are kept simple and deterministic.

use ksmith_core::tables::ModuleReason;

use crate::calls::{CallSite, Ctor};
use crate::index::{Param, ParamKind};
use crate::resolve::ClassFacts;

/// Why arguments cannot be expressed in the KernelBench format (positional lists only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GuessProblem {
    /// `forward` has a required keyword-only parameter.
    ForwardKeywordOnly(String),
}

impl GuessProblem {
    /// The reason's code.
    pub(crate) fn code(&self) -> ModuleReason {
        match self {
            GuessProblem::ForwardKeywordOnly(_) => ModuleReason::ForwardKeywordOnlyArg,
        }
    }

    /// The reason recorded in the row.
    pub(crate) fn reason(&self) -> String {
        match self {
            GuessProblem::ForwardKeywordOnly(n) => format!("forward_keyword_only_arg: {n}"),
        }
    }
}

/// The two functions appended to a program, and where each constructor argument came from:
/// `init` as [`sited_init_args`] made them.
pub(crate) fn input_functions(
    facts: &ClassFacts,
    init: &[InitArg],
) -> Result<(String, Vec<String>), GuessProblem> {
    let forward = forward_args(facts)?;
    let values: Vec<&str> = init.iter().map(|a| a.value.as_str()).collect();
    let text = format!(
        "def get_inputs():\n    return [{}]\n\n\ndef get_init_inputs():\n    return [{}]\n",
        forward.join(", "),
        values.join(", ")
    );
    Ok((text, init.iter().map(InitArg::source_line).collect()))
}

/// One constructor argument with its provenance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InitArg {
    /// The parameter.
    pub(crate) name: String,
    /// Its value as Python source.
    pub(crate) value: String,
    /// `call path:line`, `call path:line (default of p)`, `default`, `guess`, or `guess (why)`
    /// when the call site passes an argument that is not constant.
    pub(crate) source: String,
    /// When the value is a constructor call of the repository's (`value` is its source).
    pub(crate) ctor: Option<Ctor>,
    /// The value is a guess.
    pub(crate) guessed: bool,
}

impl InitArg {
    fn source_line(&self) -> String {
        format!("{}={}: {}", self.name, self.value, self.source)
    }
}

/// Constructor arguments, preferring those of `site` (a call in the repository that builds the
/// class, with its path): every required parameter (the site's literal value, else a guess),
/// and the optional positional parameters up to the last one the site sets (gaps filled with
/// their own literal defaults; where a default is not a literal, the list stops before it).
pub(crate) fn sited_init_args(facts: &ClassFacts, site: Option<(&str, &CallSite)>) -> Vec<InitArg> {
    let guessed = init_args(facts);
    let Some(init) = &facts.init else {
        return guessed
            .into_iter()
            .enumerate()
            .map(|(i, value)| InitArg {
                name: format!("arg{i}"),
                value,
                source: "guess".to_string(),
                ctor: None,
                guessed: true,
            })
            .collect();
    };
    let params: Vec<&Param> = init
        .params
        .iter()
        .filter(|p| matches!(p.kind, ParamKind::Positional | ParamKind::KeywordOnly))
        .collect();
    // The site's value for each parameter, and where the site passes one that is not constant,
    // why it is guessed.
    let mut known: Vec<Option<(String, String, Option<Ctor>)>> = vec![None; params.len()];
    let mut unknown: Vec<Option<String>> = vec![None; params.len()];
    if let Some((path, site)) = site {
        let place = site.place(path);
        let positional: Vec<usize> = params
            .iter()
            .enumerate()
            .filter(|(_, p)| p.kind == ParamKind::Positional)
            .map(|(i, _)| i)
            .collect();
        let mut next = 0;
        for arg in &site.args {
            let slot = match &arg.keyword {
                None => {
                    next += 1;
                    positional.get(next - 1).copied()
                }
                Some(k) => params.iter().position(|p| &p.name == k),
            };
            let Some(slot) = slot else { continue };
            match &arg.value {
                Some(value) => {
                    let from = match &arg.via {
                        Some(via) => format!("{place} ({via})"),
                        None => place.clone(),
                    };
                    known[slot] = Some((value.clone(), from, arg.ctor.clone()));
                }
                None => {
                    unknown[slot] = Some(format!("`{}` is not constant at {place}", arg.expr));
                }
            }
        }
    }
    // With required keyword-only parameters the generated wrapper takes the required ones only.
    let wrapped = params
        .iter()
        .any(|p| p.kind == ParamKind::KeywordOnly && p.default.is_none());
    let last_set = params
        .iter()
        .filter(|_| !wrapped)
        .enumerate()
        .filter(|(i, p)| {
            p.default.is_some() && p.kind == ParamKind::Positional && known[*i].is_some()
        })
        .map(|(i, _)| i)
        .max();
    let mut out = Vec::new();
    let mut guesses = guessed.into_iter();
    for (i, p) in params.iter().enumerate() {
        let required = p.default.is_none();
        if required {
            let guess = guesses.next().unwrap_or_else(|| init_value(&p.name));
            let arg = match known[i].clone() {
                Some((value, source, ctor)) => InitArg {
                    name: p.name.clone(),
                    value,
                    source,
                    ctor,
                    guessed: false,
                },
                None => InitArg {
                    name: p.name.clone(),
                    value: guess,
                    source: match &unknown[i] {
                        Some(why) => format!("guess ({why})"),
                        None => "guess".to_string(),
                    },
                    ctor: None,
                    guessed: true,
                },
            };
            out.push(arg);
            continue;
        }
        if p.kind != ParamKind::Positional || last_set.is_none_or(|last| i > last) {
            continue;
        }
        match (&known[i], &p.default) {
            (Some((value, source, ctor)), _) => out.push(InitArg {
                name: p.name.clone(),
                value: value.clone(),
                source: source.clone(),
                ctor: ctor.clone(),
                guessed: false,
            }),
            (None, Some(default)) if is_literal_text(default) => out.push(InitArg {
                name: p.name.clone(),
                value: default.clone(),
                source: "default".to_string(),
                ctor: None,
                guessed: false,
            }),
            // A default that is not a literal cannot be written in its place: stop here (the
            // parameters after it keep their defaults).
            _ => break,
        }
    }
    out
}

/// True for the text of a simple literal: a signed number, `True`, `False`, `None`, a plain
/// string.
pub(crate) fn is_literal_text(t: &str) -> bool {
    let t = t.trim();
    matches!(t, "True" | "False" | "None")
        || t.trim_start_matches('-').parse::<f64>().is_ok()
        || ((t.starts_with('"') || t.starts_with('\'')) && !t.contains('{'))
}

/// When the constructor has required keyword-only parameters (`def __init__(self, *, dim)`),
/// which `Model(*get_init_inputs())` cannot pass: a `class Model(<entry>)` whose constructor
/// takes every required parameter positionally, in the order `get_init_inputs()` lists them,
/// and passes the keyword-only ones on by keyword.
pub(crate) fn keyword_wrapper(facts: &ClassFacts, entry: &str) -> Option<String> {
    let init = facts.init.as_ref()?;
    let params: Vec<&Param> = required(&init.params)
        .filter(|p| matches!(p.kind, ParamKind::Positional | ParamKind::KeywordOnly))
        .collect();
    if !params.iter().any(|p| p.kind == ParamKind::KeywordOnly) {
        return None;
    }
    let names: Vec<&str> = params.iter().map(|p| p.name.as_str()).collect();
    let passed: Vec<String> = params
        .iter()
        .map(|p| match p.kind {
            ParamKind::KeywordOnly => format!("{0}={0}", p.name),
            _ => p.name.clone(),
        })
        .collect();
    Some(format!(
        "class Model({entry}):\n    def __init__(self, {}):\n        super().__init__({})\n",
        names.join(", "),
        passed.join(", ")
    ))
}

/// A parameter annotated `bool` (`Optional[bool]`, `bool | None`) or defaulting to `True` or
/// `False`: it takes a Python bool, whatever its name says.
fn is_bool(p: &Param) -> bool {
    let annotated = p.annotation.as_deref().is_some_and(|t| {
        let t: String = t.chars().filter(|c| !c.is_whitespace()).collect();
        matches!(
            t.as_str(),
            "bool" | "Optional[bool]" | "typing.Optional[bool]" | "bool|None" | "None|bool"
        )
    });
    annotated || matches!(p.default.as_deref().map(str::trim), Some("True" | "False"))
}

fn required(params: &[Param]) -> impl Iterator<Item = &Param> {
    params.iter().filter(|p| p.default.is_none())
}

/// Constructor arguments: one guess per required parameter, keyword-only ones included (they
/// are passed positionally to the [`keyword_wrapper`]).
pub(crate) fn init_args(facts: &ClassFacts) -> Vec<String> {
    let Some(init) = &facts.init else {
        return torch_base_init(facts.torch_base.as_deref());
    };
    let loss = is_loss(facts);
    required(&init.params)
        .filter(|p| matches!(p.kind, ParamKind::Positional | ParamKind::KeywordOnly))
        .map(|p| {
            if is_bool(p) {
                "False".to_string()
            } else if p.name == "reduction" && !loss {
                // Outside a loss, `reduction` is a ratio (squeeze-and-excitation blocks).
                "4".to_string()
            } else {
                init_value(&p.name)
            }
        })
        .collect()
}

/// A loss: its `forward` takes a target (`target`, `labels`, `y_true`, ...), or it derives from
/// a torch loss.
fn is_loss(facts: &ClassFacts) -> bool {
    let target = facts.forward.as_ref().is_some_and(|f| {
        f.params.iter().any(|p| {
            let n = p.name.to_ascii_lowercase();
            n.starts_with("target")
                || n.starts_with("label")
                || matches!(n.as_str(), "y" | "y_true" | "gt" | "ground_truth")
        })
    });
    target
        || facts
            .torch_base
            .as_deref()
            .is_some_and(|b| b.ends_with("Loss"))
}

/// Constructor arguments of common torch layers, for classes that only override `forward`.
fn torch_base_init(base: Option<&str>) -> Vec<String> {
    let v: &[&str] = match base {
        Some(
            "Conv1d" | "Conv2d" | "Conv3d" | "ConvTranspose1d" | "ConvTranspose2d"
            | "ConvTranspose3d",
        ) => &["4", "4", "3"],
        Some("Linear" | "Bilinear" | "Embedding" | "LSTM" | "GRU" | "RNN") => &["4", "4"],
        Some(
            "BatchNorm1d" | "BatchNorm2d" | "BatchNorm3d" | "LayerNorm" | "InstanceNorm1d"
            | "InstanceNorm2d" | "InstanceNorm3d",
        ) => &["4"],
        Some("GroupNorm") => &["2", "4"],
        Some("MultiheadAttention") => &["4", "2"],
        _ => &[],
    };
    v.iter().map(|s| s.to_string()).collect()
}

fn is_flag(n: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "use_", "is_", "has_", "with_", "enable", "return_", "no_", "do_", "apply_", "add_",
        "learn_", "skip_",
    ];
    const WORDS: &[&str] = &[
        "bias",
        "bidirectional",
        "batch_first",
        "affine",
        "inplace",
        "training",
        "train",
        "gpu",
        "cuda",
        "requires_grad",
        "require_grad",
        "residual",
        "normalize",
        "causal",
        "pre_norm",
        "learnable",
        "verbose",
        "debug",
        "shared",
        "transpose",
        "flatten",
        "deterministic",
        "track_running_stats",
        "align_corners",
        "ceil_mode",
        "count_include_pad",
        "return_indices",
        "elementwise_affine",
    ];
    PREFIXES.iter().any(|p| n.starts_with(p)) || WORDS.contains(&n) || n.ends_with("_flag")
}

/// A dropout or stochastic-depth probability.
fn is_dropout(n: &str) -> bool {
    n.contains("dropout")
        || n.contains("drop_rate")
        || n.contains("drop_prob")
        || n.contains("drop_path")
        || n.ends_with("_drop")
        || n == "p"
}

/// The guessed head count: the most common in the repositories measured (SAM's and the Karras
/// U-Nets' 8). With a guessed width of 4 the probe's divisibility repair raises the width to a
/// multiple of it, and sizing scales the width, so a head keeps a plausible size (2 heads gave
/// heads of 512 once the width was scaled).
const HEADS: &str = "8";

/// The guessed value of one constructor argument, from its name.
pub(crate) fn init_value(name: &str) -> String {
    let n = name.to_ascii_lowercase();
    let v = if n.starts_with("num_") || n.starts_with("n_") {
        if n.contains("layer") || n.contains("block") || n.contains("stage") {
            "1"
        } else if n.contains("head") {
            HEADS
        } else if n.contains("group") {
            "2"
        } else {
            "4"
        }
    } else if is_dropout(&n) {
        // Training noise: the task is the forward without it (a forward drawing random numbers
        // is no task, and a probability of 0 draws none).
        "0.0"
    } else if is_flag(&n) {
        "False"
    } else if n.contains("stride") || n.contains("dilation") || n == "groups" || n == "depth" {
        "1"
    } else if n == "eps" || n == "epsilon" || n.ends_with("_eps") {
        "1e-05"
    } else if n.contains("momentum") {
        "0.1"
    } else if n.contains("temperature")
        || n == "temp"
        || n.contains("scale")
        || n == "alpha"
        || n == "beta"
        || n == "gamma"
        || n.contains("margin")
        || n.starts_with("lambda")
        || n == "weight"
        || n == "tau"
    {
        "1.0"
    } else if n.contains("ratio") || n.contains("prob") || n.ends_with("rate") {
        "0.5"
    } else if n.contains("dtype") {
        "torch.float32"
    } else if n == "device" {
        "'cpu'"
    } else if n == "reduction" {
        "'mean'"
    } else if n == "padding_mode" {
        "'zeros'"
    } else if n.contains("padding") {
        "0"
    } else if n == "act" || n == "activation" || n.ends_with("_act") || n.ends_with("activation") {
        "torch.nn.ReLU()"
    } else if n.ends_with("_layer") || n.ends_with("_cls") || n == "block" || n.ends_with("_class")
    {
        "torch.nn.Identity"
    } else if matches!(
        n.as_str(),
        "module"
            | "submodule"
            | "net"
            | "model"
            | "backbone"
            | "encoder"
            | "decoder"
            | "fn"
            | "func"
            | "layer"
            | "sublayer"
    ) {
        "torch.nn.Identity()"
    } else if n.ends_with("sizes")
        || n.ends_with("dims")
        || n.ends_with("_list")
        || n.ends_with("shape")
        || n.ends_with("strides")
        || n.ends_with("channels_list")
    {
        "[4, 4]"
    } else if n.contains("layer") || n.contains("depth") {
        "1"
    } else if n.contains("kernel") || n == "k" || n == "ksize" {
        "3"
    } else if n.contains("head") && (n.contains("dim") || n.contains("size")) {
        // The width of one head (`dim_head`, `head_dim`).
        "64"
    } else if n.contains("head") {
        HEADS
    } else if n.contains("group") {
        "2"
    } else {
        "4"
    };
    v.to_string()
}

fn rank_from_mentions(facts: &ClassFacts) -> Option<u32> {
    let m = |s: &str| facts.mentions.contains(&s);
    if m("Conv2d") {
        return Some(4);
    }
    if m("Conv3d") || m("BatchNorm3d") || m("MaxPool3d") || m("AvgPool3d") || m("InstanceNorm3d") {
        return Some(5);
    }
    if m("Conv1d")
        || m("BatchNorm1d")
        || m("MaxPool1d")
        || m("AvgPool1d")
        || m("InstanceNorm1d")
        || m("LSTM")
        || m("GRU")
        || m("RNN")
        || m("MultiheadAttention")
    {
        return Some(3);
    }
    None
}

fn is_index_name(n: &str) -> bool {
    matches!(
        n,
        "ids" | "idx" | "indices" | "index" | "tokens" | "token" | "labels" | "label" | "classes"
    ) || n.ends_with("_ids")
        || n.ends_with("_idx")
        || n.ends_with("_indices")
        || n.ends_with("_index")
}

/// A forward input holding one value per batch element: a diffusion time step or noise level
/// (the probe keeps such inputs 1-D too).
fn is_time_name(n: &str) -> bool {
    matches!(
        n,
        "t" | "ts"
            | "time"
            | "times"
            | "timestep"
            | "timesteps"
            | "time_step"
            | "time_steps"
            | "noise_level"
            | "noise_levels"
            | "sigma"
            | "sigmas"
            | "log_snr"
    )
}

/// A forward input holding one class label per batch element (a class-conditional U-Net's
/// `forward(x, time, classes)`): integer indices of rank 1 (the probe draws them over the
/// model's smallest embedding table and keeps them 1-D).
fn is_label_name(n: &str) -> bool {
    matches!(
        n,
        "classes" | "class_labels" | "class_label" | "labels" | "label" | "class_ids" | "y_class"
    )
}

fn is_sequence_name(n: &str) -> bool {
    matches!(
        n,
        "q" | "k"
            | "v"
            | "query"
            | "key"
            | "value"
            | "queries"
            | "keys"
            | "values"
            | "seq"
            | "sequence"
            | "hidden_states"
            | "embeddings"
            | "emb"
            | "memory"
            | "src"
            | "tgt"
    )
}

/// Positional forward arguments.
pub(crate) fn forward_args(facts: &ClassFacts) -> Result<Vec<String>, GuessProblem> {
    let Some(forward) = &facts.forward else {
        return Ok(vec![tensor(4)]);
    };
    let mention_rank = rank_from_mentions(facts);
    let mut out = Vec::new();
    let mut first_rank: Option<u32> = None;
    let positional: Vec<&Param> = required(&forward.params).collect();
    for p in &positional {
        let n = p.name.to_ascii_lowercase();
        match p.kind {
            ParamKind::KeywordOnly => {
                return Err(GuessProblem::ForwardKeywordOnly(p.name.clone()));
            }
            ParamKind::VarKeywords => continue,
            ParamKind::VarArgs => {
                if positional.len() == 1 {
                    out.push(tensor(mention_rank.unwrap_or(4)));
                }
                continue;
            }
            ParamKind::Positional => {}
        }
        let hinted = forward
            .ranks
            .iter()
            .find(|(name, _)| *name == p.name)
            .map(|(_, r)| *r);
        // Integer inputs only where the parameter's name says indices: a class that mentions
        // `Embedding` may embed patches with a convolution of floats (the probe's dtype rule turns
        // a float input an embedding refuses into indices).
        let value = if is_bool(p) {
            "False".to_string()
        } else if is_label_name(&n) && hinted.is_none() {
            "torch.randint(0, 4, [4])".to_string()
        } else if is_index_name(&n) {
            format!("torch.randint(0, 4, [{}])", dims(hinted.unwrap_or(2)))
        } else if n.starts_with("num_")
            || n.starts_with("n_")
            || n.contains("len")
            || n == "step"
            || n == "steps"
            || n.ends_with("_size")
            || n.ends_with("_dim")
        {
            "4".to_string()
        } else if is_flag(&n) {
            "False".to_string()
        } else if is_time_name(&n) && hinted.is_none() {
            tensor(1)
        } else if n.contains("mask") {
            // A mask usually drops the feature dimension of the tensor before it.
            let rank = hinted
                .or(first_rank.map(|r| r.saturating_sub(1).max(2)))
                .or(mention_rank)
                .unwrap_or(4);
            format!("torch.ones([{}])", dims(rank))
        } else {
            // Later tensors default to the rank of the first one (`forward(x, context)`).
            let rank = hinted
                .or(mention_rank)
                .or(is_sequence_name(&n).then_some(3))
                .or(first_rank)
                .unwrap_or(4);
            first_rank.get_or_insert(rank);
            tensor(rank)
        };
        out.push(value);
    }
    Ok(out)
}

fn dims(rank: u32) -> String {
    vec!["4"; rank.clamp(1, 6) as usize].join(", ")
}

fn tensor(rank: u32) -> String {
    format!("torch.rand([{}])", dims(rank))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Method;

    fn param(name: &str) -> Param {
        Param {
            name: name.into(),
            default: None,
            kind: ParamKind::Positional,
            annotation: None,
        }
    }

    fn facts(init: &[&str], forward: &[&str], mentions: Vec<&'static str>) -> ClassFacts {
        ClassFacts {
            init: Some(Method {
                params: init.iter().map(|n| param(n)).collect(),
                is_abstract: false,
                ranks: Vec::new(),
            }),
            forward: Some(Method {
                params: forward.iter().map(|n| param(n)).collect(),
                is_abstract: false,
                ranks: vec![("z".into(), 3)],
            }),
            torch_base: None,
            mentions,
            abstract_class: false,
        }
    }

    #[test]
    fn init_values_follow_the_names() {
        let f = facts(
            &[
                "in_channels",
                "stride",
                "dropout",
                "use_bias",
                "eps",
                "hidden_dim",
            ],
            &["x"],
            vec![],
        );
        assert_eq!(init_args(&f), vec!["4", "1", "0.0", "False", "1e-05", "4"]);
        assert_eq!(init_value("drop_path_rate"), "0.0");
        assert_eq!(init_value("attn_drop"), "0.0");
        assert_eq!(init_value("kernel_size"), "3");
        assert_eq!(init_value("num_layers"), "1");
        assert_eq!(init_value("num_heads"), "8");
        assert_eq!(init_value("heads"), "8");
        assert_eq!(init_value("dim_head"), "64");
        assert_eq!(init_value("num_groups"), "2");
        assert_eq!(init_value("hidden_sizes"), "[4, 4]");
        assert_eq!(init_value("norm_layer"), "torch.nn.Identity");
        assert_eq!(init_value("output_padding"), "0");
        assert_eq!(init_value("padding_mode"), "'zeros'");
    }

    /// `reduction` is a loss's string option only in a loss; elsewhere (a squeeze-and-excitation
    /// block) it is a ratio.
    #[test]
    fn reduction_is_a_string_only_in_a_loss() {
        let se = facts(&["channels", "reduction"], &["x"], vec![]);
        assert_eq!(init_args(&se), vec!["4", "4"]);
        let loss = facts(&["weight", "reduction"], &["pred", "target"], vec![]);
        assert_eq!(init_args(&loss), vec!["1.0", "'mean'"]);
        let mut torch_loss = facts(&["reduction"], &["a", "b"], vec![]);
        torch_loss.torch_base = Some("MSELoss".into());
        assert_eq!(init_args(&torch_loss), vec!["'mean'"]);
    }

    #[test]
    fn forward_tensors_get_ranks_from_hints() {
        let f = facts(&[], &["x", "z", "mask", "input_ids"], vec![]);
        assert_eq!(
            forward_args(&f).unwrap(),
            vec![
                "torch.rand([4, 4, 4, 4])",
                "torch.rand([4, 4, 4])",
                "torch.ones([4, 4, 4])",
                "torch.randint(0, 4, [4, 4])"
            ]
        );
        let f = facts(&[], &["x", "time"], vec!["Conv2d"]);
        assert_eq!(
            forward_args(&f).unwrap(),
            vec!["torch.rand([4, 4, 4, 4])", "torch.rand([4])"]
        );
        // One class label per sample beside the image and its time step.
        let f = facts(&[], &["x", "time", "classes"], vec!["Conv2d", "Embedding"]);
        assert_eq!(
            forward_args(&f).unwrap(),
            vec![
                "torch.rand([4, 4, 4, 4])",
                "torch.rand([4])",
                "torch.randint(0, 4, [4])"
            ]
        );
        let f = facts(&[], &["x"], vec!["LSTM"]);
        assert_eq!(forward_args(&f).unwrap(), vec!["torch.rand([4, 4, 4])"]);
        let f = facts(&[], &["x"], vec!["Embedding", "Conv2d"]);
        assert_eq!(forward_args(&f).unwrap(), vec!["torch.rand([4, 4, 4, 4])"]);
        let f = facts(&[], &["token_ids"], vec!["Embedding"]);
        assert_eq!(
            forward_args(&f).unwrap(),
            vec!["torch.randint(0, 4, [4, 4])"]
        );
    }

    /// A parameter annotated `bool` or defaulting to a bool takes `False`, whatever its name
    /// says (SAM's `multimask_output: bool` got a tensor, a `size: bool` would get 4).
    #[test]
    fn bool_parameters_get_a_bool() {
        let mut f = facts(&["dim", "size"], &["x", "multimask_output", "size"], vec![]);
        let annotate = |m: &mut Option<Method>, i: usize, t: &str| {
            if let Some(m) = m.as_mut() {
                m.params[i].annotation = Some(t.to_string());
            }
        };
        annotate(&mut f.forward, 1, "bool");
        annotate(&mut f.forward, 2, "Optional[ bool ]");
        annotate(&mut f.init, 1, "bool");
        assert_eq!(
            forward_args(&f).unwrap(),
            vec!["torch.rand([4, 4, 4, 4])", "False", "False"]
        );
        assert_eq!(init_args(&f), vec!["4", "False"]);
        let mut f = facts(&[], &["x", "flag"], vec![]);
        annotate(&mut f.forward, 1, "int");
        assert_eq!(
            forward_args(&f).unwrap(),
            vec!["torch.rand([4, 4, 4, 4])", "torch.rand([4, 4, 4, 4])"]
        );
        let p = Param {
            name: "dense".into(),
            default: Some("True".into()),
            kind: ParamKind::Positional,
            annotation: None,
        };
        assert!(is_bool(&p));
    }

    #[test]
    fn keyword_only_constructor_parameters_get_a_positional_wrapper() {
        let mut f = facts(&["image_size", "dim", "depth"], &["x"], vec![]);
        assert_eq!(keyword_wrapper(&f, "ViT"), None);
        if let Some(init) = f.init.as_mut() {
            init.params[1].kind = ParamKind::KeywordOnly;
            init.params[2].kind = ParamKind::KeywordOnly;
            init.params.insert(
                1,
                Param {
                    name: "channels".into(),
                    default: Some("3".into()),
                    kind: ParamKind::Positional,
                    annotation: None,
                },
            );
        }
        assert_eq!(init_args(&f), vec!["4", "4", "1"]);
        assert_eq!(
            keyword_wrapper(&f, "ViT").as_deref(),
            Some(
                "class Model(ViT):\n    def __init__(self, image_size, dim, depth):\n        super().__init__(image_size, dim=dim, depth=depth)\n"
            )
        );
        if let Some(fwd) = f.forward.as_mut() {
            fwd.params[0].kind = ParamKind::KeywordOnly;
        }
        assert_eq!(
            forward_args(&f),
            Err(GuessProblem::ForwardKeywordOnly("x".into()))
        );
    }
}
