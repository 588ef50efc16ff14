"""The reward function trainers call on GRPO answers, backed by the ksmith evaluator.

Entry points (one per trainer; all share `score_answer`):

- verl: `compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs)` and the
  batch form `compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos, **kwargs)`
  (point verl 0.9's `reward.custom_reward_function.path` at this file; verl loads it by path, so
  the module works both as `ksmith.reward` and as a loose file).
- TRL: `trl_reward_func(prompts, completions, ground_truth, **kwargs) -> list[float]` (the dataset's
  `ground_truth` column arrives as a keyword argument).
- OpenRLHF: `reward_func(queries, prompts, labels, **kwargs) -> dict` (OpenRLHF 0.11's
  `--reward.remote_url` pointing at this file imports `reward_func`).

What a score means (`RewardConfig`, overridable by keyword arguments, e.g. verl `reward_kwargs`):

1. The program is read from the answer exactly as the rollout reads it (`ksmith.answer`, which
   runs the rollout's own cases): SEARCH/REPLACE blocks applied to the parent's editable block
   (`# EVOLVE-BLOCK-START` / `# EVOLVE-BLOCK-END`), or a fenced ```python block that replaces it
   (an answer repeating the whole program contributes its own block); `<think>` sections are
   ignored. No program (nothing readable, a SEARCH text not found, an edit outside the block, an
   edit that changes nothing): `no_code_reward`, with the rollout's outcome in `edit_outcome`.
2. The evaluator checks it against the reference (compile, correctness on fresh random inputs,
   integrity). A detected hack: `hack_penalty`. Any other failure: `failure_reward`.
3. Correct and timed (GPU): the parent is re-timed in the same evaluator session (cached per
   parent program for the life of the process; for first steps the parent is the reference,
   timed in the same session by the evaluator itself), `speedup = parent_ms / answer_ms`, and
   `score = correct_reward + speedup_weight * clip(speedup - 1, 0, max_speedup_bonus)`. A speedup
   above `recheck_above` is measured once more (answer and parent) and the lower one counts.
4. Correct but untimed (the Triton CPU interpreter): `score = correct_reward`, and the result says
   `correctness_only = True`: the reward does not measure speed on CPU.

The evaluator is local (sandboxed workers, `ksmith.evaluator.launched`, on `KSMITH_EVAL_DEVICE`,
default `cuda` when torch sees a GPU, else `cpu`; options from `KSMITH_EVAL_OPTIONS` as JSON, with
the evaluator's `torch.compile` baseline off unless they set `compile_baseline`; they
refuse to run where the sandbox is incomplete unless `KSMITH_ALLOW_UNCONFINED=1`), or remote when
`KSMITH_EVAL_URL` is set (`POST <url>/v1/evaluate`, the evaluator's HTTP protocol version 1; the
remote side applies its own tolerances). An evaluator that cannot be reached raises: a training
step must not silently score every answer 0. A task whose reference does not run on the
evaluator scores `failure_reward` for every answer and sets `broken_reference`.
"""

# No `from __future__ import annotations`: trainers load this file by path without registering
# it in sys.modules, and dataclasses then cannot resolve string annotations.
import dataclasses
import hashlib
import json
import os
import sys
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

if __package__ in (None, ""):
    # Loaded by path (verl `reward.custom_reward_function.path`): make the `ksmith` package importable.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ksmith.answer import ENTRY_POINT, Edit, apply_answer  # noqa: E402
from ksmith.shared.versions import EVAL_PROTOCOL as PROTOCOL_VERSION  # noqa: E402
from ksmith.shared.versions import GROUND_TRUTH as GROUND_TRUTH_VERSION  # noqa: E402

#: Characters of an evaluation's error log the reward's message keeps (its end): the same as
#: the tool reports of `ksmith.environment` and the exported conversations
#: (`ksmith_core::evaluation::ERROR_TAIL_CHARS`, tested against this line).
ERROR_TAIL_CHARS = 2000

#: The kernel languages a ground truth may name (the evaluator's backends, `verdicts.json`).
KERNEL_BACKENDS = tuple(
    json.loads(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "verdicts.json")).read())["backend"]
)
#: Set to 1, runs the local evaluator where the sandbox is incomplete (the explicit opt-out).
ALLOW_UNCONFINED = "KSMITH_ALLOW_UNCONFINED"


@dataclasses.dataclass(frozen=True)
class RewardConfig:
    """How evaluation outcomes become scores."""

    correct_reward: float = 0.3
    speedup_weight: float = 1.0
    max_speedup_bonus: float = 2.0
    hack_penalty: float = -1.0
    failure_reward: float = 0.0
    no_code_reward: float = 0.0
    recheck_above: float = 3.0

    @classmethod
    def from_kwargs(cls, kwargs: dict) -> "RewardConfig":
        """The defaults, overridden by the keyword arguments that name a field (others are the
        trainers' own arguments and are ignored)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: float(v) for k, v in kwargs.items() if k in names})


class GroundTruthError(ValueError):
    """The ground truth is not a ksmith ground truth this reward understands."""


def parse_ground_truth(ground_truth) -> dict:
    """Decodes the JSON ground truth (a dict is accepted as is) and checks its version."""
    gt = ground_truth
    if isinstance(gt, (bytes, str)):
        try:
            gt = json.loads(gt)
        except ValueError as e:
            raise GroundTruthError(f"ground truth is not JSON: {e}") from None
    if not isinstance(gt, dict):
        raise GroundTruthError(f"ground truth must be a JSON object, got {type(gt).__name__}")
    if gt.get("version") != GROUND_TRUTH_VERSION:
        raise GroundTruthError(
            f"ground truth version {gt.get('version')!r} is not supported (this reward reads {GROUND_TRUTH_VERSION})"
        )
    for key in ("task_id", "reference_program", "parent_program", "entry_point", "backend"):
        if not isinstance(gt.get(key), str) or not gt[key]:
            raise GroundTruthError(f"ground truth lacks `{key}`")
    if gt["backend"] not in KERNEL_BACKENDS:
        raise GroundTruthError(
            f"ground truth backend {gt['backend']!r} is not one this evaluator knows ({', '.join(KERNEL_BACKENDS)})"
        )
    return gt


# -- answer -> program ------------------------------------------------------------------------


def read_answer(answer: str, parent_program: str, entry_point: str = ENTRY_POINT) -> Edit:
    """How the rollout reads `answer` against `parent_program` (`ksmith.answer`): the outcome,
    the format, the program or why there is none. No finish reason and no size limit."""
    return apply_answer(parent_program, answer or "", None, None, entry_point)


def extract_program(answer: str, parent_program: str, entry_point: str = ENTRY_POINT) -> tuple[str | None, str]:
    """The program an answer stands for and how it was read (`diff` or `full_rewrite`), or None
    and why not."""
    edit = read_answer(answer, parent_program, entry_point)
    if edit.program is None:
        return None, edit.error or edit.outcome
    return edit.program, edit.format or ""


# -- evaluators -------------------------------------------------------------------------------


class EvaluatorUnavailable(RuntimeError):
    """The evaluator could not be reached or could not evaluate at all."""


class BrokenReference(RuntimeError):
    """The task's reference program does not run on this evaluator: the prompt is broken, not
    the answer."""


class LocalBackend:
    """Evaluator workers started by this process, one per set of tolerances, each inside the
    sandbox launcher (`ksmith.evaluator.launched`: the worker the ksmith pool runs). Without the
    whole sandbox they refuse to start, unless ``KSMITH_ALLOW_UNCONFINED=1`` opts out."""

    def __init__(self, device: str | None = None, options: dict | None = None):
        from ksmith.confine import Policy
        from ksmith.evaluator.launched import LaunchedWorker

        if device is None:
            device = os.environ.get("KSMITH_EVAL_DEVICE") or _default_device()
        self.device = device
        # The reward scores speed against the parent program, never against torch.compile: the
        # evaluator's compile baseline (seconds to minutes per task on a GPU) is off unless the
        # options ask for it.
        self.options = {"compile_baseline": "off", **(options or {})}
        self._by_tolerance: dict = {}
        self._lock = threading.Lock()
        policy = Policy(require=os.environ.get(ALLOW_UNCONFINED) != "1", opt_out=f"{ALLOW_UNCONFINED}=1")
        self._factory = lambda device, options: LaunchedWorker(device, options, policy)

    def _evaluator(self, tolerances: dict | None):
        key = json.dumps(tolerances or {}, sort_keys=True)
        with self._lock:
            ev = self._by_tolerance.get(key)
            if ev is None:
                opts = dict(self.options)
                if tolerances:
                    opts["tolerances"] = {k: list(v) for k, v in tolerances.items()}
                ev = self._factory(self.device, opts)
                self._by_tolerance[key] = ev
            return ev

    def evaluate(self, request: dict, tolerances: dict | None = None) -> dict:
        from ksmith.confine import SandboxError
        from ksmith.evaluator.evaluate import BrokenReference as ReferenceFailed
        from ksmith.evaluator.launched import WorkerError

        try:
            return self._evaluator(tolerances).evaluate(request)
        except ReferenceFailed as e:
            raise BrokenReference(f"reference of task {e.task_id} does not run: {e.message}") from None
        except (SandboxError, WorkerError) as e:
            raise EvaluatorUnavailable(f"local evaluator ({self.device}): {e}") from None

    def close(self) -> None:
        for ev in self._by_tolerance.values():
            ev.close()


class RemoteBackend:
    """An evaluator endpoint speaking the HTTP protocol (`python -m ksmith.evaluator serve`)."""

    def __init__(self, url: str, timeout_s: float = 900.0):
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.device = "remote"

    def evaluate(self, request: dict, tolerances: dict | None = None) -> dict:
        body = json.dumps({"v": PROTOCOL_VERSION, "request": request}).encode()
        req = urllib.request.Request(
            self.url + "/v1/evaluate", data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                answer = json.loads(resp.read())
        except urllib.error.HTTPError as e:
            try:
                detail = json.loads(e.read()).get("error", {})
            except ValueError:
                detail = {}
            if detail.get("kind") == "broken_reference":
                raise BrokenReference(
                    f"{self.url}: reference of task {detail.get('task_id')} does not run: {detail.get('message', '')}"
                ) from None
            raise EvaluatorUnavailable(
                f"{self.url}: HTTP {e.code}: {detail.get('kind', '')} {detail.get('message', '')}".strip()
            ) from None
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise EvaluatorUnavailable(f"{self.url}: {e}") from None
        if not isinstance(answer, dict) or not isinstance(answer.get("result"), dict):
            raise EvaluatorUnavailable(f"{self.url}: the answer holds no result: {str(answer)[:200]}")
        return answer["result"]

    def close(self) -> None:
        pass


def _default_device() -> str:
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


_BACKEND: LocalBackend | RemoteBackend | None = None
_BACKEND_LOCK = threading.Lock()


def get_backend():
    """The process-wide evaluator: remote when `KSMITH_EVAL_URL` is set, else local."""
    global _BACKEND
    with _BACKEND_LOCK:
        if _BACKEND is None:
            url = os.environ.get("KSMITH_EVAL_URL", "").strip()
            if url:
                _BACKEND = RemoteBackend(url)
            else:
                _BACKEND = LocalBackend(options=json.loads(os.environ.get("KSMITH_EVAL_OPTIONS") or "{}"))
        return _BACKEND


def set_backend(backend) -> None:
    """Replaces the process-wide evaluator (tests, or a trainer that builds its own)."""
    global _BACKEND
    with _BACKEND_LOCK:
        _BACKEND = backend


# -- scoring ----------------------------------------------------------------------------------

_PARENT_TIMES: dict[str, float] = {}
_PARENT_LOCK = threading.Lock()


def _timed_ms(timing) -> float | None:
    if not isinstance(timing, dict) or timing.get("method") in (None, "not_measured"):
        return None
    ms = timing.get("median_ms")
    return float(ms) if isinstance(ms, (int, float)) and ms > 0 else None


def _request(gt: dict, program: str) -> dict:
    """The evaluator's request for `program` under the ground truth `gt` (its task, reference and
    kernel language)."""
    return {
        "task_id": gt["task_id"],
        "reference": gt["reference_program"],
        "candidate": program,
        "measure": True,
        "backend": gt["backend"],
    }


def _parent_ms(backend, gt: dict, result: dict, fresh: bool) -> float | None:
    """The parent's runtime in this session: the reference's timing from the same evaluation
    for first steps; otherwise the parent program evaluated (and timed) by the same evaluator,
    cached per parent program unless `fresh`."""
    if gt.get("parent_is_reference"):
        return _timed_ms(result.get("reference_timing"))
    key = gt["task_id"] + ":" + hashlib.sha256(gt["parent_program"].encode()).hexdigest()
    with _PARENT_LOCK:
        if not fresh and key in _PARENT_TIMES:
            return _PARENT_TIMES[key]
    res = backend.evaluate(_request(gt, gt["parent_program"]), gt.get("tolerances"))
    ms = _timed_ms(res.get("candidate_timing")) if res.get("status") == "correct" else None
    if ms is not None:
        with _PARENT_LOCK:
            _PARENT_TIMES[key] = ms
    return ms


def _unscored(cfg: RewardConfig) -> dict:
    return {
        "score": cfg.no_code_reward,
        "has_code": False,
        "compiled": False,
        "correct": False,
        "hacked": False,
        "timed": False,
        "correctness_only": False,
        "broken_reference": False,
        "speedup_vs_parent": None,
        "speedup_vs_reference": None,
        "status": "no_code",
        "hack": None,
        "how": "",
        "edit_outcome": "",
        "message": "",
    }


def score_answer(solution_str: str, ground_truth, config: RewardConfig | None = None, backend=None) -> dict:
    """Scores one answer, read against the ground truth's parent program as the rollout reads
    it; returns the full result (numbers, flags and the evaluator's words)."""
    cfg = config or RewardConfig()
    gt = parse_ground_truth(ground_truth)
    out = _unscored(cfg)
    edit = read_answer(solution_str, gt["parent_program"], gt["entry_point"])
    out["edit_outcome"] = edit.outcome
    if edit.program is None:
        out["message"] = edit.error or ""
        return out
    out.update(has_code=True, how=edit.format)
    return _evaluated(edit.program, gt, cfg, backend, out)


def score_program(program: str, ground_truth, config: RewardConfig | None = None, backend=None) -> dict:
    """Scores a complete program as it is (an agent's `evaluate` tool call: no answer to read,
    no editable block to keep; the evaluator judges it against the reference as any candidate);
    the result of `score_answer`, with `how` = ``program``."""
    cfg = config or RewardConfig()
    gt = parse_ground_truth(ground_truth)
    out = _unscored(cfg)
    out.update(has_code=True, how="program")
    return _evaluated(program, gt, cfg, backend, out)


def _evaluated(program: str, gt: dict, cfg: RewardConfig, backend, out: dict) -> dict:
    """`out` completed with the evaluation of `program` (and its timing against the parent's)."""
    backend = backend or get_backend()
    request = _request(gt, program)
    try:
        res = backend.evaluate(request, gt.get("tolerances"))
    except BrokenReference as e:
        # Every answer to this prompt gets the same score (no learning signal, no crash); the
        # flag is logged so a run with broken prompts shows it.
        out.update(status="broken_reference", broken_reference=True, score=cfg.failure_reward, message=str(e))
        return out
    status = res.get("status")
    out["status"] = status
    out["hack"] = res.get("hack")
    out["compiled"] = status not in ("static_rejected", "compile_error")
    out["message"] = (res.get("error_log") or "")[-ERROR_TAIL_CHARS:]
    if status == "hacked":
        out.update(hacked=True, score=cfg.hack_penalty)
        return out
    if status != "correct":
        out["score"] = cfg.failure_reward
        return out
    out["correct"] = True
    if isinstance(res.get("speedup"), (int, float)):
        out["speedup_vs_reference"] = float(res["speedup"])
    cand_ms = _timed_ms(res.get("candidate_timing"))
    parent_ms = _parent_ms(backend, gt, res, fresh=False) if cand_ms is not None else None
    if cand_ms is None or parent_ms is None:
        out.update(correctness_only=True, score=cfg.correct_reward)
        out["message"] = (
            "correctness-only reward: no GPU timing ("
            + ("Triton CPU interpreter" if cand_ms is None else "the parent could not be timed")
            + ")"
        )
        return out
    speedup = parent_ms / cand_ms
    if speedup > cfg.recheck_above:
        again = backend.evaluate(request, gt.get("tolerances"))
        ms2 = _timed_ms(again.get("candidate_timing")) if again.get("status") == "correct" else None
        parent2 = _parent_ms(backend, gt, again, fresh=True)
        if ms2 is None or parent2 is None:
            out.update(
                correctness_only=True,
                score=cfg.correct_reward,
                message="a suspiciously large speedup could not be confirmed by a second measurement",
            )
            return out
        speedup = min(speedup, parent2 / ms2)
    out.update(timed=True, speedup_vs_parent=speedup)
    out["score"] = cfg.correct_reward + cfg.speedup_weight * min(max(speedup - 1.0, 0.0), cfg.max_speedup_bonus)
    return out


_METRIC_KEYS = ("score", "has_code", "compiled", "correct", "hacked", "timed", "correctness_only", "broken_reference")


def _metrics(full: dict) -> dict:
    """The numeric part of a result (verl logs every key of the returned dict as a metric)."""
    out = {k: (float(full[k]) if isinstance(full[k], bool) else full[k]) for k in _METRIC_KEYS}
    out["speedup_vs_parent"] = float(full["speedup_vs_parent"]) if full["speedup_vs_parent"] is not None else 0.0
    return out


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> dict:
    """verl's per-sample reward: a dict with `score` and numeric components."""
    return _metrics(score_answer(solution_str, ground_truth, RewardConfig.from_kwargs(kwargs)))


def _workers(kwargs: dict) -> int:
    n = kwargs.get("max_workers") or os.environ.get("KSMITH_REWARD_WORKERS") or 4
    return max(1, int(n))


def compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos=None, **kwargs) -> list[dict]:
    """Batch form of `compute_score` (verl releases with a `batch` reward manager): scores
    concurrently, in input order."""
    cfg = RewardConfig.from_kwargs(kwargs)
    with ThreadPoolExecutor(max_workers=_workers(kwargs)) as pool:
        results = list(pool.map(lambda a: score_answer(a[0], a[1], cfg), zip(solution_strs, ground_truths)))
    return [_metrics(r) for r in results]


def _completion_text(completion) -> str:
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        texts = [
            m.get("content", "")
            for m in completion
            if isinstance(m, dict) and m.get("role", "assistant") == "assistant"
        ]
        return "\n".join(texts)
    return str(completion)


def trl_reward_func(prompts, completions, ground_truth, **kwargs) -> list[float]:
    """TRL GRPO reward: the `ground_truth` column arrives as a keyword argument."""
    cfg = RewardConfig.from_kwargs(kwargs)
    texts = [_completion_text(c) for c in completions]
    with ThreadPoolExecutor(max_workers=_workers(kwargs)) as pool:
        results = list(pool.map(lambda a: score_answer(a[0], a[1], cfg), zip(texts, ground_truth)))
    return [float(r["score"]) for r in results]


def reward_func(queries, prompts, labels, **kwargs) -> dict:
    """OpenRLHF reward (`--reward.remote_url` pointing at this file). `queries` are prompt plus
    response; the label is the ground-truth JSON. Returns `rewards`, `scores` (1 when correct,
    for dynamic filtering) and `extra_logs`."""
    import torch

    cfg = RewardConfig.from_kwargs(kwargs)
    answers = [
        q[len(p) :] if isinstance(q, str) and isinstance(p, str) and q.startswith(p) else q
        for q, p in zip(queries, prompts)
    ]
    with ThreadPoolExecutor(max_workers=_workers(kwargs)) as pool:
        results = list(pool.map(lambda a: score_answer(a[0], a[1], cfg), zip(answers, labels)))
    metrics = [_metrics(r) for r in results]
    return {
        "rewards": torch.tensor([m["score"] for m in metrics], dtype=torch.float32),
        "scores": torch.tensor([m["correct"] for m in metrics], dtype=torch.float32),
        "extra_logs": {k: torch.tensor([m[k] for m in metrics], dtype=torch.float32) for k in metrics[0]}
        if metrics
        else {},
    }
