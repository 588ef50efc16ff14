//! The review page: one section per cluster center with its program, labels and cluster size,
//! and a form to accept, reject or relabel it with a note. No script and nothing loaded from
//! outside the page.

use std::fmt::Write as _;

use ksmith_core::tables::ReviewVerdict;
use ksmith_core::vocabulary::Vocabulary;

use ksmith_report::escape;

use crate::centers::{Catalog, Center};

const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:1100px;color:#222}\
section{border:1px solid #ccc;border-radius:6px;padding:0.5em 1em;margin:1em 0}\
section.reviewed{border-color:#5a5}pre{background:#f6f6f6;padding:0.5em;overflow:auto;max-height:30em}\
.saved{color:#262}.muted{color:#777}label{margin-right:1em}textarea{width:100%;height:3em}\
.error{color:#a33}";

/// The whole page; `token` goes into every form (the server refuses forms without it).
pub fn render(catalog: &Catalog, workdir: &str, token: &str) -> String {
    let reviewed = catalog.centers.iter().filter(|c| c.saved.is_some()).count();
    let mut h = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>ksmith review</title>\
         <style>{STYLE}</style></head><body><h1>Review of cluster centers</h1>\
         <p class=\"muted\">work directory: {}</p><p id=\"progress\">{reviewed} of {} centers reviewed. \
         Rejected centers are not tasks; a relabel replaces the rules' family and level when \
         cluster runs next (answers go to annotations.parquet).</p><datalist id=\"families\">",
        escape(workdir),
        catalog.centers.len()
    );
    for f in &catalog.families {
        let _ = write!(h, "<option value=\"{}\">", escape(f));
    }
    h.push_str("</datalist>");
    if catalog.centers.is_empty() {
        h.push_str("<p id=\"empty\">No cluster centers: cluster found no clusters.</p>");
    }
    for c in &catalog.centers {
        center(&mut h, c, token);
    }
    h.push_str("</body></html>\n");
    h
}

fn center(h: &mut String, c: &Center, token: &str) {
    let id = escape(&c.module_id);
    let _ = write!(
        h,
        "<section class=\"center{}\" id=\"c-{id}\" data-module=\"{id}\"><h2>{} <span class=\"muted\">{}</span></h2>\
         <p>family <b class=\"family\">{}</b> <span class=\"muted\">({})</span>, level <b class=\"level\">{}</b>, \
         cluster {} with <b class=\"size\">{}</b> module(s)</p>",
        if c.saved.is_some() { " reviewed" } else { "" },
        escape(&c.class_name),
        escape(&c.repo),
        escape(&c.family),
        escape(&c.family_rule),
        c.level,
        c.cluster,
        c.cluster_size
    );
    let (verdict, family, level, note) = match &c.saved {
        Some(a) => {
            let _ = write!(
                h,
                "<p class=\"saved\">saved: <b class=\"verdict\">{}</b>{}{} <span class=\"muted\">({})</span></p>",
                a.verdict,
                a.family
                    .as_deref()
                    .filter(|_| a.verdict == ReviewVerdict::Relabel)
                    .map(|f| format!(", family {}", escape(f)))
                    .unwrap_or_default(),
                a.level
                    .filter(|_| a.verdict == ReviewVerdict::Relabel)
                    .map(|l| format!(", level {l}"))
                    .unwrap_or_default(),
                escape(&a.reviewed_at)
            );
            (
                Some(a.verdict),
                a.family.clone().unwrap_or_else(|| c.family.clone()),
                a.level.unwrap_or(c.level),
                a.note.clone(),
            )
        }
        None => (None, c.family.clone(), c.level, String::new()),
    };
    let _ = write!(
        h,
        "<details><summary>program ({} lines)</summary><pre>{}</pre></details>\
         <form method=\"post\" action=\"/annotate\"><input type=\"hidden\" name=\"token\" value=\"{}\">\
         <input type=\"hidden\" name=\"module_id\" value=\"{id}\">",
        c.program.lines().count(),
        escape(&c.program),
        escape(token)
    );
    for v in ReviewVerdict::ALL {
        let _ = write!(
            h,
            "<label><input type=\"radio\" name=\"verdict\" value=\"{v}\" required{}> {v}</label>",
            if verdict == Some(*v) { " checked" } else { "" }
        );
    }
    let _ = write!(
        h,
        "<label>family <input name=\"family\" list=\"families\" value=\"{}\"></label><label>level <select name=\"level\">",
        escape(&family)
    );
    for l in 1..=3u8 {
        let _ = write!(
            h,
            "<option value=\"{l}\"{}>{l}</option>",
            if l == level { " selected" } else { "" }
        );
    }
    let _ = write!(
        h,
        "</select></label><label>note <textarea name=\"note\">{}</textarea></label>\
         <button type=\"submit\">Save</button></form></section>",
        escape(&note)
    );
}

/// A short page for a refused request.
pub fn error(message: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>ksmith review</title></head>\
         <body><p class=\"error\">{}</p><p><a href=\"/\">back to the review</a></p></body></html>\n",
        escape(message)
    )
}
