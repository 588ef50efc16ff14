//! Inline SVG plots: horizontal bar charts and line charts, no scripts, no external resources.

use std::fmt::Write as _;

/// A named line of `(x, y)` points; `y` is `None` where the series has no value.
pub(crate) type Series = (String, Vec<(f64, Option<f64>)>);

/// Escapes text for HTML and SVG (also the review page's).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

const PALETTE: &[&str] = &[
    "#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d",
    "#bab0ac", "#eeca3b",
];

/// A horizontal bar chart of `(label, value)`; `id` names the plot for tests and links. The
/// page shows a line instead of a chart without items (`html::chart`).
pub(crate) fn bar_chart(id: &str, title: &str, items: &[(String, f64)]) -> String {
    let row_h = 22.0;
    let label_w = 220.0;
    let bar_w = 420.0;
    let height = 30.0 + row_h * items.len().max(1) as f64;
    let max = items
        .iter()
        .map(|(_, v)| *v)
        .fold(0.0_f64, f64::max)
        .max(1e-12);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="plot" id="{id}" role="img" aria-label="{t}" width="{w}" height="{height}" viewBox="0 0 {w} {height}" xmlns="http://www.w3.org/2000/svg"><title>{t}</title>"#,
        t = escape(title),
        w = label_w + bar_w + 80.0
    );
    for (i, (label, value)) in items.iter().enumerate() {
        let y = 10.0 + row_h * i as f64;
        let w = (value / max * bar_w).max(0.0);
        let _ = write!(
            s,
            r#"<text x="{lx}" y="{ty}" text-anchor="end">{l}</text><rect class="bar" x="{label_w}" y="{y}" width="{w:.1}" height="{h}" fill="{c}"/><text x="{vx:.1}" y="{ty}">{v}</text>"#,
            lx = label_w - 6.0,
            ty = y + 15.0,
            l = escape(label),
            h = row_h - 6.0,
            c = PALETTE[i % PALETTE.len()],
            vx = label_w + w + 4.0,
            v = format_value(*value),
        );
    }
    s.push_str("</svg>");
    s
}

fn format_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v:.3}")
    }
}

/// A line chart of several series of `(x, y)` points (gaps where `y` is `None`).
pub(crate) fn line_chart(
    id: &str,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> String {
    let (w, h, left, bottom, top, right) = (640.0, 300.0, 56.0, 40.0, 16.0, 16.0);
    let points = series.iter().flat_map(|(_, p)| p.iter());
    let (mut x_max, mut y_max) = (1.0_f64, 1.0_f64);
    for (x, y) in points {
        x_max = x_max.max(*x);
        if let Some(y) = y {
            y_max = y_max.max(*y);
        }
    }
    let sx = |x: f64| left + x / x_max * (w - left - right);
    let sy = |y: f64| h - bottom - y / y_max * (h - bottom - top);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg class="plot" id="{id}" role="img" aria-label="{t}" width="{w}" height="{h}" viewBox="0 0 {w} {h}" xmlns="http://www.w3.org/2000/svg"><title>{t}</title>"#,
        t = escape(title)
    );
    let _ = write!(
        s,
        r##"<line x1="{left}" y1="{b}" x2="{r}" y2="{b}" stroke="#333"/><line x1="{left}" y1="{top}" x2="{left}" y2="{b}" stroke="#333"/><text x="{cx}" y="{lx}" text-anchor="middle">{xl}</text><text x="12" y="{cy}" transform="rotate(-90 12 {cy})" text-anchor="middle">{yl}</text><text x="{left}" y="{ty}" text-anchor="middle">0</text><text x="{r}" y="{ty}" text-anchor="middle">{xm}</text><text x="{yx}" y="{top2}" text-anchor="end">{ym:.2}</text>"##,
        b = h - bottom,
        r = w - right,
        cx = (w + left) / 2.0,
        lx = h - 6.0,
        xl = escape(x_label),
        cy = h / 2.0,
        yl = escape(y_label),
        ty = h - bottom + 14.0,
        xm = x_max,
        yx = left - 4.0,
        top2 = top + 4.0,
        ym = y_max,
    );
    if y_max > 1.0 {
        let _ = write!(
            s,
            r##"<line class="eager" x1="{left}" y1="{y}" x2="{r}" y2="{y}" stroke="#999" stroke-dasharray="4 3"/>"##,
            y = sy(1.0),
            r = w - right
        );
    }
    for (i, (name, pts)) in series.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let mut path = String::new();
        let mut pen_down = false;
        for (x, y) in pts {
            match y {
                Some(y) => {
                    let _ = write!(
                        path,
                        "{}{:.1},{:.1} ",
                        if pen_down { "L" } else { "M" },
                        sx(*x),
                        sy(*y)
                    );
                    pen_down = true;
                }
                None => pen_down = false,
            }
        }
        if !path.is_empty() {
            let _ = write!(
                s,
                r#"<path class="series" d="{}" fill="none" stroke="{colour}" stroke-width="2"><title>{}</title></path>"#,
                path.trim_end(),
                escape(name)
            );
        }
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bar_chart_escapes_and_scales() {
        let svg = bar_chart(
            "b",
            "t<1>",
            &[("a&b".to_string(), 2.0), ("c".to_string(), 1.0)],
        );
        assert!(svg.contains("a&amp;b"));
        assert!(svg.contains("t&lt;1&gt;"));
        assert_eq!(svg.matches("class=\"bar\"").count(), 2);
        assert!(
            svg.contains("width=\"420.0\""),
            "largest bar spans the axis: {svg}"
        );
        assert!(
            svg.contains("width=\"210.0\""),
            "half value, half width: {svg}"
        );
    }

    #[test]
    fn line_chart_breaks_at_missing_points() {
        let svg = line_chart(
            "l",
            "t",
            "x",
            "y",
            &[(
                "s".to_string(),
                vec![
                    (0.0, Some(1.0)),
                    (1.0, None),
                    (2.0, Some(2.0)),
                    (3.0, Some(3.0)),
                ],
            )],
        );
        let d = svg
            .split(" d=\"")
            .nth(1)
            .expect("a path")
            .split('"')
            .next()
            .expect("d");
        assert_eq!(d.matches('M').count(), 2, "{d}");
        assert_eq!(d.matches('L').count(), 1, "{d}");
    }
}
