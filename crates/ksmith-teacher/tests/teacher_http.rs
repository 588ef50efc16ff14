//! The teacher client against a scripted loopback server: retries, timeouts, garbage, cache,
//! weighted choice, concurrency limit.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ksmith_core::chat::{ChatClient, ChatError, ChatMessage, ChatRequest};
use ksmith_teacher::loopback::{LoopbackServer, Reply};
use ksmith_teacher::{EndpointConfig, Teacher, TeacherConfig, TeacherError};

fn config(url: &str) -> TeacherConfig {
    TeacherConfig {
        endpoints: vec![EndpointConfig {
            url: url.to_string(),
            model: "kimi".into(),
            ..Default::default()
        }],
        timeout_s: 0.5,
        max_retries: 3,
        backoff_initial_ms: 5,
        backoff_max_ms: 40,
        ..Default::default()
    }
}

fn request(text: &str, seed: u64) -> ChatRequest {
    ChatRequest {
        messages: vec![
            ChatMessage::new("system", "be brief"),
            ChatMessage::new("user", text),
        ],
        temperature: 0.6,
        top_p: 0.95,
        max_tokens: 1000,
        seed: Some(seed),
    }
}

fn teacher(cfg: &TeacherConfig, dir: &Path) -> Teacher {
    Teacher::with_url_override(cfg, dir, None).unwrap()
}

#[test]
fn good_answer_is_cached_and_not_paid_twice() {
    let server = LoopbackServer::start(|r, _| Reply::Chat {
        content: format!("answer to {}", r.message("user")),
        finish_reason: "stop".into(),
        reasoning: Some("thinking".into()),
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(server.url());
    let t = teacher(&cfg, dir.path());
    let a = t.chat(&request("q1", 1)).unwrap();
    assert_eq!(a.content, "answer to q1");
    assert_eq!(a.reasoning.as_deref(), Some("thinking"));
    assert_eq!(a.model, "kimi");
    assert!(!a.cached);
    assert!(a.prompt_tokens > 0);
    let b = t.chat(&request("q1", 1)).unwrap();
    assert!(b.cached);
    assert_eq!(b.content, a.content);
    // A fresh client on the same workdir (a resumed run) also hits the cache.
    let t2 = teacher(&cfg, dir.path());
    assert!(t2.chat(&request("q1", 1)).unwrap().cached);
    // Another seed is another request.
    assert!(!t.chat(&request("q1", 2)).unwrap().cached);
    assert_eq!(server.received().len(), 2);
    let u = t.usage();
    assert_eq!((u.requests, u.cache_hits, u.http_attempts), (3, 1, 2));
    assert!(u.completion_tokens > 0);
    // The same counts go into the report of the stage that used the teacher.
    let counters: std::collections::BTreeMap<&str, u64> = t.report_counters().into_iter().collect();
    assert_eq!(counters["teacher_requests"], 3);
    assert_eq!(counters["teacher_cache_hits"], 1);
    assert_eq!(counters["teacher_completion_tokens"], u.completion_tokens);
    assert_eq!(counters["teacher_prompt_tokens"], u.prompt_tokens);
    let sent = &server.received()[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.body["temperature"], 0.6);
    assert_eq!(sent.body["top_p"], 0.95);
    assert_eq!(sent.body["seed"], 1);
}

#[test]
fn rate_limit_then_good_is_retried() {
    let server = LoopbackServer::scripted(vec![
        Reply::Status {
            status: 429,
            body: "{\"error\":\"slow down\"}".into(),
            retry_after: Some("0.05".into()),
        },
        Reply::status(502, "bad gateway"),
        Reply::chat("ok"),
    ])
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let t = teacher(&config(server.url()), dir.path());
    let started = Instant::now();
    assert_eq!(t.chat(&request("q", 1)).unwrap().content, "ok");
    assert!(
        started.elapsed() >= Duration::from_millis(50),
        "Retry-After honoured"
    );
    assert_eq!(t.usage().retries, 2);
    assert_eq!(server.received().len(), 3);
}

#[test]
fn persistent_5xx_is_unreachable_after_bounded_attempts() {
    let server = LoopbackServer::start(|_, _| Reply::status(500, "boom")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let t = teacher(&config(server.url()), dir.path());
    match t.chat(&request("q", 1)) {
        Err(ChatError::Unreachable { attempts, message }) => {
            assert_eq!(attempts, 4);
            assert!(message.contains("500"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.received().len(), 4);
    assert_eq!(t.usage().failures, 1);
}

#[test]
fn slow_reply_times_out_and_is_retried() {
    let server = LoopbackServer::scripted(vec![
        Reply::Delay(Duration::from_secs(3), Box::new(Reply::chat("late"))),
        Reply::Hangup,
        Reply::chat("on time"),
    ])
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let t = teacher(&config(server.url()), dir.path());
    let started = Instant::now();
    assert_eq!(t.chat(&request("q", 1)).unwrap().content, "on time");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(t.usage().retries, 2);
}

#[test]
fn always_slow_gives_up_in_bounded_time() {
    let server = LoopbackServer::start(|_, _| {
        Reply::Delay(Duration::from_secs(5), Box::new(Reply::chat("late")))
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(server.url());
    cfg.max_retries = 1;
    cfg.timeout_s = 0.2;
    let t = teacher(&cfg, dir.path());
    let started = Instant::now();
    let err = t.chat(&request("q", 1)).unwrap_err();
    assert!(
        matches!(err, ChatError::Unreachable { attempts: 2, .. }),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[test]
fn garbage_is_malformed_and_not_cached() {
    let server = LoopbackServer::scripted(vec![
        Reply::status(200, "{\"choices\": [ {\"mess"),
        Reply::status(200, "{\"choices\": []}"),
        Reply::chat("fine"),
    ])
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let t = teacher(&config(server.url()), dir.path());
    assert!(matches!(
        t.chat(&request("q", 1)),
        Err(ChatError::Malformed(_))
    ));
    assert!(matches!(
        t.chat(&request("q", 1)),
        Err(ChatError::Malformed(_))
    ));
    let ok = t.chat(&request("q", 1)).unwrap();
    assert!(!ok.cached, "a malformed answer must not be cached");
    assert_eq!(t.usage().retries, 0, "malformed answers are not retried");
}

#[test]
fn truncated_answer_is_returned_with_its_finish_reason() {
    let server = LoopbackServer::scripted(vec![Reply::Chat {
        content: "```python\nimport tri".into(),
        finish_reason: "length".into(),
        reasoning: None,
    }])
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let t = teacher(&config(server.url()), dir.path());
    let a = t.chat(&request("q", 1)).unwrap();
    assert_eq!(a.finish_reason.as_deref(), Some("length"));
}

#[test]
fn client_errors_are_refused_without_retry() {
    let server =
        LoopbackServer::start(|_, _| Reply::status(400, "{\"error\":\"context too long\"}"))
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let t = teacher(&config(server.url()), dir.path());
    match t.chat(&request("q", 1)) {
        Err(ChatError::Refused(m)) => assert!(m.contains("context too long"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(server.received().len(), 1);
}

#[test]
fn api_key_comes_from_the_named_variable() {
    let server = LoopbackServer::start(|_, _| Reply::chat("ok")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(server.url());
    cfg.endpoints[0].api_key_env = Some("PATH".into());
    let t = teacher(&cfg, dir.path());
    t.chat(&request("q", 1)).unwrap();
    let auth = server.received()[0].authorization.clone().unwrap();
    assert!(auth.starts_with("Bearer "), "{auth}");
    cfg.endpoints[0].api_key_env = Some("KSMITH_SURELY_UNSET_VARIABLE_42".into());
    match Teacher::with_url_override(&cfg, dir.path(), None) {
        Err(TeacherError::MissingApiKey { var, .. }) => {
            assert_eq!(var, "KSMITH_SURELY_UNSET_VARIABLE_42")
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("missing key accepted"),
    }
}

#[test]
fn url_override_redirects_every_endpoint() {
    let server = LoopbackServer::start(|_, _| Reply::chat("ok")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config("http://127.0.0.1:9/v1");
    let t = Teacher::with_url_override(&cfg, dir.path(), Some(server.url())).unwrap();
    t.chat(&request("q", 1)).unwrap();
    assert_eq!(server.received().len(), 1);
}

#[test]
fn weighted_choice_is_seeded_by_the_request_and_follows_weights() {
    let a = LoopbackServer::start(|_, _| Reply::chat("a")).unwrap();
    let b = LoopbackServer::start(|_, _| Reply::chat("b")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = TeacherConfig {
        endpoints: vec![
            EndpointConfig {
                name: "big".into(),
                url: a.url().into(),
                model: "m-a".into(),
                weight: 3.0,
                ..Default::default()
            },
            EndpointConfig {
                name: "small".into(),
                url: b.url().into(),
                model: "m-b".into(),
                weight: 1.0,
                ..Default::default()
            },
        ],
        cache: false,
        ..config("http://unused")
    };
    let t = teacher(&cfg, dir.path());
    let mut big = 0;
    for i in 0..400 {
        let r = request(&format!("q{i}"), i);
        let label = t.teacher_for(&r).to_string();
        assert_eq!(label, t.teacher_for(&r), "same request, same teacher");
        if label == "big" {
            big += 1;
        }
    }
    assert!((250..350).contains(&big), "3:1 weights gave {big}/400");
    let r = request("q0", 0);
    let expect = if t.teacher_for(&r) == "big" { "a" } else { "b" };
    let answer = t.chat(&r).unwrap();
    assert_eq!(answer.content, expect);
    assert_eq!(answer.model, if expect == "a" { "m-a" } else { "m-b" });
}

#[test]
fn concurrency_limit_holds_across_threads() {
    let inside = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (i2, p2) = (inside.clone(), peak.clone());
    let server = LoopbackServer::start(move |_, _| {
        let n = i2.fetch_add(1, Ordering::SeqCst) + 1;
        p2.fetch_max(n, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(30));
        i2.fetch_sub(1, Ordering::SeqCst);
        Reply::chat("ok")
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(server.url());
    cfg.max_concurrency = 2;
    cfg.cache = false;
    let t = teacher(&cfg, dir.path());
    std::thread::scope(|s| {
        for k in 0..6 {
            let t = &t;
            s.spawn(move || {
                for j in 0..2 {
                    t.chat(&request(&format!("{k}-{j}"), 0)).unwrap();
                }
            });
        }
    });
    assert_eq!(server.received().len(), 12);
    assert!(
        peak.load(Ordering::SeqCst) <= 2,
        "peak {}",
        peak.load(Ordering::SeqCst)
    );
    assert_eq!(peak.load(Ordering::SeqCst), 2);
}
