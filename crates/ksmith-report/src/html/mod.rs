//! The report page: what the run made (`run`: the funnel, families and levels, the tasks), then,
//! once the rollout has run, what it did (`rollout`).

mod rollout;
mod run;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::collect::ReportData;
use crate::svg::{bar_chart, escape};

const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:1250px;color:#222}\
h1{font-size:1.6em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}\
h3{font-size:1em;margin:1.2em 0 .4em}\
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}\
th:first-child,td:first-child{text-align:left}td.text,th.text{text-align:left}\
svg text{font-size:12px}.note{color:#a33}.muted{color:#777}tr.total td{font-weight:bold}";

/// Renders the report as one self-contained HTML page: a header; the funnel, families and
/// levels, and the tasks; then the rollout's sections (speedups, metrics per level, the
/// evaluator, the teacher, selection, datasets), or one line saying why it has not run.
pub fn render_html(data: &ReportData) -> String {
    let mut h = String::new();
    header(&mut h, data);
    run::funnel(&mut h, data);
    run::families_and_levels(&mut h, data);
    run::tasks(&mut h, data);
    if data.rollout_ran {
        rollout::outputs(&mut h, data);
        rollout::rollouts(&mut h, data);
        rollout::level_metrics(&mut h, data);
        rollout::stopped(&mut h, data);
        rollout::evaluator(&mut h, data);
        rollout::teacher(&mut h, data);
        rollout::selection(&mut h, data);
        rollout::exported(&mut h, data);
    } else {
        let why = data
            .rollout_skipped
            .as_deref()
            .unwrap_or("the rollout stage has not run yet");
        let _ = write!(
            h,
            "<h2>Rollouts</h2><p class=\"muted empty\" id=\"rollout-not-run\">No rollout yet \
             ({}): its speedups, verdicts, teacher use and datasets appear here once it has \
             run.</p>",
            escape(why)
        );
    }
    h.push_str("</body></html>\n");
    h
}

/// A bar chart of `items`, or, when there are none, one line saying what is missing and why.
fn chart(h: &mut String, id: &str, title: &str, items: &[(String, f64)], why_empty: &str) {
    if items.is_empty() {
        let _ = write!(
            h,
            "<p class=\"muted empty\" id=\"{id}-empty\">{}: {}</p>",
            escape(title),
            escape(why_empty)
        );
    } else {
        h.push_str(&bar_chart(id, title, items));
    }
}

/// Counts as chart bars, labelled with `label`.
fn bars<K>(counts: &BTreeMap<K, u64>, label: impl Fn(&K) -> String) -> Vec<(String, f64)> {
    counts.iter().map(|(k, v)| (label(k), *v as f64)).collect()
}

/// The title, the work directory, a one-line summary and the tables that could not be read.
fn header(h: &mut String, data: &ReportData) {
    let _ = write!(
        h,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>ksmith report</title><style>{STYLE}</style></head><body><h1>ksmith report</h1><p class=\"muted\">work directory: {}</p>",
        escape(&data.workdir)
    );
    let step = |name: &str| {
        data.funnel
            .steps
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| s.total)
    };
    let accepted = data
        .funnel
        .repos
        .iter()
        .filter(|r| r.refused.is_none())
        .count();
    if let (Some(classes), Some(tasks)) = (step("classes found"), step("tasks")) {
        let _ = write!(
            h,
            "<p id=\"summary\">{tasks} tasks from {classes} classes found in {accepted} \
             repositories.</p>"
        );
    }
    for note in &data.notes {
        let _ = write!(
            h,
            "<p class=\"note\">unreadable table: {}</p>",
            escape(note)
        );
    }
}
