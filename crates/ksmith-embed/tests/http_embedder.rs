//! The `/v1/embeddings` client against a loopback fake server.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use ksmith_embed::{Embedder, EmbedderConfig, HttpEmbedder};

/// Serves `responses` (status, body) in order, one per connection; records request bodies.
fn fake_server(responses: Vec<(u16, String)>) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = Arc::clone(&seen);
    std::thread::spawn(move || {
        for (status, body) in responses {
            let (mut stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut len = 0usize;
            let mut auth = String::new();
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let l = line.trim_end().to_ascii_lowercase();
                if l.is_empty() {
                    break;
                }
                if let Some(v) = l.strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
                if l.starts_with("authorization:") {
                    auth = line.trim_end().to_string();
                }
            }
            let mut buf = vec![0u8; len];
            reader.read_exact(&mut buf).unwrap();
            seen2
                .lock()
                .unwrap()
                .push(format!("{auth}|{}", String::from_utf8_lossy(&buf)));
            let reply = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(reply.as_bytes()).unwrap();
        }
    });
    (format!("http://{addr}/v1"), seen)
}

fn config(url: String) -> EmbedderConfig {
    EmbedderConfig {
        kind: "http".into(),
        url: Some(url),
        model: "code-embed".into(),
        batch_size: 2,
        retries: 1,
        timeout_s: 5,
        ..Default::default()
    }
}

#[test]
fn batches_orders_by_index_normalizes_and_sends_the_key() {
    let (url, seen) = fake_server(vec![
        (
            200,
            r#"{"object":"list","data":[{"index":1,"embedding":[0.0,2.0]},{"index":0,"embedding":[3.0,4.0]}]}"#.into(),
        ),
        (200, r#"{"data":[{"index":0,"embedding":[1.0,0.0]}]}"#.into()),
    ]);
    // SAFETY: a variable name used by this test only; no other thread reads it.
    unsafe { std::env::set_var("KSMITH_TEST_EMBED_KEY", "sekret") };
    let mut cfg = config(url);
    cfg.api_key_env = Some("KSMITH_TEST_EMBED_KEY".into());
    let e = HttpEmbedder::new(&cfg).unwrap();
    let m = e.embed(&["a", "b", "c"]).unwrap();
    assert_eq!(m.shape(), &[3, 2]);
    assert!((m[[0, 0]] - 0.6).abs() < 1e-6 && (m[[0, 1]] - 0.8).abs() < 1e-6);
    assert_eq!(m.row(1).to_vec(), vec![0.0, 1.0]);
    assert_eq!(m.row(2).to_vec(), vec![1.0, 0.0]);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert!(seen[0].contains("Bearer sekret"), "{}", seen[0]);
    let body: serde_json::Value = serde_json::from_str(seen[0].split_once('|').unwrap().1).unwrap();
    assert_eq!(body["input"], serde_json::json!(["a", "b"]));
    assert_eq!(body["model"], "code-embed");
}

#[test]
fn retries_server_errors_then_succeeds() {
    let (url, seen) = fake_server(vec![
        (503, "busy".into()),
        (200, r#"{"data":[{"embedding":[1.0,1.0]}]}"#.into()),
    ]);
    let e = HttpEmbedder::new(&config(url)).unwrap();
    let m = e.embed(&["x"]).unwrap();
    assert_eq!(m.shape(), &[1, 2]);
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[test]
fn client_errors_and_bad_answers_are_errors_naming_the_endpoint() {
    let (url, _) = fake_server(vec![(400, "model not found".into())]);
    let err = HttpEmbedder::new(&config(url.clone()))
        .unwrap()
        .embed(&["x"])
        .unwrap_err();
    assert!(
        err.to_string().contains("400") && err.to_string().contains("model not found"),
        "{err}"
    );
    assert!(err.to_string().contains(&url), "{err}");

    let (url, _) = fake_server(vec![(200, r#"{"data":[{"embedding":[1.0]}]}"#.into())]);
    let err = HttpEmbedder::new(&config(url))
        .unwrap()
        .embed(&["x", "y"])
        .unwrap_err();
    assert!(err.to_string().contains("asked for 2"), "{err}");

    let (url, _) = fake_server(vec![(200, "not json".into())]);
    let err = HttpEmbedder::new(&config(url))
        .unwrap()
        .embed(&["x"])
        .unwrap_err();
    assert!(
        err.to_string().contains("not an embeddings object"),
        "{err}"
    );
}

#[test]
fn unreachable_endpoint_fails_after_retries() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    drop(listener);
    let mut cfg = config(url);
    cfg.retries = 0;
    let err = HttpEmbedder::new(&cfg).unwrap().embed(&["x"]).unwrap_err();
    assert!(err.to_string().contains("after 1 attempts"), "{err}");
}

#[test]
fn missing_api_key_variable_is_a_config_error() {
    let mut cfg = config("http://127.0.0.1:9/v1".into());
    cfg.api_key_env = Some("KSMITH_SURELY_UNSET_VARIABLE".into());
    let err = HttpEmbedder::new(&cfg).err().unwrap();
    assert!(err.to_string().contains("KSMITH_SURELY_UNSET_VARIABLE"));
}
