"""scripts/gate_trace.py: the GPU gate's shares of a bench run's steady window, from the workers'
trace lines."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "gate_trace.py")


def load_script():
    spec = importlib.util.spec_from_file_location("gate_trace", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def gate(mode, t, wait_s, hold_s, **kw):
    return {"trace": "gate", "mode": mode, "t": t, "wait_s": wait_s, "hold_s": hold_s, **kw}


def timing(t, wait_s, hold_s, ready_s, stopped=True, drained=True, kept=False):
    return gate("exclusive", t, wait_s, hold_s, ready_s=ready_s, paused=3, stopped=stopped, drained=drained, kept=kept)


def timed(now, **marks):
    """A harness's timing as the worker traces it (its marks: seconds since the harness started)."""
    return {"trace": "timing_done", "now": now, "phases": {"profile": 5.0, **marks}}


def test_shares_of_the_steady_window(tmp_path):
    mod = load_script()
    lines = [
        {"trace": "evaluation", "t": 100.0, "status": "correct", "phases": {"correctness": 9.0}},
        {"trace": "evaluation", "t": 112.0, "status": "correct", "phases": {"correctness": 3.0, "gate_wait": 1.0}},
        {"trace": "evaluation", "t": 170.0, "status": "correct", "phases": {"correctness": 30.0}},
        timing(120.0, 2.0, 1.0, 0.2),
        timing(140.0, 0.0, 2.0, 0.5, stopped=False, kept=True),
        gate("shared", 121.0, 1.5, 0.01, pausable=False),
        gate("starting", 115.0, 0.0, 10.0, pausable=True),
        gate("starting", 150.0, 0.5, 20.0, pausable=True),
        timed(121.0, capture=5.5, samples=5.9, timing=6.0),
        # captured before the hold: its samples counted from the worker's ``go``
        timed(142.0, capture=5.1, go=5.3, samples=5.9, timing=6.2),
        timed(105.0, capture=5.3, samples=9.9, timing=10.2),
    ]
    log = tmp_path / "workers" / "worker-0-cuda0.log"
    log.parent.mkdir()
    log.write_text("ksmith evaluator: a line that is no trace\n" + "".join(json.dumps(x) + "\n" for x in lines))
    (tmp_path / "meta.json").write_text(json.dumps({"label": "", "window_start_s": 10, "window_s": 60}))
    s = mod.summarize(mod.read_trace(str(log)), 10, 60)
    assert s is not None
    # the window: 110 .. 160 s (from the first evaluation's start at 100)
    assert s["window_s"] == pytest.approx(50)
    assert s["evals"] == 1 and s["phases"]["correctness"] == 3.0 and s["phases"]["gate_wait"] == 1.0
    assert s["timings"] == 2
    assert s["held_alone"] == pytest.approx(3 / 50)
    assert s["before_timing"] == pytest.approx(0.7 / 50)
    # a timing waited 118-120 and held 120-121, then held 140-142
    assert s["timing_pending"] == pytest.approx(5 / 50)
    assert s["not_stopped"] == 1 and s["not_drained"] == 0 and s["kept"] == 1
    assert s["shared"] == 1 and s["shared_wait"] == pytest.approx(1.5)
    assert s["starts"] == 2 and s["starts_at_once"] == pytest.approx(20 / 50)
    # the harness's own marks inside the two timings of the window (not the one before it)
    assert s["samples_s"] == pytest.approx(0.5) and s["save_s"] == pytest.approx(0.2)
    # from each mark to the next present (profile is 5.0 in every harness's marks)
    assert s["marks"] == pytest.approx(
        {
            "profile -> capture": 0.3,
            "capture -> go": 0.2,
            "capture -> samples": 0.4,
            "go -> samples": 0.6,
            "samples -> timing": 0.2,
        }
    )
    assert list(s["marks"])[:2] == ["profile -> capture", "capture -> go"], "in the harness's order"
    assert mod.main([str(tmp_path)]) == 0


def test_a_run_without_worker_logs_is_an_error(tmp_path, capsys):
    mod = load_script()
    (tmp_path / "meta.json").write_text(json.dumps({"label": "", "window_start_s": 10, "window_s": 60}))
    assert mod.main([str(tmp_path)]) == 1
    assert "no worker log" in capsys.readouterr().err
