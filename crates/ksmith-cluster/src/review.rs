//! An expert's review of cluster centers (`annotations.parquet`, written by `ksmith review`)
//! applied to the task selection: a rejected module is never a task, and a relabel replaces the
//! family and level the rules gave (in `clusters.parquet` too, with the rule named
//! `expert review`).

use std::collections::HashMap;

use ksmith_core::report::StageReport;
use ksmith_core::tables::{AnnotationRow, ClusterRow, ReviewVerdict};

/// The rule name of a label an expert set.
pub const EXPERT_RULE: &str = "expert review";

/// The latest annotation of each module.
#[derive(Debug, Clone, Default)]
pub struct Review {
    by_module: HashMap<String, AnnotationRow>,
}

impl Review {
    /// The review in `rows` (the last row of a module wins).
    pub fn new(rows: Vec<AnnotationRow>) -> Self {
        Review {
            by_module: rows.into_iter().map(|r| (r.module_id.clone(), r)).collect(),
        }
    }

    /// True when the expert rejected `module_id`.
    pub fn rejects(&self, module_id: &str) -> bool {
        self.by_module
            .get(module_id)
            .is_some_and(|a| a.verdict == ReviewVerdict::Reject)
    }

    /// Applies the relabels to `rows` and counts the review in `report` (`review_<verdict>`,
    /// and `review_unknown_module` for annotations of modules not clustered any more).
    pub fn apply(&self, rows: &mut [ClusterRow], report: &mut StageReport) {
        let mut seen = 0;
        for row in rows.iter_mut() {
            let Some(a) = self.by_module.get(&row.module_id) else {
                continue;
            };
            seen += 1;
            report.count(&format!("review_{}", a.verdict), 1);
            if a.verdict != ReviewVerdict::Relabel {
                continue;
            }
            if let Some(family) = a.family.as_ref().filter(|f| !f.trim().is_empty()) {
                row.family = family.trim().to_string();
                row.family_rule = EXPERT_RULE.to_string();
            }
            if let Some(level) = a.level {
                row.level = level;
                row.level_rule = EXPERT_RULE.to_string();
            }
        }
        report.count(
            "review_unknown_module",
            (self.by_module.len() - seen) as u64,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotation(id: &str, verdict: ReviewVerdict) -> AnnotationRow {
        AnnotationRow {
            module_id: id.into(),
            verdict,
            family: Some("attention".into()),
            level: Some(3),
            note: String::new(),
            rule_family: "linear".into(),
            rule_level: 1,
            cluster: 0,
            reviewed_at: "2026-11-24T00:00:00Z".into(),
        }
    }

    fn row(id: &str) -> ClusterRow {
        ClusterRow {
            module_id: id.into(),
            cluster: 0,
            is_center: true,
            family: "linear".into(),
            family_rule: "ops".into(),
            level: 1,
            level_rule: "ops".into(),
            trivial: None,
        }
    }

    #[test]
    fn relabels_replace_the_rules_and_the_latest_answer_wins() {
        let review = Review::new(vec![
            annotation("a", ReviewVerdict::Reject),
            annotation("a", ReviewVerdict::Relabel),
            annotation("b", ReviewVerdict::Accept),
            annotation("c", ReviewVerdict::Reject),
            annotation("gone", ReviewVerdict::Accept),
        ]);
        let mut rows = vec![row("a"), row("b"), row("c"), row("d")];
        let mut report = StageReport::new("cluster");
        review.apply(&mut rows, &mut report);
        assert_eq!((rows[0].family.as_str(), rows[0].level), ("attention", 3));
        assert_eq!(rows[0].family_rule, EXPERT_RULE);
        assert_eq!(
            (rows[1].family.as_str(), rows[1].level),
            ("linear", 1),
            "accepted as is"
        );
        assert!(!review.rejects("a") && review.rejects("c") && !review.rejects("d"));
        assert_eq!(report.counters["review_relabel"], 1);
        assert_eq!(report.counters["review_reject"], 1);
        assert_eq!(report.counters["review_unknown_module"], 1);
    }
}
