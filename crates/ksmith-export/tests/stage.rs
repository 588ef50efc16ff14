//! The export stage on small selections: layout, schemas as Arrow types, ground truth, metadata,
//! skip and re-run, missing inputs, formats without rows, length caps and token counts, the
//! multi-turn conversations and the agent environments.

#![allow(clippy::unwrap_used)] // Test fixtures: a failure here is a test failure.

use std::fs::File;
use std::path::Path;

use arrow::datatypes::DataType;
use ksmith_core::chat::ChatMessage;
use ksmith_core::context::StageContext;
use ksmith_core::evaluation::EvalStatus;
use ksmith_core::table::{Table, write_table};
use ksmith_core::tables::{
    ChainRow, ChainTurn, GrpoRow, GrpoSelection, SftKind, SftRow, Split, env_path_in,
};
use ksmith_export::ground_truth::GroundTruth;
use ksmith_export::{ExportConfig, Format, dataset_dir, run};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

fn grpo(i: usize, split: Split, parent: Option<&str>) -> GrpoRow {
    GrpoRow {
        sample_id: format!("g{i}"),
        backend: ksmith_core::evaluation::Backend::Triton,
        selection: GrpoSelection::BestSteps,
        split,
        task_id: format!("task{i}"),
        step_id: format!("step{i}"),
        parent_step_id: parent.map(Into::into),
        iteration: i as u32,
        island: 0,
        family: "activation".into(),
        level: 1,
        cluster: i as i32,
        prompt: vec![
            ChatMessage::new("system", "sys"),
            ChatMessage::new("user", format!("user {i}")),
        ],
        prompt_tokens: 10,
        token_counter: "approx_chars_div_4".into(),
        reference_program: "class Model: pass\n".into(),
        parent_program: format!("class ModelNew: pass  # {i}\n"),
        parent_speedup: parent.map(|_| 1.5),
        parent_runtime_ms: parent.map(|_| 0.2),
        eager_runtime_ms: Some(0.3),
        hardware: "NVIDIA H200".into(),
        parent_labels: Default::default(),
        stamp: Default::default(),
        repo: "org/repo".into(),
        license: Some("MIT".into()),
    }
}

fn sft(i: usize, split: Split) -> SftRow {
    SftRow {
        sample_id: format!("s{i}"),
        backend: ksmith_core::evaluation::Backend::Triton,
        kind: SftKind::Correctness,
        split,
        task_id: format!("task{i}"),
        step_id: format!("step{i}"),
        parent_step_id: None,
        iteration: 0,
        island: 0,
        family: "activation".into(),
        level: 1,
        cluster: -1,
        messages: vec![
            ChatMessage::new("system", "sys"),
            ChatMessage::new("user", "translate"),
            ChatMessage::new("assistant", format!("answer {i}")),
        ],
        tokens: 20,
        token_counter: "approx_chars_div_4".into(),
        speedup: None,
        parent_speedup: None,
        labels: Default::default(),
        stamp: Default::default(),
        teacher: "t".into(),
        repo: "org/repo".into(),
        license: Some("MIT".into()),
    }
}

fn chain(i: usize, split: Split, turns: usize) -> ChainRow {
    let turn = |t: usize| {
        let correct = t + 1 == turns;
        ChainTurn {
            step_id: format!("c{i}t{t}"),
            iteration: t as u32,
            response: format!("Idea {t}.\n```python\nedit {t}\n```"),
            program: format!("class ModelNew: pass  # chain {i} turn {t}\n"),
            status: if correct {
                EvalStatus::Correct
            } else {
                EvalStatus::CompileError
            },
            hack: None,
            correct,
            speedup: correct.then_some(1.75),
            error_log: if correct { "" } else { "SyntaxError" }.into(),
        }
    };
    ChainRow {
        sample_id: format!("c{i}"),
        backend: ksmith_core::evaluation::Backend::Triton,
        split,
        task_id: format!("task{i}"),
        island: 1,
        family: "activation".into(),
        level: 1,
        cluster: i as i32,
        prompt: vec![
            ChatMessage::new("system", "sys"),
            ChatMessage::new("user", format!("translate {i}")),
        ],
        start_step_id: None,
        start_speedup: None,
        turns: (0..turns).map(turn).collect(),
        tokens: 100,
        token_counter: "approx_chars_div_4".into(),
        teacher: "t".into(),
        repo: "org/repo".into(),
        license: Some("MIT".into()),
    }
}

fn inputs(dir: &Path, sft_rows: &[SftRow], grpo_rows: &[GrpoRow]) {
    all_inputs(dir, sft_rows, grpo_rows, &[], &[]);
}

fn all_inputs(
    dir: &Path,
    sft_rows: &[SftRow],
    grpo_rows: &[GrpoRow],
    env_rows: &[GrpoRow],
    chain_rows: &[ChainRow],
) {
    write_table(&SftRow::path_in(dir), sft_rows, "sft-fp").expect("fixture I/O");
    write_table(&GrpoRow::path_in(dir), grpo_rows, "grpo-fp").expect("fixture I/O");
    write_table(&env_path_in(dir), env_rows, "env-fp").expect("fixture I/O");
    write_table(&ChainRow::path_in(dir), chain_rows, "chains-fp").expect("fixture I/O");
    std::fs::write(
        dir.join("selection.json"),
        r#"{"config_hash": "abc", "rules": ["rule A", "rule B"]}"#,
    )
    .expect("fixture I/O");
}

fn read(
    path: &Path,
) -> (
    arrow::datatypes::SchemaRef,
    Vec<arrow::record_batch::RecordBatch>,
) {
    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(path).expect("fixture I/O"))
        .expect("fixture I/O");
    let schema = builder.schema().clone();
    let batches = builder
        .build()
        .expect("fixture I/O")
        .map(|b| b.expect("fixture I/O"))
        .collect();
    (schema, batches)
}

fn message_list(dt: &DataType) -> bool {
    match dt {
        DataType::List(item) => match item.data_type() {
            DataType::Struct(fields) => {
                fields.len() == 2
                    && fields[0].name() == "role"
                    && fields[0].data_type() == &DataType::Utf8
                    && fields[1].name() == "content"
                    && fields[1].data_type() == &DataType::Utf8
            }
            _ => false,
        },
        _ => false,
    }
}

#[test]
fn verl_rl_has_the_verl_types_and_a_decodable_ground_truth() {
    let dir = tempfile::tempdir().unwrap();
    let rows = vec![
        grpo(0, Split::Train, None),
        grpo(1, Split::Train, Some("step0")),
        grpo(2, Split::Validation, Some("step1")),
    ];
    inputs(dir.path(), &[sft(0, Split::Train)], &rows);
    let cfg = ExportConfig {
        formats: vec![Format::VerlRl],
        ..Default::default()
    };
    let report = run(&cfg, &StageContext::for_tests(dir.path())).unwrap();
    assert_eq!(report.counters.get("verl-rl/train"), Some(&2));
    assert_eq!(report.counters.get("verl-rl/validation"), Some(&1));
    let ds = dataset_dir(dir.path(), Format::VerlRl);
    let (schema, batches) = read(&ds.join("data/train-00000-of-00001.parquet"));
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(
        names,
        [
            "data_source",
            "prompt",
            "ability",
            "reward_model",
            "extra_info"
        ]
    );
    assert!(message_list(schema.field(1).data_type()));
    match schema.field(3).data_type() {
        DataType::Struct(f) => {
            let n: Vec<(&str, &DataType)> = f
                .iter()
                .map(|f| (f.name().as_str(), f.data_type()))
                .collect();
            assert_eq!(
                n,
                [
                    ("style", &DataType::Utf8),
                    ("ground_truth", &DataType::Utf8)
                ]
            );
        }
        other => panic!("reward_model is {other:?}"),
    }
    match schema.field(4).data_type() {
        DataType::Struct(f) => {
            let index = f.iter().find(|f| f.name() == "index").unwrap();
            assert_eq!(index.data_type(), &DataType::Int64);
            let speedup = f.iter().find(|f| f.name() == "parent_speedup").unwrap();
            assert!(speedup.is_nullable());
            // the speed labels and the stamp reach the trainers' rows
            for name in ["parent_labels", "stamp"] {
                let field = f.iter().find(|f| f.name() == name);
                assert!(
                    matches!(field.map(|f| f.data_type()), Some(DataType::Struct(_))),
                    "{name}: {field:?}"
                );
            }
        }
        other => panic!("extra_info is {other:?}"),
    }
    assert_eq!(
        schema
            .metadata()
            .get("ksmith.dataset_schema_version")
            .map(String::as_str),
        Some("1.5.0")
    );
    let batch = &batches[0];
    let rm = batch
        .column(3)
        .as_any()
        .downcast_ref::<arrow::array::StructArray>()
        .unwrap();
    let gts = rm
        .column(1)
        .as_any()
        .downcast_ref::<arrow::array::StringArray>()
        .unwrap();
    let first: GroundTruth = serde_json::from_str(gts.value(0)).unwrap();
    assert!(first.parent_is_reference);
    assert_eq!(first.entry_point, "ModelNew");
    assert_eq!(first.tolerances["float32"], [1e-4, 1e-4]);
    let second: GroundTruth = serde_json::from_str(gts.value(1)).unwrap();
    assert!(!second.parent_is_reference);
    assert_eq!(second.parent_program, "class ModelNew: pass  # 1\n");
    assert_eq!(second.parent_runtime_ms, Some(0.2));
    let card = std::fs::read_to_string(ds.join("README.md")).unwrap();
    assert!(card.contains("license: mit"), "{card}");
    assert!(card.contains("- rule A") && card.contains("`abc`"));
    // every speed label is explained
    for column in [
        "`over_eager`",
        "`over_compile`",
        "`trivial`",
        "`sol_fraction`",
        "`stamp`",
    ] {
        assert!(card.contains(column), "{column} not explained: {card}");
    }
}

#[test]
fn re_runs_skip_unless_something_changed() {
    let dir = tempfile::tempdir().unwrap();
    inputs(
        dir.path(),
        &[sft(0, Split::Train)],
        &[grpo(0, Split::Train, None)],
    );
    let ctx = StageContext::for_tests(dir.path());
    let cfg = ExportConfig::default();
    assert!(!run(&cfg, &ctx).unwrap().skipped);
    assert!(run(&cfg, &ctx).unwrap().skipped);
    let mut forced = ctx.clone();
    forced.force = true;
    assert!(!run(&cfg, &forced).unwrap().skipped);
    let other = ExportConfig {
        zstd_level: 5,
        ..Default::default()
    };
    assert!(!run(&other, &ctx).unwrap().skipped);
    // A dataset with only a validation split is up to date too.
    let dir2 = tempfile::tempdir().unwrap();
    inputs(
        dir2.path(),
        &[sft(0, Split::Validation)],
        &[grpo(0, Split::Validation, None)],
    );
    let ctx2 = StageContext::for_tests(dir2.path());
    assert!(!run(&cfg, &ctx2).unwrap().skipped);
    assert!(run(&cfg, &ctx2).unwrap().skipped);
    // A dataset folder removed by hand is written again.
    std::fs::remove_dir_all(dataset_dir(dir.path(), Format::TrlSft)).unwrap();
    assert!(!run(&other, &ctx).unwrap().skipped);
    assert!(
        dataset_dir(dir.path(), Format::TrlSft)
            .join("README.md")
            .exists()
    );
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut n: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    n.sort();
    n
}

fn record(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("datasets/export.json")).unwrap()).unwrap()
}

#[test]
fn empty_splits_and_formats_without_rows_are_left_out() {
    let dir = tempfile::tempdir().unwrap();
    // GRPO: train only. SFT: nothing at all; an earlier export left a verl-sft folder.
    inputs(dir.path(), &[], &[grpo(0, Split::Train, None)]);
    let stale = dataset_dir(dir.path(), Format::VerlSft).join("data");
    std::fs::create_dir_all(&stale).unwrap();
    std::fs::write(stale.join("train-00000-of-00001.parquet"), b"old").unwrap();
    let cfg = ExportConfig {
        formats: vec![Format::VerlRl, Format::VerlSft],
        ..Default::default()
    };
    let ctx = StageContext::for_tests(dir.path());
    let report = run(&cfg, &ctx).unwrap();
    assert_eq!(
        names_in(&dataset_dir(dir.path(), Format::VerlRl).join("data")),
        ["train-00000-of-00001.parquet"]
    );
    let card =
        std::fs::read_to_string(dataset_dir(dir.path(), Format::VerlRl).join("README.md")).unwrap();
    assert!(card.contains("split: train") && !card.contains("split: validation"));
    assert!(
        !card.contains("validation-"),
        "no command names a missing file"
    );
    assert_eq!(
        names_in(&dir.path().join("datasets")),
        ["export.json", "verl-rl"],
        "no folder for a format without rows; the stale one is gone"
    );
    assert_eq!(report.counters.get("omitted/verl-sft"), Some(&1));
    let rec = record(dir.path());
    let why = rec["omitted"]["verl-sft"].as_str().unwrap();
    assert!(why.contains("SFT rules"), "{why}");
    assert_eq!(rec["written"]["verl-rl"]["splits"]["train"], 1);
    // Nothing changed: up to date, the left-out format included.
    assert!(run(&cfg, &ctx).unwrap().skipped);
}

#[test]
fn a_required_format_without_rows_fails_the_stage_every_time() {
    let dir = tempfile::tempdir().unwrap();
    inputs(dir.path(), &[sft(0, Split::Train)], &[]);
    let cfg = ExportConfig {
        formats: vec![Format::VerlRl, Format::VerlSft],
        required_formats: vec![Format::VerlRl],
        ..Default::default()
    };
    let ctx = StageContext::for_tests(dir.path());
    for _ in 0..2 {
        let err = run(&cfg, &ctx).unwrap_err().to_string();
        assert!(
            err.contains("verl-rl") && err.contains("required_formats") && err.contains("GRPO"),
            "{err}"
        );
        // The other format is written and the report kept.
        assert!(
            dataset_dir(dir.path(), Format::VerlSft)
                .join("README.md")
                .exists()
        );
        let saved = ksmith_core::report::StageReport::load(dir.path(), "export").unwrap();
        assert_eq!(saved.counters.get("omitted/verl-rl"), Some(&1));
    }
}

#[test]
fn an_empty_rl_dataset_on_cpu_names_the_rule_and_the_missing_timings() {
    let dir = tempfile::tempdir().unwrap();
    inputs(dir.path(), &[sft(0, Split::Train)], &[]);
    std::fs::write(
        dir.path().join("selection.json"),
        r#"{"config_hash": "abc", "rules": ["rule A"], "config": {"grpo_rule": "best_steps"},
            "outcome": {"grpo": {"kept": 0, "dropped": {"parent_not_timed": 8, "first_step": 4}},
                        "sft": {"kept": 1, "dropped": {"not_timed": 8}}},
            "steps_correct_untimed": 9}"#,
    )
    .unwrap();
    let cfg = ExportConfig {
        formats: vec![Format::VerlRl, Format::TrlSft],
        ..Default::default()
    };
    run(&cfg, &StageContext::for_tests(dir.path())).unwrap();
    let why = record(dir.path())["omitted"]["verl-rl"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(why.contains("GRPO rule `best_steps` kept 0"), "{why}");
    assert!(why.contains("parent_not_timed 8, first_step 4"), "{why}");
    assert!(
        why.contains("9 correct steps have no timings (CPU evaluator)"),
        "{why}"
    );
}

fn long_sft(i: usize, user_chars: usize, answer_chars: usize) -> SftRow {
    let mut r = sft(i, Split::Train);
    r.messages[1].content = "u".repeat(user_chars);
    r.messages[2].content = "a".repeat(answer_chars);
    r
}

#[test]
fn length_caps_drop_or_cut_by_rule_and_the_card_states_lengths_and_settings() {
    let dir = tempfile::tempdir().unwrap();
    // Prompt tokens (chars/4 + 4 per message): sys 1+4, user 25+4 / 250+4; answers 10+4 / 500+4.
    let rows = vec![
        long_sft(0, 100, 40),
        long_sft(1, 1000, 40),
        long_sft(2, 100, 2000),
    ];
    inputs(dir.path(), &rows, &[]);
    let ctx = StageContext::for_tests(dir.path());
    let drop = ExportConfig {
        formats: vec![Format::VerlSft],
        max_prompt_tokens: 100,
        max_response_tokens: 200,
        ..Default::default()
    };
    let report = run(&drop, &ctx).unwrap();
    assert_eq!(report.dropped.get("sft/over_max_prompt_tokens"), Some(&1));
    assert_eq!(report.dropped.get("sft/over_max_response_tokens"), Some(&1));
    assert_eq!(report.counters.get("verl-sft/train"), Some(&1));
    let cut = ExportConfig {
        over_length: ksmith_export::caps::OverLength::Truncate,
        ..drop.clone()
    };
    let report = run(&cut, &ctx).unwrap();
    assert_eq!(report.dropped.get("sft/over_max_prompt_tokens"), None);
    assert_eq!(report.dropped.get("sft/over_max_response_tokens"), Some(&1));
    assert_eq!(report.counters.get("sft_truncated"), Some(&1));
    assert_eq!(report.counters.get("verl-sft/train"), Some(&2));
    assert!(report.counters["sft_prompt_tokens_max"] <= 100);
    let card = std::fs::read_to_string(dataset_dir(dir.path(), Format::VerlSft).join("README.md"))
        .unwrap();
    assert!(card.contains("## Lengths"), "{card}");
    assert!(card.contains("prompts cut to fit: 1"), "{card}");
    let max_total = report.counters["sft_total_tokens_max"];
    let fit = (max_total + max_total / 5).div_ceil(256) * 256;
    assert!(card.contains(&format!("data.max_length={fit}")), "{card}");
    assert!(
        card.contains(&format!("| verl `data.max_length` | {fit} |")),
        "{card}"
    );
}

/// A word-level `tokenizer.json` (whitespace split, one id per word, [UNK] otherwise).
fn word_tokenizer(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("tok").join("tokenizer.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let json = r#"{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null,
        "decoder": null, "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "answer": 1,
        "sys": 2, "translate": 3}, "unk_token": "[UNK]"}}"#;
    std::fs::write(&path, json).unwrap();
    path
}

#[test]
fn a_configured_tokenizer_counts_the_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let mut row = sft(0, Split::Train);
    row.messages[1].content = "one two three four five".into();
    row.messages[2].content = "a b c".into();
    inputs(dir.path(), &[row], &[]);
    let cfg = ExportConfig {
        formats: vec![Format::TrlSft],
        tokenizer: word_tokenizer(dir.path()),
        ..Default::default()
    };
    let report = run(&cfg, &StageContext::for_tests(dir.path())).unwrap();
    // sys (1 + 6) + five words (5 + 6); answer 3 + 6.
    assert_eq!(report.counters["sft_prompt_tokens_max"], 18);
    assert_eq!(report.counters["sft_response_tokens_max"], 9);
    let rec = record(dir.path());
    assert_eq!(rec["token_counter"], "tokenizer:tok/tokenizer.json");
    let (_, batches) =
        read(&dataset_dir(dir.path(), Format::TrlSft).join("data/train-00000-of-00001.parquet"));
    let meta = batches[0]
        .column_by_name("meta")
        .unwrap()
        .as_any()
        .downcast_ref::<arrow::array::StructArray>()
        .unwrap();
    let tokens = meta
        .column_by_name("tokens")
        .unwrap()
        .as_any()
        .downcast_ref::<arrow::array::Int64Array>()
        .unwrap();
    assert_eq!(tokens.value(0), 27);
    // A tokenizer that cannot be read is a clear error naming the file.
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "{not json").unwrap();
    let err = run(
        &ExportConfig {
            tokenizer: broken.clone(),
            ..cfg
        },
        &StageContext::for_tests(dir.path()),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("broken.json"), "{err}");
}

#[test]
fn shards_split_at_shard_rows() {
    let dir = tempfile::tempdir().unwrap();
    let rows: Vec<SftRow> = (0..7).map(|i| sft(i, Split::Train)).collect();
    inputs(dir.path(), &rows, &[]);
    let cfg = ExportConfig {
        formats: vec![Format::VerlSft],
        shard_rows: 3,
        ..Default::default()
    };
    run(&cfg, &StageContext::for_tests(dir.path())).unwrap();
    let data = dataset_dir(dir.path(), Format::VerlSft).join("data");
    let mut names: Vec<String> = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "train-00000-of-00003.parquet",
            "train-00001-of-00003.parquet",
            "train-00002-of-00003.parquet",
        ]
    );
    let rows: Vec<usize> = (0..3)
        .map(|i| {
            read(&data.join(format!("train-0000{i}-of-00003.parquet")))
                .1
                .iter()
                .map(|b| b.num_rows())
                .sum()
        })
        .collect();
    assert_eq!(rows, [3, 3, 1]);
}

#[test]
fn missing_or_broken_inputs_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = StageContext::for_tests(dir.path());
    let err = run(&ExportConfig::default(), &ctx).unwrap_err().to_string();
    assert!(
        err.contains("sft.parquet") && err.contains("ksmith select"),
        "{err}"
    );
    inputs(dir.path(), &[], &[]);
    std::fs::write(dir.path().join("selection.json"), "{broken").unwrap();
    let err = run(&ExportConfig::default(), &ctx).unwrap_err().to_string();
    assert!(err.contains("selection.json"), "{err}");
    // Nothing was published.
    assert!(!dir.path().join("datasets").exists());
}

fn struct_fields(dt: &DataType) -> Vec<&str> {
    match dt {
        DataType::Struct(f) => f.iter().map(|f| f.name().as_str()).collect(),
        DataType::List(item) => struct_fields(item.data_type()),
        other => panic!("not a struct: {other:?}"),
    }
}

fn json_rows(path: &Path) -> Vec<serde_json::Value> {
    let (_, batches) = read(path);
    let mut out = Vec::new();
    for b in batches {
        let rows: Vec<serde_json::Value> = serde_arrow::from_record_batch(&b).unwrap();
        out.extend(rows);
    }
    out
}

#[test]
fn chains_become_tool_call_and_text_conversations_with_their_cards() {
    let dir = tempfile::tempdir().unwrap();
    let chains = vec![
        chain(0, Split::Train, 2),
        chain(1, Split::Train, 3),
        chain(2, Split::Validation, 2),
    ];
    all_inputs(dir.path(), &[], &[], &[], &chains);
    let cfg = ExportConfig {
        formats: vec![
            Format::VerlSftMultiturn,
            Format::TrlSftMultiturn,
            Format::OpenrlhfSftMultiturn,
        ],
        ..Default::default()
    };
    let report = run(&cfg, &StageContext::for_tests(dir.path())).unwrap();
    assert_eq!(report.counters.get("verl-sft-multiturn/train"), Some(&2));
    assert_eq!(
        report.counters.get("trl-sft-multiturn/validation"),
        Some(&1)
    );
    assert!(report.counters["chains_tools_total_tokens_max"] > 0);
    assert!(report.counters["chains_text_total_tokens_max"] > 0);

    let ds = dataset_dir(dir.path(), Format::VerlSftMultiturn);
    let file = ds.join("data/train-00000-of-00001.parquet");
    let (schema, _) = read(&file);
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(
        names,
        ["messages", "tools", "meta"],
        "no prompt/completion/text column"
    );
    assert_eq!(
        struct_fields(schema.field(0).data_type()),
        ["role", "content", "tool_calls", "name"]
    );
    let rows = json_rows(&file);
    let messages = rows[1]["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant"
        ]
    );
    let call = &messages[2]["tool_calls"][0];
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "evaluate");
    assert_eq!(
        call["function"]["arguments"]["program"],
        "class ModelNew: pass  # chain 1 turn 0\n"
    );
    assert_eq!(
        messages[2]["content"], "Idea 0.",
        "the program travels in the call"
    );
    assert_eq!(messages[3]["name"], "evaluate");
    let report0: serde_json::Value =
        serde_json::from_str(messages[3]["content"].as_str().unwrap()).unwrap();
    assert_eq!(report0["status"], "compile_error");
    assert_eq!(report0["compiled"], false);
    assert_eq!(report0["error"], "SyntaxError");
    let last: serde_json::Value =
        serde_json::from_str(messages[7]["content"].as_str().unwrap()).unwrap();
    assert_eq!(last["speedup"], 1.75);
    assert!(messages[8].get("tool_calls").is_none_or(|c| c.is_null()));
    assert!(
        messages[0]["content"]
            .as_str()
            .unwrap()
            .contains("calling the `evaluate` tool")
    );
    assert_eq!(rows[0]["tools"][0]["function"]["name"], "evaluate");
    assert_eq!(rows[1]["meta"]["step_ids"][2], "c1t2");
    assert_eq!(rows[1]["meta"]["end_speedup"], 1.75);

    let text = json_rows(
        &dataset_dir(dir.path(), Format::OpenrlhfSftMultiturn)
            .join("data/train-00000-of-00001.parquet"),
    );
    let input = text[0]["input"].as_array().unwrap();
    let roles: Vec<&str> = input.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant"
        ]
    );
    assert!(
        input[2]["content"]
            .as_str()
            .unwrap()
            .contains("```python\nedit 0")
    );

    let card = std::fs::read_to_string(ds.join("README.md")).unwrap();
    assert!(card.contains("data.tools_key=tools"), "{card}");
    assert!(card.contains("-m verl.trainer.sft_trainer"));
    let trl =
        std::fs::read_to_string(dataset_dir(dir.path(), Format::TrlSftMultiturn).join("README.md"))
            .unwrap();
    assert!(trl.contains("--assistant_only_loss true"), "{trl}");
    let orl = std::fs::read_to_string(
        dataset_dir(dir.path(), Format::OpenrlhfSftMultiturn).join("README.md"),
    )
    .unwrap();
    assert!(orl.contains("--data.multiturn") && orl.contains("--data.input_key input"));
    let max_total = report.counters["chains_text_total_tokens_max"];
    let fit = (max_total + max_total / 5).div_ceil(256) * 256;
    assert!(orl.contains(&format!("--data.max_len {fit}")), "{orl}");

    // The conversation cap drops whole conversations, never cuts them.
    let capped = ExportConfig {
        max_conversation_tokens: report.counters["chains_tools_total_tokens_max"] - 1,
        ..cfg
    };
    let report = run(&capped, &StageContext::for_tests(dir.path())).unwrap();
    assert!(
        report
            .dropped
            .get("chains_tools/over_max_conversation_tokens")
            .is_some_and(|n| *n >= 1),
        "{:?}",
        report.dropped
    );
}

#[test]
fn environment_starts_carry_the_instructions_the_tool_arguments_and_agent_settings() {
    let dir = tempfile::tempdir().unwrap();
    let env = vec![
        grpo(0, Split::Train, None),
        grpo(1, Split::Validation, None),
    ];
    all_inputs(dir.path(), &[], &[], &env, &[]);
    let cfg = ExportConfig {
        formats: vec![Format::VerlAgent, Format::TrlEnv, Format::OpenrlhfAgent],
        agent_max_turns: 3,
        ..Default::default()
    };
    let report = run(&cfg, &StageContext::for_tests(dir.path())).unwrap();
    assert_eq!(report.counters.get("verl-agent/train"), Some(&1));
    let ds = dataset_dir(dir.path(), Format::VerlAgent);
    let file = ds.join("data/train-00000-of-00001.parquet");
    let (schema, _) = read(&file);
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(
        names,
        [
            "data_source",
            "agent_name",
            "prompt",
            "ability",
            "reward_model",
            "extra_info"
        ]
    );
    let rows = json_rows(&file);
    assert_eq!(rows[0]["agent_name"], "tool_agent");
    let gt = &rows[0]["reward_model"]["ground_truth"];
    assert_eq!(
        &rows[0]["extra_info"]["tools_kwargs"]["evaluate"]["create_kwargs"]["ground_truth"],
        gt
    );
    let parsed: GroundTruth = serde_json::from_str(gt.as_str().unwrap()).unwrap();
    assert!(parsed.parent_is_reference);
    assert_eq!(rows[0]["extra_info"]["index"], 0);
    assert_eq!(rows[0]["extra_info"]["meta"]["task_id"], "task0");
    let system = rows[0]["prompt"][0]["content"].as_str().unwrap();
    assert!(
        system.starts_with("sys\n\n# Working with the evaluator"),
        "{system}"
    );
    assert!(system.contains("`evaluate` tool"));

    let text = json_rows(
        &dataset_dir(dir.path(), Format::OpenrlhfAgent).join("data/train-00000-of-00001.parquet"),
    );
    let system = text[0]["input"][0]["content"].as_str().unwrap();
    assert!(system.contains("SEARCH/REPLACE blocks applied to your last program"));
    assert!(!system.contains("`evaluate` tool"));
    let trl = json_rows(
        &dataset_dir(dir.path(), Format::TrlEnv).join("data/train-00000-of-00001.parquet"),
    );
    assert_eq!(trl[0]["ground_truth"], *gt);

    // The tool-call prompt is counted with the tools' schema: longer than the text one's
    // instructions alone would make it.
    let tools_prompt = report.counters["env_tools_prompt_tokens_max"];
    assert!(tools_prompt > report.counters["env_text_prompt_tokens_max"]);
    let card = std::fs::read_to_string(ds.join("README.md")).unwrap();
    let program = report.counters["env_tools_response_tokens_max"];
    let per_turn = 3 * (2 * program + ksmith_export::lengths::Fit::REPORT_TOKENS);
    let response = (per_turn + per_turn / 5).div_ceil(256) * 256;
    assert!(
        card.contains(&format!("data.max_response_length={response}")),
        "{card}"
    );
    assert!(card.contains("actor_rollout_ref.rollout.multi_turn.max_assistant_turns=4"));
    assert!(card.contains("verl_tools.yaml") && card.contains("trainers/verl_agent.py"));
    let trl_card =
        std::fs::read_to_string(dataset_dir(dir.path(), Format::TrlEnv).join("README.md")).unwrap();
    assert!(trl_card.contains("-m ksmith.trainers.trl_env"));
    assert!(trl_card.contains("--max_tool_calling_iterations 3"));
    let orl_card =
        std::fs::read_to_string(dataset_dir(dir.path(), Format::OpenrlhfAgent).join("README.md"))
            .unwrap();
    assert!(orl_card.contains("KSMITH_AGENT_MAX_TURNS=3 python -m openrlhf.cli.train_ppo_ray"));
    assert!(
        orl_card
            .contains("--train.agent_func_path $KSMITH/python/ksmith/trainers/openrlhf_agent.py")
    );
}

#[test]
fn multi_turn_formats_without_rows_say_which_rule_gave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    all_inputs(dir.path(), &[sft(0, Split::Train)], &[], &[], &[]);
    std::fs::write(
        dir.path().join("selection.json"),
        r#"{"config_hash": "abc", "rules": ["rule A"], "config": {"env_rule": "first_steps"},
            "outcome": {"chains": {"kept": 0, "dropped": {"chain_too_short": 3,
                                                          "chain_not_better": 2}},
                        "env": {"kept": 0, "dropped": {"empty_prompt": 1}}},
            "steps_correct_untimed": 4}"#,
    )
    .unwrap();
    run(
        &ExportConfig::default(),
        &StageContext::for_tests(dir.path()),
    )
    .unwrap();
    let rec = record(dir.path());
    let chains = rec["omitted"]["trl-sft-multiturn"].as_str().unwrap();
    assert!(chains.contains("multi-turn chain rules kept 0"), "{chains}");
    assert!(chains.contains("chain_too_short 3"), "{chains}");
    assert!(
        chains.contains("4 correct steps have no timings (CPU evaluator), so a chain shows"),
        "{chains}"
    );
    let env = rec["omitted"]["verl-agent"].as_str().unwrap();
    assert!(env.contains("environment rule `first_steps`"), "{env}");
    assert!(!env.contains("no timings"), "{env}");
    assert!(rec["written"]["verl-sft"].is_object());
}
