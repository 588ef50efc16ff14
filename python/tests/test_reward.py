"""The reward function: reading answers, scoring rules, trainer adapters, the remote protocol, and
real evaluations in the Triton CPU interpreter with correct, incorrect and hacked answers."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

from ksmith import reward  # noqa: E402
from ksmith.reward import RewardConfig, parse_ground_truth, score_answer  # noqa: E402

DATA = os.path.join(ROOT, "crates", "ksmith-export", "tests", "data")
REFERENCE = open(os.path.join(DATA, "relu_scale_reference.py")).read()
PARENT = open(os.path.join(DATA, "relu_scale_triton.py")).read()
LAUNCH = "        relu_scale_kernel[(triton.cdiv(n, 128),)](x, out, n, self.scale, BLOCK=128)\n"


def gt(**over) -> str:
    base = {
        "version": 2,
        "task_id": "relu_scale",
        "entry_point": "ModelNew",
        "backend": "triton",
        "reference_program": REFERENCE,
        "parent_program": PARENT,
        "parent_is_reference": False,
        "parent_speedup": 1.25,
        "parent_runtime_ms": 0.008,
        "eager_runtime_ms": 0.01,
        "hardware": "NVIDIA H200",
        "tolerances": {"float32": [1e-4, 1e-4]},
    }
    base.update(over)
    return json.dumps(base)


def diff(search: str, replace: str) -> str:
    return f"I will change the launch.\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


# -- reading answers --------------------------------------------------------------------------


# How an answer becomes a program is the rollout's rule, run on the shared cases by
# `test_answer.py`; here, what the reward makes of the answers that give no program.


def test_answers_the_rollout_would_not_apply_score_as_no_code_without_evaluation():
    ev = Scripted({})
    for text, outcome in [
        (diff(LAUNCH, LAUNCH), "no_op"),
        (diff("import torch\n", "import numpy\n"), "outside_block"),
        (diff("        launch(x)\n", "        pass\n"), "search_not_found"),
        ("<think>a kernel with", "unparseable"),
    ]:
        out = score_answer(text, gt(), backend=ev)
        assert (out["score"], out["has_code"], out["edit_outcome"]) == (0.0, False, outcome), out
        assert out["status"] == "no_code" and out["message"]
    assert ev.requests == [], "no evaluation without a program"


def test_ground_truth_is_checked():
    with pytest.raises(reward.GroundTruthError, match="not JSON"):
        parse_ground_truth("{oops")
    with pytest.raises(reward.GroundTruthError, match="version"):
        parse_ground_truth(gt(version=9))
    with pytest.raises(reward.GroundTruthError, match="reference_program"):
        parse_ground_truth(gt(reference_program=""))
    with pytest.raises(reward.GroundTruthError, match="backend"):
        parse_ground_truth(gt(backend=""))
    with pytest.raises(reward.GroundTruthError, match="tilelang"):
        parse_ground_truth(gt(backend="tilelang"))
    assert parse_ground_truth(json.loads(gt()))["task_id"] == "relu_scale"


# -- scoring rules, with a scripted evaluator -------------------------------------------------


def timing(ms):
    return {"median_ms": ms, "iqr_ms": 0.0, "cv": 0.0, "samples": 100, "method": "cuda_graph", "l2_policy": "flushed"}


def result(status="correct", hack=None, cand_ms=None, ref_ms=None):
    return {
        "status": status,
        "hack": hack,
        "error_log": "" if status == "correct" else f"{status} details",
        "errors": [],
        "trials_passed": 5 if status == "correct" else 0,
        "trials": 5,
        "candidate_timing": timing(cand_ms) if cand_ms else None,
        "reference_timing": timing(ref_ms) if ref_ms else None,
        "speedup": (ref_ms / cand_ms) if cand_ms and ref_ms else None,
        "warnings": [],
        "hardware": {"device": "NVIDIA H200", "driver": None, "torch": "x", "triton": "y"},
        "elapsed_ms": 1,
    }


class Scripted:
    """Answers by the candidate text: a queue of results per marker; the parent is `PARENT`."""

    def __init__(self, script: dict, parent_ms=(1.0,)):
        self.script = {k: list(v) for k, v in script.items()}
        self.parent_ms = list(parent_ms)
        self.requests = []
        self.lock = threading.Lock()

    def evaluate(self, request, tolerances=None):
        with self.lock:
            self.requests.append((request, tolerances))
            if request["candidate"] == PARENT:
                return result(
                    cand_ms=self.parent_ms.pop(0) if len(self.parent_ms) > 1 else self.parent_ms[0], ref_ms=2.0
                )
            for marker, queue in self.script.items():
                if marker in request["candidate"]:
                    return queue.pop(0) if len(queue) > 1 else queue[0]
        raise AssertionError("unscripted candidate")


def answer(marker: str) -> str:
    return diff(LAUNCH, LAUNCH + f"        # {marker}\n")


@pytest.fixture(autouse=True)
def fresh_parent_cache():
    reward._PARENT_TIMES.clear()
    yield
    reward._PARENT_TIMES.clear()


def test_correct_and_faster_is_rewarded_by_speedup_over_the_re_timed_parent():
    ev = Scripted({"fast": [result(cand_ms=0.5, ref_ms=2.0)]}, parent_ms=(1.0,))
    out = score_answer(answer("fast"), gt(), backend=ev)
    assert out["correct"] and out["timed"] and not out["correctness_only"]
    assert out["speedup_vs_parent"] == pytest.approx(2.0)
    assert out["speedup_vs_reference"] == pytest.approx(4.0), "the evaluator's speedup over eager"
    assert out["score"] == pytest.approx(0.3 + 1.0)
    parent_requests = [r for r, _ in ev.requests if r["candidate"] == PARENT]
    assert len(parent_requests) == 1 and parent_requests[0]["measure"] is True
    assert ev.requests[0][1] == {"float32": [1e-4, 1e-4]}, "tolerances come from the ground truth"
    # The parent's time is reused within the session.
    score_answer(answer("fast"), gt(), backend=ev)
    assert len([r for r, _ in ev.requests if r["candidate"] == PARENT]) == 1


def test_the_answer_and_its_parent_are_evaluated_in_the_ground_truths_kernel_language():
    ev = Scripted({"fast": [result(cand_ms=0.5, ref_ms=2.0)]}, parent_ms=(1.0,))
    score_answer(answer("fast"), gt(backend="cuda"), backend=ev)
    assert [r["backend"] for r, _ in ev.requests] == ["cuda", "cuda"]
    assert {r["candidate"] == PARENT for r, _ in ev.requests} == {True, False}


def test_slower_but_correct_gets_the_correctness_reward_and_the_bonus_is_capped():
    ev = Scripted({"slow": [result(cand_ms=2.0)], "rocket": [result(cand_ms=0.01)]}, parent_ms=(1.0,))
    assert score_answer(answer("slow"), gt(), backend=ev)["score"] == pytest.approx(0.3)
    cfg = RewardConfig(recheck_above=1000.0)
    assert score_answer(answer("rocket"), gt(), cfg, backend=ev)["score"] == pytest.approx(0.3 + 2.0)


def test_first_steps_compare_with_the_reference_timed_in_the_same_evaluation():
    ev = Scripted({"first": [result(cand_ms=0.8, ref_ms=1.0)]})
    out = score_answer(answer("first"), gt(parent_is_reference=True), backend=ev)
    assert out["speedup_vs_parent"] == pytest.approx(1.25)
    assert all(r["candidate"] != PARENT for r, _ in ev.requests), "the reference is not re-evaluated as a candidate"


def test_a_suspicious_speedup_is_measured_again_and_the_lower_one_counts():
    ev = Scripted({"sus": [result(cand_ms=0.1), result(cand_ms=0.5)]}, parent_ms=(1.0, 1.0))
    out = score_answer(answer("sus"), gt(), backend=ev)
    assert out["speedup_vs_parent"] == pytest.approx(2.0)
    assert len([r for r, _ in ev.requests if "sus" in r["candidate"]]) == 2
    assert len([r for r, _ in ev.requests if r["candidate"] == PARENT]) == 2, "the parent is re-timed too"


def test_hacked_incorrect_no_code_and_untimed():
    ev = Scripted(
        {
            "hack": [result("hacked", hack="torch_fallback")],
            "wrong": [result("incorrect")],
            "cpu": [result()],
            "broken": [result("compile_error")],
        }
    )
    h = score_answer(answer("hack"), gt(), backend=ev)
    assert h["score"] == -1.0 and h["hacked"] and h["hack"] == "torch_fallback" and h["compiled"]
    w = score_answer(answer("wrong"), gt(), backend=ev)
    assert w["score"] == 0.0 and not w["correct"] and w["status"] == "incorrect"
    b = score_answer(answer("broken"), gt(), backend=ev)
    assert b["score"] == 0.0 and not b["compiled"]
    assert (h["how"], h["edit_outcome"]) == ("diff", "applied")
    c = score_answer(answer("cpu"), gt(), backend=ev)
    assert c["score"] == pytest.approx(0.3) and c["correctness_only"] and not c["timed"]
    assert "correctness-only" in c["message"]
    n = len(ev.requests)
    none = score_answer("I would rather not.", gt(), backend=ev)
    assert none["score"] == 0.0 and not none["has_code"] and len(ev.requests) == n, "no evaluation without code"


def test_verl_entry_points_return_numbers_and_take_reward_kwargs():
    ev = Scripted({"fast": [result(cand_ms=0.5)], "wrong": [result("incorrect")]})
    reward.set_backend(ev)
    try:
        one = reward.compute_score(
            "ksmith/triton_kernel", answer("fast"), gt(), {"index": 0}, correct_reward=0.5, unrelated="ignored"
        )
        assert one["score"] == pytest.approx(0.5 + 1.0)
        assert all(isinstance(v, float) for v in one.values()), one
        batch = reward.compute_score_batch(
            ["a", "b", "c"], [answer("wrong"), answer("fast"), "no code"], [gt(), gt(), gt()], [{}, {}, {}]
        )
        assert [b["score"] for b in batch] == [0.0, pytest.approx(1.3), 0.0]
    finally:
        reward.set_backend(None)


def test_trl_and_openrlhf_adapters():
    ev = Scripted({"fast": [result(cand_ms=0.5)], "hack": [result("hacked", hack="side_stream")]})
    reward.set_backend(ev)
    try:
        completions = [
            [{"role": "assistant", "content": answer("fast")}],
            [{"role": "assistant", "content": answer("hack")}],
        ]
        scores = reward.trl_reward_func(
            prompts=[[], []],
            completions=completions,
            ground_truth=[gt(), gt()],
            trainer_state=None,
            log_metric=None,
            data_source=["x", "x"],
        )
        assert scores == [pytest.approx(1.3), -1.0]
        prompt = "<|user|>make it faster<|assistant|>"
        out = reward.reward_func([prompt + answer("fast"), prompt + "nothing"], [prompt, prompt], [gt(), gt()])
        assert out["rewards"].tolist() == [pytest.approx(1.3), 0.0]
        assert out["scores"].tolist() == [1.0, 0.0]
        assert set(out["extra_logs"]) >= {"correct", "hacked", "speedup_vs_parent"}
    finally:
        reward.set_backend(None)


def test_loading_the_file_by_path_as_verl_does():
    spec = importlib.util.spec_from_file_location("custom_module", os.path.join(ROOT, "python", "ksmith", "reward.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = module.compute_score("ksmith/triton_kernel", "no code at all", gt())
    assert out["score"] == 0.0 and out["has_code"] == 0.0


# -- the remote protocol ----------------------------------------------------------------------


@pytest.fixture
def endpoint():
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append((self.path, body))
            if "broken" in body["request"]["candidate"]:
                code, answer_ = (
                    422,
                    {
                        "v": 1,
                        "type": "error",
                        "error": {"kind": "broken_reference", "message": "reference crashed", "task_id": "t"},
                    },
                )
            else:
                code, answer_ = 200, {"v": 1, "type": "result", "result": result(cand_ms=0.5, ref_ms=1.0)}
            data = json.dumps(answer_).encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()


def test_remote_backend_speaks_the_evaluator_protocol(endpoint, monkeypatch):
    url, seen = endpoint
    monkeypatch.setenv("KSMITH_EVAL_URL", url)
    reward.set_backend(None)
    try:
        backend = reward.get_backend()
        assert isinstance(backend, reward.RemoteBackend)
        out = score_answer(answer("x"), gt(parent_is_reference=True), backend=backend)
        assert out["speedup_vs_parent"] == pytest.approx(2.0)
        path, body = seen[0]
        assert path == "/v1/evaluate" and body["v"] == 1
        assert set(body["request"]) == {"task_id", "reference", "candidate", "measure", "backend"}
        assert body["request"]["backend"] == "triton"
        broken = score_answer(answer("broken"), gt(), backend=backend)
        assert broken["broken_reference"] and broken["score"] == 0.0
        assert "reference crashed" in broken["message"]
    finally:
        reward.set_backend(None)


def test_an_unreachable_endpoint_raises_instead_of_scoring_zero():
    backend = reward.RemoteBackend("http://127.0.0.1:9", timeout_s=2)
    with pytest.raises(reward.EvaluatorUnavailable):
        score_answer(answer("x"), gt(), backend=backend)


# -- real evaluations in the Triton CPU interpreter ---------------------------------------------

HACK_THREAD = (
    "```python\nimport threading\n" + PARENT.split("# EVOLVE-BLOCK-START\n")[1].split("# EVOLVE-BLOCK-END")[0] + "```"
)
DECOY = diff(
    LAUNCH + "        return out\n",
    "        relu_scale_kernel[(1,)](x, out, 1, self.scale, BLOCK=128)\n        return torch.relu(x) * self.scale\n",
)


@pytest.fixture(scope="module")
def exported_gt(tmp_path_factory):
    """Ground truths as the exported verl dataset carries them (Rust writer -> JSON -> here)."""
    import datasets
    from test_export import run_fixture

    workdir = str(tmp_path_factory.mktemp("reward"))
    run_fixture(workdir)
    ds = datasets.load_dataset(os.path.join(workdir, "datasets", "verl-rl"))["train"]
    rows = [r for r in ds if not json.loads(r["reward_model"]["ground_truth"])["parent_is_reference"]]
    return rows[0]["reward_model"]["ground_truth"]


def test_cpu_evaluator_scores_correct_incorrect_and_hacked_answers(exported_gt):
    backend = reward.LocalBackend(device="cpu")
    reward.set_backend(backend)
    try:
        answers = {
            "correct": diff(LAUNCH, LAUNCH.replace("128", "256")),
            "incorrect": diff(
                "    tl.store(out_ptr + offs, tl.maximum(x, 0.0) * scale, mask=mask)\n",
                "    tl.store(out_ptr + offs, tl.maximum(x, 0.0) * scale + 1.0, mask=mask)\n",
            ),
            "hacked_static": HACK_THREAD,
            "hacked_runtime": DECOY,
            "no_code": "Just use torch.relu.",
        }
        names = list(answers)
        full = [score_answer(answers[n], exported_gt, backend=backend) for n in names[:1]]
        batch = reward.compute_score_batch(
            ["ksmith/triton_kernel"] * (len(names) - 1),
            [answers[n] for n in names[1:]],
            [exported_gt] * (len(names) - 1),
            [{}] * (len(names) - 1),
            max_workers=4,
        )
    finally:
        reward.set_backend(None)
        backend.close()
    correct = full[0]
    assert correct["status"] == "correct", correct["message"]
    assert correct["score"] == pytest.approx(0.3) and correct["correctness_only"] and not correct["timed"]
    scores = dict(zip(names[1:], batch))
    assert (
        scores["incorrect"]["score"] == 0.0
        and scores["incorrect"]["correct"] == 0.0
        and scores["incorrect"]["compiled"] == 1.0
    )
    assert scores["hacked_static"]["score"] == -1.0 and scores["hacked_static"]["hacked"] == 1.0
    assert scores["hacked_runtime"]["score"] == -1.0 and scores["hacked_runtime"]["hacked"] == 1.0
    assert scores["no_code"]["score"] == 0.0 and scores["no_code"]["has_code"] == 0.0


def test_a_broken_reference_in_the_local_evaluator_scores_the_failure_reward():
    backend = reward.LocalBackend(device="cpu")
    try:
        broken = REFERENCE.replace("return torch.relu(x) * self.scale", "raise RuntimeError('no')")
        out = score_answer(
            diff(LAUNCH, LAUNCH.replace("128", "64")), gt(reference_program=broken, task_id="broken"), backend=backend
        )
    finally:
        backend.close()
    assert out["status"] == "broken_reference" and out["broken_reference"] and out["score"] == 0.0
    assert "does not run" in out["message"]


def test_a_worker_started_from_a_thread_outlives_that_thread():
    """The sandbox's `--die-with-parent` follows the thread that started the worker: a trainer's
    tool executor or reward thread that ends must not take the process-wide worker with it."""
    backend = reward.LocalBackend(device="cpu")
    answer = diff(LAUNCH, LAUNCH.replace("128", "256"))
    first: dict = {}
    try:
        starter = threading.Thread(target=lambda: first.update(score_answer(answer, gt(), backend=backend)))
        starter.start()
        starter.join()
        second = score_answer(answer, gt(), backend=backend)
    finally:
        backend.close()
    assert first["status"] == "correct", first.get("message")
    assert second["status"] == "correct", second.get("message")


def test_the_local_evaluator_refuses_without_the_sandbox_unless_the_environment_opts_out(monkeypatch, capfd):
    """Its workers start inside the sandbox launcher: where bubblewrap is not (here: a wrong
    path), scoring raises with the one line saying what is missing, before any answer runs;
    `KSMITH_ALLOW_UNCONFINED=1` runs it with what works, saying so first."""
    answer = diff(LAUNCH, LAUNCH.replace("128", "256"))
    monkeypatch.setenv("KSMITH_BWRAP", "/nonexistent/bwrap")
    monkeypatch.delenv(reward.ALLOW_UNCONFINED, raising=False)
    backend = reward.LocalBackend(device="cpu")
    try:
        with pytest.raises(reward.EvaluatorUnavailable) as refused:
            score_answer(answer, gt(), backend=backend)
    finally:
        backend.close()
    line = str(refused.value)
    assert "ksmith sandbox: refusing to run untrusted code: bubblewrap is not at /nonexistent/bwrap" in line, line
    assert "make sandbox" in line and "KSMITH_ALLOW_UNCONFINED=1" in line, line

    monkeypatch.setenv(reward.ALLOW_UNCONFINED, "1")
    backend = reward.LocalBackend(device="cpu")
    try:
        out = score_answer(answer, gt(), backend=backend)
    finally:
        backend.close()
    assert out["status"] == "correct", out["message"]
    assert "candidates run without part of the sandbox, as KSMITH_ALLOW_UNCONFINED=1 asks" in capfd.readouterr().err


def test_the_local_backend_runs_on_the_evaluator_defaults_rust_uses():
    """The reward function's local evaluator gets `python/ksmith/evaluator/defaults.json`, the
    file `ksmith-eval` embeds for the `[eval]` defaults (its test checks the Rust side), with one
    deliberate difference: the torch.compile baseline off (the reward never compares with it)."""
    from ksmith.evaluator import compare
    from ksmith.evaluator.evaluate import DEFAULT_OPTIONS, merge_options

    with open(os.path.join(ROOT, "python", "ksmith", "evaluator", "defaults.json")) as f:
        shared = json.load(f)
    assert DEFAULT_OPTIONS == shared
    assert compare.DEFAULT_TOLERANCES == shared["tolerances"]
    seen = []
    backend = reward.LocalBackend(device="cpu")
    backend._factory = lambda device, opts: seen.append(merge_options(opts)) or object()
    backend._evaluator(None)
    backend._evaluator({"float32": [1e-3, 1e-3]})
    reward_defaults = {**shared, "compile_baseline": "off"}
    assert seen[0] == reward_defaults
    assert seen[1] == {**reward_defaults, "tolerances": {**shared["tolerances"], "float32": [1e-3, 1e-3]}}


def test_the_local_backend_leaves_the_compile_baseline_off_unless_asked():
    # the reward compares with the parent program; a torch.compile per task would only slow it
    assert reward.LocalBackend(device="cpu").options["compile_baseline"] == "off"
    asked = reward.LocalBackend(device="cpu", options={"compile_baseline": "default", "trials": 2})
    assert asked.options == {"compile_baseline": "default", "trials": 2}
