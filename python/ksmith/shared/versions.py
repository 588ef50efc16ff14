"""The versions of what crosses between ksmith's parts, defined once in ``versions.json``: the
probe's worker protocol (``ksmith-probe`` <-> ``ksmith.probe.worker`` and the Ray driver), the
evaluator's worker and HTTP protocol (``ksmith-eval`` <-> ``ksmith.evaluator``, the reward's
remote backend) and the exported ground truth (``ksmith-export`` -> ``ksmith.reward``). The Rust
side's are ``ksmith_core::versions``, tested against the file."""

from __future__ import annotations

import json
import pathlib

_FILE = json.loads(pathlib.Path(__file__).with_name("versions.json").read_text())

#: The probe's JSON-lines protocol.
PROBE_PROTOCOL: int = _FILE["probe_protocol"]
#: The evaluator's JSON-lines protocol (and its HTTP form).
EVAL_PROTOCOL: int = _FILE["eval_protocol"]
#: The ground truth an exported GRPO sample carries for the reward.
GROUND_TRUTH: int = _FILE["ground_truth"]
