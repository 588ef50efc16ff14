//! The dataset card (`README.md`): YAML header with the `configs` the `datasets` library and
//! the Hub read, then counts, schema, provenance, selection rules and hashes.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::formats::{DATASET_SCHEMA_VERSION, Format};
use crate::lengths::{Fit, Lengths};

/// Where the samples of one repository came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Provenance {
    /// Repository name.
    pub repo: String,
    /// License (SPDX), when known.
    pub license: Option<String>,
    /// Pinned commit, when `repos.parquet` records it.
    pub commit: Option<String>,
    /// URL, when `repos.parquet` records it.
    pub url: Option<String>,
    /// Samples of this dataset from the repository.
    pub samples: usize,
}

/// One split of a dataset as written.
#[derive(Debug, Clone, PartialEq)]
pub struct SplitFiles {
    /// `train` or `validation`.
    pub name: String,
    /// Rows.
    pub rows: usize,
    /// Its shard files, relative to the dataset folder (`data/train-00000-of-00002.parquet`).
    pub files: Vec<String>,
    /// Uncompressed size of its Arrow data (`dataset_info.splits[].num_bytes`).
    pub num_bytes: u64,
}

/// What the length caps did to the samples a dataset is made from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CapsApplied {
    /// `[export] max_prompt_tokens` (0 = none).
    pub max_prompt_tokens: u64,
    /// `[export] max_response_tokens` (0 = none).
    pub max_response_tokens: u64,
    /// `[export] max_conversation_tokens` (0 = none).
    pub max_conversation_tokens: u64,
    /// Samples left out, by reason.
    pub dropped: BTreeMap<String, u64>,
    /// Samples whose prompt was cut to fit.
    pub truncated: u64,
}

/// What a card says.
#[derive(Debug, Clone)]
pub struct CardInput {
    /// The format.
    pub format: Format,
    /// Human name.
    pub pretty_name: String,
    /// License for the YAML header.
    pub license: String,
    /// The splits that have rows, train first.
    pub splits: Vec<SplitFiles>,
    /// The columns as `datasets` features (YAML lines, indented for `dataset_info`).
    pub features: String,
    /// Rows per difficulty level.
    pub by_level: BTreeMap<i64, usize>,
    /// Rows per family.
    pub by_family: BTreeMap<String, usize>,
    /// Rows per selection kind (`correctness`, `performance`, `best_steps`, ...).
    pub by_kind: BTreeMap<String, usize>,
    /// Rows per kernel language (`triton`, `cuda`).
    pub by_backend: BTreeMap<String, usize>,
    /// Source repositories.
    pub provenance: Vec<Provenance>,
    /// The selection rules in words.
    pub rules: Vec<String>,
    /// Hash of the `[select]` section.
    pub select_config_hash: String,
    /// Hash of the `[export]` section.
    pub export_config_hash: String,
    /// The export stage fingerprint.
    pub fingerprint: String,
    /// The reward routing key.
    pub data_source: String,
    /// Total bytes of the Parquet files.
    pub download_size: u64,
    /// Token lengths of the samples.
    pub lengths: Lengths,
    /// Trainer settings that fit them.
    pub fit: Fit,
    /// True when tokens were approximated (`chars / 4`).
    pub approx: bool,
    /// `[export] agent_max_turns`: evaluations per agent episode.
    pub agent_max_turns: u32,
    /// What the length caps did.
    pub caps: CapsApplied,
}

/// A YAML/Markdown-safe double-quoted string.
fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

/// The license for the YAML header: the configured one, else the samples' single license
/// (lowercased SPDX, as the Hub spells it), else `other`.
pub fn card_license(configured: &str, provenance: &[Provenance]) -> String {
    if !configured.trim().is_empty() {
        return configured.trim().to_string();
    }
    let mut seen: Vec<String> = provenance
        .iter()
        .map(|p| p.license.clone().unwrap_or_default().to_lowercase())
        .collect();
    seen.sort();
    seen.dedup();
    match seen.as_slice() {
        [one] if !one.is_empty() => one.clone(),
        _ => "other".to_string(),
    }
}

/// What the speed labels and the stamp in the lineage (`meta` / `extra_info`) mean.
const SPEED_LABELS: &str = "Speed labels (SFT: `labels`, of the answer's program; GRPO and agent \
     starts: `parent_labels`, of the current program): `over_eager` and `over_parent` are \
     `{value, low, high}`: the speedup over PyTorch eager and over the parent program (its speedup \
     over eager over the parent's) with the bounds of a confidence interval (the method and its \
     confidence are in the selection rules); `sol_fraction` is the task's speed-of-light time \
     (max of FLOPs / peak FLOP/s and compulsory bytes / peak bandwidth at the GPU's dense \
     datasheet peaks, TF32 policy recorded by the evaluator) over the program's median time (1 = \
     at the peaks); `over_compile` is `{value, low, high}` of the speedup over the task's \
     `torch.compile` baseline (the reference compiled by inductor in the evaluator's configured \
     mode, timed once per task with the eager reference beside it: the program's speedup over \
     eager over compile's, each against the eager reference of its own process); `trivial` is \
     true when the gain over eager is significant and the gain over compile is not (the lower \
     bound of `over_compile` not above the selection's `min_gain_over_compile`): what one \
     compiler call gives for free (null when it cannot be judged: no significant gain over \
     eager, or no compile baseline, e.g. on the CPU); a null figure has its reason in \
     `why_null`. `stamp`: the GPU, driver, CUDA, torch and Triton versions, the ksmith version, \
     the timing method and the timing settings the figures were measured with.\n";

fn columns(format: Format) -> &'static str {
    match format {
        Format::VerlRl => {
            "| column | type | meaning |\n|---|---|---|\n\
             | `data_source` | string | reward routing key (verl `data.reward_fn_key`) |\n\
             | `prompt` | list<struct<role, content>> | system and user messages |\n\
             | `ability` | string | task category |\n\
             | `reward_model` | struct<style, ground_truth> | `style = \"rule\"`; `ground_truth` is a JSON string: reference program, current (parent) program, rollout timings, tolerances, entry point `ModelNew` |\n\
             | `extra_info` | struct | `index`, `split`, lineage (task, step, parent step, iteration, island), family, level, cluster, rollout metrics, prompt tokens, provenance, schema version |\n"
        }
        Format::TrlGrpo => {
            "| column | type | meaning |\n|---|---|---|\n\
             | `prompt` | list<struct<role, content>> | system and user messages (conversational prompt-only) |\n\
             | `ground_truth` | string | JSON: what the reward needs (passed to reward functions as a keyword argument) |\n\
             | `data_source` | string | reward routing key |\n\
             | `meta` | struct | lineage and rollout metrics |\n"
        }
        Format::OpenrlhfRl => {
            "| column | type | meaning |\n|---|---|---|\n\
             | `input` | list<struct<role, content>> | chat prompt (`--apply_chat_template`) |\n\
             | `label` | string | JSON ground truth for the reward function |\n\
             | `datasource` | string | reward routing key |\n\
             | `meta` | struct | lineage and rollout metrics |\n"
        }
        Format::VerlSft => {
            "| column | type | meaning |\n|---|---|---|\n\
             | `messages` | list<struct<role, content>> | system, user and assistant messages |\n\
             | `meta` | struct | kind, lineage, family, level, cluster, tokens, speedups, teacher, provenance |\n"
        }
        Format::TrlSft => {
            "| column | type | meaning |\n|---|---|---|\n\
             | `prompt` | list<struct<role, content>> | system and user messages |\n\
             | `completion` | list<struct<role, content>> | the assistant message |\n\
             | `meta` | struct | kind, lineage, metrics, provenance |\n"
        }
        Format::TrlSftStandard => {
            "| column | type | meaning |\n|---|---|---|\n\
             | `prompt` | string | system and user texts joined by a blank line |\n\
             | `completion` | string | the answer |\n\
             | `meta` | struct | kind, lineage, metrics, provenance |\n"
        }
        Format::OpenrlhfSft => {
            "| column | type | meaning |\n|---|---|---|\n\
             | `input` | list<struct<role, content>> | system and user messages |\n\
             | `output` | list<struct<role, content>> | the assistant message |\n\
             | `meta` | struct | kind, lineage, metrics, provenance |\n"
        }
        Format::VerlSftMultiturn | Format::TrlSftMultiturn => {
            "| column | type | meaning |\n|---|---|---|\n\
             | `messages` | list<struct<role, content, tool_calls, name>> | system (with the instructions for the `evaluate` tool), user (the first step's prompt), then per step an assistant message (the teacher's explanation) calling `evaluate` with its program (`tool_calls[].function.arguments.program`) and a `tool` message with the evaluator's JSON report; a last assistant message without a call |\n\
             | `tools` | list<struct> | the `evaluate` tool's JSON schema (OpenAI function form) |\n\
             | `meta` | struct | task, island, step ids and iterations, start and end speedups, family, level, cluster, tokens, teacher, provenance |\n"
        }
        Format::OpenrlhfSftMultiturn => {
            "| column | type | meaning |\n|---|---|---|\n\
             | `input` | list<struct<role, content>> | the whole conversation: system (with the instructions), user, then per step the teacher's whole answer and a user message with the evaluator's JSON report; a last assistant message without code |\n\
             | `meta` | struct | task, island, step ids and iterations, start and end speedups, family, level, cluster, tokens, teacher, provenance |\n"
        }
        Format::VerlAgent => {
            "| column | type | meaning |\n|---|---|---|\n\
             | `data_source` | string | reward routing key |\n\
             | `agent_name` | string | `tool_agent`: verl's `ToolAgentLoop` |\n\
             | `prompt` | list<struct<role, content>> | system (with the instructions for the `evaluate` tool) and user messages |\n\
             | `ability` | string | task category |\n\
             | `reward_model` | struct<style, ground_truth> | `ground_truth`: JSON with the reference and the program the episode starts from |\n\
             | `extra_info` | struct | `index`, `tools_kwargs.evaluate.create_kwargs.ground_truth` (the same JSON, for the tool) and `meta` (lineage and rollout metrics) |\n"
        }
        Format::TrlEnv => {
            "| column | type | meaning |\n|---|---|---|\n\
             | `prompt` | list<struct<role, content>> | system (with the instructions for the `evaluate` tool) and user messages |\n\
             | `ground_truth` | string | JSON: the reference and the program the episode starts from (the environment's `reset` reads it) |\n\
             | `data_source` | string | reward routing key |\n\
             | `meta` | struct | lineage and rollout metrics |\n"
        }
        Format::OpenrlhfAgent => {
            "| column | type | meaning |\n|---|---|---|\n\
             | `input` | list<struct<role, content>> | system (with the instructions for answering in text) and user messages (`--data.apply_chat_template`) |\n\
             | `label` | string | JSON ground truth: the agent's `reset` reads it |\n\
             | `datasource` | string | reward routing key |\n\
             | `meta` | struct | lineage and rollout metrics |\n"
        }
    }
}

/// The card's text: the YAML header the `datasets` library reads, the description and counts,
/// the provenance table, then the selection rules and what identifies the export.
pub fn render(c: &CardInput) -> String {
    let mut s = String::new();
    front_matter(&mut s, c);
    description(&mut s, c);
    provenance_table(&mut s, c);
    let _ = writeln!(s, "\n## Selection rules\n");
    for rule in &c.rules {
        let _ = writeln!(s, "- {rule}");
    }
    let _ = writeln!(
        s,
        "\n## Reproducibility\n\n- `[select]` config hash: `{}`\n- `[export]` config hash: \
         `{}`\n- export fingerprint: `{}`\n- written by ksmith {}",
        c.select_config_hash,
        c.export_config_hash,
        c.fingerprint,
        env!("CARGO_PKG_VERSION")
    );
    s
}

/// The YAML header: license, tags, the splits' files and `dataset_info`.
fn front_matter(s: &mut String, c: &CardInput) {
    let _ = writeln!(s, "---");
    let _ = writeln!(s, "license: {}", c.license);
    let _ = writeln!(s, "pretty_name: {}", quoted(&c.pretty_name));
    let _ = writeln!(s, "task_categories:\n- text-generation");
    let _ = writeln!(
        s,
        "tags:\n- triton\n- gpu-kernels\n- code\n- ksmith\n- {}",
        c.format.folder()
    );
    let _ = writeln!(s, "configs:\n- config_name: default\n  data_files:");
    for split in &c.splits {
        let _ = writeln!(s, "  - split: {}\n    path:", split.name);
        for file in &split.files {
            let _ = writeln!(s, "    - {}", quoted(file));
        }
    }
    let _ = writeln!(s, "  default: true");
    // `datasets` caches a local folder under a hash of this block and the configs (not of the
    // files), so the block names the export's fingerprint: a re-exported folder is never
    // answered from the cache of an earlier export. Every field `datasets` reads is present
    // (features, and per split name, num_bytes and num_examples), so no load warns that the
    // block is malformed.
    let dataset_size: u64 = c.splits.iter().map(|sp| sp.num_bytes).sum();
    let _ = writeln!(
        s,
        "dataset_info:\n  config_name: default\n  description: {}\n  features:\n{}  \
         download_size: {}\n  dataset_size: {dataset_size}\n  splits:",
        quoted(&format!("ksmith export {}", c.fingerprint)),
        c.features,
        c.download_size
    );
    for split in &c.splits {
        let _ = writeln!(
            s,
            "  - name: {}\n    num_bytes: {}\n    num_examples: {}",
            split.name, split.num_bytes, split.rows
        );
    }
    let _ = writeln!(s, "---\n");
}

/// The title, what the data is, and the counts by split, selection, level and family.
fn description(s: &mut String, c: &CardInput) {
    let _ = writeln!(s, "# {} ({})\n", c.pretty_name, c.format.folder());
    let _ = writeln!(
        s,
        "Training data for models that write and optimize GPU kernels ({}), produced by \
         ksmith (the data recipe of \"Kernel-Smith\", arXiv 2603.28342) from evolutionary \
         rollouts over PyTorch modules of public repositories. Format: `{}`. Schema version \
         {DATASET_SCHEMA_VERSION} (also in every file's metadata as \
         `ksmith.dataset_schema_version`).\n",
        backends_in_words(&c.by_backend),
        c.format.key()
    );
    let _ = writeln!(s, "## Counts\n\n| split | rows | files |\n|---|---|---|");
    for split in &c.splits {
        let files: Vec<String> = split.files.iter().map(|f| format!("`{f}`")).collect();
        let _ = writeln!(
            s,
            "| {} | {} | {} |",
            split.name,
            split.rows,
            files.join(", ")
        );
    }
    let _ = writeln!(s);
    let table = |s: &mut String, title: &str, m: &mut dyn Iterator<Item = (String, usize)>| {
        let _ = writeln!(s, "| {title} | rows |\n|---|---|");
        for (k, v) in m {
            let _ = writeln!(s, "| {k} | {v} |");
        }
        let _ = writeln!(s);
    };
    table(
        s,
        "kernel language",
        &mut c.by_backend.iter().map(|(k, v)| (k.clone(), *v)),
    );
    table(
        s,
        "selection",
        &mut c.by_kind.iter().map(|(k, v)| (k.clone(), *v)),
    );
    table(
        s,
        "level",
        &mut c.by_level.iter().map(|(k, v)| (k.to_string(), *v)),
    );
    table(
        s,
        "family",
        &mut c.by_family.iter().map(|(k, v)| (k.clone(), *v)),
    );
    let _ = writeln!(s, "## Columns\n\n{}\n{SPEED_LABELS}", columns(c.format));
    s.push_str(&crate::commands::sections(c));
    let _ = writeln!(
        s,
        "Reward routing key (`data_source`): `{}`.\n",
        c.data_source
    );
}

/// The kernel languages of a dataset in words: "Triton", "CUDA C++ (inline extensions)", or both.
fn backends_in_words(by_backend: &BTreeMap<String, usize>) -> String {
    let words: Vec<&str> = by_backend
        .keys()
        .map(|k| match k.as_str() {
            "cuda" => "CUDA C++ as inline PyTorch extensions",
            "triton" => "Triton",
            other => other,
        })
        .collect();
    if words.is_empty() {
        "Triton".to_string()
    } else {
        words.join(" and ")
    }
}

/// Which repositories the samples come from, with license and pinned commit.
fn provenance_table(s: &mut String, c: &CardInput) {
    let _ = writeln!(
        s,
        "## Provenance\n\nEvery sample derives from a module of one of these repositories \
         (pinned commits as crawled). Respect each repository's license.\n\n\
         | repository | license | commit | samples |\n|---|---|---|---|"
    );
    for p in &c.provenance {
        let repo = match &p.url {
            Some(url) if url.starts_with("https://") => format!("[{}]({url})", p.repo),
            _ => p.repo.clone(),
        };
        let _ = writeln!(
            s,
            "| {repo} | {} | {} | {} |",
            p.license.as_deref().unwrap_or("unknown"),
            p.commit
                .as_deref()
                .map(|c| format!("`{c}`"))
                .unwrap_or_else(|| "unknown".to_string()),
            p.samples
        );
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::lengths::Stats;

    fn prov(license: Option<&str>) -> Provenance {
        Provenance {
            repo: "r".into(),
            license: license.map(Into::into),
            commit: None,
            url: None,
            samples: 1,
        }
    }

    #[test]
    fn license_is_configured_single_or_other() {
        assert_eq!(card_license("mit", &[prov(Some("Apache-2.0"))]), "mit");
        assert_eq!(
            card_license("", &[prov(Some("Apache-2.0")), prov(Some("Apache-2.0"))]),
            "apache-2.0"
        );
        assert_eq!(
            card_license("", &[prov(Some("MIT")), prov(Some("Apache-2.0"))]),
            "other"
        );
        assert_eq!(card_license("", &[prov(None)]), "other");
        assert_eq!(card_license("", &[]), "other");
    }

    /// A card of `format` with `splits` (name, rows, shards).
    pub(crate) fn card(format: Format, splits: &[(&str, usize, usize)]) -> CardInput {
        let lengths = Lengths {
            counter: "approx_chars_div_4".into(),
            samples: 12,
            prompt: Stats {
                median: 900,
                p99: 1190,
                max: 1200,
            },
            response: Stats {
                median: 300,
                p99: 390,
                max: 400,
            },
            total: Stats {
                median: 1200,
                p99: 1580,
                max: 1600,
            },
        };
        CardInput {
            format,
            pretty_name: "Kernels: \"evolved\"".into(),
            license: "mit".into(),
            splits: splits
                .iter()
                .map(|&(name, rows, shards)| SplitFiles {
                    name: name.into(),
                    rows,
                    files: (0..shards)
                        .map(|i| format!("data/{}", crate::shards::shard_name(name, i, shards)))
                        .collect(),
                    num_bytes: 100 * rows as u64,
                })
                .collect(),
            features: "  - name: prompt\n    dtype: string\n".into(),
            by_level: BTreeMap::new(),
            by_family: BTreeMap::new(),
            by_kind: BTreeMap::new(),
            by_backend: BTreeMap::from([("cuda".to_string(), 2), ("triton".to_string(), 3)]),
            provenance: vec![],
            rules: vec!["rule one".into()],
            select_config_hash: "s".into(),
            export_config_hash: "e".into(),
            fingerprint: "f".into(),
            data_source: "ds".into(),
            download_size: 1234,
            fit: match format.source() {
                crate::formats::Source::Grpo => Fit::rl(&lengths, true),
                crate::formats::Source::Env(_) => Fit::agent(&lengths, true, 3),
                _ => Fit::sft(&lengths, true),
            },
            lengths,
            approx: true,
            agent_max_turns: 3,
            caps: CapsApplied::default(),
        }
    }

    #[test]
    fn the_card_counts_rows_by_kernel_language() {
        let text = render(&card(Format::VerlSft, &[("train", 5, 1)]));
        assert!(
            text.contains("| kernel language | rows |\n|---|---|\n| cuda | 2 |\n| triton | 3 |\n")
        );
        assert!(text.contains("GPU kernels (CUDA C++ as inline PyTorch extensions and Triton)"));
        let mut triton_only = card(Format::VerlSft, &[("train", 5, 1)]);
        triton_only.by_backend = BTreeMap::from([("triton".to_string(), 5)]);
        assert!(render(&triton_only).contains("optimize GPU kernels (Triton), produced"));
    }

    #[test]
    fn the_header_names_every_file_and_a_complete_dataset_info() {
        let c = card(Format::VerlRl, &[("train", 10, 2), ("validation", 2, 1)]);
        let text = render(&c);
        assert!(text.starts_with("---\nlicense: mit\n"), "{text}");
        assert!(
            text.contains("pretty_name: \"Kernels: \\\"evolved\\\"\""),
            "{text}"
        );
        assert!(text.contains(
            "  - split: train\n    path:\n    - \"data/train-00000-of-00002.parquet\"\n    - \"data/train-00001-of-00002.parquet\"\n"
        ));
        assert!(text.contains(
            "  - split: validation\n    path:\n    - \"data/validation-00000-of-00001.parquet\"\n"
        ));
        assert!(text.contains("- rule one"));
        assert!(text.contains(
            "  description: \"ksmith export f\"\n  features:\n  - name: prompt\n    dtype: string\n  download_size: 1234\n  dataset_size: 1200\n"
        ), "{text}");
        assert!(
            text.contains("  - name: validation\n    num_bytes: 200\n    num_examples: 2\n---"),
            "{text}"
        );
    }
}
