//! The rollout loop against the real teacher client and a loopback OpenAI-compatible server
//! that serves scripted answers with 429s, slow replies past the timeout and garbage bodies.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use crate::support::*;
use ksmith_core::chat::{ChatClient, ChatError, ChatRequest, ChatResponse};
use ksmith_core::context::StageContext;
use ksmith_core::report::StageReport;
use ksmith_core::table::{Table, read_fingerprint, read_table};
use ksmith_core::tables::{EditOutcome, StepRow};
use ksmith_evolve::engine::request_seed;
use ksmith_evolve::{Error, RolloutConfig, run};
use ksmith_teacher::loopback::{LoopbackServer, Received, Reply};
use ksmith_teacher::{EndpointConfig, Teacher, TeacherConfig};

fn garbage(seed: u64) -> bool {
    seed % 13 == 5
}

fn responder(r: &Received, n: usize) -> Reply {
    let req: ChatRequest = serde_json::from_value(r.body.clone()).unwrap();
    if n % 5 == 1 {
        return Reply::Status {
            status: 429,
            body: "{\"error\":\"rate limited\"}".into(),
            retry_after: Some("0".into()),
        };
    }
    if n % 7 == 3 {
        return Reply::Delay(Duration::from_secs(2), Box::new(Reply::chat("too late")));
    }
    if garbage(req.seed.unwrap()) {
        return Reply::status(200, "{\"choices\": [ {\"message\": ");
    }
    let (content, finish) = scripted_answer(&req);
    Reply::Chat {
        content,
        finish_reason: finish.into(),
        reasoning: Some("thinking about tiles".into()),
    }
}

fn teacher_cfg(url: &str) -> TeacherConfig {
    TeacherConfig {
        endpoints: vec![EndpointConfig {
            url: url.into(),
            model: "scripted".into(),
            ..Default::default()
        }],
        timeout_s: 0.4,
        max_retries: 4,
        backoff_initial_ms: 5,
        backoff_max_ms: 20,
        ..Default::default()
    }
}

fn cfg() -> RolloutConfig {
    RolloutConfig {
        iterations: 16,
        num_islands: 2,
        migration_interval: 4,
        parallel_tasks: 2,
        ..Default::default()
    }
}

/// The same scripted answers in process, with the garbage replaced by the error the HTTP
/// client reports for it.
struct InProcess;

impl ChatClient for InProcess {
    fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, ChatError> {
        if garbage(req.seed.unwrap()) {
            return Err(ChatError::Malformed("garbage".into()));
        }
        ScriptedTeacher::new().chat(req)
    }
}

type Key = (
    String,
    u32,
    u32,
    String,
    EditOutcome,
    Option<String>,
    Option<f64>,
);

fn key(r: &StepRow) -> Key {
    (
        r.task_id.clone(),
        r.iteration,
        r.island,
        r.parent_id.clone(),
        r.edit_outcome,
        r.program_id.clone(),
        r.speedup,
    )
}

#[test]
fn loop_over_http_with_faults_matches_the_in_process_run() {
    let server = LoopbackServer::start(responder).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_tasks(dir.path(), &default_tasks(2));
    let teacher = Teacher::with_url_override(&teacher_cfg(server.url()), dir.path(), None).unwrap();
    let ev = FakeEvaluator::new();
    let ctx = StageContext::for_tests(dir.path());
    let report = run(&cfg(), &ctx, &teacher, &ev).unwrap();
    assert_eq!(report.rows_written, 32);
    let rows: Vec<StepRow> = read_table(&StepRow::path_in(dir.path())).unwrap();
    let expected_garbage = (0..2)
        .flat_map(|t| (0..16).map(move |i| request_seed(0, &format!("task{t}"), i)))
        .filter(|s| garbage(*s))
        .count();
    assert!(
        expected_garbage > 0,
        "the script must include garbage answers"
    );
    let malformed: Vec<&StepRow> = rows
        .iter()
        .filter(|r| r.edit_outcome == EditOutcome::TeacherMalformed)
        .collect();
    assert_eq!(malformed.len(), expected_garbage);
    assert!(
        malformed
            .iter()
            .all(|r| r.edit_error.as_deref().unwrap().contains("not JSON"))
    );
    let usage = teacher.usage();
    assert!(
        usage.retries > 0,
        "429s and timeouts were retried: {usage:?}"
    );
    assert!(
        rows.iter()
            .filter(|r| r.edit_outcome != EditOutcome::TeacherMalformed)
            .all(|r| {
                r.reasoning.as_deref() == Some("thinking about tiles")
                    && r.teacher_model.as_deref() == Some("scripted")
            })
    );

    // The same trajectory as with the in-process teacher.
    let other = tempfile::tempdir().unwrap();
    write_tasks(other.path(), &default_tasks(2));
    run(
        &cfg(),
        &StageContext::for_tests(other.path()),
        &InProcess,
        &FakeEvaluator::new(),
    )
    .unwrap();
    let in_process: Vec<StepRow> = read_table(&StepRow::path_in(other.path())).unwrap();
    assert_eq!(
        rows.iter().map(key).collect::<Vec<_>>(),
        in_process.iter().map(key).collect::<Vec<_>>()
    );

    // Forced rerun: every good answer comes from the cache; only garbage is asked again.
    let before = server.received().len();
    let mut forced = ctx.clone();
    forced.force = true;
    let teacher2 =
        Teacher::with_url_override(&teacher_cfg(server.url()), dir.path(), None).unwrap();
    run(&cfg(), &forced, &teacher2, &FakeEvaluator::new()).unwrap();
    let again: Vec<StepRow> = read_table(&StepRow::path_in(dir.path())).unwrap();
    assert_eq!(
        again.iter().map(key).collect::<Vec<_>>(),
        rows.iter().map(key).collect::<Vec<_>>()
    );
    assert_eq!(teacher2.usage().cache_hits as usize, 32 - expected_garbage);
    assert!(again.iter().filter(|r| r.cached).count() == 32 - expected_garbage);
    assert!(server.received().len() - before >= expected_garbage);
}

#[test]
fn teacher_outage_stops_cleanly_and_a_rerun_completes() {
    let down = LoopbackServer::start(|_, _| Reply::status(503, "overloaded")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_tasks(dir.path(), &default_tasks(2));
    let mut tc = teacher_cfg(down.url());
    tc.max_retries = 1;
    let teacher = Teacher::with_url_override(&tc, dir.path(), None).unwrap();
    let ctx = StageContext::for_tests(dir.path());
    let err = run(&cfg(), &ctx, &teacher, &FakeEvaluator::new()).unwrap_err();
    assert!(matches!(err, Error::Incomplete(_)), "{err}");
    assert!(err.to_string().contains("503"), "{err}");
    let fp = read_fingerprint(&StepRow::path_in(dir.path())).unwrap();
    assert!(fp.ends_with(":incomplete"));
    // The stopped run's report is kept, with the teacher's counts.
    let stopped = StageReport::load(dir.path(), "rollout").expect("report of the stopped run");
    assert_eq!(stopped.fingerprint, fp);
    assert_eq!(stopped.counters["tasks_aborted"], 2);
    assert!(stopped.counters["teacher_failures"] >= 2, "{stopped:?}");
    let endings: serde_json::Value =
        serde_json::from_slice(&std::fs::read(ksmith_evolve::endings_path(dir.path())).unwrap())
            .unwrap();
    for (task, e) in endings.as_object().unwrap() {
        assert_eq!(e["ending"], "aborted", "{task}");
        assert!(e["reason"].as_str().unwrap().contains("503"), "{e}");
    }

    let up = LoopbackServer::start(|r, _| {
        let req: ChatRequest = serde_json::from_value(r.body.clone()).unwrap();
        let (content, finish) = scripted_answer(&req);
        Reply::Chat {
            content,
            finish_reason: finish.into(),
            reasoning: None,
        }
    })
    .unwrap();
    let teacher = Teacher::with_url_override(&teacher_cfg(up.url()), dir.path(), None).unwrap();
    let report = run(&cfg(), &ctx, &teacher, &FakeEvaluator::new()).unwrap();
    assert_eq!(report.rows_written, 32);
    assert_eq!(report.counters["tasks_done"], 2);
    // The resumed run's counters cover both processes.
    assert_eq!(report.counters["rollout_processes"], 2);
    for name in [
        "teacher_requests",
        "teacher_failures",
        "teacher_retries",
        "steps_new",
    ] {
        assert_eq!(
            report.counters[name],
            stopped.counters[name] + report.counters[&format!("last_process/{name}")],
            "{name}: {report:?}"
        );
    }
    assert!(report.counters["teacher_failures"] >= 2);
    let endings: serde_json::Value =
        serde_json::from_slice(&std::fs::read(ksmith_evolve::endings_path(dir.path())).unwrap())
            .unwrap();
    assert!(
        endings
            .as_object()
            .unwrap()
            .values()
            .all(|e| e["ending"] == "done")
    );
    assert_eq!(
        StageReport::load(dir.path(), "rollout"),
        Some(report.clone())
    );
    assert!(
        !read_fingerprint(&StepRow::path_in(dir.path()))
            .unwrap()
            .ends_with(":incomplete")
    );
}
