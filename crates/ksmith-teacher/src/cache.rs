//! The response cache: one JSON file per request key, written atomically.

use std::path::{Path, PathBuf};

use ksmith_core::chat::ChatResponse;
use ksmith_core::ids::IdHasher;
use ksmith_core::table::write_bytes_atomically;
use serde::{Deserialize, Serialize};

/// Version of the cache entry format; part of every key.
const CACHE_FORMAT: &str = "ksmith-teacher-cache-v1";

/// The cache key of a request: a hash of the exact request body (model, messages, temperature,
/// top-p, token cap, seed) as produced by [`crate::request_body`].
pub fn cache_key(request_body: &str) -> String {
    IdHasher::new()
        .part(CACHE_FORMAT)
        .part(request_body)
        .finish()
}

#[derive(Serialize, Deserialize)]
struct Entry {
    key: String,
    response: ChatResponse,
}

/// A directory of cached answers, `<dir>/<key[..2]>/<key>.json`.
#[derive(Debug, Clone)]
pub struct ResponseCache {
    dir: PathBuf,
}

impl ResponseCache {
    /// A cache in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        ResponseCache { dir: dir.into() }
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, key: &str) -> PathBuf {
        let shard = key.get(..2).unwrap_or("00");
        self.dir.join(shard).join(format!("{key}.json"))
    }

    /// The cached answer for `key`, marked `cached`. A missing entry is `Ok(None)`; an entry that
    /// cannot be read back (truncated, another key) is `Err` with the reason, and the caller
    /// treats it as a miss.
    pub fn get(&self, key: &str) -> Result<Option<ChatResponse>, String> {
        let path = self.path(key);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let entry: Entry = serde_json::from_slice(&bytes)
            .map_err(|e| format!("{}: unreadable cache entry: {e}", path.display()))?;
        if entry.key != key {
            return Err(format!(
                "{}: holds key {}, expected {key}",
                path.display(),
                entry.key
            ));
        }
        let mut response = entry.response;
        response.cached = true;
        Ok(Some(response))
    }

    /// Stores the answer for `key` (atomically: a reader sees the old state or the whole entry).
    pub fn put(&self, key: &str, response: &ChatResponse) -> Result<(), String> {
        let mut response = response.clone();
        response.cached = false;
        let entry = Entry {
            key: key.to_string(),
            response,
        };
        let bytes = serde_json::to_vec(&entry).map_err(|e| e.to_string())?;
        write_bytes_atomically(&self.path(key), &bytes).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(text: &str) -> ChatResponse {
        ChatResponse {
            content: text.into(),
            reasoning: Some("r".into()),
            finish_reason: Some("stop".into()),
            model: "m".into(),
            prompt_tokens: 10,
            completion_tokens: 2,
            cached: false,
        }
    }

    #[test]
    fn round_trip_marks_cached_and_keys_differ_by_body() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ResponseCache::new(dir.path().join("c"));
        let k1 = cache_key("{\"model\":\"a\"}");
        let k2 = cache_key("{\"model\":\"b\"}");
        assert_ne!(k1, k2);
        assert_eq!(cache.get(&k1).unwrap(), None);
        cache.put(&k1, &answer("x")).unwrap();
        let got = cache.get(&k1).unwrap().unwrap();
        assert!(got.cached);
        assert_eq!(got.content, "x");
        assert_eq!(cache.get(&k2).unwrap(), None);
    }

    #[test]
    fn corrupt_entry_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ResponseCache::new(dir.path());
        let k = cache_key("body");
        cache.put(&k, &answer("x")).unwrap();
        std::fs::write(cache.path(&k), b"{\"key\":").unwrap();
        let err = cache.get(&k).unwrap_err();
        assert!(err.contains("unreadable"), "{err}");
        cache.put(&k, &answer("y")).unwrap();
        assert_eq!(cache.get(&k).unwrap().unwrap().content, "y");
    }
}
