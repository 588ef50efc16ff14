//! The report page.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::collect::ReportData;
use crate::svg::{Series, bar_chart, escape, line_chart};

const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:1000px;color:#222}\
h1{font-size:1.6em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}\
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}\
th:first-child,td:first-child{text-align:left}svg text{font-size:12px}.note{color:#a33}\
.muted{color:#777}";

/// Renders the report as one self-contained HTML page: a header, then one section each for
/// the funnel, families and levels, rollouts, metrics per level, tasks, the evaluator, the
/// teacher, selection and export.
pub fn render_html(data: &ReportData) -> String {
    let mut h = String::new();
    header(&mut h, data);
    funnel(&mut h, data);
    families_and_levels(&mut h, data);
    rollouts(&mut h, data);
    level_metrics(&mut h, data);
    tasks(&mut h, data);
    evaluator(&mut h, data);
    teacher(&mut h, data);
    selection(&mut h, data);
    exported(&mut h, data);
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

fn header(h: &mut String, data: &ReportData) {
    let _ = write!(
        h,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>ksmith report</title><style>{STYLE}</style></head><body><h1>ksmith report</h1><p class=\"muted\">work directory: {}</p>",
        escape(&data.workdir)
    );
    for note in &data.notes {
        let _ = write!(
            h,
            "<p class=\"note\">unreadable table: {}</p>",
            escape(note)
        );
    }
}

fn funnel(h: &mut String, data: &ReportData) {
    h.push_str("<h2>Funnel</h2>");
    let funnel: Vec<(String, f64)> = data
        .funnel
        .iter()
        .filter_map(|(name, n)| n.map(|n| (name.clone(), n as f64)))
        .collect();
    chart(h, "funnel", "Funnel", &funnel, "no stage has run yet");
    let not_run: Vec<&str> = data
        .funnel
        .iter()
        .filter(|(_, n)| n.is_none())
        .map(|(name, _)| name.as_str())
        .collect();
    if !not_run.is_empty() {
        let _ = write!(
            h,
            "<p class=\"muted\">not run yet: {}</p>",
            escape(&not_run.join(", "))
        );
    }
}

fn families_and_levels(h: &mut String, data: &ReportData) {
    h.push_str("<h2>Families and levels</h2>");
    let why = "cluster has not run (no clusters.parquet)";
    chart(
        h,
        "families",
        "Unique modules per family",
        &bars(&data.families, String::clone),
        why,
    );
    chart(
        h,
        "levels",
        "Unique modules per level",
        &bars(&data.levels, |k| format!("level {k}")),
        why,
    );
}

fn rollouts(h: &mut String, data: &ReportData) {
    h.push_str("<h2>Rollouts</h2>");
    if data.trajectories.is_empty() {
        h.push_str("<p class=\"muted empty\" id=\"best-so-far-empty\">No speedup charts: no rollout steps yet.</p>");
        return;
    }
    if !data.timed {
        h.push_str("<p class=\"muted empty\" id=\"best-so-far-empty\">No speedup charts: no step has a measured speedup (the evaluator ran without a GPU, in the Triton interpreter: correctness only).</p>");
        return;
    }
    let series: Vec<Series> = data
        .trajectories
        .iter()
        .map(|t| {
            (
                t.task_id.clone(),
                t.best_so_far
                    .iter()
                    .map(|(i, s)| (f64::from(*i), *s))
                    .collect(),
            )
        })
        .collect();
    h.push_str(&line_chart(
        "best-so-far",
        "Best-so-far speedup per task",
        "iteration",
        "best speedup over eager",
        &series,
    ));
    h.push_str(&line_chart(
        "best-so-far-mean",
        "Mean best-so-far speedup over tasks",
        "iteration",
        "mean best speedup",
        &[("mean".to_string(), aggregate(&series))],
    ));
}

fn level_metrics(h: &mut String, data: &ReportData) {
    h.push_str("<h2>Metrics per level</h2><table><tr><th>level</th><th>tasks</th><th>correctness</th><th>fast_1</th><th>avg speedup (sub-1x as 0)</th></tr>");
    for m in &data.level_metrics {
        let opt = |v: Option<f64>| v.map_or("not measured".to_string(), |v| format!("{v:.3}"));
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{:.3}</td><td>{}</td><td>{}</td></tr>",
            if m.level == 0 {
                "unknown".to_string()
            } else {
                m.level.to_string()
            },
            m.tasks,
            m.correctness,
            opt(m.fast_1),
            opt(m.avg_speedup)
        );
    }
    h.push_str("</table>");
}

/// One row per task: family, level, steps, correct steps, best speedup, hacks, how it ended.
fn tasks(h: &mut String, data: &ReportData) {
    h.push_str("<h2>Tasks</h2>");
    if data.tasks.is_empty() {
        h.push_str("<p class=\"muted empty\" id=\"tasks-empty\">No rollout steps yet.</p>");
        return;
    }
    h.push_str("<table id=\"tasks\"><tr><th>task</th><th>family</th><th>level</th><th>steps</th><th>correct steps</th><th>best speedup</th><th>hacks</th><th>rollout</th></tr>");
    for t in &data.tasks {
        let best = match (t.best_speedup, t.correct_steps) {
            (Some(s), _) => format!("{s:.2}x"),
            (None, 0) => "none correct".to_string(),
            (None, _) => "not measured".to_string(),
        };
        let ending = match &t.ending {
            Some(e) if t.reason.is_empty() => escape(e),
            Some(e) => format!("<span title=\"{}\">{}</span>", escape(&t.reason), escape(e)),
            None => "not recorded".to_string(),
        };
        let short: String = t.task_id.chars().take(8).collect();
        let _ = write!(
            h,
            "<tr class=\"task\"><td>{} <span class=\"muted\">{}</span></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{best}</td><td>{}</td><td>{ending}</td></tr>",
            escape(&t.name),
            escape(&short),
            escape(&t.family),
            if t.level == 0 {
                "?".to_string()
            } else {
                t.level.to_string()
            },
            t.steps,
            t.correct_steps,
            t.hacks,
        );
    }
    h.push_str("</table>");
    let stopped: Vec<_> = data
        .tasks
        .iter()
        .filter(|t| t.ending.as_deref().is_some_and(|e| e != "done"))
        .collect();
    if !stopped.is_empty() {
        h.push_str("<p id=\"aborted\">Tasks that did not finish in the last rollout (a rerun resumes them):</p><ul>");
        for t in stopped {
            // A traceback's last line says what went wrong; the whole text is one click away.
            let last = t
                .reason
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or_default()
                .trim();
            let _ = write!(
                h,
                "<li class=\"aborted\">{} {} ({}): {}",
                escape(&t.name),
                escape(&t.task_id),
                escape(t.ending.as_deref().unwrap_or_default()),
                escape(last)
            );
            if t.reason.trim() != last {
                let _ = write!(
                    h,
                    "<details><summary>details</summary><pre>{}</pre></details>",
                    escape(&t.reason)
                );
            }
            h.push_str("</li>");
        }
        h.push_str("</ul>");
    }
}

fn evaluator(h: &mut String, data: &ReportData) {
    h.push_str("<h2>Evaluator</h2>");
    chart(
        h,
        "statuses",
        "Steps per verdict",
        &bars(&data.statuses, String::clone),
        "no rollout steps yet",
    );
    let why = if data.statuses.is_empty() {
        "no rollout steps yet"
    } else {
        "no step was caught cheating"
    };
    chart(
        h,
        "hacks",
        "Hacked steps per kind",
        &bars(&data.hacks, String::clone),
        why,
    );
}

/// Tokens, and the teacher client's requests, cache hits, retries and failures over every
/// rollout process.
fn teacher(h: &mut String, data: &ReportData) {
    let (prompt, completion, cached) = data.tokens;
    let _ = write!(
        h,
        "<h2>Teacher</h2><table><tr><th>prompt tokens</th><th>completion tokens</th><th>steps answered from cache</th></tr><tr><td>{prompt}</td><td>{completion}</td><td>{cached}</td></tr></table>"
    );
    if data.teacher.is_empty() {
        return;
    }
    h.push_str(
        "<table id=\"teacher\"><tr><th>rollout counter (all processes)</th><th>value</th></tr>",
    );
    for (k, v) in &data.teacher {
        let _ = write!(h, "<tr><td>{}</td><td>{v}</td></tr>", escape(k));
    }
    h.push_str("</table>");
}

/// What select kept and why it dropped the rest (and what export's caps left out).
fn selection(h: &mut String, data: &ReportData) {
    h.push_str("<h2>Selection</h2>");
    if data.select_kept.is_empty() && data.select_drops.is_empty() {
        h.push_str("<p class=\"muted empty\">select has not run.</p>");
        return;
    }
    h.push_str("<table id=\"selected\"><tr><th>kept</th><th>samples</th></tr>");
    for (k, v) in &data.select_kept {
        let _ = write!(h, "<tr><td>{}</td><td>{v}</td></tr>", escape(k));
    }
    h.push_str("</table>");
    chart(
        h,
        "drops",
        "Steps not selected, by set and reason",
        &bars(&data.select_drops, String::clone),
        "nothing was dropped",
    );
}

/// The datasets written and those left out, with the reason.
fn exported(h: &mut String, data: &ReportData) {
    h.push_str("<h2>Datasets</h2>");
    if data.exported.is_empty() {
        h.push_str("<p class=\"muted empty\">export has not run.</p>");
        return;
    }
    h.push_str("<table id=\"datasets\"><tr><th>dataset</th><th>rows</th><th>longest prompt / sample (tokens)</th></tr>");
    for d in &data.exported {
        let rows = match &d.omitted {
            Some(why) => format!("left out: {}", escape(why)),
            None => d
                .splits
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", "),
        };
        let longest = d
            .longest
            .map_or(String::new(), |(p, t)| format!("{p} / {t}"));
        let _ = write!(
            h,
            "<tr class=\"dataset\"><td>{}</td><td>{rows}</td><td>{longest}</td></tr>",
            escape(&d.folder)
        );
    }
    h.push_str("</table>");
}

/// The mean over series at each x where at least one series has a value.
fn aggregate(series: &[Series]) -> Vec<(f64, Option<f64>)> {
    let mut sums: std::collections::BTreeMap<u64, (f64, u32)> = Default::default();
    for (_, pts) in series {
        for (x, y) in pts {
            if let Some(y) = y {
                let e = sums.entry(x.to_bits()).or_insert((0.0, 0));
                e.0 += y;
                e.1 += 1;
            }
        }
    }
    let mut out: Vec<(f64, Option<f64>)> = sums
        .into_iter()
        .map(|(x, (s, n))| (f64::from_bits(x), Some(s / f64::from(n))))
        .collect();
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}
