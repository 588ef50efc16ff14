"""The evaluator as an environment (`ksmith.environment`): episodes scored by the reward function,
the reports they answer with, text answers edited against the last program, and the agreement
between what the Rust export writes (the multi-turn SFT datasets' tool schema and reports) and
what an episode answers with, down to real evaluations in the Triton CPU interpreter."""

from __future__ import annotations

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ksmith import environment, reward  # noqa: E402
from ksmith.environment import REPORT_KEYS, TOOL_SCHEMA, KernelEnvironment, report, report_text  # noqa: E402
from test_reward import LAUNCH, PARENT, Scripted, diff, gt, result  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_parent_cache():
    reward._PARENT_TIMES.clear()
    yield
    reward._PARENT_TIMES.clear()


def program(marker: str) -> str:
    return PARENT.replace(LAUNCH, LAUNCH + f"        # {marker}\n")


def test_tool_calls_are_scored_by_the_reward_and_the_episode_keeps_its_best():
    ev = Scripted(
        {
            "fast": [result(cand_ms=0.5, ref_ms=2.0)],
            "wrong": [result("incorrect")],
            "hack": [result("hacked", hack="torch_fallback")],
        },
        parent_ms=(1.0,),
    )
    episode = KernelEnvironment(gt(), backend=ev)
    assert episode.reward() == 0.0, "no evaluation yet: no_code_reward"
    wrong = episode.evaluate(program("wrong"))
    assert list(wrong) == list(REPORT_KEYS)
    assert wrong == {
        "status": "incorrect",
        "compiled": True,
        "correct": False,
        "speedup": None,
        "hack": None,
        "error": "incorrect details",
    }
    fast = episode.evaluate(program("fast"))
    assert fast["correct"] and fast["speedup"] == 4.0 and fast["error"] == "", "speedup over eager"
    hack = episode.evaluate(program("hack"))
    assert hack["hack"] == "torch_fallback" and hack["status"] == "hacked"
    # The scores are the reward function's own: 0.3 + (2x over the parent - 1).
    assert [r["score"] for r in episode.results] == [0.0, pytest.approx(1.3), -1.0]
    assert episode.reward() == pytest.approx(1.3) and episode.last_score == -1.0
    assert episode.best()["speedup_vs_parent"] == pytest.approx(2.0)
    # The evaluated candidate is the program itself (one fenced block read by the reward).
    candidates = [r["candidate"] for r, _ in ev.requests if r["candidate"] != PARENT]
    assert candidates[1] == program("fast")


def test_an_empty_program_is_reported_without_an_evaluation():
    ev = Scripted({})
    episode = KernelEnvironment(gt(), backend=ev)
    rep = episode.evaluate("  ")
    assert rep["status"] == "no_code" and "complete program" in rep["error"]
    assert ev.requests == [] and episode.reward() == 0.0


def test_text_answers_edit_the_last_program_and_an_answer_without_code_ends_the_episode():
    # The second program holds both markers: the scripted evaluator matches "second" first.
    ev = Scripted({"second": [result(cand_ms=0.8, ref_ms=1.0)], "first": [result("runtime_error")]})
    episode = KernelEnvironment(gt(), backend=ev)
    first = episode.answer(diff(LAUNCH, LAUNCH + "        # first\n"))
    assert first["status"] == "runtime_error" and first["error"] == "runtime_error details"
    # The second answer edits the first one's program (its marker line is the SEARCH text).
    second = episode.answer(diff("        # first\n", "        # first\n        # second\n"))
    assert second["correct"]
    assert "# first\n        # second" in episode.current
    done = episode.answer("That is my final kernel.")
    assert done is None and len(episode.results) == 2, "no program: no evaluation"
    # 0.8 ms against the parent's 1.0 ms, re-timed by the reward: 0.3 + (1.25 - 1).
    assert episode.reward() == pytest.approx(0.55)


def test_reports_cut_the_error_log_and_print_compact_json():
    long = {"status": "compile_error", "compiled": False, "correct": False, "hack": None, "message": "x" * 5000 + "END"}
    rep = report(long)
    assert len(rep["error"]) == environment.ERROR_TAIL_CHARS and rep["error"].endswith("END")
    # Speedups round half away from zero, as the Rust export rounds them.
    ok = {"status": "correct", "compiled": True, "correct": True, "hack": None, "message": ""}
    assert report({**ok, "speedup_vs_reference": 1.125})["speedup"] == 1.13
    assert report_text(report({**long, "message": "é"})) == (
        '{"status":"compile_error","compiled":false,"correct":false,"speedup":null,"hack":null,"error":"é"}'
    )


# -- what the Rust export writes --------------------------------------------------------------


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    import datasets
    from test_export import run_fixture

    workdir = str(tmp_path_factory.mktemp("environment"))
    run_fixture(workdir)
    root = os.path.join(workdir, "datasets")
    return {
        "chains": datasets.load_dataset(os.path.join(root, "verl-sft-multiturn"))["train"],
        "env": datasets.load_dataset(os.path.join(root, "verl-agent"))["train"],
    }


def test_the_datasets_declare_the_environments_tool_and_report(exported):
    chains = exported["chains"]
    assert chains[0]["tools"] == [TOOL_SCHEMA], "one schema: the datasets' and the environment's"
    reports = [json.loads(m["content"]) for row in chains for m in row["messages"] if m["role"] == "tool"]
    assert reports and all(list(r) == list(REPORT_KEYS) for r in reports)
    # An untimed correct turn is reported exactly as an episode reports one.
    untimed = next(
        m["content"]
        for row in chains
        for m in row["messages"]
        if m["role"] == "tool" and json.loads(m["content"])["correct"] and json.loads(m["content"])["speedup"] is None
    )
    correct = {"status": "correct", "compiled": True, "correct": True, "hack": None, "message": "correctness-only"}
    assert report_text(report(correct)) == untimed


def test_an_episode_on_an_exported_start_evaluates_in_the_cpu_interpreter(exported):
    """The start is the task's seed (the reference as the editable block); the fixture chain's two
    programs are its turns: the wrong one fails with the evaluator's words, the right one passes."""
    row = exported["env"][0]
    chain = exported["chains"][0]
    calls = [m["tool_calls"][0]["function"]["arguments"]["program"] for m in chain["messages"] if m["tool_calls"]]
    backend = reward.LocalBackend(device="cpu")
    try:
        episode = KernelEnvironment(row["extra_info"]["tools_kwargs"]["evaluate"]["create_kwargs"]["ground_truth"])
        episode.backend = backend
        wrong = episode.evaluate(calls[0])
        right = episode.evaluate(calls[1])
    finally:
        backend.close()
    assert wrong["status"] == "incorrect" and wrong["compiled"] and wrong["error"], wrong
    assert right == {"status": "correct", "compiled": True, "correct": True, "speedup": None, "hack": None, "error": ""}
    assert episode.reward() == pytest.approx(0.3), "correct, untimed on CPU: the correctness reward"
