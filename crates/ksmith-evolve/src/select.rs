//! Choosing a step's island, parent and context programs.
//!
//! Step `i` runs on island `i % num_islands`. On an island with correct programs the parent is
//! picked by one of three draws: exploitation (fitness-weighted: a sigmoid of the program's
//! log-speedup against the island's median, scaled by the median absolute deviation, times a
//! novelty bonus `1 / (1 + children)`), exploration (the elite of a uniformly random occupied
//! cell) or a uniformly random member. An island without a correct program is in repair mode:
//! the parent is one of its latest failed programs, weighted towards the ones that got furthest
//! (incorrect > runtime error > compile error); an island with no program at all translates the
//! seed. Context: the task's top programs (elites) and programs of cells near the parent's.

use ksmith_core::evaluation::EvalStatus;
use ksmith_core::tables::StepKind;
use rand::Rng;
use rand_chacha::ChaCha12Rng;

use crate::archive::Archive;
use crate::config::RolloutConfig;

/// What a step works on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Iteration.
    pub iteration: u32,
    /// Island index.
    pub island: usize,
    /// Parent program index (0 is the seed).
    pub parent: usize,
    /// Translate, optimize or repair.
    pub kind: StepKind,
    /// Top programs to show, best first.
    pub top: Vec<usize>,
    /// Programs from nearby cells to show.
    pub diverse: Vec<usize>,
    /// Whether the parent is the task's best program.
    pub parent_is_best: bool,
}

fn progress_rank(status: Option<EvalStatus>) -> f64 {
    match status {
        Some(EvalStatus::Incorrect) => 4.0,
        Some(EvalStatus::RuntimeError) | Some(EvalStatus::Timeout) => 3.0,
        Some(EvalStatus::Hacked) => 2.0,
        Some(EvalStatus::CompileError) | Some(EvalStatus::StaticRejected) => 1.0,
        Some(EvalStatus::Correct) | None => 1.0,
    }
}

fn weighted(rng: &mut ChaCha12Rng, weights: &[f64]) -> usize {
    let total: f64 = weights.iter().sum();
    if !(total.is_finite() && total > 0.0) {
        return rng.random_range(0..weights.len());
    }
    let mut x = rng.random::<f64>() * total;
    for (i, w) in weights.iter().enumerate() {
        if x < *w {
            return i;
        }
        x -= w;
    }
    weights.len() - 1
}

fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// Picks the parent on an island with correct members.
fn pick_correct_parent(
    rng: &mut ChaCha12Rng,
    a: &Archive,
    island: usize,
    cfg: &RolloutConfig,
) -> usize {
    let isl = &a.islands[island];
    let r: f64 = rng.random();
    if r < cfg.exploitation_ratio {
        // Candidates: the cell elites (bounded by the grid size, so this stays flat).
        let cands: Vec<usize> = isl.occupied.iter().filter_map(|&c| isl.grid[c]).collect();
        let scores: Vec<f64> = cands
            .iter()
            .map(|&p| a.programs[p].fitness.max(1e-6).log2())
            .collect();
        let mut sorted = scores.clone();
        sorted.sort_by(f64::total_cmp);
        let med = median(&sorted);
        let mut dev: Vec<f64> = scores.iter().map(|s| (s - med).abs()).collect();
        dev.sort_by(f64::total_cmp);
        let mad = median(&dev).max(1e-3);
        let weights: Vec<f64> = cands
            .iter()
            .zip(&scores)
            .map(|(&p, s)| {
                let z = cfg.selection_sharpness * (s - med) / mad;
                let sig = 1.0 / (1.0 + (-z.clamp(-50.0, 50.0)).exp());
                sig / (1.0 + f64::from(a.programs[p].children))
            })
            .collect();
        cands[weighted(rng, &weights)]
    } else if r < cfg.exploitation_ratio + cfg.exploration_ratio {
        let cell = isl.occupied[rng.random_range(0..isl.occupied.len())];
        isl.grid[cell].unwrap_or(isl.members[0].program)
    } else {
        isl.members[rng.random_range(0..isl.members.len())].program
    }
}

/// Plans iteration `iteration`: island, parent, kind and context. Uses `rng` (and only it), so
/// the same archive and RNG state always give the same plan.
pub fn plan_step(rng: &mut ChaCha12Rng, a: &Archive, iteration: u32, cfg: &RolloutConfig) -> Plan {
    let island = (iteration % cfg.num_islands) as usize;
    let isl = &a.islands[island];
    let (parent, kind) = if !isl.members.is_empty() {
        (pick_correct_parent(rng, a, island, cfg), StepKind::Optimize)
    } else if !isl.failed.is_empty() {
        let window: Vec<usize> = isl
            .failed
            .iter()
            .rev()
            .take(cfg.repair_window)
            .copied()
            .collect();
        let weights: Vec<f64> = window
            .iter()
            .map(|&p| {
                progress_rank(a.programs[p].status()) / (1.0 + f64::from(a.programs[p].children))
            })
            .collect();
        (window[weighted(rng, &weights)], StepKind::Repair)
    } else {
        (0, StepKind::Translate)
    };
    let mut shown = vec![parent];
    let mut top = Vec::new();
    if kind != StepKind::Translate {
        for &e in &a.elites {
            if top.len() >= cfg.num_top_programs {
                break;
            }
            if !shown.contains(&e) {
                top.push(e);
                shown.push(e);
            }
        }
    }
    let mut diverse = Vec::new();
    if kind == StepKind::Optimize && cfg.num_diverse_programs > 0 {
        let (cb, sb) = a.binning.coords(a.programs[parent].cell);
        let tries = 4 * cfg.num_diverse_programs;
        for _ in 0..tries {
            if diverse.len() >= cfg.num_diverse_programs {
                break;
            }
            let dc = rng.random_range(-2i64..=2);
            let ds = rng.random_range(-2i64..=2);
            let Some(cell) = a.binning.index(i64::from(cb) + dc, i64::from(sb) + ds) else {
                continue;
            };
            if let Some(p) = isl.grid[cell]
                && !shown.contains(&p)
            {
                diverse.push(p);
                shown.push(p);
            }
        }
        let mut fill = 0;
        while diverse.len() < cfg.num_diverse_programs && fill < tries && isl.members.len() > 1 {
            fill += 1;
            let p = isl.members[rng.random_range(0..isl.members.len())].program;
            if !shown.contains(&p) {
                diverse.push(p);
                shown.push(p);
            }
        }
    }
    Plan {
        iteration,
        island,
        parent,
        kind,
        top,
        diverse,
        parent_is_best: a.best == Some(parent),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::tests::eval;
    use rand::SeedableRng;

    fn cfg() -> RolloutConfig {
        RolloutConfig {
            num_islands: 2,
            ..Default::default()
        }
    }

    #[test]
    fn empty_island_translates_failed_island_repairs() {
        let c = cfg();
        let mut a = Archive::new("seed", &c);
        let mut rng = ChaCha12Rng::seed_from_u64(1);
        let p = plan_step(&mut rng, &a, 0, &c);
        assert_eq!((p.island, p.parent, p.kind), (0, 0, StepKind::Translate));
        assert!(p.top.is_empty() && p.diverse.is_empty());
        let f1 = a.add_program(
            "c1".into(),
            0,
            "s",
            0,
            0,
            eval(EvalStatus::CompileError, None),
        );
        let f2 = a.add_program("c2".into(), 0, "s", 2, 0, eval(EvalStatus::Incorrect, None));
        let mut seen = [0, 0];
        for i in 0..200 {
            let p = plan_step(&mut rng, &a, 2 * i, &c);
            assert_eq!(p.kind, StepKind::Repair);
            seen[usize::from(p.parent == f2)] += 1;
            assert!(p.parent == f1 || p.parent == f2);
        }
        assert!(
            seen[1] > seen[0] * 2,
            "incorrect (closer) preferred: {seen:?}"
        );
        // Island 1 has nothing yet: translation.
        assert_eq!(plan_step(&mut rng, &a, 1, &c).kind, StepKind::Translate);
        // A correct program switches island 0 to optimisation; failed ones are not parents.
        let ok = a.add_program(
            "ok".into(),
            f2,
            "s",
            4,
            0,
            eval(EvalStatus::Correct, Some(1.2)),
        );
        for i in 0..50 {
            let p = plan_step(&mut rng, &a, 2 * i, &c);
            assert_eq!((p.kind, p.parent), (StepKind::Optimize, ok));
            assert!(p.parent_is_best);
        }
    }

    #[test]
    fn selection_mixes_and_prefers_fit_programs_and_context_is_deduplicated() {
        let c = RolloutConfig {
            num_islands: 1,
            ..Default::default()
        };
        let mut a = Archive::new("seed", &c);
        let speeds = [0.5, 0.9, 1.1, 1.6, 2.5, 3.5, 6.0];
        let ids: Vec<usize> = speeds
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let code = format!("@triton.jit\n{}", "x = tl.load(p)\n".repeat(i * 6));
                a.add_program(
                    code,
                    0,
                    "s",
                    i as u32,
                    0,
                    eval(EvalStatus::Correct, Some(*s)),
                )
            })
            .collect();
        let mut rng = ChaCha12Rng::seed_from_u64(7);
        let mut counts = vec![0usize; ids.len()];
        for i in 0..2000 {
            let p = plan_step(&mut rng, &a, i, &c);
            counts[ids.iter().position(|&x| x == p.parent).unwrap()] += 1;
            assert!(!p.top.contains(&p.parent));
            assert!(!p.diverse.contains(&p.parent));
            assert!(p.top.iter().all(|t| !p.diverse.contains(t)));
            assert!(p.top.len() <= 3 && p.diverse.len() <= 2);
        }
        assert!(
            counts.iter().all(|&n| n > 0),
            "every program gets picked: {counts:?}"
        );
        assert!(
            counts[6] > counts[0] * 3,
            "fitter programs preferred: {counts:?}"
        );
    }

    #[test]
    fn same_rng_state_same_plan() {
        let c = cfg();
        let mut a = Archive::new("seed", &c);
        for i in 0..5 {
            a.add_program(
                format!("p{i}"),
                0,
                "s",
                i,
                0,
                eval(EvalStatus::Correct, Some(1.0 + f64::from(i))),
            );
        }
        let mut r1 = ChaCha12Rng::seed_from_u64(3);
        let mut r2 = r1.clone();
        for i in 0..20 {
            assert_eq!(plan_step(&mut r1, &a, i, &c), plan_step(&mut r2, &a, i, &c));
        }
    }
}
