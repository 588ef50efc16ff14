//! What the rollout did, once it has run: what it made, speedups, metrics per level, the
//! tasks that did not finish, the evaluator's verdicts, the teacher's use, selection, datasets.

use std::fmt::Write as _;

use super::{bars, chart};
use crate::collect::ReportData;
use crate::svg::{Series, escape, line_chart};

/// Steps, correct steps and the samples select kept.
pub(super) fn outputs(h: &mut String, data: &ReportData) {
    h.push_str("<h2>Rollouts</h2><table id=\"outputs\">");
    for (name, n) in &data.outputs {
        let n = n.map_or_else(|| "not run".to_string(), |n| n.to_string());
        let _ = write!(h, "<tr><td>{}</td><td>{n}</td></tr>", escape(name));
    }
    h.push_str("</table>");
}

pub(super) fn rollouts(h: &mut String, data: &ReportData) {
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

/// The paper's metrics per difficulty level.
pub(super) fn level_metrics(h: &mut String, data: &ReportData) {
    h.push_str("<h2>Metrics per level</h2>");
    if data.level_metrics.is_empty() {
        h.push_str(
            "<p class=\"muted empty\" id=\"levels-metrics-empty\">No task has a step yet.</p>",
        );
        return;
    }
    h.push_str("<table id=\"level-metrics\"><tr><th>level</th><th>tasks</th><th>correctness</th><th>fast_1</th><th>avg speedup (sub-1x as 0)</th></tr>");
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

/// The tasks whose rollout did not finish in the last process, with the last line of why.
pub(super) fn stopped(h: &mut String, data: &ReportData) {
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

/// Steps per verdict and hacked steps per kind.
pub(super) fn evaluator(h: &mut String, data: &ReportData) {
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
pub(super) fn teacher(h: &mut String, data: &ReportData) {
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
pub(super) fn selection(h: &mut String, data: &ReportData) {
    h.push_str("<h2>Selection</h2>");
    if !data.select_ran {
        h.push_str("<p class=\"muted empty\">select has not run.</p>");
        return;
    }
    if data.select_kept.is_empty() {
        h.push_str("<p class=\"muted empty\" id=\"selected-empty\">select kept no sample.</p>");
    } else {
        h.push_str("<table id=\"selected\"><tr><th>kept</th><th>samples</th></tr>");
        for (k, v) in &data.select_kept {
            let _ = write!(h, "<tr><td>{}</td><td>{v}</td></tr>", escape(k));
        }
        h.push_str("</table>");
    }
    chart(
        h,
        "drops",
        "Steps not selected, by set and reason",
        &bars(&data.select_drops, String::clone),
        "nothing was dropped",
    );
}

/// The datasets written and those left out, with the reason.
pub(super) fn exported(h: &mut String, data: &ReportData) {
    h.push_str("<h2>Datasets</h2>");
    if data.exported.is_empty() {
        h.push_str("<p class=\"muted empty\">export has not run.</p>");
        return;
    }
    h.push_str("<table id=\"datasets\"><tr><th>dataset</th><th class=\"text\">rows</th><th>longest prompt / sample (tokens)</th></tr>");
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
            "<tr class=\"dataset\"><td>{}</td><td class=\"text\">{rows}</td><td>{longest}</td></tr>",
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
