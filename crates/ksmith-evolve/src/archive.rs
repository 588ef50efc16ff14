//! The per-task program archive: every program ever evaluated, islands with their MAP-Elites
//! grids, failed programs kept for feedback, the elite archive and the best program.
//!
//! Programs are identified by the content hash of their code, so the same code is one program
//! (evaluated once) however many islands hold it. Island membership marks migrants, which are
//! never migrated again. Only correct programs enter grids, elites and member lists; failed ones
//! are kept per island for repair mode and prompts.

use std::collections::{HashMap, HashSet};

use ksmith_core::evaluation::{EvalResult, EvalStatus};
use ksmith_core::ids::content_id;
use ksmith_core::speedup_interval::{Bootstrap, Draws};
use ksmith_core::tables::{EditOutcome, StepKind};
use serde::{Deserialize, Serialize};

use crate::config::RolloutConfig;
use crate::features::{Binning, complexity, fitness};

/// Failed programs remembered per island.
const FAILED_KEPT: usize = 64;
/// Attempts remembered per island.
const ATTEMPTS_KEPT: usize = 16;

/// Decides whether program `challenger` should take the place of an incumbent (a grid cell, an
/// island's best, the task's best): its fitness is higher and, when both were timed with samples,
/// significantly so (the lower bound of the ratio of their speedups, a percentile bootstrap at
/// the default confidence, above 1). A challenger within timing noise of the incumbent leaves it
/// in place, so which program a run builds on does not depend on which of two equal programs
/// the noise put ahead. Without samples (the CPU, or an evaluation that reports none) the
/// figures decide. The bootstrap draws of each program are computed once per placement (the
/// three incumbents are often one program).
struct Challenge {
    bootstrap: Bootstrap,
    challenger: usize,
    draws: HashMap<usize, Option<Draws>>,
}

impl Challenge {
    fn new(challenger: usize) -> Challenge {
        Challenge {
            bootstrap: Bootstrap::default(),
            challenger,
            draws: HashMap::new(),
        }
    }

    /// Computes the draws of program `idx` over eager once (None when it has none).
    fn fill(&mut self, programs: &[Program], idx: usize) {
        let bootstrap = &self.bootstrap;
        self.draws.entry(idx).or_insert_with(|| {
            let p = &programs[idx];
            p.eval
                .as_ref()
                .and_then(|e| bootstrap.eager_draws(e, &p.id).ok())
        });
    }

    /// True when the challenger should take `incumbent`'s place.
    fn beats(&mut self, programs: &[Program], incumbent: usize) -> bool {
        if programs[self.challenger].fitness <= programs[incumbent].fitness {
            return false;
        }
        self.fill(programs, self.challenger);
        self.fill(programs, incumbent);
        let (Some(Some(mine)), Some(Some(theirs))) =
            (self.draws.get(&self.challenger), self.draws.get(&incumbent))
        else {
            return true;
        };
        mine.ratio(theirs)
            .is_none_or(|r| self.bootstrap.interval(&r).above(1.0))
    }
}

/// One program of a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Program {
    /// Content hash of the code.
    pub id: String,
    /// The full program.
    pub code: String,
    /// Index of the parent program (`None` for the seed).
    pub parent: Option<usize>,
    /// The step that produced it (`None` for the seed).
    pub step_id: Option<String>,
    /// Iteration it was produced at.
    pub iteration: u32,
    /// Island it was born on.
    pub island: u32,
    /// The evaluator's result (`None` for the seed).
    pub eval: Option<EvalResult>,
    /// Whether it is correct.
    pub correct: bool,
    /// Speedup when correct (1.0 when not timed), 0 otherwise.
    pub fitness: f64,
    /// Complexity feature.
    pub complexity: f64,
    /// Flat MAP-Elites cell index.
    pub cell: usize,
    /// Steps that used it as a parent.
    pub children: u32,
}

impl Program {
    /// The measured speedup, if any.
    pub fn speedup(&self) -> Option<f64> {
        self.eval.as_ref().and_then(|e| e.speedup)
    }

    /// The evaluator's status, if evaluated.
    pub fn status(&self) -> Option<EvalStatus> {
        self.eval.as_ref().map(|e| e.status)
    }
}

/// A program's membership of an island.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// Program index.
    pub program: usize,
    /// Arrived by migration (never migrated again).
    pub migrant: bool,
}

/// One attempt on an island, for the "recent attempts" feedback of later prompts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// Iteration of the attempt.
    pub iteration: u32,
    /// Parent program index.
    pub parent: usize,
    /// Step kind.
    pub kind: StepKind,
    /// What became of the answer.
    pub outcome: EditOutcome,
    /// The candidate, when there was one.
    pub program: Option<usize>,
    /// The evaluator's status, when evaluated.
    pub status: Option<EvalStatus>,
    /// The speedup, when measured.
    pub speedup: Option<f64>,
    /// The edit error or the start of the error log.
    pub error: Option<String>,
}

/// One island: correct members, their MAP-Elites grid, failed programs and recent attempts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Island {
    /// Correct programs on the island, in arrival order.
    pub members: Vec<Member>,
    /// Cell -> program index of the cell's elite.
    pub grid: Vec<Option<usize>>,
    /// Occupied cells, in order of first occupation.
    pub occupied: Vec<usize>,
    /// Failed programs born here, oldest first (bounded).
    pub failed: Vec<usize>,
    /// Latest attempts, oldest first (bounded).
    pub attempts: Vec<Attempt>,
    /// Best program of the island.
    pub best: Option<usize>,
}

/// The archive of one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Archive {
    /// Every program; index 0 is the seed.
    pub programs: Vec<Program>,
    /// The islands.
    pub islands: Vec<Island>,
    /// Task-wide elites, best first.
    pub elites: Vec<usize>,
    /// Best program of the task.
    pub best: Option<usize>,
    /// Migration rounds done.
    pub migrations: u32,
    /// Elite archive capacity.
    pub elite_size: usize,
    /// The fixed binning.
    pub binning: Binning,
    #[serde(skip)]
    index: HashMap<String, usize>,
    #[serde(skip)]
    member_sets: Vec<HashSet<usize>>,
}

impl Archive {
    /// A fresh archive holding only the seed program (index 0).
    pub fn new(seed_code: &str, cfg: &RolloutConfig) -> Self {
        let binning = Binning::new(cfg);
        let seed = Program {
            id: content_id(seed_code),
            code: seed_code.to_string(),
            parent: None,
            step_id: None,
            iteration: 0,
            island: 0,
            eval: None,
            correct: false,
            fitness: 0.0,
            complexity: 0.0,
            cell: 0,
            children: 0,
        };
        let islands = (0..cfg.num_islands)
            .map(|_| Island {
                members: Vec::new(),
                grid: vec![None; binning.cells()],
                occupied: Vec::new(),
                failed: Vec::new(),
                attempts: Vec::new(),
                best: None,
            })
            .collect();
        let mut a = Archive {
            programs: vec![seed],
            islands,
            elites: Vec::new(),
            best: None,
            migrations: 0,
            elite_size: cfg.elite_size,
            binning,
            index: HashMap::new(),
            member_sets: Vec::new(),
        };
        a.rebuild_index();
        a
    }

    /// Rebuilds the lookup tables (after deserialization).
    pub fn rebuild_index(&mut self) {
        self.index = self
            .programs
            .iter()
            .enumerate()
            .map(|(i, p)| (p.id.clone(), i))
            .collect();
        self.member_sets = self
            .islands
            .iter()
            .map(|isl| isl.members.iter().map(|m| m.program).collect())
            .collect();
    }

    /// The program with content id `id`.
    pub fn find(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }

    /// Whether `program` is a member of `island`.
    pub fn is_member(&self, island: usize, program: usize) -> bool {
        self.member_sets
            .get(island)
            .is_some_and(|s| s.contains(&program))
    }

    /// Fitness of the task's best program (0 when none).
    pub fn best_fitness(&self) -> f64 {
        self.best.map_or(0.0, |b| self.programs[b].fitness)
    }

    /// Adds an evaluated program born on `island` and places it (grid when correct, failed list
    /// otherwise). Returns its index.
    #[allow(clippy::too_many_arguments)]
    pub fn add_program(
        &mut self,
        code: String,
        parent: usize,
        step_id: &str,
        iteration: u32,
        island: usize,
        eval: EvalResult,
    ) -> usize {
        let correct = eval.is_correct();
        let fit = fitness(correct, eval.speedup);
        let cx = complexity(&code);
        let program = Program {
            id: content_id(&code),
            cell: self.binning.cell(cx, fit),
            code,
            parent: Some(parent),
            step_id: Some(step_id.to_string()),
            iteration,
            island: island as u32,
            eval: Some(eval),
            correct,
            fitness: fit,
            complexity: cx,
            children: 0,
        };
        let idx = self.programs.len();
        self.index.insert(program.id.clone(), idx);
        self.programs.push(program);
        if correct {
            self.place(island, idx, false);
        } else {
            let failed = &mut self.islands[island].failed;
            failed.push(idx);
            if failed.len() > FAILED_KEPT {
                failed.remove(0);
            }
        }
        idx
    }

    /// Makes the correct program `idx` a member of `island`. Returns false when it already is
    /// one (no duplicate code on an island) or is not correct.
    pub fn place(&mut self, island: usize, idx: usize, migrant: bool) -> bool {
        if !self.programs[idx].correct || self.is_member(island, idx) {
            return false;
        }
        let (cell, fit) = (self.programs[idx].cell, self.programs[idx].fitness);
        let isl = &mut self.islands[island];
        isl.members.push(Member {
            program: idx,
            migrant,
        });
        self.member_sets[island].insert(idx);
        let mut challenge = Challenge::new(idx);
        match isl.grid[cell] {
            None => {
                isl.grid[cell] = Some(idx);
                isl.occupied.push(cell);
            }
            Some(old) if challenge.beats(&self.programs, old) => isl.grid[cell] = Some(idx),
            Some(_) => {}
        }
        if isl.best.is_none_or(|b| challenge.beats(&self.programs, b)) {
            isl.best = Some(idx);
        }
        if !self.elites.contains(&idx) {
            let pos = self
                .elites
                .iter()
                .position(|&e| fit > self.programs[e].fitness)
                .unwrap_or(self.elites.len());
            if pos < self.elite_size {
                self.elites.insert(pos, idx);
                self.elites.truncate(self.elite_size);
            }
        }
        if self.best.is_none_or(|b| challenge.beats(&self.programs, b)) {
            self.best = Some(idx);
        }
        true
    }

    /// Remembers an attempt on `island`.
    pub fn push_attempt(&mut self, island: usize, attempt: Attempt) {
        let a = &mut self.islands[island].attempts;
        a.push(attempt);
        if a.len() > ATTEMPTS_KEPT {
            a.remove(0);
        }
    }

    /// Ring migration: each island sends its best non-migrant members (a `rate` share, at least
    /// one) to the next island, as migrants, skipping programs the target already holds.
    /// Returns the number of programs placed.
    pub fn migrate(&mut self, rate: f64) -> usize {
        let n = self.islands.len();
        if n < 2 {
            return 0;
        }
        let mut moves = Vec::new();
        for (i, isl) in self.islands.iter().enumerate() {
            let mut natives: Vec<usize> = isl
                .members
                .iter()
                .filter(|m| !m.migrant)
                .map(|m| m.program)
                .collect();
            if natives.is_empty() {
                continue;
            }
            natives.sort_by(|&a, &b| {
                self.programs[b]
                    .fitness
                    .total_cmp(&self.programs[a].fitness)
                    .then(a.cmp(&b))
            });
            let k = ((natives.len() as f64 * rate) as usize).max(1);
            for &p in natives.iter().take(k) {
                moves.push(((i + 1) % n, p));
            }
        }
        let mut placed = 0;
        for (target, p) in moves {
            if self.place(target, p, true) {
                placed += 1;
            }
        }
        self.migrations += 1;
        placed
    }

    /// The ancestors of `idx`, nearest first, at most `depth` (the seed excluded).
    pub fn lineage(&self, idx: usize, depth: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut cur = self.programs[idx].parent;
        while let Some(p) = cur {
            if p == 0 || out.len() >= depth {
                break;
            }
            out.push(p);
            cur = self.programs[p].parent;
        }
        out
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ksmith_core::evaluation::Hardware;

    pub(crate) fn eval(status: EvalStatus, speedup: Option<f64>) -> EvalResult {
        EvalResult {
            status,
            hack: None,
            error_log: if status == EvalStatus::Correct {
                String::new()
            } else {
                format!("{status:?} happened")
            },
            errors: vec![],
            trials_passed: 0,
            trials: 3,
            candidate_timing: None,
            reference_timing: None,
            speedup,
            warnings: vec![],
            hardware: Hardware::default(),
            elapsed_ms: 1,
            speed_of_light: None,
            compile_baseline: None,
        }
    }

    fn cfg(islands: u32) -> RolloutConfig {
        RolloutConfig {
            num_islands: islands,
            elite_size: 3,
            ..Default::default()
        }
    }

    /// A correct evaluation `speedup` times faster than a 2 ms reference, timed with 200 paired
    /// samples whose candidate side spreads by 4 % (evenly over the range, in a shuffled order).
    fn timed(speedup: f64) -> EvalResult {
        use ksmith_core::evaluation::TimingMethod;
        use ksmith_core::speedup_interval::{SplitMix, timing_from_samples};
        let n = 200;
        let mut rng = SplitMix::from_text(&format!("{speedup}"));
        let reference: Vec<f64> = (0..n).map(|_| 2.0 * (1.0 + 0.01 * rng.unit())).collect();
        let mut spread: Vec<f64> = (0..n)
            .map(|k| 1.0 + 0.04 * (k as f64 / (n - 1) as f64 - 0.5))
            .collect();
        for i in (1..n).rev() {
            spread.swap(i, rng.below(i + 1));
        }
        let cand: Vec<f64> = reference
            .iter()
            .zip(&spread)
            .map(|(r, f)| r / speedup * f)
            .collect();
        let mut c = timing_from_samples(vec![cand], vec![reference.clone()]);
        c.method = TimingMethod::CudaGraph;
        let mut r = timing_from_samples(vec![reference], vec![]);
        r.method = TimingMethod::CudaGraph;
        EvalResult {
            candidate_timing: Some(c),
            reference_timing: Some(r),
            ..eval(EvalStatus::Correct, Some(speedup))
        }
    }

    #[test]
    fn a_program_within_timing_noise_does_not_displace_the_best() {
        let mut a = Archive::new("seed", &cfg(1));
        let first = a.add_program("k1".into(), 0, "s1", 1, 0, timed(2.264));
        // 0.4 % faster by its figure, within the noise of 4 % spread samples: the incumbent
        // stays the best and keeps its cell.
        let tie = a.add_program("k2".into(), first, "s2", 2, 0, timed(2.273));
        assert_eq!(a.programs[first].cell, a.programs[tie].cell);
        assert_eq!(a.best, Some(first));
        assert_eq!(a.islands[0].best, Some(first));
        assert_eq!(a.islands[0].grid[a.programs[first].cell], Some(first));
        // 10 % faster: significantly, so it takes over.
        let faster = a.add_program("k3".into(), first, "s3", 3, 0, timed(2.5));
        assert_eq!(a.best, Some(faster));
        assert_eq!(a.islands[0].best, Some(faster));
    }

    #[test]
    fn better_programs_take_cells_and_elites_stay_sorted() {
        let mut a = Archive::new("seed", &cfg(1));
        let p1 = a.add_program(
            "k1".into(),
            0,
            "s1",
            1,
            0,
            eval(EvalStatus::Correct, Some(1.5)),
        );
        let p2 = a.add_program(
            "k2".into(),
            p1,
            "s2",
            2,
            0,
            eval(EvalStatus::Correct, Some(1.55)),
        );
        // Same complexity (0) and same score bin: the better one owns the cell.
        assert_eq!(a.programs[p1].cell, a.programs[p2].cell);
        assert_eq!(a.islands[0].grid[a.programs[p1].cell], Some(p2));
        let worse = a.add_program(
            "k3".into(),
            p1,
            "s3",
            3,
            0,
            eval(EvalStatus::Correct, Some(1.52)),
        );
        assert_eq!(a.islands[0].grid[a.programs[p1].cell], Some(p2));
        assert_eq!(
            a.islands[0].members.len(),
            3,
            "displaced programs stay members"
        );
        let p4 = a.add_program(
            "k4".into(),
            p2,
            "s4",
            4,
            0,
            eval(EvalStatus::Correct, Some(4.0)),
        );
        assert_eq!(a.elites, vec![p4, p2, worse]);
        assert_eq!(a.best, Some(p4));
        assert_eq!(a.islands[0].occupied.len(), 2);
        let f = a.add_program(
            "bad".into(),
            p4,
            "s5",
            5,
            0,
            eval(EvalStatus::CompileError, None),
        );
        assert_eq!(a.islands[0].failed, vec![f]);
        assert!(!a.is_member(0, f));
        assert_eq!(a.lineage(f, 10), vec![p4, p2, p1]);
        assert_eq!(a.lineage(f, 2), vec![p4, p2]);
        assert_eq!(a.find(&content_id("k2")), Some(p2));
    }

    #[test]
    fn ring_migration_copies_natives_once_and_never_duplicates() {
        let mut a = Archive::new("seed", &cfg(3));
        let p = a.add_program(
            "a".into(),
            0,
            "s1",
            1,
            0,
            eval(EvalStatus::Correct, Some(2.0)),
        );
        let q = a.add_program(
            "b".into(),
            0,
            "s2",
            2,
            1,
            eval(EvalStatus::Correct, Some(1.0)),
        );
        assert_eq!(a.migrate(0.1), 2);
        assert!(a.is_member(1, p) && a.is_member(2, q));
        let m = a.islands[1]
            .members
            .iter()
            .find(|m| m.program == p)
            .unwrap();
        assert!(m.migrant);
        // Second round: migrants are not re-migrated; natives already present are skipped.
        assert_eq!(a.migrate(0.1), 0);
        assert!(!a.is_member(2, p), "a migrant must not travel on");
        assert_eq!(a.islands[1].members.len(), 2);
        assert_eq!(a.migrations, 2);
        // Placing the same program twice on an island is refused.
        assert!(!a.place(1, q, false));
    }

    #[test]
    fn serde_round_trip_rebuilds_the_index() {
        let mut a = Archive::new("seed", &cfg(2));
        a.add_program(
            "a".into(),
            0,
            "s1",
            1,
            0,
            eval(EvalStatus::Correct, Some(2.0)),
        );
        let json = serde_json::to_string(&a).unwrap();
        let mut b: Archive = serde_json::from_str(&json).unwrap();
        b.rebuild_index();
        assert_eq!(a, b);
        assert!(b.is_member(0, 1));
        assert_eq!(b.find(&content_id("a")), Some(1));
    }
}
