"""The worker's side of a task (CPU interpreter): it keeps facts, not tensors; a broken reference is
remembered as broken; a task that does not fit the memory budget is refused saying so; the fork
server comes back after it dies."""

from __future__ import annotations

import os
import signal
import time

import pytest
from ksmith.confine import Policy
from ksmith.evaluator.evaluate import BrokenReference, DeviceEvaluator
from ksmith.evaluator.inputs import fingerprint, make_inputs, tensor_bytes

#: An evaluator made in this process, outside the sandbox launcher: only the per-child
#: confinement, by the explicit opt-out (the default refuses without the whole sandbox).
UNCONFINED = Policy(require=False)

HERE = os.path.dirname(os.path.abspath(__file__))
CAND = os.path.join(HERE, "candidates")
TASK = open(os.path.join(CAND, "tasks", "elementwise.py")).read()
HONEST = open(os.path.join(CAND, "honest", "elementwise.py")).read()
BROKEN = (
    "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
    "def get_inputs():\n    raise RuntimeError('no inputs today')\ndef get_init_inputs():\n    return []\n"
)


@pytest.fixture()
def ev():
    e = DeviceEvaluator("cpu", {"trials": 2, "run_timeout_s": 30, "memory_limit_mb": 1536}, policy=UNCONFINED)
    yield e
    e.close()


def test_the_worker_keeps_facts_not_tensors(ev):
    facts = ev.reference("t", TASK)
    assert len(facts.build.trials) == 3 and all(len(t["fingerprint"]) == 32 for t in facts.build.trials)
    assert facts.build.out_meta == [[[4096], "float32"]]
    assert facts.build.input_bytes == 2 * 4096 * 4 and facts.build.output_bytes == 4096 * 4
    assert [s["sizes"] for s in facts.build.size_sets] == [{"N": 2048}]
    assert ev.reference("t", TASK) is facts, "built once"


def test_a_broken_reference_is_remembered(ev, monkeypatch):
    with pytest.raises(BrokenReference, match="no inputs today"):
        ev.reference("broken", BROKEN)
    builds = []
    original = ev._build
    monkeypatch.setattr(ev, "_build", lambda *a: builds.append(a) or original(*a))
    started = time.monotonic()
    for _ in range(3):
        with pytest.raises(BrokenReference, match="no inputs today") as e:
            ev.evaluate({"task_id": "broken", "reference": BROKEN, "candidate": HONEST, "measure": False})
        assert e.value.task_id == "broken"
    assert builds == [], "no rebuild of a reference known to be broken"
    assert time.monotonic() - started < 1.0
    # another reference text under the same task id is another task
    assert ev.reference("broken", TASK).build.trials


def test_a_task_over_the_memory_budget_is_refused_saying_so():
    big = TASK.replace("N = 4096", "N = 2 ** 20")
    ev = DeviceEvaluator("cpu", {"trials": 2, "run_timeout_s": 60, "memory_budget_mb": 16}, policy=UNCONFINED)
    try:
        with pytest.raises(BrokenReference, match=r"memory budget.*memory_budget_mb = 16") as e:
            ev.reference("big", big)
        assert "inputs 8.0 MiB" in e.value.message
        with pytest.raises(BrokenReference, match="memory_budget_mb"):
            ev.evaluate({"task_id": "big", "reference": big, "candidate": HONEST, "measure": False})
        # the same task fits a budget of its size
        ev.opts["memory_budget_mb"] = 256
        assert ev.reference("big2", big).build.input_bytes == 2 * 2**20 * 4
    finally:
        ev.close()


def test_the_fork_server_comes_back_after_it_dies(ev):
    r = ev.evaluate({"task_id": "t", "reference": TASK, "candidate": HONEST, "measure": False})
    assert r["status"] == "correct", r["error_log"]
    os.kill(ev.forks().proc.pid, signal.SIGKILL)
    ev.forks().proc.wait()
    r = ev.evaluate({"task_id": "t", "reference": TASK, "candidate": HONEST, "measure": False})
    assert r["status"] == "correct", r["error_log"]


def test_inputs_and_their_fingerprints_are_reproducible():
    import torch

    def get_inputs():
        return [torch.randn(64, 32), torch.randint(0, 9, (5,)), 3, [torch.rand(4)]]

    a = make_inputs(get_inputs, 11, 2)
    b = make_inputs(get_inputs, 11, 2)
    assert fingerprint(a) == fingerprint(b)
    assert fingerprint(a) != fingerprint(make_inputs(get_inputs, 12, 2))
    c = [t.clone() for t in a[:2]] + a[2:]
    c[0][3, 4] = float(c[0][3, 4]) + 1e-6
    assert fingerprint(c) != fingerprint(a), "one changed bit changes it"
    assert tensor_bytes(a) == 64 * 32 * 4 + 5 * 8 + 4 * 4


def test_the_triton_cache_of_a_program_is_read_from_its_shared_folder(tmp_path, monkeypatch):
    from ksmith.evaluator import tritoncache

    root = tmp_path / "shared"
    root.mkdir()
    folder = tritoncache.program_folder(str(root), "program text")
    assert folder != tritoncache.program_folder(str(root), "another program")
    # a child compiled kernel K into its own cache (a group file naming its workspace's paths)
    child = tmp_path / "child-cache"
    (child / "K").mkdir(parents=True)
    (child / "K" / "k.cubin").write_bytes(b"binary")
    (child / "K" / "__grp__k.json").write_text('{"child_paths": {"k.cubin": "' + str(child / "K" / "k.cubin") + '"}}')
    (child / "K" / "link").symlink_to("/etc/hostname")
    (child / "K" / "tmp.partial").mkdir()
    tritoncache.adopt(str(child), folder, str(root))
    assert sorted(os.listdir(os.path.join(folder, "K"))) == ["__grp__k.json", "k.cubin"]
    # the next child of the same program reads it there, from an empty cache of its own
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "next-child"))
    monkeypatch.setenv(tritoncache.SHARED_VAR, folder)
    cache = tritoncache.LayeredCache("K")
    assert cache.get_file("k.cubin") == os.path.join(folder, "K", "k.cubin")
    assert cache.get_group("k.json") == {"k.cubin": os.path.join(folder, "K", "k.cubin")}
    assert cache.get_file("other") is None
    # and writes only into its own
    written = cache.put(b"new", "new.bin")
    assert written.startswith(str(tmp_path / "next-child")) and not os.path.exists(os.path.join(folder, "K", "new.bin"))
    # a child of another program does not see it
    monkeypatch.setenv(tritoncache.SHARED_VAR, tritoncache.program_folder(str(root), "another program"))
    assert tritoncache.LayeredCache("K").get_file("k.cubin") is None
