//! Classes probed again with the configuration a model of their repository gives them.
//!
//! A class that its repository only builds inside another one (Swin's `PatchMerging`, built by
//! `BasicLayer` with a resolution computed from the patch embedding) gets guessed arguments and
//! guessed input shapes in its own program. When the whole model's program runs, the runner
//! records how the model built and first called each class the program defines
//! (`ProbeRow::submodules`, `observe.py`). [`plan`] finds, for each module, the first model
//! row of its repository that observed it, matched through that model's inlined definitions
//! (`ModuleRow::deps`, `path::name`), and [`adopt`] keeps the second probe's row when it runs.
//!
//! Invariants:
//! - A module is probed again at most once per row: the row that comes out says what happened,
//!   in its first repair step ([`STEP`]) when the observed configuration was kept, or in its
//!   attempt log ([`NOT_RUN`]) when it was not; a row that says either is not planned again
//!   (so reused and journaled rows are not probed a third time).
//! - A module never takes a configuration from its own row.
//! - A configuration that names a class or function of the model's program (`downsample=
//!   PatchMerging`) which the module's own program does not define is used with those
//!   arguments at their defaults (`SubmoduleConfig::init_without`), or not at all.

use std::collections::HashMap;

use ksmith_core::tables::{
    ModuleRow, ProbeRow, ProbeStatus, SizeReason, SizeStatus, SubmoduleConfig,
};

/// How a kept observed configuration's repair step begins.
pub const STEP: &str = "observed: ";
/// How the attempt-log line of an observed configuration that was not kept begins.
pub const NOT_RUN: &str = "observed configuration not kept: ";

/// One module to probe again.
#[derive(Debug, Clone, PartialEq)]
pub struct Reprobe {
    /// The module's index in the modules (and rows) given to [`plan`].
    pub index: usize,
    /// The override: `get_init_inputs()` and `get_inputs()` as the model gave them.
    pub config: String,
    /// What it is and where it came from, in words.
    pub step: String,
}

/// For the modules of `modules` (with `rows`, one for one), the ones to probe again, in order:
/// each with the configuration that the largest model observing its class gave it (the row
/// with the most `submodules`: the whole model rather than a block of it, whose own arguments
/// may be guesses; ties go to the first in module order). A model names a class through its
/// `deps` entry `path::Class` in the same repository; a name two of its entries share is not
/// matched.
pub fn plan(modules: &[&ModuleRow], rows: &[ProbeRow]) -> Vec<Reprobe> {
    let mut by_key: HashMap<(&str, &str, &str), usize> = HashMap::new();
    for (i, m) in modules.iter().enumerate() {
        by_key.insert((m.repo.as_str(), m.path.as_str(), m.class_name.as_str()), i);
    }
    // child index -> (parent's submodule count, parent index, the observation)
    let mut chosen: HashMap<usize, (usize, usize, &SubmoduleConfig)> = HashMap::new();
    for (p, (parent, row)) in modules.iter().zip(rows).enumerate() {
        for sub in &row.submodules {
            let Some(index) = dep_module(parent, sub, &by_key) else {
                continue;
            };
            if index == p || rows.get(index).is_some_and(already_tried) {
                continue;
            }
            let size = row.submodules.len();
            if chosen.get(&index).is_none_or(|&(best, _, _)| size > best) {
                chosen.insert(index, (size, p, sub));
            }
        }
    }
    let mut out: Vec<Reprobe> = chosen
        .into_iter()
        .filter_map(|(index, (_, p, sub))| {
            let parent = modules[p];
            let program = modules[index].program.as_deref().unwrap_or_default();
            let missing: Vec<&str> = sub
                .needs
                .iter()
                .map(String::as_str)
                .filter(|n| !defines(program, n))
                .collect();
            let (init, without) = if missing.is_empty() {
                (sub.init.as_str(), String::new())
            } else {
                let init = sub.init_without.as_deref()?;
                (init, format!(" (without {})", missing.join(", ")))
            };
            Some(Reprobe {
                index,
                config: format!("{}\n\n{}", init.trim_end(), sub.inputs.trim_end()),
                step: format!(
                    "{STEP}{}{without} in {} ({}:{})",
                    sub.summary, parent.class_name, parent.path, parent.line
                ),
            })
        })
        .collect();
    out.sort_by_key(|r| r.index);
    out
}

/// Whether a program defines `name` at its top level (a class, a function or an assignment).
fn defines(program: &str, name: &str) -> bool {
    program.lines().any(|line| {
        let rest = line
            .strip_prefix("class ")
            .or_else(|| line.strip_prefix("def "))
            .unwrap_or(line);
        rest.strip_prefix(name).is_some_and(|after| {
            let after = after.trim_start();
            after.starts_with('(') || after.starts_with(':') || after.starts_with('=')
        })
    })
}

/// The module a model's observed class is: its one `deps` entry of that name, in the model's
/// repository.
fn dep_module(
    parent: &ModuleRow,
    sub: &SubmoduleConfig,
    by_key: &HashMap<(&str, &str, &str), usize>,
) -> Option<usize> {
    let mut paths = parent.deps.iter().filter_map(|d| {
        let (path, name) = d.rsplit_once("::")?;
        (name == sub.class_name).then_some(path)
    });
    let path = paths.next()?;
    if paths.next().is_some() {
        return None;
    }
    by_key
        .get(&(parent.repo.as_str(), path, sub.class_name.as_str()))
        .copied()
}

/// Whether a row already says how its observed configuration went.
fn already_tried(row: &ProbeRow) -> bool {
    adopted(row) || row.attempt_log.iter().any(|l| l.starts_with(NOT_RUN))
}

/// Whether a row is the one an observed configuration gave.
pub fn adopted(row: &ProbeRow) -> bool {
    row.repair_steps
        .first()
        .is_some_and(|s| s.starts_with(STEP))
}

/// The module's row once its observed configuration ran as `second`: `second` when it is `ok`
/// and sized at least as well as `first` (`sized` before any other size status), or `too_small`
/// (at the sizes its repository builds it with, the class does no GPU-meaningful work: the
/// first row's sizes grew from guesses), with the observation as its first repair step; else
/// `first` with a line in its attempt log saying why it was not kept. Attempts and CPU time add
/// up either way.
pub fn adopt(first: &ProbeRow, mut second: ProbeRow, r: &Reprobe) -> ProbeRow {
    let attempts = first.attempts + second.attempts;
    let cpu_time_ms = first.cpu_time_ms + second.cpu_time_ms;
    let sized = |row: &ProbeRow| row.size_status == Some(SizeStatus::Sized);
    let too_small = second.size_reason_code == Some(SizeReason::TooSmall);
    let better = second.status == ProbeStatus::Ok
        && (first.status != ProbeStatus::Ok || sized(&second) || !sized(first) || too_small);
    if better {
        second.repair_steps.insert(0, r.step.clone());
        second.attempts = attempts;
        second.cpu_time_ms = cpu_time_ms;
        return second;
    }
    let why = if second.status == ProbeStatus::Ok {
        format!(
            "sized {}",
            second.size_status.map(|s| s.as_str()).unwrap_or("none")
        )
    } else {
        format!(
            "{}: {}",
            second.status.as_str(),
            second.error_message.as_deref().unwrap_or("")
        )
    };
    let mut kept = first.clone();
    kept.attempts = attempts;
    kept.cpu_time_ms = cpu_time_ms;
    let step = r.step.strip_prefix(STEP).unwrap_or(&r.step);
    kept.attempt_log.push(format!("{NOT_RUN}{step} ({why})"));
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksmith_core::tables::ModuleStatus;

    fn module(id: &str, class: &str, deps: &[&str]) -> ModuleRow {
        ModuleRow {
            id: id.into(),
            repo: "r".into(),
            commit: "c".into(),
            path: "models/net.py".into(),
            class_name: class.into(),
            line: 10,
            status: ModuleStatus::Ok,
            reason: None,
            reason_code: None,
            program: Some("class Model: pass".into()),
            deps: deps.iter().map(|d| d.to_string()).collect(),
            imports: Vec::new(),
            lines: 1,
            license: None,
            stars: None,
            arg_sources: Vec::new(),
        }
    }

    fn row(m: &ModuleRow, status: ProbeStatus, subs: &[&str]) -> ProbeRow {
        let mut r = ProbeRow::empty(&m.id, &m.repo, &m.class_name, status);
        r.submodules = subs
            .iter()
            .map(|c| SubmoduleConfig {
                class_name: c.to_string(),
                init: "def get_init_inputs():\n    return [(56, 56), 96]\n".into(),
                inputs: "def get_inputs():\n    return [torch.rand([4, 3136, 96])]\n".into(),
                summary: format!("{c}((56, 56), 96)"),
                needs: Vec::new(),
                init_without: None,
            })
            .collect();
        r
    }

    #[test]
    fn a_class_a_model_built_is_planned_with_that_models_configuration() {
        let child = module("a", "PatchMerging", &[]);
        let lib = module("b", "Unrelated", &[]);
        let model = module(
            "m",
            "Swin",
            &[
                "models/net.py::PatchMerging",
                "timm==1:timm/drop.py::DropPath",
            ],
        );
        let mods = [&child, &lib, &model];
        let rows = [
            row(&child, ProbeStatus::Ok, &[]),
            row(&lib, ProbeStatus::Failed, &[]),
            row(
                &model,
                ProbeStatus::Degenerate,
                &["PatchMerging", "DropPath"],
            ),
        ];
        let plan = plan(&mods, &rows);
        assert_eq!(plan.len(), 1, "{plan:?}");
        assert_eq!(plan[0].index, 0);
        assert!(plan[0].config.contains("return [(56, 56), 96]"));
        assert!(plan[0].config.contains("def get_inputs():"));
        assert_eq!(
            plan[0].step,
            "observed: PatchMerging((56, 56), 96) in Swin (models/net.py:10)"
        );
    }

    #[test]
    fn the_largest_model_observing_a_class_gives_its_configuration() {
        let child = module("a", "Mlp", &[]);
        let block = module("b", "Block", &["models/net.py::Mlp"]);
        let model = module("m", "Swin", &["models/net.py::Block", "models/net.py::Mlp"]);
        let mods = [&child, &block, &model];
        let mut rows = [
            row(&child, ProbeStatus::Ok, &[]),
            row(&block, ProbeStatus::Ok, &["Mlp"]),
            row(&model, ProbeStatus::Ok, &["Block", "Mlp"]),
        ];
        rows[1].submodules[0].summary = "Mlp(4, 16)".into();
        let plan = plan(&mods, &rows);
        assert_eq!(plan.iter().map(|r| r.index).collect::<Vec<_>>(), [0, 1]);
        assert!(
            plan[0].step.ends_with(" in Swin (models/net.py:10)"),
            "{}",
            plan[0].step
        );
    }

    #[test]
    fn a_configuration_naming_what_the_class_lacks_goes_without_it_or_not_at_all() {
        let mut child = module("a", "BasicLayer", &[]);
        child.program =
            Some("class Model(nn.Module):\n    pass\n\n\ndef window(x):\n    return x\n".into());
        let model = module("m", "Swin", &["models/net.py::BasicLayer"]);
        let mods = [&child, &model];
        let mut rows = [
            row(&child, ProbeStatus::Ok, &[]),
            row(&model, ProbeStatus::Ok, &["BasicLayer"]),
        ];
        rows[1].submodules[0].init =
            "def get_init_inputs():\n    return [96, PatchMerging, window]\n".into();
        rows[1].submodules[0].needs = vec!["PatchMerging".into(), "window".into()];
        rows[1].submodules[0].init_without =
            Some("def get_init_inputs():\n    return [96]\n".into());
        let plan_with = plan(&mods, &rows);
        assert!(
            plan_with[0]
                .config
                .starts_with("def get_init_inputs():\n    return [96]\n")
        );
        assert!(
            plan_with[0].step.contains("(without PatchMerging) in Swin"),
            "{}",
            plan_with[0].step
        );

        child.program =
            Some("class PatchMerging(nn.Module):\n    pass\n\ndef window(x):\n    pass\n".into());
        let mods = [&child, &model];
        let plan_all = plan(&mods, &rows);
        assert!(
            plan_all[0]
                .config
                .contains("return [96, PatchMerging, window]")
        );

        child.program = Some("class Model:\n    pass\n".into());
        rows[1].submodules[0].init_without = None;
        let mods = [&child, &model];
        assert!(plan(&mods, &rows).is_empty());
    }

    #[test]
    fn ambiguous_names_own_rows_and_rows_already_tried_are_not_planned() {
        let child = module("a", "Block", &["models/net.py::Block"]);
        let twice = module(
            "m",
            "Net",
            &["models/net.py::Block", "models/other.py::Block"],
        );
        let mods = [&child, &twice];
        let rows = [
            row(&child, ProbeStatus::Ok, &["Block"]),
            row(&twice, ProbeStatus::Ok, &["Block"]),
        ];
        assert!(plan(&mods, &rows).is_empty());

        let model = module("n", "Net", &["models/net.py::Block"]);
        let mods = [&child, &model];
        let mut tried = row(&child, ProbeStatus::Ok, &[]);
        tried
            .attempt_log
            .push(format!("{NOT_RUN}Block(4) in Net (failed: x)"));
        let rows = [tried, row(&model, ProbeStatus::Ok, &["Block"])];
        assert!(plan(&mods, &rows).is_empty());
    }

    #[test]
    fn an_observed_row_is_kept_only_when_it_runs_and_sizes_as_well() {
        let m = module("a", "PatchMerging", &[]);
        let r = Reprobe {
            index: 0,
            config: String::new(),
            step: format!("{STEP}PatchMerging((56, 56), 96) in Swin (models/net.py:10)"),
        };
        let mut first = row(&m, ProbeStatus::Ok, &[]);
        first.size_status = Some(SizeStatus::Sized);
        first.attempts = 3;
        let mut second = row(&m, ProbeStatus::Ok, &[]);
        second.size_status = Some(SizeStatus::Sized);
        second.attempts = 2;
        second.repair_steps = vec!["input0: rank 3 -> 2".into()];
        let kept = adopt(&first, second.clone(), &r);
        assert!(adopted(&kept));
        assert_eq!(kept.repair_steps[1], "input0: rank 3 -> 2");
        assert_eq!(kept.attempts, 5);

        second.size_status = Some(SizeStatus::BelowTarget);
        let not = adopt(&first, second.clone(), &r);
        assert!(!adopted(&not));
        assert_eq!(not.attempts, 5);
        assert!(
            not.attempt_log[0].starts_with(NOT_RUN),
            "{:?}",
            not.attempt_log
        );
        assert!(not.attempt_log[0].ends_with("(sized below_target)"));

        // too small at the model's sizes: the first row grew guessed widths, the class is no task
        second.size_status = Some(SizeStatus::Unsizable);
        second.size_reason_code = Some(SizeReason::TooSmall);
        let small = adopt(&first, second.clone(), &r);
        assert!(adopted(&small));
        assert_eq!(small.size_reason_code, Some(SizeReason::TooSmall));
        second.size_reason_code = Some(SizeReason::Timeout);
        assert!(!adopted(&adopt(&first, second.clone(), &r)));

        second.status = ProbeStatus::Failed;
        second.error_message = Some("forward: shape mismatch".into());
        let failed_first = row(&m, ProbeStatus::Failed, &[]);
        let still = adopt(&failed_first, second, &r);
        assert_eq!(still.status, ProbeStatus::Failed);
        assert!(still.attempt_log[0].contains("failed: forward: shape mismatch"));
    }
}
