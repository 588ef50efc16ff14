//! Parquet table I/O.
//!
//! Every table is a row struct that implements [`Table`] and derives serde's `Serialize` and
//! `Deserialize`; the Arrow schema is traced from the type, so the struct is the one place where
//! a table's columns are defined. Files are compressed with zstd and written atomically: rows go
//! to a temporary file in the same directory, which is synced and then renamed over the target,
//! so a crash never leaves a half-written table behind. The file metadata records the table
//! name, its schema version, the fingerprint of the stage run that wrote it and the ksmith
//! version.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::datatypes::{FieldRef, Schema};
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_arrow::schema::{SchemaLike, TracingOptions};

use crate::error::{Error, Result};

/// Metadata key holding the table name.
pub const META_TABLE: &str = "ksmith.table";
/// Metadata key holding the schema version.
pub const META_SCHEMA_VERSION: &str = "ksmith.schema_version";
/// Metadata key holding the fingerprint of the stage run that wrote the file.
pub const META_FINGERPRINT: &str = "ksmith.fingerprint";
/// Metadata key holding the ksmith version that wrote the file.
pub const META_WRITER: &str = "ksmith.writer";

/// Rows per row group and per Arrow batch when writing.
const BATCH_ROWS: usize = 8192;

/// A table: a row type with a name and a schema version.
pub trait Table: Serialize + DeserializeOwned {
    /// The table's name; its file is `<NAME>.parquet` in the work directory.
    const NAME: &'static str;
    /// Bumped whenever a column is added, removed, renamed or changes type.
    const SCHEMA_VERSION: u32;

    /// The file name of the table inside a work directory.
    fn file_name() -> String {
        format!("{}.parquet", Self::NAME)
    }

    /// The path of the table inside a work directory.
    fn path_in(workdir: &Path) -> PathBuf {
        workdir.join(Self::file_name())
    }
}

/// How Arrow types are traced from row structs: plain `Utf8` strings and lists (readable by
/// every Parquet consumer), unit enums as strings.
pub fn tracing_options() -> TracingOptions {
    TracingOptions::default()
        .strings_as_large_utf8(false)
        .sequence_as_large_list(false)
        .bytes_as_large_binary(false)
        .enums_without_data_as_strings(true)
        .allow_null_fields(true)
}

/// The Arrow fields of a table's row type.
pub fn fields_of<T: Table>() -> Result<Vec<FieldRef>> {
    Vec::<FieldRef>::from_type::<T>(tracing_options())
        .map_err(|e| Error::table(T::file_name(), format!("cannot trace schema: {e}")))
}

/// Writes rows to `path` atomically, recording `fingerprint` in the file metadata.
pub fn write_table<T: Table>(path: &Path, rows: &[T], fingerprint: &str) -> Result<()> {
    let fields = fields_of::<T>()?;
    let schema = Arc::new(Schema::new(fields.clone()));
    let metadata = vec![
        KeyValue::new(META_TABLE.to_string(), T::NAME.to_string()),
        KeyValue::new(
            META_SCHEMA_VERSION.to_string(),
            T::SCHEMA_VERSION.to_string(),
        ),
        KeyValue::new(META_FINGERPRINT.to_string(), fingerprint.to_string()),
        KeyValue::new(
            META_WRITER.to_string(),
            format!("ksmith {}", env!("CARGO_PKG_VERSION")),
        ),
    ];
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(3).map_err(|e| Error::table(path, e))?,
        ))
        .set_max_row_group_row_count(Some(BATCH_ROWS * 8))
        .set_key_value_metadata(Some(metadata))
        .build();
    write_atomically(path, |file| {
        let mut writer = ArrowWriter::try_new(file, schema.clone(), Some(props))
            .map_err(|e| Error::table(path, e))?;
        for chunk in rows.chunks(BATCH_ROWS) {
            let batch = serde_arrow::to_record_batch(&fields, &chunk)
                .map_err(|e| Error::table(path, format!("cannot convert rows: {e}")))?;
            writer.write(&batch).map_err(|e| Error::table(path, e))?;
        }
        if rows.is_empty() {
            writer
                .write(&RecordBatch::new_empty(schema.clone()))
                .map_err(|e| Error::table(path, e))?;
        }
        let file = writer.into_inner().map_err(|e| Error::table(path, e))?;
        file.sync_all().map_err(|e| Error::io(path, e))
    })
}

/// Writes a file through a temporary sibling and renames it into place.
///
/// `fill` gets the open temporary file and must write (and sync) everything. On any error the
/// temporary file is removed and `path` is left as it was.
pub fn write_atomically(path: &Path, fill: impl FnOnce(File) -> Result<()>) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "table".to_string());
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let file = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
    if let Err(e) = fill(file) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io(path, e)
    })?;
    if let Ok(d) = File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Writes bytes to `path` atomically (used for JSON side files such as reports).
pub fn write_bytes_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomically(path, |mut file| {
        file.write_all(bytes).map_err(|e| Error::io(path, e))?;
        file.sync_all().map_err(|e| Error::io(path, e))
    })
}

/// Reads all rows of a table, checking its schema version.
pub fn read_table<T: Table>(path: &Path) -> Result<Vec<T>> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| Error::table(path, e))?;
    check_metadata::<T>(
        path,
        builder.metadata().file_metadata().key_value_metadata(),
    )?;
    let reader = builder
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(|e| Error::table(path, e))?;
    let mut rows = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| Error::table(path, e))?;
        let mut part: Vec<T> = serde_arrow::from_record_batch(&batch)
            .map_err(|e| Error::table(path, format!("cannot read rows: {e}")))?;
        rows.append(&mut part);
    }
    Ok(rows)
}

fn check_metadata<T: Table>(path: &Path, kv: Option<&Vec<KeyValue>>) -> Result<()> {
    let get = |key: &str| {
        kv.and_then(|kv| kv.iter().find(|e| e.key == key))
            .and_then(|e| e.value.clone())
    };
    match get(META_TABLE) {
        Some(name) if name == T::NAME => {}
        Some(name) => {
            return Err(Error::table(
                path,
                format!("holds table `{name}`, expected `{}`", T::NAME),
            ));
        }
        None => {
            return Err(Error::table(
                path,
                "not a ksmith table (no ksmith.table metadata)",
            ));
        }
    }
    let found = get(META_SCHEMA_VERSION).unwrap_or_else(|| "none".to_string());
    if found != T::SCHEMA_VERSION.to_string() {
        return Err(Error::SchemaVersion {
            path: path.to_path_buf(),
            found,
            expected: T::SCHEMA_VERSION,
        });
    }
    Ok(())
}

/// The fingerprint recorded in a table file, or `None` when the file is missing or unreadable.
pub fn read_fingerprint(path: &Path) -> Option<String> {
    let file = File::open(path).ok()?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).ok()?;
    builder
        .metadata()
        .file_metadata()
        .key_value_metadata()?
        .iter()
        .find(|e| e.key == META_FINGERPRINT)?
        .value
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum Colour {
        Red,
        Blue,
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Demo {
        id: String,
        n: u32,
        tags: Vec<String>,
        note: Option<String>,
        colour: Colour,
    }

    impl Table for Demo {
        const NAME: &'static str = "demo";
        const SCHEMA_VERSION: u32 = 2;
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Other {
        id: String,
    }

    impl Table for Other {
        const NAME: &'static str = "other";
        const SCHEMA_VERSION: u32 = 1;
    }

    fn rows(n: usize) -> Vec<Demo> {
        (0..n)
            .map(|i| Demo {
                id: format!("id{i}"),
                n: i as u32,
                tags: (0..i % 3).map(|t| format!("t{t}")).collect(),
                note: (i % 2 == 0).then(|| "even".to_string()),
                colour: if i % 2 == 0 {
                    Colour::Red
                } else {
                    Colour::Blue
                },
            })
            .collect()
    }

    #[test]
    fn round_trip_keeps_every_row_and_the_fingerprint() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("demo.parquet");
        let data = rows(20_000);
        write_table(&path, &data, "fp-abc").expect("write");
        let back: Vec<Demo> = read_table(&path).expect("read");
        assert_eq!(back, data);
        assert_eq!(read_fingerprint(&path).as_deref(), Some("fp-abc"));
    }

    #[test]
    fn empty_table_round_trips() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("demo.parquet");
        write_table::<Demo>(&path, &[], "fp").expect("write");
        let back: Vec<Demo> = read_table(&path).expect("read");
        assert!(back.is_empty());
    }

    #[test]
    fn wrong_table_and_wrong_version_are_clear_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.parquet");
        write_table(&path, &rows(2), "fp").expect("write");
        let err = read_table::<Other>(&path).expect_err("wrong table");
        assert!(err.to_string().contains("holds table `demo`"), "{err}");
        assert!(err.to_string().contains("x.parquet"), "{err}");
    }

    #[test]
    fn failed_write_leaves_the_old_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("demo.parquet");
        write_table(&path, &rows(3), "old").expect("write");
        let err = write_atomically(&path, |_| Err(Error::table("x", "boom")));
        assert!(err.is_err());
        assert_eq!(read_fingerprint(&path).as_deref(), Some("old"));
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
            .collect();
        assert!(leftovers.is_empty(), "temporary file left behind");
    }

    #[test]
    fn garbage_file_is_a_clear_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("demo.parquet");
        std::fs::write(&path, b"not parquet at all").expect("write");
        let err = read_table::<Demo>(&path).expect_err("garbage");
        assert!(err.to_string().contains("demo.parquet"), "{err}");
        assert_eq!(read_fingerprint(&path), None);
    }
}
