//! The dataset card (`README.md`): YAML header with the `configs` the `datasets` library and
//! the Hub read, then counts, schema, provenance, selection rules and hashes.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::formats::{DATASET_SCHEMA_VERSION, Format};

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

/// What a card says.
#[derive(Debug, Clone)]
pub struct CardInput {
    /// The format.
    pub format: Format,
    /// Human name.
    pub pretty_name: String,
    /// License for the YAML header.
    pub license: String,
    /// `(split, rows, shards)`.
    pub splits: Vec<(String, usize, usize)>,
    /// Rows per difficulty level.
    pub by_level: BTreeMap<i64, usize>,
    /// Rows per family.
    pub by_family: BTreeMap<String, usize>,
    /// Rows per selection kind (`correctness`, `performance`, `best_steps`, ...).
    pub by_kind: BTreeMap<String, usize>,
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
    }
}

fn usage(format: Format) -> &'static str {
    match format {
        Format::VerlRl => {
            "```bash\npython -m verl.trainer.main_ppo \\\n  data.train_files=$DS/data/train-00000-of-00001.parquet \\\n  data.val_files=$DS/data/validation-00000-of-00001.parquet \\\n  data.filter_overlong_prompts=True \\\n  custom_reward_function.path=python/ksmith/reward.py \\\n  custom_reward_function.name=compute_score\n```\n\
             Set `KSMITH_EVAL_URL` to score answers on a remote evaluator; otherwise the reward \
             evaluates locally (GPU when visible, else the Triton CPU interpreter, \
             correctness-only). `reward_model.reward_manager=batch` with \
             `custom_reward_function.name=compute_score_batch` scores a batch in one call.\n"
        }
        Format::TrlGrpo => {
            "```python\nfrom datasets import load_dataset\nfrom trl import GRPOTrainer\nfrom ksmith.reward import trl_reward_func\nds = load_dataset(DS)\ntrainer = GRPOTrainer(model=..., reward_funcs=trl_reward_func, train_dataset=ds[\"train\"])\n```\n"
        }
        Format::OpenrlhfRl => {
            "```bash\npython -m openrlhf.cli.train_ppo_ray --prompt_data $DS --input_key input \\\n  --label_key label --apply_chat_template --remote_rm_url python/ksmith/reward.py\n```\n\
             (OpenRLHF imports `reward_func(queries, prompts, labels)` from that file.)\n"
        }
        Format::VerlSft => {
            "```bash\ntorchrun -m verl.trainer.fsdp_sft_trainer data.multiturn.enable=true \\\n  data.multiturn.messages_key=messages data.train_files=$DS/data/train-00000-of-00001.parquet\n```\n"
        }
        Format::TrlSft | Format::TrlSftStandard => {
            "```python\nfrom datasets import load_dataset\nfrom trl import SFTTrainer\nds = load_dataset(DS)\ntrainer = SFTTrainer(model=..., train_dataset=ds[\"train\"])\n```\n"
        }
        Format::OpenrlhfSft => {
            "```bash\npython -m openrlhf.cli.train_sft --dataset $DS --input_key input --output_key output \\\n  --apply_chat_template\n```\n"
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
    for (split, _, _) in &c.splits {
        let _ = writeln!(
            s,
            "  - split: {split}\n    path: {}",
            quoted(&format!("data/{split}-*.parquet"))
        );
    }
    let _ = writeln!(s, "  default: true");
    // `datasets` caches a local folder under a hash of this block and the configs (not of the
    // files), so the block names the export's fingerprint: a re-exported folder is never
    // answered from the cache of an earlier export.
    let _ = writeln!(
        s,
        "dataset_info:\n  config_name: default\n  description: {}\n  download_size: {}\n  splits:",
        quoted(&format!("ksmith export {}", c.fingerprint)),
        c.download_size
    );
    for (split, rows, _) in &c.splits {
        let _ = writeln!(s, "  - name: {split}\n    num_examples: {rows}");
    }
    let _ = writeln!(s, "---\n");
}

/// The title, what the data is, and the counts by split, selection, level and family.
fn description(s: &mut String, c: &CardInput) {
    let _ = writeln!(s, "# {} ({})\n", c.pretty_name, c.format.folder());
    let _ = writeln!(
        s,
        "Training data for models that write and optimize Triton GPU kernels, produced by \
         ksmith (the data recipe of \"Kernel-Smith\", arXiv 2603.28342) from evolutionary \
         rollouts over PyTorch modules of public repositories. Format: `{}`. Schema version \
         {DATASET_SCHEMA_VERSION} (also in every file's metadata as \
         `ksmith.dataset_schema_version`).\n",
        c.format.key()
    );
    let _ = writeln!(s, "## Counts\n\n| split | rows | shards |\n|---|---|---|");
    for (split, rows, shards) in &c.splits {
        let _ = writeln!(s, "| {split} | {rows} | {shards} |");
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
    let _ = writeln!(s, "## Columns\n\n{}", columns(c.format));
    let _ = writeln!(s, "## Usage\n\n{}", usage(c.format));
    let _ = writeln!(
        s,
        "Reward routing key (`data_source`): `{}`.\n",
        c.data_source
    );
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
mod tests {
    use super::*;

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

    #[test]
    fn the_header_lists_one_glob_per_split_and_quotes_free_text() {
        let c = CardInput {
            format: Format::VerlRl,
            pretty_name: "Kernels: \"evolved\"".into(),
            license: "mit".into(),
            splits: vec![("train".into(), 10, 1), ("validation".into(), 2, 1)],
            by_level: BTreeMap::new(),
            by_family: BTreeMap::new(),
            by_kind: BTreeMap::new(),
            provenance: vec![],
            rules: vec!["rule one".into()],
            select_config_hash: "s".into(),
            export_config_hash: "e".into(),
            fingerprint: "f".into(),
            data_source: "ds".into(),
            download_size: 1234,
        };
        let text = render(&c);
        assert!(text.starts_with("---\nlicense: mit\n"), "{text}");
        assert!(
            text.contains("pretty_name: \"Kernels: \\\"evolved\\\"\""),
            "{text}"
        );
        assert!(text.contains("  - split: train\n    path: \"data/train-*.parquet\""));
        assert!(text.contains("  - split: validation\n    path: \"data/validation-*.parquet\""));
        assert!(text.contains("- rule one"));
        assert!(text.contains("  description: \"ksmith export f\"\n  download_size: 1234\n"));
        assert!(
            text.contains("  - name: validation\n    num_examples: 2\n---"),
            "{text}"
        );
    }
}
