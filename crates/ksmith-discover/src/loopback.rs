//! A fake GitHub REST API on `127.0.0.1` and a virtual clock, for tests (feature `loopback`).
//!
//! [`FakeGitHub`] serves a world of [`FakeRepo`]s and [`FakeFile`]s the way GitHub does:
//! repository search with its qualifiers (`language:`, `topic:`, `stars:`, `created:`,
//! `pushed:`, `size:`, `fork:`, `archived:`), sorted by stars, 100 a page at most, and nothing
//! past the 1,000th result (422, as GitHub answers); code search (token required) sliced by
//! `size:`; `GET /repos/{owner}/{repo}`; and the head commit of a branch as a bare SHA. Each
//! resource has a rate limit per window of the [`VirtualClock`] with GitHub's headers; a
//! request sent after `x-ratelimit-remaining: 0` and before the reset is answered 403 and
//! counted as a violation. A fault function can replace any answer with a server error, a
//! secondary rate limit, a malformed page, an incomplete page or a dropped connection.
//!
//! The server stops when dropped (the accept loop polls a stop flag), so a test never hangs on
//! it.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use ksmith_core::timestamp::{parse_rfc3339, rfc3339_from_secs};
use serde_json::{Value, json};

use crate::clock::Clock;
use crate::search::RESULT_CAP;

/// A clock whose time moves only when someone sleeps on it (or [`VirtualClock::advance`]).
#[derive(Debug)]
pub struct VirtualClock {
    nanos: Mutex<u128>,
    slept: Mutex<Duration>,
}

impl VirtualClock {
    /// A clock reading `start` (epoch seconds).
    pub fn new(start: u64) -> Arc<VirtualClock> {
        Arc::new(VirtualClock {
            nanos: Mutex::new(u128::from(start) * 1_000_000_000),
            slept: Mutex::new(Duration::ZERO),
        })
    }

    /// Moves the time forward without counting it as sleep.
    pub fn advance(&self, by: Duration) {
        *lock(&self.nanos) += by.as_nanos();
    }

    /// Total time slept on this clock.
    pub fn slept(&self) -> Duration {
        *lock(&self.slept)
    }
}

impl Clock for VirtualClock {
    fn now_secs(&self) -> u64 {
        (*lock(&self.nanos) / 1_000_000_000) as u64
    }

    fn sleep(&self, duration: Duration) {
        *lock(&self.nanos) += duration.as_nanos();
        *lock(&self.slept) += duration;
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A repository of the fake world.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeRepo {
    /// GitHub id.
    pub id: u64,
    /// `owner/name`.
    pub full_name: String,
    /// What `clone_url` says (a `file://` URL lets a test crawl it for real).
    pub clone_url: String,
    /// Default branch.
    pub default_branch: String,
    /// Stars.
    pub stars: u64,
    /// Creation time, epoch seconds.
    pub created_at: u64,
    /// Last push, epoch seconds.
    pub pushed_at: u64,
    /// A fork.
    pub fork: bool,
    /// Archived.
    pub archived: bool,
    /// Disabled.
    pub disabled: bool,
    /// Private: only visible with a token.
    pub private: bool,
    /// Size in KiB.
    pub size_kb: u64,
    /// Primary language.
    pub language: Option<String>,
    /// SPDX id GitHub detected (`NOASSERTION` for an unrecognized file); `None`: no license.
    pub license: Option<String>,
    /// Topics.
    pub topics: Vec<String>,
    /// Description (searched by free text).
    pub description: String,
    /// Head commit of the default branch; `None`: an empty repository (409).
    pub head: Option<String>,
}

impl FakeRepo {
    /// A public, MIT-licensed Python repository with 100 stars, created and pushed at
    /// 2020-01-01, described as "pytorch models".
    pub fn new(id: u64, full_name: &str) -> FakeRepo {
        let t = 1_577_836_800;
        FakeRepo {
            id,
            full_name: full_name.to_string(),
            clone_url: format!("https://github.com/{full_name}.git"),
            default_branch: "main".into(),
            stars: 100,
            created_at: t,
            pushed_at: t,
            fork: false,
            archived: false,
            disabled: false,
            private: false,
            size_kb: 100,
            language: Some("Python".into()),
            license: Some("MIT".into()),
            topics: Vec::new(),
            description: "pytorch models".into(),
            head: Some(format!("{id:040x}")),
        }
    }

    fn json(&self) -> Value {
        let name = self
            .full_name
            .split_once('/')
            .map_or(self.full_name.as_str(), |(_, n)| n);
        let license = match &self.license {
            Some(id) => json!({"key": id.to_ascii_lowercase(), "name": id, "spdx_id": id}),
            None => Value::Null,
        };
        json!({
            "id": self.id,
            "node_id": format!("R_{}", self.id),
            "name": name,
            "full_name": self.full_name,
            "private": self.private,
            "owner": {"login": self.full_name.split('/').next().unwrap_or("")},
            "html_url": format!("https://github.com/{}", self.full_name),
            "description": self.description,
            "fork": self.fork,
            "created_at": rfc3339_from_secs(self.created_at),
            "updated_at": rfc3339_from_secs(self.pushed_at),
            "pushed_at": rfc3339_from_secs(self.pushed_at),
            "clone_url": self.clone_url,
            "size": self.size_kb,
            "stargazers_count": self.stars,
            "watchers_count": self.stars,
            "language": self.language,
            "archived": self.archived,
            "disabled": self.disabled,
            "license": license,
            "topics": self.topics,
            "visibility": if self.private { "private" } else { "public" },
            "default_branch": self.default_branch,
            "score": 1.0
        })
    }
}

/// A file of the fake world, for code search.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeFile {
    /// The repository's id.
    pub repo_id: u64,
    /// Path in the repository.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// Content (searched by free text).
    pub text: String,
}

/// Requests allowed per window; 0 means no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Repository searches a minute.
    pub search: u64,
    /// Code searches a minute.
    pub code_search: u64,
    /// Other requests an hour.
    pub core: u64,
}

impl Limits {
    /// GitHub's limits for a token: 30 searches and 10 code searches a minute, 5,000 other
    /// requests an hour.
    pub fn github() -> Limits {
        Limits {
            search: 30,
            code_search: 10,
            core: 5000,
        }
    }

    /// No limits.
    pub fn none() -> Limits {
        Limits {
            search: 0,
            code_search: 0,
            core: 0,
        }
    }
}

/// An answer that replaces the normal one.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// This status, body and optional `retry-after` header (a 502, a secondary limit, ...).
    Status {
        /// HTTP status.
        status: u16,
        /// Body.
        body: String,
        /// `retry-after` seconds.
        retry_after: Option<u64>,
    },
    /// A primary rate limit: 403 with `x-ratelimit-remaining: 0` and a reset this many seconds
    /// ahead.
    Primary {
        /// Seconds until the reset.
        reset_in: u64,
    },
    /// A 200 answer with this body.
    Malformed(String),
    /// The normal answer with `incomplete_results: true`.
    Incomplete,
    /// The connection is closed without an answer.
    Hangup,
    /// The normal answer, sent after this much real time.
    Slow(Duration),
}

/// A request as the fake received it.
#[derive(Debug, Clone, PartialEq)]
pub struct Served {
    /// Path without the query.
    pub path: String,
    /// Decoded query parameters.
    pub query: BTreeMap<String, String>,
    /// `Authorization` header.
    pub authorization: Option<String>,
    /// `Accept` header.
    pub accept: Option<String>,
    /// Virtual time of arrival.
    pub at: u64,
}

type FaultFn = dyn Fn(&Served, usize) -> Option<Fault> + Send + Sync;

struct Shared {
    repos: Mutex<Vec<FakeRepo>>,
    files: Mutex<Vec<FakeFile>>,
    clock: Arc<dyn Clock>,
    limits: Limits,
    faults: Box<FaultFn>,
    served: Mutex<Vec<Served>>,
    windows: Mutex<BTreeMap<&'static str, (u64, u64)>>,
    violations: AtomicUsize,
}

/// The running fake; stops when dropped.
pub struct FakeGitHub {
    url: String,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl FakeGitHub {
    /// Serves `repos` and `files` with `limits`, on `clock`, replacing answers where `faults`
    /// returns one (it sees each request and its index, counting from 0).
    pub fn start(
        repos: Vec<FakeRepo>,
        files: Vec<FakeFile>,
        clock: Arc<dyn Clock>,
        limits: Limits,
        faults: impl Fn(&Served, usize) -> Option<Fault> + Send + Sync + 'static,
    ) -> std::io::Result<FakeGitHub> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let url = format!("http://{}", listener.local_addr()?);
        let shared = Arc::new(Shared {
            repos: Mutex::new(repos),
            files: Mutex::new(files),
            clock,
            limits,
            faults: Box::new(faults),
            served: Mutex::new(Vec::new()),
            windows: Mutex::new(BTreeMap::new()),
            violations: AtomicUsize::new(0),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let accept = {
            let shared = shared.clone();
            let stop = stop.clone();
            std::thread::spawn(move || accept_loop(listener, shared, stop))
        };
        Ok(FakeGitHub {
            url,
            shared,
            stop,
            accept: Some(accept),
        })
    }

    /// The API's base URL (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Requests received so far, in arrival order.
    pub fn served(&self) -> Vec<Served> {
        lock(&self.shared.served).clone()
    }

    /// Requests sent while a rate limit was exhausted (after the client was told so).
    pub fn violations(&self) -> usize {
        self.shared.violations.load(Ordering::SeqCst)
    }

    /// Changes the world (stars, pushes, new repositories) between runs.
    pub fn update(&self, change: impl FnOnce(&mut Vec<FakeRepo>)) {
        change(&mut lock(&self.shared.repos));
    }
}

impl Drop for FakeGitHub {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                let shared = shared.clone();
                std::thread::spawn(move || {
                    let _ = serve(stream, &shared);
                });
            }
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

/// One answer: status, extra headers, body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn json(status: u16, body: Value) -> Answer {
        Answer {
            status,
            headers: Vec::new(),
            body: body.to_string(),
        }
    }

    fn message(status: u16, message: &str) -> Answer {
        Answer::json(status, json!({"message": message}))
    }
}

fn serve(stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let target = line.split_whitespace().nth(1).unwrap_or("/").to_string();
    let mut authorization = None;
    let mut accept = None;
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 || line.trim_end().is_empty() {
            break;
        }
        if let Some((k, v)) = line.trim_end().split_once(':') {
            match k.trim().to_ascii_lowercase().as_str() {
                "authorization" => authorization = Some(v.trim().to_string()),
                "accept" => accept = Some(v.trim().to_string()),
                _ => {}
            }
        }
    }
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), decode_query(q)),
        None => (target.clone(), BTreeMap::new()),
    };
    let req = Served {
        path,
        query,
        authorization,
        accept,
        at: shared.clock.now_secs(),
    };
    let n = {
        let mut served = lock(&shared.served);
        served.push(req.clone());
        served.len() - 1
    };
    let mut fault = (shared.faults)(&req, n);
    if let Some(Fault::Slow(d)) = fault {
        std::thread::sleep(d);
        fault = None;
    }
    let answer = match fault {
        Some(Fault::Hangup) => return Ok(()),
        Some(Fault::Status {
            status,
            body,
            retry_after,
        }) => Answer {
            status,
            headers: retry_after
                .map(|s| vec![("retry-after".to_string(), s.to_string())])
                .unwrap_or_default(),
            body,
        },
        Some(Fault::Primary { reset_in }) => Answer {
            status: 403,
            headers: vec![
                ("x-ratelimit-remaining".into(), "0".into()),
                ("x-ratelimit-reset".into(), (req.at + reset_in).to_string()),
            ],
            body: json!({"message": "API rate limit exceeded"}).to_string(),
        },
        Some(Fault::Malformed(body)) => Answer {
            status: 200,
            headers: Vec::new(),
            body,
        },
        Some(Fault::Incomplete) => {
            let mut a = route(shared, &req);
            if let Ok(mut v) = serde_json::from_str::<Value>(&a.body) {
                v["incomplete_results"] = Value::Bool(true);
                a.body = v.to_string();
            }
            a
        }
        Some(Fault::Slow(_)) | None => match rate_limit(shared, &req) {
            Err(limited) => limited,
            Ok(headers) => {
                let mut a = route(shared, &req);
                a.headers.extend(headers);
                a
            }
        },
    };
    write_answer(stream, &answer)
}

fn write_answer(mut stream: TcpStream, answer: &Answer) -> std::io::Result<()> {
    let content_type = if answer.body.starts_with(['{', '[']) {
        "application/json"
    } else {
        "text/plain"
    };
    let mut head = format!(
        "HTTP/1.1 {} Fake\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
        answer.status,
        answer.body.len()
    );
    for (k, v) in &answer.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(answer.body.as_bytes())?;
    stream.flush()
}

fn resource_of(path: &str) -> (&'static str, u64) {
    match path {
        "/search/repositories" => ("search", 60),
        "/search/code" => ("code_search", 60),
        _ => ("core", 3600),
    }
}

/// Counts the request against its resource's window: the headers to send, or the 403 of an
/// exhausted limit.
fn rate_limit(shared: &Shared, req: &Served) -> Result<Vec<(String, String)>, Answer> {
    let (resource, window) = resource_of(&req.path);
    let limit = match resource {
        "search" => shared.limits.search,
        "code_search" => shared.limits.code_search,
        _ => shared.limits.core,
    };
    if limit == 0 {
        return Ok(Vec::new());
    }
    let mut windows = lock(&shared.windows);
    let (start, used) = windows.entry(resource).or_insert((req.at, 0));
    if req.at >= *start + window {
        *start = req.at;
        *used = 0;
    }
    let reset = *start + window;
    let headers = |remaining: u64, used: u64| {
        vec![
            ("x-ratelimit-limit".to_string(), limit.to_string()),
            ("x-ratelimit-remaining".to_string(), remaining.to_string()),
            ("x-ratelimit-reset".to_string(), reset.to_string()),
            ("x-ratelimit-used".to_string(), used.to_string()),
            ("x-ratelimit-resource".to_string(), resource.to_string()),
        ]
    };
    if *used >= limit {
        shared.violations.fetch_add(1, Ordering::SeqCst);
        let mut a = Answer::message(403, "API rate limit exceeded");
        a.headers = headers(0, *used);
        return Err(a);
    }
    *used += 1;
    Ok(headers(limit - *used, *used))
}

fn route(shared: &Shared, req: &Served) -> Answer {
    let parts: Vec<&str> = req.path.trim_matches('/').split('/').collect();
    match parts.as_slice() {
        ["search", "repositories"] => search_repositories(shared, req),
        ["search", "code"] => search_code(shared, req),
        ["repos", owner, name] => match find(shared, req, owner, name) {
            Some(repo) => Answer::json(200, repo.json()),
            None => Answer::message(404, "Not Found"),
        },
        ["repos", owner, name, "commits", reference @ ..] => {
            let reference = percent_decode(&reference.join("/"));
            match find(shared, req, owner, name) {
                None => Answer::message(404, "Not Found"),
                Some(repo) => match &repo.head {
                    None => Answer::message(409, "Git Repository is empty."),
                    Some(_) if reference != repo.default_branch && reference != "HEAD" => {
                        Answer::message(422, &format!("No commit found for SHA: {reference}"))
                    }
                    Some(head) if req.accept.as_deref().is_some_and(|a| a.contains("sha")) => {
                        Answer {
                            status: 200,
                            headers: Vec::new(),
                            body: head.clone(),
                        }
                    }
                    Some(head) => Answer::json(200, json!({"sha": head})),
                },
            }
        }
        _ => Answer::message(404, "Not Found"),
    }
}

fn find(shared: &Shared, req: &Served, owner: &str, name: &str) -> Option<FakeRepo> {
    let full = format!("{owner}/{name}");
    lock(&shared.repos)
        .iter()
        .find(|r| r.full_name.eq_ignore_ascii_case(&full) && visible(r, req))
        .cloned()
}

fn visible(repo: &FakeRepo, req: &Served) -> bool {
    !repo.private || req.authorization.is_some()
}

/// A parsed `q`: free-text words and qualifiers.
struct Query {
    words: Vec<String>,
    qualifiers: Vec<(String, String)>,
}

fn parse_q(q: &str) -> Query {
    let mut words = Vec::new();
    let mut qualifiers = Vec::new();
    for token in q.split_whitespace() {
        match token.split_once(':') {
            Some((k, v)) if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphabetic()) => {
                qualifiers.push((k.to_ascii_lowercase(), v.to_string()))
            }
            _ => words.push(token.to_ascii_lowercase()),
        }
    }
    Query { words, qualifiers }
}

/// Whether `value` satisfies a range expression (`a..b`, `>=a`, `>a`, `<=a`, `<a`, `a`), with
/// values read by `parse` (an upper bound of a bare date covers the whole day).
fn in_range(value: u64, expr: &str, parse: impl Fn(&str, bool) -> Option<u64>) -> bool {
    let bound = |s: &str, upper: bool| parse(s, upper);
    if let Some((a, b)) = expr.split_once("..") {
        let lo = if a == "*" { Some(0) } else { bound(a, false) };
        let hi = if b == "*" {
            Some(u64::MAX)
        } else {
            bound(b, true)
        };
        matches!((lo, hi), (Some(lo), Some(hi)) if lo <= value && value <= hi)
    } else if let Some(x) = expr.strip_prefix(">=") {
        bound(x, false).is_some_and(|x| value >= x)
    } else if let Some(x) = expr.strip_prefix('>') {
        bound(x, true).is_some_and(|x| value > x)
    } else if let Some(x) = expr.strip_prefix("<=") {
        bound(x, true).is_some_and(|x| value <= x)
    } else if let Some(x) = expr.strip_prefix('<') {
        bound(x, false).is_some_and(|x| value < x)
    } else {
        bound(expr, false).is_some_and(|x| value == x)
    }
}

fn number(s: &str, _upper: bool) -> Option<u64> {
    s.parse().ok()
}

fn date(s: &str, upper: bool) -> Option<u64> {
    let t = parse_rfc3339(s)?;
    Some(if upper && !s.contains('T') {
        t + 86_399
    } else {
        t
    })
}

fn repo_matches(repo: &FakeRepo, q: &Query) -> bool {
    let text = format!(
        "{} {} {}",
        repo.full_name,
        repo.description,
        repo.topics.join(" ")
    )
    .to_ascii_lowercase();
    if !q.words.iter().all(|w| text.contains(w.as_str())) {
        return false;
    }
    let mut forks = "false";
    for (k, v) in &q.qualifiers {
        let ok = match k.as_str() {
            "language" => repo
                .language
                .as_deref()
                .is_some_and(|l| l.eq_ignore_ascii_case(v)),
            "topic" => repo.topics.iter().any(|t| t.eq_ignore_ascii_case(v)),
            "stars" => in_range(repo.stars, v, number),
            "size" => in_range(repo.size_kb, v, number),
            "created" => in_range(repo.created_at, v, date),
            "pushed" => in_range(repo.pushed_at, v, date),
            "archived" => v.parse::<bool>().is_ok_and(|a| a == repo.archived),
            "fork" => {
                forks = if v == "only" { "only" } else { "true" };
                true
            }
            _ => true,
        };
        if !ok {
            return false;
        }
    }
    match forks {
        "only" => repo.fork,
        "true" => true,
        _ => !repo.fork,
    }
}

/// The parsed `q` of a search and the range of results its `per_page` and `page` ask for, or
/// GitHub's 422 (no `q`, or a page past the 1,000th result).
fn search_request(req: &Served) -> Result<(Query, usize, usize), Answer> {
    let q = req
        .query
        .get("q")
        .ok_or_else(|| Answer::message(422, "Validation Failed"))?;
    let per_page: usize = req
        .query
        .get("per_page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(30)
        .clamp(1, 100);
    let page: usize = req
        .query
        .get("page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1);
    let start = (page - 1) * per_page;
    if start >= RESULT_CAP as usize {
        return Err(Answer::message(
            422,
            "Only the first 1000 search results are available",
        ));
    }
    Ok((
        parse_q(q),
        start,
        (start + per_page).min(RESULT_CAP as usize),
    ))
}

fn page_of(total: usize, items: Vec<Value>) -> Answer {
    Answer::json(
        200,
        json!({"total_count": total, "incomplete_results": false, "items": items}),
    )
}

fn search_repositories(shared: &Shared, req: &Served) -> Answer {
    let (q, start, end) = match search_request(req) {
        Ok(r) => r,
        Err(a) => return a,
    };
    let mut hits: Vec<FakeRepo> = lock(&shared.repos)
        .iter()
        .filter(|r| visible(r, req) && repo_matches(r, &q))
        .cloned()
        .collect();
    hits.sort_by(|a, b| b.stars.cmp(&a.stars).then(a.id.cmp(&b.id)));
    let items = hits
        .iter()
        .skip(start)
        .take(end - start)
        .map(FakeRepo::json)
        .collect();
    page_of(hits.len(), items)
}

fn search_code(shared: &Shared, req: &Served) -> Answer {
    if req.authorization.is_none() {
        return Answer::message(401, "Requires authentication");
    }
    let (q, start, end) = match search_request(req) {
        Ok(r) => r,
        Err(a) => return a,
    };
    let repos = lock(&shared.repos).clone();
    let mut hits: Vec<(FakeFile, FakeRepo)> = lock(&shared.files)
        .iter()
        .filter_map(|f| {
            let repo = repos.iter().find(|r| r.id == f.repo_id)?;
            let text = f.text.to_ascii_lowercase();
            let ok = visible(repo, req)
                && q.words.iter().all(|w| text.contains(w.as_str()))
                && q.qualifiers.iter().all(|(k, v)| match k.as_str() {
                    "size" => in_range(f.size, v, number),
                    "language" => v.eq_ignore_ascii_case("python") == f.path.ends_with(".py"),
                    _ => true,
                });
            ok.then(|| (f.clone(), repo.clone()))
        })
        .collect();
    hits.sort_by(|a, b| (a.1.id, &a.0.path).cmp(&(b.1.id, &b.0.path)));
    let items = hits
        .iter()
        .skip(start)
        .take(end - start)
        .map(|(f, r)| {
            json!({
                "name": f.path.rsplit('/').next().unwrap_or(&f.path),
                "path": f.path,
                "sha": format!("{:040x}", f.size),
                "repository": {
                    "id": r.id,
                    "full_name": r.full_name,
                    "private": r.private,
                    "fork": r.fork,
                    "html_url": format!("https://github.com/{}", r.full_name)
                },
                "score": 1.0
            })
        })
        .collect();
    page_of(hits.len(), items)
}

fn decode_query(q: &str) -> BTreeMap<String, String> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (
                percent_decode(&k.replace('+', " ")),
                percent_decode(&v.replace('+', " ")),
            )
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_and_ranges() {
        let q = decode_query("q=pytorch%20language%3APython+stars%3A%3E%3D10&page=2");
        assert_eq!(q["q"], "pytorch language:Python stars:>=10");
        assert_eq!(q["page"], "2");
        assert_eq!(percent_decode("a%2"), "a%2");
        assert!(in_range(5, "1..5", number));
        assert!(!in_range(6, "1..5", number));
        assert!(in_range(10, ">=10", number));
        assert!(!in_range(10, ">10", number));
        assert!(in_range(3, "*..4", number));
        let day = parse_rfc3339("2020-01-01").unwrap_or(0);
        assert!(in_range(day + 3600, "2020-01-01..2020-01-01", date));
        assert!(in_range(
            day + 59,
            "2020-01-01T00:00:00Z..2020-01-01T00:00:59Z",
            date
        ));
        assert!(!in_range(
            day + 60,
            "2020-01-01T00:00:00Z..2020-01-01T00:00:59Z",
            date
        ));
    }
}
