//! Start the review server on a small work directory, answer in the browser (real mouse clicks
//! and typing), check annotations.parquet, then start a second server and see the answers.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;

use ksmith_core::table::{Table, read_table, write_table};
use ksmith_core::tables::{
    AnnotationRow, ClusterRow, ModuleRow, ModuleStatus, ProbeRow, ProbeStatus, ReviewVerdict,
};
use ksmith_review::Server;

use crate::cdp::Browser;

fn module(id: &str, class_name: &str) -> ModuleRow {
    ModuleRow {
        id: id.into(),
        repo: "org/zoo".into(),
        commit: "c".into(),
        path: "zoo.py".into(),
        class_name: class_name.into(),
        line: 1,
        status: ModuleStatus::Ok,
        reason: None,
        reason_code: None,
        program: Some(format!(
            "class Model:  # {class_name} as extracted\n    pass\n"
        )),
        deps: vec![],
        imports: vec![],
        lines: 2,
        license: Some("MIT".into()),
        stars: None,
        arg_sources: Vec::new(),
    }
}

/// Three clusters (sizes 3, 2 and 1) with centers m1, m4 and m6.
fn write_workdir(dir: &Path) {
    let members = [
        ("m1", 0, true, "linear", 1, "Dense"),
        ("m2", 0, false, "linear", 1, "Dense2"),
        ("m3", 0, false, "linear", 1, "Dense3"),
        ("m4", 1, true, "activation", 1, "Gelu"),
        ("m5", 1, false, "activation", 1, "Gelu2"),
        ("m6", 2, true, "convolution", 2, "ConvBlock"),
    ];
    let clusters: Vec<ClusterRow> = members
        .iter()
        .map(|&(id, cluster, center, family, level, _)| ClusterRow {
            module_id: id.into(),
            cluster,
            is_center: center,
            family: family.into(),
            family_rule: "operators".into(),
            level,
            level_rule: "operators".into(),
            trivial: None,
        })
        .collect();
    write_table(&ClusterRow::path_in(dir), &clusters, "fp").unwrap();
    let modules: Vec<ModuleRow> = members.iter().map(|m| module(m.0, m.5)).collect();
    write_table(&ModuleRow::path_in(dir), &modules, "fp").unwrap();
    let probes: Vec<ProbeRow> = members
        .iter()
        .map(|m| ProbeRow {
            program: Some(format!(
                "class Model:  # {} repaired\n    def forward(self, x):\n        return x\n",
                m.5
            )),
            cpu_time_ms: 1.0,
            attempts: 1,
            ..ProbeRow::empty(m.0, "org/zoo", m.5, ProbeStatus::Ok)
        })
        .collect();
    write_table(&ProbeRow::path_in(dir), &probes, "fp").unwrap();
}

fn start(dir: &Path) -> String {
    let server = Server::bind(dir, 0).unwrap();
    let url = server.url();
    std::thread::spawn(move || server.serve(&|_| {}));
    url
}

fn annotations(dir: &Path) -> Vec<AnnotationRow> {
    read_table(&AnnotationRow::path_in(dir)).unwrap()
}

#[test]
fn a_reviewer_answers_in_the_browser_and_a_second_run_shows_the_answers() {
    let dir = tempfile::tempdir().unwrap();
    write_workdir(dir.path());
    let first = start(dir.path());
    let mut b = Browser::start(dir.path());
    b.open(&first);
    // The centers, largest cluster first, with program, family, level and cluster size.
    let shown = b.eval(
        "[...document.querySelectorAll('section.center')].map(s => [s.dataset.module, \
         s.querySelector('.family').textContent, s.querySelector('.level').textContent, \
         s.querySelector('.size').textContent])",
    );
    assert_eq!(
        shown,
        serde_json::json!([
            ["m1", "linear", "1", "3"],
            ["m4", "activation", "1", "2"],
            ["m6", "convolution", "2", "1"]
        ])
    );
    let program = b.eval("document.querySelector('#c-m1 pre').textContent");
    assert!(
        program.as_str().unwrap().contains("Dense repaired"),
        "{program}"
    );

    // Reject m1 with a note.
    b.click("#c-m1 input[value=reject]");
    b.click("#c-m1 textarea");
    b.type_text("duplicates a torch.nn.Linear call; not a kernel task");
    b.until_loaded(|b| b.click("#c-m1 button[type=submit]"));
    assert_eq!(
        b.eval("document.querySelector('#c-m1 .verdict').textContent"),
        "reject"
    );

    // Relabel m4: family and level.
    b.click("#c-m4 input[value=relabel]");
    b.eval("document.querySelector('#c-m4 input[name=family]').value = ''");
    b.click("#c-m4 input[name=family]");
    b.type_text("normalization");
    b.eval("document.querySelector('#c-m4 select[name=level]').value = '2'");
    b.until_loaded(|b| b.click("#c-m4 button[type=submit]"));
    assert_eq!(
        b.eval("document.querySelector('#c-m4 .verdict').textContent"),
        "relabel"
    );

    // A relabel that changes nothing is refused with the reason; nothing is saved.
    b.open(&first);
    b.click("#c-m6 input[value=relabel]");
    b.until_loaded(|b| b.click("#c-m6 button[type=submit]"));
    let refused = b.eval("document.body.textContent");
    assert!(
        refused.as_str().unwrap().contains("must change"),
        "{refused}"
    );

    let saved = annotations(dir.path());
    assert_eq!(saved.len(), 2, "{saved:?}");
    let (m1, m4) = (&saved[0], &saved[1]);
    assert_eq!(
        (m1.module_id.as_str(), m1.verdict),
        ("m1", ReviewVerdict::Reject)
    );
    assert_eq!(
        m1.note,
        "duplicates a torch.nn.Linear call; not a kernel task"
    );
    assert_eq!((m1.rule_family.as_str(), m1.cluster), ("linear", 0));
    assert_eq!(
        (m4.module_id.as_str(), m4.verdict),
        ("m4", ReviewVerdict::Relabel)
    );
    assert_eq!(
        (m4.family.as_deref(), m4.level),
        (Some("normalization"), Some(2))
    );
    assert!(ksmith_core::timestamp::parse_rfc3339(&m1.reviewed_at).is_some());

    // A second run (a new server reading the file) shows the saved answers.
    let second = start(dir.path());
    assert_ne!(first, second);
    b.open(&second);
    assert_eq!(
        b.eval("document.getElementById('progress').textContent.startsWith('2 of 3')"),
        true
    );
    assert_eq!(
        b.eval("document.querySelector('#c-m1 input[value=reject]').checked"),
        true
    );
    assert_eq!(
        b.eval("document.querySelector('#c-m1 textarea').value"),
        "duplicates a torch.nn.Linear call; not a kernel task"
    );
    assert_eq!(
        b.eval("document.querySelector('#c-m4 input[value=relabel]').checked"),
        true
    );
    assert_eq!(
        b.eval("document.querySelector('#c-m4 input[name=family]').value"),
        "normalization"
    );
    assert_eq!(
        b.eval("document.querySelector('#c-m4 select[name=level]').value"),
        "2"
    );
    assert_eq!(
        b.eval("document.querySelectorAll('section.reviewed').length"),
        2
    );
    // Changing an answer replaces it.
    b.click("#c-m1 input[value=accept]");
    b.until_loaded(|b| b.click("#c-m1 button[type=submit]"));
    let saved = annotations(dir.path());
    assert_eq!(saved.len(), 2);
    assert_eq!(saved[0].verdict, ReviewVerdict::Accept);
    assert!(
        b.eval("document.querySelectorAll('script, [src^=http], link').length") == 0,
        "the page loads nothing and runs no script"
    );
}

/// Sends `request` to `url`'s server and returns the whole response.
fn raw(url: &str, request: &str) -> String {
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

fn status(response: &str) -> &str {
    response.lines().next().unwrap_or_default()
}

#[test]
fn requests_from_elsewhere_are_refused_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    write_workdir(dir.path());
    let url = start(dir.path());
    let host = url.trim_start_matches("http://").trim_end_matches('/');
    let page = raw(&url, &format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n"));
    let token = page
        .split("name=\"token\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap();
    let post = |host: &str, token: &str, origin: &str| {
        let body = format!("token={token}&module_id=m1&verdict=reject");
        format!(
            "POST /annotate HTTP/1.1\r\nHost: {host}\r\n{origin}Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    // Another host name (DNS rebinding), a form without the page's token, a foreign origin.
    assert!(status(&raw(&url, &post("evil.example:80", token, ""))).contains("403"));
    assert!(status(&raw(&url, &post(host, "guess", ""))).contains("400"));
    let foreign = raw(&url, &post(host, token, "Origin: http://evil.example\r\n"));
    assert!(
        status(&foreign).contains("400") && foreign.contains("another site"),
        "{foreign}"
    );
    let missing = raw(
        &url,
        &format!("GET /nothing HTTP/1.1\r\nHost: {host}\r\n\r\n"),
    );
    assert!(status(&missing).contains("404"));
    assert!(!AnnotationRow::path_in(dir.path()).exists());
    // The same form from the page's own origin is saved.
    let own = raw(
        &url,
        &post(host, token, &format!("Origin: http://{host}\r\n")),
    );
    assert!(status(&own).contains("303"), "{own}");
    assert_eq!(annotations(dir.path())[0].verdict, ReviewVerdict::Reject);
    // Without clusters.parquet there is nothing to review: a clear error naming the stage.
    let empty = tempfile::tempdir().unwrap();
    let Err(err) = Server::bind(empty.path(), 0) else {
        panic!("served an empty work directory");
    };
    assert!(err.to_string().contains("ksmith cluster"), "{err}");
}
