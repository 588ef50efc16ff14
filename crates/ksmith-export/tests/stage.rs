//! The export stage on small selections: layout, schemas as Arrow types, ground truth, metadata,
//! skip and re-run, missing inputs, empty tables.

use std::fs::File;
use std::path::Path;

use arrow::datatypes::DataType;
use ksmith_core::chat::ChatMessage;
use ksmith_core::context::StageContext;
use ksmith_core::table::{Table, write_table};
use ksmith_core::tables::{GrpoRow, GrpoSelection, SftKind, SftRow, Split};
use ksmith_export::ground_truth::GroundTruth;
use ksmith_export::{ExportConfig, Format, dataset_dir, run};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

fn grpo(i: usize, split: Split, parent: Option<&str>) -> GrpoRow {
    GrpoRow {
        sample_id: format!("g{i}"),
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
        repo: "org/repo".into(),
        license: Some("MIT".into()),
    }
}

fn sft(i: usize, split: Split) -> SftRow {
    SftRow {
        sample_id: format!("s{i}"),
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
        teacher: "t".into(),
        repo: "org/repo".into(),
        license: Some("MIT".into()),
    }
}

fn inputs(dir: &Path, sft_rows: &[SftRow], grpo_rows: &[GrpoRow]) {
    write_table(&SftRow::path_in(dir), sft_rows, "sft-fp").expect("fixture I/O");
    write_table(&GrpoRow::path_in(dir), grpo_rows, "grpo-fp").expect("fixture I/O");
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
        }
        other => panic!("extra_info is {other:?}"),
    }
    assert_eq!(
        schema
            .metadata()
            .get("ksmith.dataset_schema_version")
            .map(String::as_str),
        Some("1.0.0")
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

#[test]
fn empty_splits_are_left_out_and_an_empty_dataset_keeps_its_schema() {
    let dir = tempfile::tempdir().unwrap();
    // GRPO: train only. SFT: nothing at all.
    inputs(dir.path(), &[], &[grpo(0, Split::Train, None)]);
    let cfg = ExportConfig {
        formats: vec![Format::VerlRl, Format::VerlSft],
        ..Default::default()
    };
    run(&cfg, &StageContext::for_tests(dir.path())).unwrap();
    let names = |f: Format| {
        let mut n: Vec<String> = std::fs::read_dir(dataset_dir(dir.path(), f).join("data"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        n.sort();
        n
    };
    assert_eq!(names(Format::VerlRl), ["train-00000-of-00001.parquet"]);
    let card =
        std::fs::read_to_string(dataset_dir(dir.path(), Format::VerlRl).join("README.md")).unwrap();
    assert!(card.contains("split: train") && !card.contains("split: validation"));
    assert_eq!(names(Format::VerlSft), ["train-00000-of-00001.parquet"]);
    let (schema, batches) =
        read(&dataset_dir(dir.path(), Format::VerlSft).join("data/train-00000-of-00001.parquet"));
    assert!(message_list(schema.field(0).data_type()));
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 0);
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
