//! Prompt templates and prompt building with a token budget.
//!
//! Templates are Markdown files with `{placeholders}`: `system.md`, `translate.md` (first step,
//! PyTorch to the backend's kernels), `improve.md` (correct parent) and `repair.md` (failing
//! parent), one set per backend (each states its rules): Triton's in `configs/prompts/`, CUDA's
//! in `configs/prompts/cuda/`. Defaults are embedded; a folder given by `prompts_dir` overrides any
//! of them (Triton's files in it, CUDA's in its `cuda/` folder). Every placeholder is checked when
//! templates are loaded.
//!
//! The budget is counted with [`ksmith_core::tokens`] (characters / 4 and 4 per message, the
//! counter select applies to the same prompts). When a prompt is over budget, history is trimmed before code: oldest ancestors first,
//! then older attempts (the latest attempt always stays), then diverse programs, then top
//! programs, then the error log is shortened. The reference and the current program are never cut.

use std::fmt::Write as _;
use std::path::Path;

use ksmith_core::evaluation::Backend;
use ksmith_core::evolve_block::split_block;
use ksmith_core::tables::{EditOutcome, StepKind};
use ksmith_core::tokens::approx_message_tokens;

use crate::archive::{Archive, Attempt, Program};
use crate::config::RolloutConfig;
use crate::error::Error;
use crate::select::Plan;

const SLOTS: &[&str] = &[
    "reference",
    "program",
    "metrics",
    "goal",
    "error_log",
    "lineage",
    "recent",
    "top_programs",
    "diverse_programs",
];

#[derive(Debug, Clone, PartialEq)]
enum Segment {
    Text(String),
    Slot(usize),
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    segments: Vec<Segment>,
}

impl Template {
    /// Parses `text`; `{name}` with a known name is a slot, a `{word}` with an unknown name is an
    /// error, any other brace is literal. `required` slots must appear.
    pub fn parse(name: &str, origin: &str, text: &str, required: &[&str]) -> Result<Self, Error> {
        let err = |message: String| Error::Template {
            name: name.to_string(),
            origin: origin.to_string(),
            message,
        };
        let mut segments = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            literal.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            let close = after.find('}');
            let word = close.map(|c| &after[..c]);
            match word {
                Some(w)
                    if !w.is_empty() && w.chars().all(|c| c.is_ascii_lowercase() || c == '_') =>
                {
                    let Some(slot) = SLOTS.iter().position(|s| *s == w) else {
                        return Err(err(format!(
                            "unknown placeholder {{{w}}}; known: {}",
                            SLOTS.join(", ")
                        )));
                    };
                    if !literal.is_empty() {
                        segments.push(Segment::Text(std::mem::take(&mut literal)));
                    }
                    segments.push(Segment::Slot(slot));
                    rest = &after[w.len() + 1..];
                }
                _ => {
                    literal.push('{');
                    rest = after;
                }
            }
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            segments.push(Segment::Text(literal));
        }
        for r in required {
            let idx = SLOTS.iter().position(|s| s == r);
            if !segments
                .iter()
                .any(|s| matches!(s, Segment::Slot(i) if Some(*i) == idx))
            {
                return Err(err(format!("the placeholder {{{r}}} is required")));
            }
        }
        Ok(Template { segments })
    }

    fn render(&self, values: &[&str; 9]) -> String {
        let mut out = String::new();
        for s in &self.segments {
            match s {
                Segment::Text(t) => out.push_str(t),
                Segment::Slot(i) => out.push_str(values[*i]),
            }
        }
        out
    }
}

/// The four templates.
#[derive(Debug, Clone, PartialEq)]
pub struct Prompts {
    /// System message.
    pub system: Template,
    /// First step: PyTorch to Triton.
    pub translate: Template,
    /// Improve a correct program.
    pub improve: Template,
    /// Repair a failing program.
    pub repair: Template,
}

/// The templates' files, their embedded defaults and required placeholders, for Triton.
const EMBEDDED: [(&str, &str, &[&str]); 4] = [
    (
        "system.md",
        include_str!("../../../configs/prompts/system.md"),
        &[],
    ),
    (
        "translate.md",
        include_str!("../../../configs/prompts/translate.md"),
        &["reference", "program"],
    ),
    (
        "improve.md",
        include_str!("../../../configs/prompts/improve.md"),
        &["program"],
    ),
    (
        "repair.md",
        include_str!("../../../configs/prompts/repair.md"),
        &["program"],
    ),
];

/// The same for CUDA (`configs/prompts/cuda/`).
const EMBEDDED_CUDA: [(&str, &str, &[&str]); 4] = [
    (
        "system.md",
        include_str!("../../../configs/prompts/cuda/system.md"),
        &[],
    ),
    (
        "translate.md",
        include_str!("../../../configs/prompts/cuda/translate.md"),
        &["reference", "program"],
    ),
    (
        "improve.md",
        include_str!("../../../configs/prompts/cuda/improve.md"),
        &["program"],
    ),
    (
        "repair.md",
        include_str!("../../../configs/prompts/cuda/repair.md"),
        &["program"],
    ),
];

impl Prompts {
    /// Triton's embedded defaults, overridden by the files present in `dir`.
    pub fn load(dir: Option<&Path>) -> Result<Prompts, Error> {
        Prompts::load_for(Backend::Triton, dir)
    }

    /// The templates of `backend`: its embedded defaults, overridden by the files present in
    /// `dir` (Triton's) or in `dir/<backend>/` (the others').
    pub fn load_for(backend: Backend, dir: Option<&Path>) -> Result<Prompts, Error> {
        let (embedded, dir) = match backend {
            Backend::Triton => (EMBEDDED, dir.map(Path::to_path_buf)),
            Backend::Cuda => (EMBEDDED_CUDA, dir.map(|d| d.join(backend.as_str()))),
        };
        let mut parsed = Vec::new();
        for (name, text, required) in embedded {
            let file = dir.as_ref().map(|d| d.join(name)).filter(|p| p.exists());
            let (origin, text) = match file {
                Some(p) => {
                    let t = std::fs::read_to_string(&p).map_err(|e| Error::io(&p, e))?;
                    (p.display().to_string(), t)
                }
                None => ("embedded default".to_string(), text.to_string()),
            };
            parsed.push(Template::parse(name, &origin, &text, required)?);
        }
        let mut it = parsed.into_iter();
        let mut next = || {
            it.next()
                .ok_or_else(|| Error::Config("template missing".into()))
        };
        Ok(Prompts {
            system: next()?,
            translate: next()?,
            improve: next()?,
            repair: next()?,
        })
    }
}

/// The templates of every backend a run uses (`RolloutConfig::backends`).
#[derive(Debug, Clone, PartialEq)]
pub struct PromptSets {
    sets: Vec<(Backend, Prompts)>,
}

impl PromptSets {
    /// The templates of each backend of `cfg`, from `cfg.prompts_dir` (see [`Prompts::load_for`]).
    pub fn load(cfg: &RolloutConfig) -> Result<PromptSets, Error> {
        let mut sets = Vec::new();
        for b in cfg.backends() {
            sets.push((b, Prompts::load_for(b, cfg.prompts_dir.as_deref())?));
        }
        Ok(PromptSets { sets })
    }

    /// The templates of `backend`; an error when the run's configuration does not use it.
    pub fn of(&self, backend: Backend) -> Result<&Prompts, Error> {
        self.sets
            .iter()
            .find(|(b, _)| *b == backend)
            .map(|(_, p)| p)
            .ok_or_else(|| Error::Config(format!("no prompts loaded for the backend {backend}")))
    }
}

/// A built prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltPrompt {
    /// System message.
    pub system: String,
    /// User message.
    pub user: String,
    /// Approximate tokens of both.
    pub approx_tokens: usize,
    /// History items trimmed to fit the budget.
    pub trimmed: usize,
    /// Still over budget after trimming everything that may be trimmed.
    pub over_budget: bool,
}

fn fmt_speedup(s: Option<f64>) -> String {
    match s {
        Some(x) => format!("{x:.2}x"),
        None => "not measured".to_string(),
    }
}

fn status_name(p: &Program) -> String {
    match &p.eval {
        None => "not evaluated (PyTorch reference)".into(),
        Some(e) => {
            let mut s = e.status.to_string();
            if let Some(h) = e.hack {
                s.push_str(&format!(" ({h})"));
            }
            if e.trials > 0 {
                s.push_str(&format!(
                    ", {}/{} correctness trials passed",
                    e.trials_passed, e.trials
                ));
            }
            s
        }
    }
}

/// Head and tail of `text` within `max` bytes.
pub fn trim_middle(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let half = max / 2;
    let mut head = half;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - half;
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    format!(
        "{}\n[... {} bytes cut ...]\n{}",
        &text[..head],
        tail - head,
        &text[tail..]
    )
}

fn block_of(code: &str) -> &str {
    split_block(code).map(|b| b.body).unwrap_or(code)
}

fn metrics_of(p: &Program) -> String {
    let mut s = format!("- status: {}\n", status_name(p));
    if let Some(e) = &p.eval {
        let _ = writeln!(
            s,
            "- speedup over PyTorch eager: {}",
            fmt_speedup(e.speedup)
        );
        if let Some(t) = &e.candidate_timing {
            let _ = writeln!(s, "- runtime: {:.4} ms median", t.median_ms);
        }
        if let Some(t) = &e.reference_timing {
            let _ = writeln!(s, "- reference runtime: {:.4} ms median", t.median_ms);
        }
        if let Some(w) = e
            .errors
            .iter()
            .max_by(|a, b| a.max_abs.total_cmp(&b.max_abs))
            && !p.correct
        {
            let _ = writeln!(
                s,
                "- worst output error: max abs {:.3e}, mean abs {:.3e} (output {})",
                w.max_abs, w.mean_abs, w.index
            );
        }
        for w in &e.warnings {
            let _ = writeln!(s, "- warning: {w}");
        }
        if !e.hardware.device.is_empty() {
            let _ = writeln!(s, "- hardware: {}", e.hardware.device);
        }
    }
    s
}

fn goal_of(p: &Program, best: f64) -> String {
    match p.speedup() {
        Some(x) if x < 1.0 => format!(
            "Goal: the current program runs at {x:.2}x of PyTorch eager; need > 1.00x to beat eager{}.",
            if best > 1.0 { format!(" (the best program of this task reaches {best:.2}x)") } else { String::new() }
        ),
        Some(x) => format!(
            "Goal: the current program runs at {x:.2}x of PyTorch eager; need > {x:.2}x to improve on it{}.",
            if best > x { format!(" (the best program of this task reaches {best:.2}x)") } else { String::new() }
        ),
        None => "Goal: timing is not measured on this evaluator; keep the program correct and make it leaner (fewer passes over memory, more fusion).".to_string(),
    }
}

fn attempt_line(a: &Archive, t: &Attempt, cfg: &RolloutConfig) -> String {
    let kind = match t.kind {
        StepKind::Translate => "translation",
        StepKind::Optimize => "optimization",
        StepKind::Repair => "repair",
    };
    let mut s = format!(
        "- iteration {} ({kind} of program {}): ",
        t.iteration,
        &a.programs[t.parent].id[..8]
    );
    match (t.outcome, t.status) {
        (EditOutcome::Applied | EditOutcome::Duplicate, Some(st)) => {
            let _ = write!(s, "evaluated as {st}, speedup {}", fmt_speedup(t.speedup));
            if t.outcome == EditOutcome::Duplicate {
                s.push_str(" (it repeated an earlier program)");
            }
        }
        (o, _) => {
            let _ = write!(s, "edit failed ({o})");
        }
    }
    if let Some(e) = &t.error {
        let _ = write!(
            s,
            ": {}",
            trim_middle(e, cfg.error_log_chars / 4).replace('\n', " ")
        );
    }
    s.push('\n');
    s
}

fn program_entry(label: &str, p: &Program) -> String {
    format!(
        "### {label}: {} ({})\n```python\n{}```\n",
        fmt_speedup(p.speedup()),
        status_name(p),
        block_of(&p.code)
    )
}

/// What a prompt may show besides the reference and the current program, in the order it is
/// given up when the prompt is over budget: lineage, older attempts (the latest stays),
/// diverse then top programs, then half the error log at a time (down to 400 characters).
struct History<'a> {
    lineage: Vec<String>,
    recent: Vec<String>,
    top: Vec<String>,
    diverse: Vec<String>,
    full_log: &'a str,
    log_limit: usize,
}

impl<'a> History<'a> {
    /// Everything the plan asks to show.
    fn gather(plan: &Plan, a: &'a Archive, cfg: &RolloutConfig) -> Self {
        let lineage = a
            .lineage(plan.parent, cfg.lineage_depth)
            .iter()
            .enumerate()
            .map(|(k, &p)| {
                let q = &a.programs[p];
                format!(
                    "- ancestor {} (iteration {}): {}, speedup {}\n",
                    k + 1,
                    q.iteration,
                    status_name(q),
                    fmt_speedup(q.speedup())
                )
            })
            .collect();
        let recent = a.islands[plan.island]
            .attempts
            .iter()
            .rev()
            .take(cfg.recent_attempts.max(1))
            .map(|t| attempt_line(a, t, cfg))
            .collect();
        let entries = |label: &str, programs: &[usize]| -> Vec<String> {
            programs
                .iter()
                .enumerate()
                .map(|(k, &p)| program_entry(&format!("{label} {}", k + 1), &a.programs[p]))
                .collect()
        };
        let full_log = a.programs[plan.parent]
            .eval
            .as_ref()
            .map(|e| e.error_log.as_str())
            .unwrap_or("");
        History {
            lineage,
            recent,
            top: entries("Top program", &plan.top),
            diverse: entries("Diverse program", &plan.diverse),
            full_log,
            log_limit: cfg.error_log_chars,
        }
    }

    /// The template's values: reference, program, metrics, goal, error log and the sections.
    fn render(&self, template: &Template, reference: &str, parent: &Program, goal: &str) -> String {
        let section = |title: &str, items: &[String]| {
            if items.is_empty() {
                String::new()
            } else {
                format!("\n## {title}\n{}", items.concat())
            }
        };
        let metrics = metrics_of(parent);
        let error_log = trim_middle(self.full_log, self.log_limit);
        let lineage = section(
            "Lineage of the current program (nearest ancestor first)",
            &self.lineage,
        );
        let recent = section(
            "Latest attempts on this island (most recent first)",
            &self.recent,
        );
        let top = section("Top programs of this task (editable block only)", &self.top);
        let diverse = section("Diverse programs (editable block only)", &self.diverse);
        template.render(&[
            reference.trim_end(),
            parent.code.trim_end(),
            metrics.trim_end(),
            goal,
            error_log.trim_end(),
            &lineage,
            &recent,
            &top,
            &diverse,
        ])
    }

    /// Gives up the next thing; false when nothing is left to give up.
    fn trim(&mut self) -> bool {
        if self.lineage.pop().is_some() {
            return true;
        }
        if self.recent.len() > 1 {
            self.recent.pop();
            return true;
        }
        if self.diverse.pop().is_some() || self.top.pop().is_some() {
            return true;
        }
        if self.log_limit > 400 && self.full_log.len() > 400 {
            self.log_limit = (self.log_limit.min(self.full_log.len()) / 2).max(400);
            return true;
        }
        false
    }
}

/// Builds the system and user messages of a planned step, within the token budget: history
/// is given up before code (see `History`); the reference and the current program are never
/// cut.
pub fn build_prompt(
    prompts: &Prompts,
    plan: &Plan,
    a: &Archive,
    reference: &str,
    cfg: &RolloutConfig,
) -> BuiltPrompt {
    let parent = &a.programs[plan.parent];
    let goal = goal_of(parent, a.best_fitness());
    let system = prompts.system.render(&[""; 9]);
    let template = match plan.kind {
        StepKind::Translate => &prompts.translate,
        StepKind::Optimize => &prompts.improve,
        StepKind::Repair => &prompts.repair,
    };
    let mut history = History::gather(plan, a, cfg);
    let mut trimmed = 0;
    loop {
        let user = history.render(template, reference, parent, &goal);
        let approx = (approx_message_tokens(&system) + approx_message_tokens(&user)) as usize;
        let over_budget = approx > cfg.prompt_token_budget;
        if !over_budget || !history.trim() {
            return BuiltPrompt {
                system,
                user,
                approx_tokens: approx,
                trimmed,
                over_budget,
            };
        }
        trimmed += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::tests::eval;
    use crate::seed::seed_program;
    use crate::select::plan_step;
    use ksmith_core::evaluation::EvalStatus;
    use rand::SeedableRng;
    use rand_chacha::ChaCha12Rng;

    const REF: &str = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n";

    fn kernel(tag: &str) -> String {
        format!(
            "import torch\nimport triton\n# EVOLVE-BLOCK-START\n@triton.jit\ndef k_{tag}(x):\n    tl.store(x, tl.load(x))\nclass ModelNew: pass\n# EVOLVE-BLOCK-END\n"
        )
    }

    #[test]
    fn embedded_templates_load_and_bad_placeholders_are_caught() {
        Prompts::load(None).unwrap();
        let e = Template::parse("x.md", "t", "hello {programm}", &[]).unwrap_err();
        assert!(
            e.to_string().contains("unknown placeholder {programm}"),
            "{e}"
        );
        let e = Template::parse("x.md", "t", "hello", &["program"]).unwrap_err();
        assert!(e.to_string().contains("{program} is required"), "{e}");
        let t =
            Template::parse("x.md", "t", "a {program} {not a slot} {} b", &["program"]).unwrap();
        let mut v = [""; 9];
        v[1] = "P";
        assert_eq!(t.render(&v), "a P {not a slot} {} b");
    }

    #[test]
    fn override_folder_replaces_only_present_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("improve.md"), "IMPROVE {program}").unwrap();
        let p = Prompts::load(Some(dir.path())).unwrap();
        let d = Prompts::load(None).unwrap();
        assert_ne!(p.improve, d.improve);
        assert_eq!(p.system, d.system);
        std::fs::write(dir.path().join("repair.md"), "no slot").unwrap();
        let e = Prompts::load(Some(dir.path())).unwrap_err();
        assert!(e.to_string().contains("repair.md"), "{e}");
    }

    #[test]
    fn each_backend_has_its_own_rules_and_override_folder() {
        let triton = Prompts::load_for(Backend::Triton, None).unwrap();
        let cuda = Prompts::load_for(Backend::Cuda, None).unwrap();
        let text = |t: &Template| t.render(&[""; 9]);
        assert!(text(&cuda.system).contains("load_inline"));
        assert!(text(&cuda.system).contains("__global__"));
        assert!(!text(&cuda.system).contains("@triton.jit"));
        assert!(text(&triton.system).contains("@triton.jit"));
        assert!(text(&cuda.translate).contains("PyTorch to CUDA"));
        assert!(text(&cuda.repair).contains("nvcc"));
        for p in [&cuda.translate, &cuda.improve, &cuda.repair] {
            assert!(!text(p).contains("Triton"), "{}", text(p));
        }
        // CUDA's overrides live in `<dir>/cuda/`; Triton's files there do not touch CUDA's
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("improve.md"), "TRITON {program}").unwrap();
        std::fs::create_dir(dir.path().join("cuda")).unwrap();
        std::fs::write(dir.path().join("cuda/improve.md"), "CUDA {program}").unwrap();
        let c = Prompts::load_for(Backend::Cuda, Some(dir.path())).unwrap();
        let t = Prompts::load_for(Backend::Triton, Some(dir.path())).unwrap();
        assert_eq!(text(&c.improve), "CUDA ");
        assert_eq!(text(&t.improve), "TRITON ");
        assert_eq!(c.system, cuda.system);
    }

    #[test]
    fn translate_prompt_has_reference_and_seed() {
        let cfg = RolloutConfig::default();
        let a = Archive::new(&seed_program(REF, Backend::Triton).unwrap(), &cfg);
        let mut rng = ChaCha12Rng::seed_from_u64(0);
        let plan = plan_step(&mut rng, &a, 0, &cfg);
        let p = build_prompt(&Prompts::load(None).unwrap(), &plan, &a, REF, &cfg);
        assert!(p.user.contains("translate PyTorch to Triton"));
        assert!(p.user.contains("return torch.relu(x)"));
        assert!(p.user.contains("EVOLVE-BLOCK-START"));
        assert!(p.system.contains("ModelNew"));
        assert!(!p.over_budget);
    }

    fn rich_archive(cfg: &RolloutConfig) -> (Archive, Plan) {
        let mut a = Archive::new(&seed_program(REF, Backend::Triton).unwrap(), cfg);
        let mut parent = 0;
        for i in 0..6 {
            parent = a.add_program(
                kernel(&format!("{i}")),
                parent,
                "s",
                i,
                0,
                eval(EvalStatus::Correct, Some(0.5 + f64::from(i) * 0.07)),
            );
        }
        for i in 0..3 {
            a.push_attempt(
                0,
                Attempt {
                    iteration: 10 + i,
                    parent,
                    kind: StepKind::Optimize,
                    outcome: EditOutcome::SearchNotFound,
                    program: None,
                    status: None,
                    speedup: None,
                    error: Some(format!("block #{i} not found")),
                },
            );
        }
        let mut rng = ChaCha12Rng::seed_from_u64(1);
        let mut plan = plan_step(&mut rng, &a, 0, cfg);
        plan.parent = parent;
        (a, plan)
    }

    #[test]
    fn improve_prompt_shows_relative_speedup_lineage_and_feedback() {
        let cfg = RolloutConfig {
            num_islands: 1,
            ..Default::default()
        };
        let (a, plan) = rich_archive(&cfg);
        let p = build_prompt(&Prompts::load(None).unwrap(), &plan, &a, REF, &cfg);
        assert!(
            p.user.contains("0.85x of PyTorch eager; need > 1.00x"),
            "{}",
            p.user
        );
        assert!(p.user.contains("ancestor 4"));
        assert!(p.user.contains("search_not_found"));
        assert!(p.user.contains("block #2 not found"));
        assert!(p.user.contains("Top program 1"));
        assert_eq!(p.trimmed, 0);
    }

    #[test]
    fn budget_trims_history_before_code() {
        let cfg = RolloutConfig {
            num_islands: 1,
            ..Default::default()
        };
        let (a, plan) = rich_archive(&cfg);
        let prompts = Prompts::load(None).unwrap();
        let full = build_prompt(&prompts, &plan, &a, REF, &cfg);
        let tight = RolloutConfig {
            prompt_token_budget: full.approx_tokens - 60,
            ..cfg.clone()
        };
        let p = build_prompt(&prompts, &plan, &a, REF, &tight);
        assert!(!p.over_budget && p.trimmed >= 1);
        assert!(p.approx_tokens <= tight.prompt_token_budget);
        // Select counts the stored prompt with the same counter.
        let messages = [
            ksmith_core::chat::ChatMessage::new("system", p.system.clone()),
            ksmith_core::chat::ChatMessage::new("user", p.user.clone()),
        ];
        assert_eq!(
            p.approx_tokens as u64,
            ksmith_core::tokens::approx_conversation_tokens(&messages)
        );
        assert!(!p.user.contains("ancestor 4"), "oldest ancestor goes first");
        assert!(
            p.user.contains("Top program 1"),
            "code kept while history can go"
        );
        let tiny = RolloutConfig {
            prompt_token_budget: 256,
            ..cfg
        };
        let p = build_prompt(&prompts, &plan, &a, REF, &tiny);
        assert!(p.over_budget);
        assert!(!p.user.contains("ancestor 1") && !p.user.contains("Top program"));
        assert!(
            p.user.contains("block #2 not found"),
            "the latest feedback stays"
        );
        assert!(
            p.user.contains("return torch.relu(x)"),
            "reference never cut"
        );
        assert!(
            p.user
                .contains(&a.programs[plan.parent].code.trim_end().to_string())
        );
    }
}
