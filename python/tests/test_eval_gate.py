"""No child touches the GPU outside the gate: every child (the reference's build and time
children, the judge, the candidate's harness) waits for the worker's first command before its
first GPU work, and the worker sends that command while it holds the GPU's gate (timing: alone;
a start: the gate's `starting` mode).
Checked on the CPU with an instrumented gate: what each child does before its first command shows
in its workspace."""

from __future__ import annotations

import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), ".."))

import contextlib  # noqa: E402
import os  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import pytest  # noqa: E402
from ksmith.confine import Policy  # noqa: E402
from ksmith.evaluator import messages  # noqa: E402
from ksmith.evaluator.evaluate import DeviceEvaluator  # noqa: E402
from ksmith.evaluator.gate import GpuGate, Together  # noqa: E402
from ksmith.evaluator.sandbox import Child, ChildTimeout  # noqa: E402

#: An evaluator made in this process, outside the sandbox launcher: only the per-child
#: confinement, by the explicit opt-out (the default refuses without the whole sandbox).
UNCONFINED = Policy(require=False)

HERE = os.path.dirname(os.path.abspath(__file__))
CAND = os.path.join(HERE, "candidates")


def read(rel: str) -> str:
    return open(os.path.join(CAND, rel)).read()


class RecordingGate(GpuGate):
    """The GPU gate, enabled on the CPU, that knows which mode each thread holds."""

    def __init__(self) -> None:
        super().__init__(True)
        self.held = threading.local()

    def mode(self) -> str | None:
        return getattr(self.held, "mode", None)

    @contextlib.contextmanager
    def _hold(self, mode: str, inner):  # type: ignore[no-untyped-def]
        with inner():
            self.held.mode = mode
            try:
                yield
            finally:
                self.held.mode = None

    def shared(self):  # type: ignore[override]
        return self._hold("shared", super().shared)

    def starting(self, child=None):  # type: ignore[no-untyped-def,override]
        assert child is not None, "every start is registered with its child (a timing pauses it)"
        self.held.child = child
        return self._hold("starting", lambda: super(RecordingGate, self).starting(child))

    def exclusive(self, waited=None):  # type: ignore[no-untyped-def,override]
        return self._hold("exclusive", lambda: super(RecordingGate, self).exclusive(waited))


@pytest.fixture(scope="module")
def evaluator():
    ev = DeviceEvaluator("cpu", {"trials": 2, "run_timeout_s": 30, "memory_limit_mb": 1536}, policy=UNCONFINED)
    ev.gate = RecordingGate()
    yield ev
    ev.close()


def test_every_first_command_is_sent_under_the_gate(evaluator, monkeypatch):
    sent: list[tuple[str, str, str | None]] = []
    command = Child.command

    def recording(child, text):  # type: ignore[no-untyped-def]
        sent.append((os.path.basename(child.workdir).split("-")[0], text.split(" ")[0], evaluator.gate.mode()))
        command(child, text)

    # the harness's side, in order with the commands: what it answered
    harness: list[tuple[str, str | None]] = []
    receive = Child.receive

    def received(child, timeout_s):  # type: ignore[no-untyped-def]
        msg = receive(child, timeout_s)
        if os.path.basename(child.workdir).startswith("cand"):
            harness.append((msg.TYPE, None))
        return msg

    def recording_harness(child, text):  # type: ignore[no-untyped-def]
        if os.path.basename(child.workdir).startswith("cand"):
            harness.append((text.split(" ")[0], evaluator.gate.mode()))
        recording(child, text)

    monkeypatch.setattr(Child, "command", recording_harness)
    monkeypatch.setattr(Child, "receive", received)
    r = evaluator.evaluate(
        {
            "task_id": "gate/elementwise",
            "reference": read("tasks/elementwise.py"),
            "candidate": read("honest/elementwise.py"),
            "measure": False,
        }
    )
    assert r["status"] == "correct", r["error_log"]
    # the timing's CUDA graphs are captured on a `next` under the gate's shared mode, after the
    # correctness calls: the timing's hold (`go`) covers its samples only
    done = [m for m, _ in harness].index("correctness_done")
    expected = [("ready", None), ("next", "shared"), ("ready_to_time", None), ("go", "exclusive")]
    assert harness[done + 1 :][:4] == expected, harness
    first: dict[str, tuple[str, str | None]] = {}
    for kind, text, mode in sent:
        first.setdefault(kind, (text, mode))
    # a child's start (its first command) is held as a start; its later calls as short ones
    assert first == {"ref": ("start", "starting"), "judge": ("start", "starting"), "cand": ("next", "starting")}, sent
    for kind, text, mode in sent:
        if text == "go":
            assert mode == "exclusive", (kind, text)
        elif text == "start":
            assert mode == "starting", (kind, text)
        elif text == "next" or text.startswith("{"):
            assert mode in ("shared", "starting"), (kind, text)
    assert sum(1 for _, text, mode in sent if text == "next" and mode == "shared") >= 2, sent


class AlwaysIdle:
    """A drain that finds the GPU idle at once: the gate pauses starts (as on a GPU)."""

    def available(self) -> bool:
        return True

    def wait(self) -> bool:
        return True


def test_correctness_calls_are_one_pausable_hold_of_harness_and_judge(monkeypatch):
    # With 16 evaluations in flight a timing nearly always holds or waits for the GPU, and each of
    # a process's gated correctness calls waited behind it: the calls run inside one start of the
    # gate instead, harness and judge stopped together for another candidate's timing.
    gate = RecordingGate()
    gate.drain = AlwaysIdle()

    def evaluate_honest(**options) -> None:  # type: ignore[no-untyped-def]
        ev = DeviceEvaluator(
            "cpu", {"trials": 2, "run_timeout_s": 30, "memory_limit_mb": 1536, **options}, policy=UNCONFINED
        )
        ev.gate = gate
        try:
            r = ev.evaluate(
                {
                    "task_id": "gate/held",
                    "reference": read("tasks/elementwise.py"),
                    "candidate": read("honest/elementwise.py"),
                    "measure": False,
                }
            )
        finally:
            ev.close()
        assert r["status"] == "correct", r["error_log"]

    sent: list[tuple[str, str, str | None, object]] = []
    command = Child.command

    def recording(child, text):  # type: ignore[no-untyped-def]
        held = gate.held.child if gate.mode() == "starting" else None
        word = "{" if text.startswith("{") else text.split(" ")[0]
        sent.append((os.path.basename(child.workdir).split("-")[0], word, gate.mode(), held))
        command(child, text)

    monkeypatch.setattr(Child, "command", recording)
    evaluate_honest()
    calls = [c for c in sent if c[0] in ("cand", "judge") and c[1] != "stop"]
    first_next = next(i for i, (kind, text, _, _) in enumerate(calls) if kind == "cand" and text == "next")
    # the judge's start runs beside the harness's (`JudgeStart`): a start of its own, the judge its child
    (judge_start,) = [c for c in calls if c[:2] == ("judge", "start")]
    assert judge_start[2] == "starting" and not isinstance(judge_start[3], Together), judge_start
    correctness = [c for c in calls[first_next + 1 :] if c[1] != "go" and c[:2] != ("judge", "start")]
    # the timed calls' check (after the timing, the hold released) is one short call
    *correctness, timed_check = correctness
    assert timed_check[:3] == ("judge", "{", "shared"), timed_check
    assert len([c for c in correctness if c[0] == "cand"]) >= 2 and any(c[0] == "judge" for c in correctness), calls
    for kind, text, mode, held in correctness:
        assert mode == "starting", (kind, text, mode)
        assert isinstance(held, Together) and len(held.children) == 2, (kind, text, held)
        assert {os.path.basename(c.workdir).split("-")[0] for c in held.children} == {"cand", "judge"}
    assert [c[2] for c in calls if c[1] == "go"] == ["exclusive"], "the rehearsal of the timing holds the GPU alone"

    # with the option off, each call takes the gate's shared mode again
    sent.clear()
    evaluate_honest(pause_correctness_for_timing=False)
    assert sum(1 for kind, text, mode, _ in sent if kind == "cand" and text == "next" and mode == "shared") >= 2, sent


def test_the_judge_starts_beside_the_harness(evaluator, monkeypatch):
    # A judge's start is mostly CUDA's start (5-8 s each with 16 evaluations on an H200); made
    # after the harness had compiled, it added that to every evaluation. The judge is told to
    # start while the harness starts: here the harness's answer that it compiled is held back
    # until the judge's start was sent (or 20 s passed), which only a judge started beside the
    # harness can satisfy.
    judge_sent = threading.Event()
    command, receive = Child.command, Child.receive

    def recording(child, text):  # type: ignore[no-untyped-def]
        if os.path.basename(child.workdir).startswith("judge") and text == "start":
            judge_sent.set()
        command(child, text)

    def held_back(child, timeout_s):  # type: ignore[no-untyped-def]
        msg = receive(child, timeout_s)
        if isinstance(msg, messages.Compiled):
            held_back.before = judge_sent.wait(20)  # type: ignore[attr-defined]
        return msg

    monkeypatch.setattr(Child, "command", recording)
    monkeypatch.setattr(Child, "receive", held_back)
    r = evaluator.evaluate(
        {
            "task_id": "gate/judge-beside",
            "reference": read("tasks/elementwise.py"),
            "candidate": read("honest/elementwise.py"),
            "measure": False,
        }
    )
    assert r["status"] == "correct", r["error_log"]
    assert held_back.before, "the judge was told to start only after the harness compiled"  # type: ignore[attr-defined]


def test_a_reference_child_does_nothing_before_its_start(evaluator):
    config = evaluator._config(1, mode="build", measure=True, size_sets=[], max_size_sets=0, memory_budget_mb=4096)
    with evaluator._reference_child("gate/wait", config, read("tasks/elementwise.py")) as child:
        time.sleep(3.0)
        assert child.messages.empty(), "no message before its start"
        assert not os.path.exists(os.path.join(child.workdir, "ksmith_reference.py")), "the task not even loaded"
        child.command("start")
        msg = child.receive(60)
        assert isinstance(msg, messages.BuildDone)
        assert os.path.exists(os.path.join(child.workdir, "ksmith_reference.py"))
        child.command("stop")


def test_evaluators_of_one_gpu_share_its_gate():
    # the bench's two evaluators (static checks on and off) on one GPU: one's timing holds the
    # gate against the other's work too
    gate = RecordingGate()
    a = DeviceEvaluator("cpu", {"trials": 2}, policy=UNCONFINED, gate=gate)
    b = DeviceEvaluator("cpu", {"trials": 2, "static_checks": False}, policy=UNCONFINED, gate=a.gate)
    alone = DeviceEvaluator("cpu", {"trials": 2}, policy=UNCONFINED)
    try:
        assert a.gate is gate and b.gate is gate and alone.gate is not gate, "alone, an evaluator has its own"
        done = threading.Event()

        def shared_work() -> None:
            with b.gate.shared():
                done.set()

        with a.gate.exclusive():
            worker = threading.Thread(target=shared_work)
            worker.start()
            assert not done.wait(0.3), "the other evaluator's GPU work waits for this one's timing"
        assert done.wait(5)
        worker.join()
    finally:
        for ev in (a, b, alone):
            ev.close()


def _state_of(stat: str) -> str:
    with open(stat) as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def _state(pid: int) -> str:
    return _state_of(f"/proc/{pid}/stat")


def test_a_paused_child_is_stopped_and_its_time_limit_waits_for_it(evaluator):
    # A timing stops the children starting beside it (`GpuGate.exclusive`); their time limits must
    # not run meanwhile, or a long timing queue would time out honest starts.
    config = evaluator._config(1, mode="build", measure=True, size_sets=[], max_size_sets=0, memory_budget_mb=4096)
    with evaluator._reference_child("gate/pause", config, read("tasks/elementwise.py")) as child:
        child.command("start")
        assert isinstance(child.receive(60), messages.BuildDone)
        assert isinstance(child.receive(60), messages.ReadyToTime)
        child.pause()
        # a signal is delivered asynchronously: settle returns once every thread is stopped
        child.settle(time.monotonic() + 5.0)
        states = [_state_of(f"/proc/{child.pid}/task/{tid}/stat") for tid in os.listdir(f"/proc/{child.pid}/task")]
        assert set(states) == {"T"}, states
        child.command("go 0")
        time.sleep(0.5)
        assert child.messages.empty(), "a stopped child answers nothing"
        resumer = threading.Timer(2.5, child.resume)
        resumer.start()
        t0 = time.monotonic()
        msg = child.receive(1.5)  # the answer comes after the pause: 2.5 s > 1.5 s
        resumer.join()
        assert isinstance(msg, messages.Timed), msg
        assert time.monotonic() - t0 >= 2.0
        assert _state(child.pid) != "T"
        assert child.paused_s() >= 2.9
        child.command("stop")
    # paused again after its end: nothing is signalled (its pid may be another process's by now)
    child.pause()
    assert child.paused_s() >= 2.9 and child._paused_since is None


#: A process whose child leaves its session and process group (``setsid``), then counts in a file.
ESCAPING_CHILD = """
import os, sys, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    os.write(w, b"%d\\n" % os.getpid())
    n = 0
    while True:
        n += 1
        with open(sys.argv[1], "w") as f:
            f.write(str(n))
        time.sleep(0.005)
print(os.read(r, 64).decode().strip(), flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead and not yet reaped, does not)."""
    try:
        return _state(pid) not in ("Z", "X")
    except OSError:
        return False


def test_a_pause_stops_a_grandchild_that_left_the_process_group(tmp_path):
    # A candidate's native code (a CUDA extension) can fork a process that calls setsid: the
    # signal to the child's process group misses it, and it went on issuing GPU work beside
    # another candidate's timing. The pause stops every process of the child's tree.
    import signal
    import subprocess
    import sys

    from ksmith.evaluator.sandbox import kill_tree, signal_tree, tree_stopped

    counter = tmp_path / "count"
    proc = subprocess.Popen(
        [sys.executable, "-c", ESCAPING_CHILD, str(counter)], start_new_session=True, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        grandchild = int(proc.stdout.readline())
        assert os.getpgid(grandchild) != proc.pid
        os.killpg(proc.pid, signal.SIGSTOP)
        time.sleep(0.2)
        assert _state(grandchild) != "T", "the group's signal reaches it (the escape this test is about is gone)"
        os.killpg(proc.pid, signal.SIGCONT)

        signal_tree(proc.pid, signal.SIGSTOP)
        assert tree_stopped(proc.pid, time.monotonic() + 5.0)
        assert _state(proc.pid) == "T" and _state(grandchild) == "T"
        before = counter.read_text()
        time.sleep(0.2)
        assert counter.read_text() == before, "a stopped grandchild writes nothing"

        signal_tree(proc.pid, signal.SIGCONT)
        deadline = time.monotonic() + 5.0
        while counter.read_text() == before and time.monotonic() < deadline:
            time.sleep(0.01)
        assert counter.read_text() != before, "continued with the rest of the tree"
        # and a kill reaches it too (killing the leader first would leave it to another parent)
        kill_tree(proc.pid)
        proc.wait(10)
        deadline = time.monotonic() + 5.0
        while _alive(grandchild) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not _alive(grandchild), "the grandchild outlived the kill"
    finally:
        if proc.poll() is None:
            kill_tree(proc.pid)
            proc.wait(10)


def test_a_childs_time_limit_still_runs_out_when_it_is_not_paused(evaluator):
    config = evaluator._config(1, mode="build", measure=True, size_sets=[], max_size_sets=0, memory_budget_mb=4096)
    with evaluator._reference_child("gate/limit", config, read("tasks/elementwise.py")) as child:
        t0 = time.monotonic()
        with pytest.raises(ChildTimeout, match="no answer within 1.00 s"):
            child.receive(1.0)  # no start: it never answers
        assert 0.9 < time.monotonic() - t0 < 5.0
