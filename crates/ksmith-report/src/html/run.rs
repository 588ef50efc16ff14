//! What the run made: the funnel with its losses, the families and levels, the tasks.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::{bars, chart};
use crate::collect::{ReportData, TaskSummary};
use crate::svg::escape;

/// Reasons shown per loss; the others are summed on one line.
const TOP_REASONS: usize = 5;

/// The funnel as a chart, per repository as a table, and why classes were lost at each step.
pub(super) fn funnel(h: &mut String, data: &ReportData) {
    let f = &data.funnel;
    h.push_str("<h2>Funnel</h2>");
    let ran: Vec<(String, f64)> = f
        .steps
        .iter()
        .filter_map(|s| s.total.map(|n| (s.name.to_string(), n as f64)))
        .collect();
    chart(
        h,
        "funnel",
        "From the classes found to the tasks",
        &ran,
        "extract has not run (no modules.parquet)",
    );
    let not_run: Vec<&str> = f
        .steps
        .iter()
        .filter(|s| s.total.is_none())
        .map(|s| s.name)
        .collect();
    if !not_run.is_empty() {
        let _ = write!(
            h,
            "<p class=\"muted\">not run yet: {}</p>",
            escape(&not_run.join(", "))
        );
    }
    if f.repos.is_empty() {
        return;
    }
    let steps: Vec<_> = f.steps.iter().filter(|s| s.total.is_some()).collect();
    h.push_str("<h3>Per repository</h3><table id=\"funnel-repos\"><tr><th>repository</th>");
    for s in &steps {
        let _ = write!(h, "<th>{}</th>", escape(s.name));
    }
    h.push_str("</tr>");
    for r in &f.repos {
        let _ = write!(h, "<tr class=\"repo\"><td>{}</td>", escape(&r.repo));
        match &r.refused {
            Some(why) => {
                let _ = write!(
                    h,
                    "<td class=\"text\" colspan=\"{}\">not accepted: {}</td>",
                    steps.len().max(1),
                    escape(why)
                );
            }
            None => {
                for s in &steps {
                    let _ = write!(h, "<td>{}</td>", s.per_repo.get(&r.repo).unwrap_or(&0));
                }
            }
        }
        h.push_str("</tr>");
    }
    h.push_str("<tr class=\"total\"><td>all</td>");
    for s in &steps {
        let _ = write!(h, "<td>{}</td>", s.total.unwrap_or(0));
    }
    h.push_str("</tr></table>");
    losses(h, data);
}

/// Per step: the classes that did not reach it, by reason, with one example each.
fn losses(h: &mut String, data: &ReportData) {
    let lossy: Vec<_> = data.funnel.losses.iter().filter(|l| l.lost > 0).collect();
    if lossy.is_empty() {
        return;
    }
    h.push_str("<h3>Where classes were lost</h3><table id=\"losses\"><tr><th>not reached</th><th class=\"text\">reason</th><th>classes</th><th class=\"text\">example</th></tr>");
    for loss in lossy {
        let shown = loss.reasons.iter().take(TOP_REASONS);
        for (i, r) in shown.enumerate() {
            let step = if i == 0 {
                format!("{} ({} lost)", loss.step, loss.lost)
            } else {
                String::new()
            };
            let _ = write!(
                h,
                "<tr class=\"loss\"><td>{}</td><td class=\"text\">{}</td><td>{}</td><td class=\"text\">{}</td></tr>",
                escape(&step),
                escape(&r.reason),
                r.count,
                escape(&r.example)
            );
        }
        let rest = &loss.reasons[loss.reasons.len().min(TOP_REASONS)..];
        if !rest.is_empty() {
            let _ = write!(
                h,
                "<tr><td></td><td class=\"text muted\">{} more reasons</td><td>{}</td><td></td></tr>",
                rest.len(),
                rest.iter().map(|r| r.count).sum::<u64>()
            );
        }
    }
    h.push_str("</table>");
}

/// The unique modules per family and per level (they add up to the funnel's "unique").
pub(super) fn families_and_levels(h: &mut String, data: &ReportData) {
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
        &bars(&data.levels, |k| {
            if *k == 0 {
                "unlabelled".to_string()
            } else {
                format!("level {k}")
            }
        }),
        why,
    );
}

/// One row per task: what it is, how large, where it came from; with its rollout once there is
/// one (and a row for a task the rollout names that `tasks.parquet` no longer holds).
pub(super) fn tasks(h: &mut String, data: &ReportData) {
    h.push_str("<h2>Tasks</h2>");
    if data.task_list.is_empty() && data.tasks.is_empty() {
        h.push_str("<p class=\"muted empty\" id=\"tasks-empty\">No tasks yet: cluster has not run (no tasks.parquet).</p>");
        return;
    }
    h.push_str("<table id=\"tasks\"><tr><th>task</th><th class=\"text\">family</th><th>level</th><th class=\"text\">sizes</th><th>est. time (H200 eager)</th><th class=\"text\">source</th>");
    if data.rollout_ran {
        h.push_str("<th>steps</th><th>correct steps</th><th>best speedup (over eager)</th><th>its speedup over torch.compile</th><th>its share of SOL</th><th>trivial steps</th><th class=\"text\">headroom</th><th>hacks</th><th class=\"text\">rollout</th>");
    }
    h.push_str("</tr>");
    let rollout: HashMap<&str, &TaskSummary> =
        data.tasks.iter().map(|t| (t.task_id.as_str(), t)).collect();
    for t in &data.task_list {
        let short: String = t.task_id.chars().take(8).collect();
        let source = match &t.href {
            Some(href) => format!("<a href=\"{}\">{}</a>", escape(href), escape(&t.source)),
            None => escape(&t.source),
        };
        let _ = write!(
            h,
            "<tr class=\"task\"><td>{} <span class=\"muted\">{}</span></td><td class=\"text\">{}</td><td>{}</td><td class=\"text\">{}</td><td>{}</td><td class=\"text\">{source}</td>",
            escape(&t.class_name),
            escape(&short),
            escape(&t.family),
            level(t.level),
            escape(&t.sizes),
            t.est_ms.map_or(String::new(), |ms| format!("{ms:.2} ms")),
        );
        if data.rollout_ran {
            rollout_cells(h, rollout.get(t.task_id.as_str()).copied());
        }
        h.push_str("</tr>");
    }
    let listed: std::collections::HashSet<&str> =
        data.task_list.iter().map(|t| t.task_id.as_str()).collect();
    for t in data
        .tasks
        .iter()
        .filter(|t| !listed.contains(t.task_id.as_str()))
    {
        let short: String = t.task_id.chars().take(8).collect();
        let _ = write!(
            h,
            "<tr class=\"task\"><td>{} <span class=\"muted\">{}</span></td><td class=\"text\">{}</td><td>{}</td><td></td><td></td><td class=\"text muted\">not in tasks.parquet</td>",
            escape(&t.name),
            escape(&short),
            escape(&t.family),
            level(t.level),
        );
        rollout_cells(h, Some(t));
        h.push_str("</tr>");
    }
    h.push_str("</table>");
}

fn level(level: u8) -> String {
    if level == 0 {
        "?".to_string()
    } else {
        level.to_string()
    }
}

/// A task's steps, correct steps, best speedup (over eager, over compile, its share of
/// speed-of-light), trivial steps, headroom, hacks and how its rollout ended.
fn rollout_cells(h: &mut String, t: Option<&TaskSummary>) {
    let Some(t) = t else {
        h.push_str(
            "<td>0</td><td>0</td><td></td><td></td><td></td><td></td><td></td><td>0</td><td class=\"text muted\">not started</td>",
        );
        return;
    };
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
    let over_compile = t
        .best_over_compile
        .map_or(String::new(), |s| format!("{s:.2}x"));
    let sol = t
        .best_sol_fraction
        .map_or(String::new(), |f| format!("{:.0} %", f * 100.0));
    let trivial = t.trivial.map_or(String::new(), |n| n.to_string());
    let _ = write!(
        h,
        "<td>{}</td><td>{}</td><td>{best}</td><td>{over_compile}</td><td>{sol}</td><td>{trivial}</td><td class=\"text\">{}</td><td>{}</td><td class=\"text\">{ending}</td>",
        t.steps,
        t.correct_steps,
        escape(&t.headroom),
        t.hacks
    );
}
