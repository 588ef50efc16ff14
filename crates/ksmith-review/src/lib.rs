//! Review: the expert check of cluster centers the paper does by hand, as a local web page.
//!
//! `ksmith review` serves a page on the loopback interface (127.0.0.1 only) listing every
//! cluster center of a work directory with its program, family, level and cluster size
//! ([`centers`]); for each one a person accepts, rejects or relabels it (family and level) and
//! adds a note ([`page`]). Every answer is saved at once to `annotations.parquet` ([`store`],
//! `ksmith_core::tables::AnnotationRow`); a later run of the page shows the saved answers, and
//! cluster reads them for the task selection (rejected centers are not tasks, relabels replace
//! the rules' labels).
//!
//! Invariants: the server listens on 127.0.0.1 only, answers only requests whose `Host` names
//! that address (no DNS rebinding) and saves only forms that carry the page's per-process token
//! and, when the browser sends one, a loopback `Origin` (no cross-site posts); the page loads
//! nothing from outside itself and runs no script; a refused answer changes nothing on disk.
//! Entry point: [`Server`].
#![deny(missing_docs)]

pub mod centers;
pub mod http;
pub mod page;
pub mod store;

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use ksmith_core::tables::{AnnotationRow, ReviewVerdict};
use rand::Rng;

use crate::centers::Catalog;
use crate::http::{BadRequest, Request, read_request, respond};

/// Why the review could not start or save.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The port could not be bound.
    #[error("cannot listen on 127.0.0.1:{port}: {source}")]
    Bind {
        /// The port asked for.
        port: u16,
        /// Why.
        source: std::io::Error,
    },
    /// A missing input or a table that cannot be read or written.
    #[error(transparent)]
    Core(#[from] ksmith_core::Error),
}

/// The review server of one work directory.
pub struct Server {
    listener: TcpListener,
    addr: SocketAddr,
    workdir: PathBuf,
    token: String,
}

impl Server {
    /// Checks that `workdir` has cluster centers to review and listens on 127.0.0.1:`port`
    /// (0: a free port).
    pub fn bind(workdir: &Path, port: u16) -> Result<Server, Error> {
        centers::load(workdir)?;
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port))
            .map_err(|source| Error::Bind { port, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| Error::Bind { port, source })?;
        Ok(Server {
            listener,
            addr,
            workdir: workdir.to_path_buf(),
            token: format!("{:032x}", rand::rng().random::<u128>()),
        })
    }

    /// The page's address.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Answers requests until the process ends; `log` gets one line per saved answer and per
    /// refused request.
    pub fn serve(&self, log: &dyn Fn(&str)) {
        for stream in self.listener.incoming() {
            match stream {
                Ok(stream) => {
                    if let Err(e) = self.handle(&stream, log) {
                        log(&format!("review: connection: {e}"));
                    }
                }
                Err(e) => log(&format!("review: accept: {e}")),
            }
        }
    }

    fn handle(&self, stream: &TcpStream, log: &dyn Fn(&str)) -> std::io::Result<()> {
        let html = [("Content-Type", "text/html; charset=utf-8")];
        let request = match read_request(stream) {
            Ok(r) => r,
            Err(BadRequest::Io(e)) => return Err(e),
            Err(BadRequest::Malformed(m)) => {
                return respond(stream, "400 Bad Request", &html, page::error(&m).as_bytes());
            }
        };
        if !self.is_loopback(request.headers.get("host")) {
            log("review: refused a request for another host name");
            return respond(
                stream,
                "403 Forbidden",
                &html,
                page::error("wrong host").as_bytes(),
            );
        }
        match (request.method.as_str(), request.path.as_str()) {
            ("GET", "/") => match centers::load(&self.workdir) {
                Ok(catalog) => {
                    let body =
                        page::render(&catalog, &self.workdir.display().to_string(), &self.token);
                    respond(stream, "200 OK", &html, body.as_bytes())
                }
                Err(e) => respond(
                    stream,
                    "500 Internal Server Error",
                    &html,
                    page::error(&e.to_string()).as_bytes(),
                ),
            },
            ("POST", "/annotate") => match self.annotate(&request) {
                Ok(answer) => {
                    log(&format!("review: {} {}", answer.module_id, answer.verdict));
                    let location = format!("/#c-{}", answer.module_id);
                    respond(stream, "303 See Other", &[("Location", &location)], b"")
                }
                Err(message) => {
                    log(&format!("review: refused an answer: {message}"));
                    respond(
                        stream,
                        "400 Bad Request",
                        &html,
                        page::error(&message).as_bytes(),
                    )
                }
            },
            _ => respond(
                stream,
                "404 Not Found",
                &html,
                page::error("no such page").as_bytes(),
            ),
        }
    }

    /// True when `host` (a `Host` or the authority of an `Origin`) names this server.
    fn is_loopback(&self, host: Option<&String>) -> bool {
        let port = self.addr.port();
        host.is_some_and(|h| h == &format!("127.0.0.1:{port}") || h == &format!("localhost:{port}"))
    }

    /// Checks and saves one form.
    fn annotate(&self, request: &Request) -> Result<AnnotationRow, String> {
        if let Some(origin) = request.headers.get("origin") {
            let authority = origin.strip_prefix("http://").map(str::to_string);
            if !self.is_loopback(authority.as_ref()) {
                return Err(format!("a form from another site ({origin})"));
            }
        }
        let form = Form::parse(&request.body);
        if form.get("token") != self.token {
            return Err("the form is not from this page (reload it)".into());
        }
        let catalog = centers::load(&self.workdir).map_err(|e| e.to_string())?;
        let answer = answer_from_form(&catalog, &form, SystemTime::now())?;
        store::save(&self.workdir, answer.clone()).map_err(|e| e.to_string())?;
        Ok(answer)
    }
}

/// The fields of a submitted form.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Form(Vec<(String, String)>);

impl Form {
    /// The fields of an `application/x-www-form-urlencoded` body.
    pub fn parse(body: &[u8]) -> Self {
        Form(
            form_urlencoded::parse(body)
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    /// The value of `name` ("" when absent).
    pub fn get(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_default()
    }
}

/// The most characters of a note.
const MAX_NOTE: usize = 4000;

/// The answer a form gives, checked against the centers: a known center, a known verdict, and
/// for a relabel a family (letters, digits, `_`, `-`, at most 64) and a level 1 to 3 of which at
/// least one differs from the labels shown.
pub fn answer_from_form(
    catalog: &Catalog,
    form: &Form,
    now: SystemTime,
) -> Result<AnnotationRow, String> {
    let field = |name: &str| form.get(name);
    let id = field("module_id");
    let center = catalog
        .centers
        .iter()
        .find(|c| c.module_id == id)
        .ok_or_else(|| format!("{id:?} is not a cluster center of this work directory"))?;
    let verdict = ReviewVerdict::parse(field("verdict")).ok_or_else(|| {
        format!(
            "verdict {:?}: choose accept, reject or relabel",
            field("verdict")
        )
    })?;
    let note = field("note").trim().to_string();
    if note.chars().count() > MAX_NOTE {
        return Err(format!("the note is longer than {MAX_NOTE} characters"));
    }
    let (family, level) = if verdict == ReviewVerdict::Relabel {
        let family = field("family").trim().to_string();
        let ok = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
        if family.is_empty() || family.len() > 64 || !family.chars().all(ok) {
            return Err(format!(
                "family {family:?}: letters, digits, '_' or '-', at most 64 characters"
            ));
        }
        let level: u8 = match field("level").parse() {
            Ok(l @ 1..=3) => l,
            _ => return Err(format!("level {:?}: 1, 2 or 3", field("level"))),
        };
        if family == center.family && level == center.level {
            return Err("a relabel must change the family or the level (accept keeps them)".into());
        }
        (Some(family), Some(level))
    } else {
        (None, None)
    };
    // The rules' labels: those shown, unless an earlier review already replaced them.
    let (rule_family, rule_level) = match &center.saved {
        Some(s) => (s.rule_family.clone(), s.rule_level),
        None => (center.family.clone(), center.level),
    };
    Ok(AnnotationRow {
        module_id: center.module_id.clone(),
        verdict,
        family,
        level,
        note,
        rule_family,
        rule_level,
        cluster: center.cluster,
        reviewed_at: ksmith_core::timestamp::rfc3339_utc(now),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::centers::Center;

    fn catalog() -> Catalog {
        Catalog {
            centers: vec![Center {
                module_id: "m1".into(),
                class_name: "Gelu".into(),
                repo: "org/r".into(),
                program: "class Model: pass\n".into(),
                family: "activation".into(),
                family_rule: "ops".into(),
                level: 1,
                cluster: 0,
                cluster_size: 4,
                saved: None,
            }],
            families: vec!["activation".into()],
        }
    }

    fn answer(fields: &[(&str, &str)]) -> Result<AnnotationRow, String> {
        let body: String = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(fields)
            .finish();
        answer_from_form(
            &catalog(),
            &Form::parse(body.as_bytes()),
            SystemTime::UNIX_EPOCH,
        )
    }

    #[test]
    fn forms_become_answers_and_bad_ones_say_why() {
        let a = answer(&[
            ("module_id", "m1"),
            ("verdict", "reject"),
            ("note", " dup "),
        ])
        .unwrap();
        assert_eq!(
            (a.verdict, a.family, a.level),
            (ReviewVerdict::Reject, None, None)
        );
        assert_eq!(
            (a.note.as_str(), a.rule_family.as_str()),
            ("dup", "activation")
        );
        assert_eq!(a.reviewed_at, "1970-01-01T00:00:00Z");
        let r = answer(&[
            ("module_id", "m1"),
            ("verdict", "relabel"),
            ("family", "normalization"),
            ("level", "2"),
        ])
        .unwrap();
        assert_eq!(
            (r.family.as_deref(), r.level),
            (Some("normalization"), Some(2))
        );
        for (fields, why) in [
            (
                vec![("module_id", "m9"), ("verdict", "accept")],
                "not a cluster center",
            ),
            (vec![("module_id", "m1"), ("verdict", "maybe")], "verdict"),
            (
                vec![
                    ("module_id", "m1"),
                    ("verdict", "relabel"),
                    ("family", "a b"),
                    ("level", "2"),
                ],
                "family",
            ),
            (
                vec![
                    ("module_id", "m1"),
                    ("verdict", "relabel"),
                    ("family", "x"),
                    ("level", "4"),
                ],
                "level",
            ),
            (
                vec![
                    ("module_id", "m1"),
                    ("verdict", "relabel"),
                    ("family", "activation"),
                    ("level", "1"),
                ],
                "must change",
            ),
        ] {
            let err = answer(&fields).unwrap_err();
            assert!(err.contains(why), "{fields:?}: {err}");
        }
    }
}
