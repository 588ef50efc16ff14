//! Writing one split of a dataset as Parquet shards in the Hugging Face layout.
//!
//! Files are `data/<split>-<i:05>-of-<n:05>.parquet`, zstd-compressed, dictionary-encoded,
//! with row groups of `row_group_rows` rows. The Arrow schema is traced from the row type
//! (plain `Utf8` strings and `List`s, structs, nullable fields for optional values, never
//! `Map`), so every shard of every split has the same schema. The
//! metadata (schema version, format, fingerprint) is written both into the Arrow schema
//! (what pyarrow's `read_schema` shows) and into the Parquet footer (what
//! `ParquetFile.metadata` shows).

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::datatypes::{FieldRef, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_arrow::schema::SchemaLike;

use crate::error::Error;

/// How shards are written.
#[derive(Debug, Clone)]
pub struct ShardOptions {
    /// Name of the dataset (for error messages).
    pub dataset: String,
    /// Most rows per shard.
    pub shard_rows: usize,
    /// Rows per row group.
    pub row_group_rows: usize,
    /// zstd level.
    pub zstd_level: i32,
    /// Metadata written into the schema and the footer of every file.
    pub metadata: Vec<(String, String)>,
}

/// The Arrow fields of row type `T`.
pub fn fields_of<T: Serialize + DeserializeOwned>(dataset: &str) -> Result<Vec<FieldRef>, Error> {
    Vec::<FieldRef>::from_type::<T>(ksmith_core::table::tracing_options()).map_err(|e| {
        Error::Write {
            dataset: dataset.to_string(),
            path: PathBuf::new(),
            message: format!("cannot trace the schema: {e}"),
        }
    })
}

/// The shard file name of shard `i` of `n` of `split`.
pub fn shard_name(split: &str, i: usize, n: usize) -> String {
    format!("{split}-{i:05}-of-{n:05}.parquet")
}

/// One shard file as written.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardFile {
    /// The file.
    pub path: PathBuf,
    /// Its rows.
    pub rows: usize,
    /// The in-memory size of its Arrow data (what `datasets` records as `num_bytes`).
    pub arrow_bytes: u64,
}

/// Writes `rows` as the shards of `split` into `data_dir`; returns each file. No rows give no
/// file (the `datasets` library cannot load an empty split).
pub fn write_split<T: Serialize + DeserializeOwned>(
    data_dir: &Path,
    split: &str,
    rows: &[T],
    opts: &ShardOptions,
) -> Result<Vec<ShardFile>, Error> {
    let err = |path: &Path, message: String| Error::Write {
        dataset: opts.dataset.clone(),
        path: path.to_path_buf(),
        message,
    };
    std::fs::create_dir_all(data_dir).map_err(|e| err(data_dir, e.to_string()))?;
    let fields = fields_of::<T>(&opts.dataset)?;
    let meta: HashMap<String, String> = opts.metadata.iter().cloned().collect();
    let schema = Arc::new(Schema::new_with_metadata(fields.clone(), meta));
    let n = rows.len().div_ceil(opts.shard_rows);
    let mut written = Vec::with_capacity(n);
    for i in 0..n {
        let path = data_dir.join(shard_name(split, i, n));
        let part = rows
            .get(i * opts.shard_rows..((i + 1) * opts.shard_rows).min(rows.len()))
            .unwrap_or(&[]);
        let level = ZstdLevel::try_new(opts.zstd_level).map_err(|e| err(&path, e.to_string()))?;
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(level))
            .set_max_row_group_row_count(Some(opts.row_group_rows))
            .set_key_value_metadata(Some(
                opts.metadata
                    .iter()
                    .map(|(k, v)| KeyValue::new(k.clone(), v.clone()))
                    .collect(),
            ))
            .build();
        let file = File::create(&path).map_err(|e| err(&path, e.to_string()))?;
        let mut writer = ArrowWriter::try_new(file, schema.clone(), Some(props))
            .map_err(|e| err(&path, e.to_string()))?;
        let mut arrow_bytes = 0u64;
        for chunk in part.chunks(opts.row_group_rows) {
            let batch = serde_arrow::to_record_batch(&fields, &chunk)
                .map_err(|e| err(&path, format!("cannot convert rows: {e}")))?;
            // The schema metadata travels with the writer's schema, not the batch.
            let batch = batch
                .with_schema(schema.clone())
                .map_err(|e| err(&path, e.to_string()))?;
            arrow_bytes += batch.get_array_memory_size() as u64;
            writer
                .write(&batch)
                .map_err(|e| err(&path, e.to_string()))?;
            writer.flush().map_err(|e| err(&path, e.to_string()))?;
        }
        let file = writer.into_inner().map_err(|e| err(&path, e.to_string()))?;
        file.sync_all().map_err(|e| err(&path, e.to_string()))?;
        written.push(ShardFile {
            path,
            rows: part.len(),
            arrow_bytes,
        });
    }
    Ok(written)
}
