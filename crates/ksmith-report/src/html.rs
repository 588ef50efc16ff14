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
/// the funnel, families and levels, rollouts, metrics per level, the evaluator and the teacher.
pub fn render_html(data: &ReportData) -> String {
    let mut h = String::new();
    header(&mut h, data);
    funnel(&mut h, data);
    families_and_levels(&mut h, data);
    rollouts(&mut h, data);
    level_metrics(&mut h, data);
    evaluator(&mut h, data);
    let (prompt, completion, cached) = data.tokens;
    let _ = write!(
        h,
        "<h2>Teacher</h2><table><tr><th>prompt tokens</th><th>completion tokens</th><th>steps answered from cache</th></tr><tr><td>{prompt}</td><td>{completion}</td><td>{cached}</td></tr></table>"
    );
    h.push_str("</body></html>\n");
    h
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
    h.push_str(&bar_chart("funnel", "Funnel", &funnel));
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
    h.push_str(&bar_chart(
        "families",
        "Unique modules per family",
        &bars(&data.families, String::clone),
    ));
    h.push_str(&bar_chart(
        "levels",
        "Unique modules per level",
        &bars(&data.levels, |k| format!("level {k}")),
    ));
}

fn rollouts(h: &mut String, data: &ReportData) {
    h.push_str("<h2>Rollouts</h2>");
    if !data.timed && !data.trajectories.is_empty() {
        h.push_str("<p class=\"muted\">No step has a measured speedup (the evaluator ran without a GPU, in the Triton interpreter): speedups are not measured, only correctness.</p>");
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

fn evaluator(h: &mut String, data: &ReportData) {
    h.push_str("<h2>Evaluator</h2>");
    h.push_str(&bar_chart(
        "statuses",
        "Steps per verdict",
        &bars(&data.statuses, String::clone),
    ));
    h.push_str(&bar_chart(
        "hacks",
        "Hacked steps per kind",
        &bars(&data.hacks, String::clone),
    ));
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
