//! The "Trainer settings" and "Usage" sections of a card: the settings that fit the samples'
//! lengths and a command line per trainer for the releases users run now (verl 0.9.x, TRL
//! 1.16.x, OpenRLHF 0.11.x), naming every shard of every split.
//!
//! Commands use three shell variables the card defines: `DS` (the dataset folder), `MODEL` (the
//! model to train) and `KSMITH` (a ksmith checkout, for `python/ksmith/reward.py` and the agent
//! adapters in `python/ksmith/trainers/`). The Python tests parse each command with the
//! trainer's own parser (hydra for verl, `TrlParser` for TRL, argparse for OpenRLHF) and build
//! the trainer's datasets from it.

use std::fmt::Write as _;

use crate::card::{CardInput, SplitFiles};
use crate::formats::{Format, Source};
use crate::lengths::Fit;

/// verl's default `data.max_token_len_per_gpu` for SFT (dynamic batch size): a sample longer
/// than this needs the setting raised too.
const VERL_SFT_TOKENS_PER_GPU: u64 = 8192;

/// verl's `multi_turn.max_tool_response_length` for the agent datasets, in characters: a
/// report (an error log's end of 2,000 characters, JSON-escaped, and the fields around it)
/// fits whole.
pub const VERL_TOOL_RESPONSE_CHARS: u64 = 4096;

/// The split named `name`, if it has rows.
fn split<'a>(c: &'a CardInput, name: &str) -> Option<&'a SplitFiles> {
    c.splits.iter().find(|s| s.name == name)
}

/// A hydra list override of `key` naming every file of `split`, quoted for the shell.
fn hydra_files(key: &str, split: &SplitFiles) -> String {
    let files: Vec<String> = split.files.iter().map(|f| format!("'$DS/{f}'")).collect();
    format!("\"{key}=[{}]\"", files.join(","))
}

/// The shell lines that define the variables the commands use.
fn variables(c: &CardInput) -> String {
    let mut s = format!(
        "DS=/path/to/{}    # this folder\nMODEL=/path/to/model    # the model to train\n",
        c.format.folder()
    );
    if c.format.source().is_rl() {
        s.push_str("KSMITH=/path/to/ksmith    # a ksmith checkout: python/ksmith/reward.py\n");
    }
    s
}

/// The sentence every agent card ends its usage with: where the evaluator runs.
const EVALUATOR_NOTE: &str = "Set `KSMITH_EVAL_URL` (where the rollout workers start: before \
    `ray start`, or in Ray's runtime environment) to evaluate on a remote evaluator; otherwise \
    each tool call evaluates locally (GPU when visible, else the Triton CPU interpreter, \
    correctness only).";

/// What ksmith's trainer tests (`make test-trainers`, on CPU) run of a multi-turn format's
/// command, and what they cannot run.
fn tested(format: Format) -> &'static str {
    match format {
        Format::VerlSftMultiturn => {
            "Tested by ksmith (CPU): verl's `MultiTurnSFTDataset` builds every conversation with \
             these settings; the training step needs verl's engine and GPUs and is not run."
        }
        Format::TrlSftMultiturn => {
            "Tested by ksmith (CPU): one `SFTTrainer` step with this command on a tiny model."
        }
        Format::OpenrlhfSftMultiturn => {
            "Tested by ksmith (CPU): OpenRLHF's `SFTDataset` keeps every conversation and trains \
             every answer; the training step needs DeepSpeed and GPUs and is not run."
        }
        Format::VerlAgent => {
            "Tested by ksmith (CPU): verl's `RLHFDataset` keeps every prompt with the tool's \
             schema, and one `ToolAgentLoop` episode runs with the `evaluate` tool and the \
             reward; a training step needs verl's GPU rollout engine (vLLM or SGLang) and is not \
             run."
        }
        Format::TrlEnv => {
            "Tested by ksmith (CPU): one `GRPOTrainer` step with this command on a tiny model \
             (transformers generation, no vLLM)."
        }
        Format::OpenrlhfAgent => {
            "Tested by ksmith (CPU): OpenRLHF's `PromptDataset` and one episode of its \
             `MultiTurnAgentExecutor` with this agent file; a training step needs Ray, vLLM and \
             GPUs and is not run."
        }
        _ => "",
    }
}

/// One row of the settings table: the trainer's key, its value and what it must hold.
type Row = (&'static str, u64, String);

/// The SFT sizes: the whole conversation.
fn conversation_row(c: &CardInput, key: &'static str, note: &str) -> Row {
    (
        key,
        c.fit.total,
        format!("longest conversation: {} tokens{note}", c.lengths.total.max),
    )
}

/// verl's SFT rows: the conversation, and the tokens per GPU when the default holds less.
fn verl_sft_rows(c: &CardInput) -> Vec<Row> {
    let mut rows = vec![conversation_row(c, "verl `data.max_length`", "")];
    if c.fit.total > VERL_SFT_TOKENS_PER_GPU {
        rows.push((
            "verl `data.max_token_len_per_gpu`",
            c.fit.total,
            "at least one whole sample per GPU".to_string(),
        ));
    }
    rows
}

/// The RL answer's size: a multiple of the current program, which an answer rewrites.
fn answer_row(c: &CardInput, key: &'static str, note: &str) -> Row {
    (
        key,
        c.fit.response,
        format!(
            "{}x the longest current program ({} tokens){note}",
            Fit::RL_RESPONSE_FACTOR,
            c.lengths.response.max
        ),
    )
}

/// The per-turn size of an agent episode, in words.
fn episode(c: &CardInput) -> String {
    format!(
        "{} turns x ({}x the longest current program ({} tokens) + {} for a report)",
        c.agent_max_turns,
        Fit::RL_RESPONSE_FACTOR,
        c.lengths.response.max,
        Fit::REPORT_TOKENS
    )
}

/// Joins command parts as one shell command, one argument per line.
fn command(parts: &[String]) -> String {
    parts.join(" \\\n  ")
}

/// The settings table: each trainer key, its value and what it must hold.
fn settings(c: &CardInput) -> String {
    let f = &c.fit;
    let l = &c.lengths;
    let rows: Vec<Row> = match c.format {
        Format::VerlRl => vec![
            (
                "verl `data.max_prompt_length`",
                f.prompt,
                format!("longest prompt: {} tokens", l.prompt.max),
            ),
            answer_row(
                c,
                "verl `data.max_response_length`",
                ": an answer rewrites it",
            ),
        ],
        Format::TrlGrpo => vec![
            answer_row(c, "TRL `max_completion_length`", ""),
            (
                "TRL `vllm_max_model_length` (with vLLM)",
                f.total,
                format!(
                    "longest prompt ({} tokens) plus the completion",
                    l.prompt.max
                ),
            ),
        ],
        Format::OpenrlhfRl => vec![
            (
                "OpenRLHF `--data.max_len`",
                f.total,
                format!("longest prompt ({} tokens) plus the answer", l.prompt.max),
            ),
            answer_row(c, "OpenRLHF `--rollout.max_new_tokens`", ""),
        ],
        Format::VerlSft | Format::VerlSftMultiturn => verl_sft_rows(c),
        Format::TrlSft | Format::TrlSftStandard => vec![(
            "TRL `max_length`",
            f.total,
            format!(
                "longest prompt plus completion: {} tokens (TRL's default of 1024 cuts the \
                 end, i.e. the completion)",
                l.total.max
            ),
        )],
        Format::TrlSftMultiturn => vec![conversation_row(
            c,
            "TRL `max_length`",
            " (TRL cuts longer ones at the end)",
        )],
        Format::OpenrlhfSft | Format::OpenrlhfSftMultiturn => vec![conversation_row(
            c,
            "OpenRLHF `--data.max_len`",
            " (longer samples are dropped silently)",
        )],
        Format::VerlAgent => vec![
            (
                "verl `data.max_prompt_length`",
                f.prompt,
                format!(
                    "longest prompt with the tools' schema: {} tokens",
                    l.prompt.max
                ),
            ),
            ("verl `data.max_response_length`", f.response, episode(c)),
            (
                "verl `multi_turn.max_assistant_turns`",
                u64::from(c.agent_max_turns) + 1,
                "the evaluations and the last answer".to_string(),
            ),
            (
                "verl `multi_turn.max_tool_response_length`",
                VERL_TOOL_RESPONSE_CHARS,
                "characters: a whole report".to_string(),
            ),
        ],
        Format::TrlEnv => vec![
            ("TRL `max_completion_length`", f.response, episode(c)),
            (
                "TRL `max_tool_calling_iterations`",
                u64::from(c.agent_max_turns),
                "evaluations per episode".to_string(),
            ),
            (
                "TRL `vllm_max_model_length` (with vLLM)",
                f.total,
                format!("longest prompt ({} tokens) plus the episode", l.prompt.max),
            ),
        ],
        Format::OpenrlhfAgent => vec![
            (
                "OpenRLHF `--data.max_len`",
                f.total,
                format!(
                    "longest prompt ({} tokens) plus {}",
                    l.prompt.max,
                    episode(c)
                ),
            ),
            (
                "`KSMITH_AGENT_MAX_TURNS`",
                u64::from(c.agent_max_turns),
                "evaluations per episode (the agent stops earlier on an answer without code)"
                    .to_string(),
            ),
        ],
    };
    let mut s = String::from("| setting | value | fits |\n|---|---|---|\n");
    for (key, value, why) in rows {
        let _ = writeln!(s, "| {key} | {value} | {why} |");
    }
    s
}

/// verl's data files, every shard of each split. The PPO trainer always builds a validation
/// dataset (`ppo`): without a validation split it reads the train files and validation is
/// switched off.
fn verl_files(c: &CardInput, ppo: bool) -> Vec<String> {
    let (train, validation) = (split(c, "train"), split(c, "validation"));
    let mut parts: Vec<String> = train
        .map(|t| hydra_files("data.train_files", t))
        .into_iter()
        .collect();
    let val = if ppo {
        validation.or(train)
    } else {
        validation
    };
    parts.extend(val.map(|v| hydra_files("data.val_files", v)));
    if ppo && validation.is_none() {
        parts.push("trainer.val_before_train=False".to_string());
        parts.push("trainer.test_freq=-1".to_string());
    }
    parts
}

/// The start of verl's GRPO commands (`launcher`: how `verl.trainer.main_ppo` is started): the
/// model, the data files and the prompt and answer lengths.
fn verl_grpo_head(c: &CardInput, launcher: &str) -> Vec<String> {
    let mut parts = vec![
        launcher.to_string(),
        "algorithm.adv_estimator=grpo".to_string(),
        "actor_rollout_ref.model.path=$MODEL".to_string(),
    ];
    parts.extend(verl_files(c, true));
    parts.extend([
        "data.prompt_key=prompt".to_string(),
        format!("data.max_prompt_length={}", c.fit.prompt),
        format!("data.max_response_length={}", c.fit.response),
        "data.filter_overlong_prompts=True".to_string(),
        "data.truncation=error".to_string(),
    ]);
    parts
}

/// TRL's evaluation arguments, when there is a validation split.
fn trl_eval(c: &CardInput) -> Vec<String> {
    match split(c, "validation") {
        Some(_) => vec![
            "--eval_strategy epoch".to_string(),
            "--dataset_test_split validation".to_string(),
        ],
        None => Vec::new(),
    }
}

/// OpenRLHF's evaluation arguments, when there is a validation split.
fn openrlhf_eval(c: &CardInput) -> Vec<String> {
    match split(c, "validation") {
        Some(_) => vec![
            "--eval.dataset $DS".to_string(),
            "--eval.split validation".to_string(),
        ],
        None => Vec::new(),
    }
}

/// verl's SFT command for conversations (`extra`: the keys of the format's columns besides
/// `messages`).
fn verl_sft_command(c: &CardInput, extra: &[&str]) -> String {
    let total = c.fit.total;
    let mut parts = vec![
        "torchrun --standalone --nnodes=1 --nproc_per_node=8 -m verl.trainer.sft_trainer"
            .to_string(),
        "model.path=$MODEL".to_string(),
    ];
    parts.extend(verl_files(c, false));
    parts.push("data.messages_key=messages".to_string());
    parts.extend(extra.iter().map(|e| e.to_string()));
    parts.push(format!("data.max_length={total}"));
    parts.push("data.truncation=error".to_string());
    if total > VERL_SFT_TOKENS_PER_GPU {
        parts.push(format!("data.max_token_len_per_gpu={total}"));
    }
    command(&parts)
}

/// The start of OpenRLHF's commands: the launcher, the model, the dataset and its train split
/// (`args`: the arguments that name these three) and the evaluation arguments.
fn openrlhf_head(c: &CardInput, launcher: String, args: [&str; 3]) -> Vec<String> {
    let [model, dataset, split] = args;
    let mut parts = vec![
        launcher,
        format!("{model} $MODEL"),
        format!("{dataset} $DS"),
        format!("{split} train"),
    ];
    parts.extend(openrlhf_eval(c));
    parts
}

/// The command line (and Python equivalent) for `c`'s format.
fn usage(c: &CardInput) -> String {
    let f = &c.fit;
    let mut out = String::new();
    match c.format {
        Format::VerlRl => {
            let mut parts = verl_grpo_head(c, "python -m verl.trainer.main_ppo");
            parts.extend([
                "reward.custom_reward_function.path=$KSMITH/python/ksmith/reward.py".to_string(),
                "reward.custom_reward_function.name=compute_score".to_string(),
            ]);
            let _ = writeln!(out, "```bash\n{}{}\n```\n", variables(c), command(&parts));
            out.push_str(
                "Set `KSMITH_EVAL_URL` to score answers on a remote evaluator; otherwise the \
                 reward evaluates locally (GPU when visible, else the Triton CPU interpreter, \
                 correctness only).\n",
            );
        }
        Format::VerlSft => {
            let _ = writeln!(
                out,
                "```bash\n{}{}\n```",
                variables(c),
                verl_sft_command(c, &[])
            );
        }
        Format::TrlSft | Format::TrlSftStandard => {
            let mut parts = vec![
                "trl sft".to_string(),
                "--model_name_or_path $MODEL".to_string(),
                "--dataset_name $DS".to_string(),
                format!("--max_length {}", f.total),
                "--output_dir sft-out".to_string(),
            ];
            parts.extend(trl_eval(c));
            let _ = writeln!(
                out,
                "```bash\n{}{}\n```\n\nor in Python:\n\n```python\nfrom datasets import \
                 load_dataset\nfrom trl import SFTConfig, SFTTrainer\nds = load_dataset(DS)\n\
                 trainer = SFTTrainer(model=MODEL, args=SFTConfig(max_length={}), \
                 train_dataset=ds[\"train\"])\n```",
                variables(c),
                command(&parts),
                f.total
            );
        }
        Format::TrlGrpo => {
            let parts = vec![
                "PYTHONPATH=$KSMITH/python trl grpo".to_string(),
                "--model_name_or_path $MODEL".to_string(),
                "--dataset_name $DS".to_string(),
                "--reward_funcs ksmith.reward.trl_reward_func".to_string(),
                format!("--max_completion_length {}", f.response),
                "--output_dir grpo-out".to_string(),
            ];
            let _ = writeln!(
                out,
                "```bash\n{}{}\n```\n\nor in Python (with `$KSMITH/python` on `sys.path`):\n\n\
                 ```python\nfrom datasets import load_dataset\nfrom trl import GRPOConfig, \
                 GRPOTrainer\nfrom ksmith.reward import trl_reward_func\nds = load_dataset(DS)\n\
                 trainer = GRPOTrainer(model=MODEL, reward_funcs=trl_reward_func, \
                 args=GRPOConfig(max_completion_length={}), train_dataset=ds[\"train\"])\n```\n\n\
                 With `--use_vllm`, also `--vllm_max_model_length {}`.",
                variables(c),
                command(&parts),
                f.response,
                f.total
            );
        }
        Format::OpenrlhfRl => {
            let mut parts = openrlhf_head(
                c,
                "python -m openrlhf.cli.train_ppo_ray".to_string(),
                [
                    "--actor.model_name_or_path",
                    "--data.prompt_dataset",
                    "--data.prompt_split",
                ],
            );
            parts.extend([
                "--data.input_key input".to_string(),
                "--data.label_key label".to_string(),
                "--data.apply_chat_template".to_string(),
                format!("--data.max_len {}", f.total),
                format!("--rollout.max_new_tokens {}", f.response),
                "--reward.remote_url $KSMITH/python/ksmith/reward.py".to_string(),
                "--algo.advantage.estimator group_norm".to_string(),
                "--rollout.n_samples_per_prompt 8".to_string(),
            ]);
            let _ = writeln!(
                out,
                "```bash\n{}{}\n```\n\nOpenRLHF imports `reward_func(queries, prompts, labels)` \
                 from that file.",
                variables(c),
                command(&parts)
            );
        }
        Format::OpenrlhfSft => {
            let mut parts = openrlhf_head(
                c,
                "deepspeed --module openrlhf.cli.train_sft".to_string(),
                [
                    "--model.model_name_or_path",
                    "--data.dataset",
                    "--data.dataset_split",
                ],
            );
            parts.extend([
                "--data.input_key input".to_string(),
                "--data.output_key output".to_string(),
                "--data.apply_chat_template".to_string(),
                format!("--data.max_len {}", f.total),
            ]);
            let _ = writeln!(out, "```bash\n{}{}\n```", variables(c), command(&parts));
        }
        Format::VerlSftMultiturn => {
            let _ = writeln!(
                out,
                "```bash\n{}{}\n```\n\nverl templates each message on its own and checks the \
                 result against the whole conversation; models whose template renders turns \
                 differently in context need `data.ignore_input_ids_mismatch=True`.",
                variables(c),
                verl_sft_command(c, &["data.tools_key=tools"])
            );
        }
        Format::TrlSftMultiturn => {
            let mut parts = vec![
                "trl sft".to_string(),
                "--model_name_or_path $MODEL".to_string(),
                "--dataset_name $DS".to_string(),
                format!("--max_length {}", f.total),
                "--assistant_only_loss true".to_string(),
                "--output_dir sft-out".to_string(),
            ];
            parts.extend(trl_eval(c));
            let _ = writeln!(
                out,
                "```bash\n{}{}\n```\n\nTRL renders each row's `tools` into the prompt. \
                 `--assistant_only_loss true` trains on the assistant turns only (the calls \
                 and the explanations, not the reports); it needs a chat template TRL knows \
                 (Qwen 2.5 and 3, Llama 3, ...) or one with `{{% generation %}}` markers.",
                variables(c),
                command(&parts)
            );
        }
        Format::OpenrlhfSftMultiturn => {
            let mut parts = openrlhf_head(
                c,
                "deepspeed --module openrlhf.cli.train_sft".to_string(),
                [
                    "--model.model_name_or_path",
                    "--data.dataset",
                    "--data.dataset_split",
                ],
            );
            parts.extend([
                "--data.input_key input".to_string(),
                "--data.apply_chat_template".to_string(),
                "--data.multiturn".to_string(),
                format!("--data.max_len {}", f.total),
            ]);
            let _ = writeln!(
                out,
                "```bash\n{}{}\n```\n\nOpenRLHF trains on every assistant turn of `input`.",
                variables(c),
                command(&parts)
            );
        }
        Format::VerlAgent => {
            let mut parts = verl_grpo_head(
                c,
                "PYTHONPATH=$KSMITH/python python -m verl.trainer.main_ppo",
            );
            parts.extend([
                "actor_rollout_ref.rollout.multi_turn.enable=True".to_string(),
                "actor_rollout_ref.rollout.multi_turn.format=hermes".to_string(),
                "actor_rollout_ref.rollout.multi_turn.tool_config_path=$KSMITH/python/ksmith/trainers/verl_tools.yaml"
                    .to_string(),
                format!(
                    "actor_rollout_ref.rollout.multi_turn.max_assistant_turns={}",
                    c.agent_max_turns + 1
                ),
                format!(
                    "actor_rollout_ref.rollout.multi_turn.max_tool_response_length={VERL_TOOL_RESPONSE_CHARS}"
                ),
                "reward.custom_reward_function.path=$KSMITH/python/ksmith/trainers/verl_agent.py"
                    .to_string(),
                "reward.custom_reward_function.name=compute_score".to_string(),
            ]);
            let _ = writeln!(
                out,
                "```bash\n{}{}\n```\n\nEvery row names verl's `tool_agent` loop; the `evaluate` \
                 tool (`ksmith.trainers.verl_agent.EvaluateTool`, needs `$KSMITH/python` on the \
                 workers' `PYTHONPATH`) scores each call with `ksmith.reward.score_answer` \
                 against the row's `extra_info.tools_kwargs`, and the episode's reward is its \
                 best call (no call: the last answer scored as a single-turn answer). The \
                 `hermes` parser reads `<tool_call>` blocks (Qwen 2.5 and 3, Hermes); set \
                 `multi_turn.format` for other models. {EVALUATOR_NOTE}",
                variables(c),
                command(&parts)
            );
        }
        Format::TrlEnv => {
            let mut parts = vec![
                "PYTHONPATH=$KSMITH/python python -m ksmith.trainers.trl_env".to_string(),
                "--model_name_or_path $MODEL".to_string(),
                "--dataset_name $DS".to_string(),
                format!("--max_completion_length {}", f.response),
                format!("--max_tool_calling_iterations {}", c.agent_max_turns),
                "--output_dir env-out".to_string(),
            ];
            parts.extend(trl_eval(c));
            let _ = writeln!(
                out,
                "```bash\n{}{}\n```\n\n`ksmith.trainers.trl_env` is `trl grpo` with \
                 `environment_factory=KernelEnv`: each rollout's environment reads the row's \
                 `ground_truth` on `reset`, exposes `evaluate` as the tool, and its \
                 `get_reward` is the best call's `ksmith.reward.score_answer` score. In Python: \
                 `GRPOTrainer(model=MODEL, args=GRPOConfig(max_completion_length={}, \
                 max_tool_calling_iterations={}), train_dataset=load_dataset(DS)[\"train\"], \
                 environment_factory=ksmith.trainers.trl_env.KernelEnv)`. With `--use_vllm`, \
                 also `--vllm_max_model_length {}`. {EVALUATOR_NOTE}",
                variables(c),
                command(&parts),
                f.response,
                c.agent_max_turns,
                f.total
            );
        }
        Format::OpenrlhfAgent => {
            let mut parts = openrlhf_head(
                c,
                format!(
                    "KSMITH_AGENT_MAX_TURNS={} python -m openrlhf.cli.train_ppo_ray",
                    c.agent_max_turns
                ),
                [
                    "--actor.model_name_or_path",
                    "--data.prompt_dataset",
                    "--data.prompt_split",
                ],
            );
            parts.extend([
                "--data.input_key input".to_string(),
                "--data.label_key label".to_string(),
                "--data.apply_chat_template".to_string(),
                format!("--data.max_len {}", f.total),
                "--train.agent_func_path $KSMITH/python/ksmith/trainers/openrlhf_agent.py"
                    .to_string(),
                "--algo.advantage.estimator group_norm".to_string(),
                "--rollout.n_samples_per_prompt 8".to_string(),
            ]);
            let _ = writeln!(
                out,
                "```bash\n{}{}\n```\n\nOpenRLHF loads `AgentExecutor` from that file: each \
                 answer is read as a single-turn answer (`ksmith.reward.extract_program` against \
                 the last program), scored with `ksmith.reward.score_answer`, and the report \
                 comes back as a user turn rendered with the model's chat template; an answer \
                 without code, or `KSMITH_AGENT_MAX_TURNS` answers, end the episode, whose \
                 reward is its best answer's score. {EVALUATOR_NOTE}",
                variables(c),
                command(&parts)
            );
        }
    }
    out
}

/// The "Lengths", "Trainer settings" and "Usage" sections (and, for the multi-turn formats, what
/// ksmith's tests run of the command).
pub fn sections(c: &CardInput) -> String {
    let l = &c.lengths;
    let mut s = String::new();
    let response = match c.format.source() {
        Source::Sft => "response (answer)",
        Source::Grpo => "current program (an answer rewrites it)",
        Source::Chains(_) => "rest of the conversation (answers, calls, reports)",
        Source::Env(_) => "current program (each answer rewrites it)",
    };
    let _ = writeln!(
        s,
        "## Lengths\n\nTokens per sample, counted with `{}`{} (prompts include {} tokens per \
         message for the chat template).\n\n| tokens | median | p99 | max |\n|---|---|---|---|",
        l.counter,
        if c.approx {
            " (ceil(characters / 4): within about 15% of a BPE tokenizer's count on code)"
        } else {
            ""
        },
        if c.approx {
            4
        } else {
            crate::lengths::TEMPLATE_TOKENS_PER_MESSAGE
        }
    );
    for (name, st) in [
        ("prompt", &l.prompt),
        (response, &l.response),
        ("total", &l.total),
    ] {
        let _ = writeln!(s, "| {name} | {} | {} | {} |", st.median, st.p99, st.max);
    }
    let caps = &c.caps;
    if caps.max_prompt_tokens > 0
        || caps.max_response_tokens > 0
        || caps.max_conversation_tokens > 0
    {
        let dropped: Vec<String> = caps
            .dropped
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect();
        let _ = writeln!(
            s,
            "\nCaps (`[export]`): max_prompt_tokens = {}, max_response_tokens = {}, \
             max_conversation_tokens = {} (0 = none); samples left out: {}; prompts cut to fit: \
             {}.",
            caps.max_prompt_tokens,
            caps.max_response_tokens,
            caps.max_conversation_tokens,
            if dropped.is_empty() {
                "none".to_string()
            } else {
                dropped.join(", ")
            },
            caps.truncated
        );
    }
    let _ = writeln!(
        s,
        "\n## Trainer settings\n\nSettings that fit every sample: the longest length plus a \
         margin ({}), rounded up to a multiple of {}.\n\n{}",
        if c.approx {
            "20%, for the chars/4 estimate"
        } else {
            "5%, for the chat template"
        },
        crate::lengths::Fit::ROUND,
        settings(c)
    );
    let _ = writeln!(s, "## Usage\n\n{}", usage(c));
    let note = tested(c.format);
    if !note.is_empty() {
        let _ = writeln!(s, "{note}\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::card::tests::card;

    #[test]
    fn verl_rl_names_every_shard_and_reads_train_for_validation_when_there_is_none() {
        let with_val = usage(&card(
            Format::VerlRl,
            &[("train", 10, 2), ("validation", 2, 1)],
        ));
        assert!(with_val.contains(
            "\"data.train_files=['$DS/data/train-00000-of-00002.parquet','$DS/data/train-00001-of-00002.parquet']\""
        ), "{with_val}");
        assert!(
            with_val.contains("\"data.val_files=['$DS/data/validation-00000-of-00001.parquet']\"")
        );
        assert!(!with_val.contains("test_freq"));
        // 1200 + 20% -> 1536; answers: 2 x 400 + 20% -> 1024.
        assert!(
            with_val.contains("data.max_prompt_length=1536"),
            "{with_val}"
        );
        assert!(with_val.contains("data.max_response_length=1024"));
        assert!(
            with_val.contains("reward.custom_reward_function.path=$KSMITH/python/ksmith/reward.py")
        );

        let train_only = usage(&card(Format::VerlRl, &[("train", 10, 1)]));
        assert!(!train_only.contains("validation-"), "{train_only}");
        assert!(
            train_only.contains("\"data.val_files=['$DS/data/train-00000-of-00001.parquet']\"")
        );
        assert!(train_only.contains("trainer.val_before_train=False"));
        assert!(train_only.contains("trainer.test_freq=-1"));
    }

    #[test]
    fn sft_commands_carry_the_length_that_fits() {
        // 1600 + 20% = 1920 -> 2048.
        let verl = usage(&card(Format::VerlSft, &[("train", 3, 1)]));
        assert!(verl.contains("-m verl.trainer.sft_trainer"), "{verl}");
        assert!(verl.contains("data.messages_key=messages"));
        assert!(verl.contains("data.max_length=2048"));
        assert!(!verl.contains("val_files"), "no validation split");
        assert!(
            !verl.contains("max_token_len_per_gpu"),
            "2048 fits the default"
        );
        let trl = usage(&card(
            Format::TrlSft,
            &[("train", 3, 1), ("validation", 1, 1)],
        ));
        assert!(trl.contains("--max_length 2048") && trl.contains("SFTConfig(max_length=2048)"));
        assert!(trl.contains("--dataset_test_split validation"));
        let orl = usage(&card(Format::OpenrlhfSft, &[("train", 3, 1)]));
        assert!(orl.contains("--data.max_len 2048") && !orl.contains("--eval.dataset"));
        let table = settings(&card(Format::TrlSft, &[("train", 3, 1)]));
        assert!(table.contains("| TRL `max_length` | 2048 |"), "{table}");
    }

    #[test]
    fn rl_commands_size_prompt_and_answer() {
        let orl = usage(&card(
            Format::OpenrlhfRl,
            &[("train", 3, 1), ("validation", 1, 1)],
        ));
        assert!(orl.contains("--data.max_len 2560"), "1536 + 1024: {orl}");
        assert!(orl.contains("--rollout.max_new_tokens 1024"));
        assert!(orl.contains("--eval.dataset $DS") && orl.contains("--eval.split validation"));
        assert!(orl.contains("--reward.remote_url $KSMITH/python/ksmith/reward.py"));
        let trl = usage(&card(Format::TrlGrpo, &[("train", 3, 1)]));
        assert!(trl.contains("--max_completion_length 1024"), "{trl}");
        assert!(trl.contains("--reward_funcs ksmith.reward.trl_reward_func"));
    }
}
