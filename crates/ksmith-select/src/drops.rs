//! Why a step is not a sample: one closed vocabulary, counted in the report as `sft/<reason>`,
//! `grpo/<reason>`, `env/<reason>` or `chains/<reason>` (a chain is judged once per island).

use ksmith_core::report::StageReport;
use serde::{Deserialize, Serialize};

ksmith_core::vocabulary! {
    /// Which set a step was judged for.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub enum SampleSet {
        /// SFT samples.
        Sft = "sft",
        /// GRPO prompts.
        Grpo = "grpo",
        /// Starts of agent environments (`env.parquet`).
        Env = "env",
        /// Multi-turn chains (`chains.parquet`), judged per island.
        Chains = "chains",
    }
}

ksmith_core::vocabulary! {
    /// Why a step does not become an SFT sample or a GRPO prompt.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub enum DropReason {
        /// The teacher's answer is empty.
        EmptyResponse = "empty_response",
        /// The stored answer was cut at `[rollout] max_stored_answer_bytes`: not a whole answer.
        AnswerCut = "answer_cut",
        /// The step has no prompt.
        EmptyPrompt = "empty_prompt",
        /// The answer gave no program.
        EditFailed = "edit_failed",
        /// The program is not correct.
        NotCorrect = "not_correct",
        /// The step's parent is not among the steps.
        ParentMissing = "parent_missing",
        /// The program was not timed (CPU interpreter).
        NotTimed = "not_timed",
        /// Timed, but no confidence interval can be drawn for the program (or the prompt's
        /// current program): its evaluation carries no samples (an evaluator before they were
        /// kept).
        NoInterval = "no_interval",
        /// The program is not significantly faster than eager (the lower bound of its
        /// interval is not above the configured factor).
        NotFasterThanEager = "not_faster_than_eager",
        /// The parent has no speedup (or no interval) to compare with.
        ParentNotComparable = "parent_not_comparable",
        /// The program is not significantly faster than its parent (the lower bound of the
        /// interval of its speedup over the parent is not above the configured factor).
        NotFasterThanParent = "not_faster_than_parent",
        /// The program is `trivial`: significantly faster than eager, not than the task's
        /// `torch.compile` baseline (`trivial_steps = "drop"`).
        Trivial = "trivial",
        /// The prompt's current program is `trivial` (`trivial_steps = "drop"`).
        ParentTrivial = "parent_trivial",
        /// `first_steps` takes first steps only.
        NotFirstStep = "not_first_step",
        /// The parent (the prompt's current program) is not correct.
        ParentNotCorrect = "parent_not_correct",
        /// `best_steps` takes no first step (its current program is the reference).
        FirstStep = "first_step",
        /// The parent was not timed.
        ParentNotTimed = "parent_not_timed",
        /// The parent is not significantly faster than eager by the configured factor.
        ParentNotFasterThanEager = "parent_not_faster_than_eager",
        /// An earlier step of the trajectory was faster than the parent.
        ParentNotBestSoFar = "parent_not_best_so_far",
        /// The step's task is not in `tasks.parquet`.
        UnknownTask = "unknown_task",
        /// The same answer to the same task was already taken.
        DuplicateAnswer = "duplicate_answer",
        /// The sample is over the token budget.
        OverTokenBudget = "over_token_budget",
        /// The parent already has `grpo_max_prompts_per_parent` prompts.
        ParentPromptLimit = "parent_prompt_limit",
        /// Its family exceeds the family cap in its level.
        BalanceFamilyCap = "balance_family_cap",
        /// Dropped to meet the level proportions.
        BalanceLevelProportion = "balance_level_proportion",
        /// The island has no correct step for a chain to end at.
        NoCorrectStep = "no_correct_step",
        /// The lineage of the island's best step has fewer usable steps than `chain_min_turns`
        /// (a step without a whole answer, a program or an evaluation breaks it).
        ChainTooShort = "chain_too_short",
        /// The chain's last program does not beat its first turn's and its first prompt's
        /// program by `chain_min_gain`.
        ChainNotBetter = "chain_not_better",
        /// The chain's first prompt already shows a program of one of its turns.
        LaterProgramInPrompt = "later_program_in_prompt",
    }
}

/// Counts one step of `set` dropped for `reason` (`sft/not_correct`).
pub fn count_drop(report: &mut StageReport, set: SampleSet, reason: DropReason) {
    report.drop_row(&format!("{set}/{reason}"));
}
