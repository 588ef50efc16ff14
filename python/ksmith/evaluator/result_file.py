"""The judge's reading of a result file: what an honest harness writes, checked before any of it
is used.

The harness runs in the candidate's process (`candidate_child`), so a result file, and the
request that names it (its size set, trial, rows), are the candidate's to forge. The judge is
trusted: a failure of the judge is answered as the worker's own (an internal error), which the
pool counts against the worker's GPU. So nothing a file holds may make the judge fail:

- the file is loaded with ``weights_only`` onto the host (``map_location="cpu"``: a tensor saved
  from the GPU is not put back there);
- its payload must be exactly what `candidate_child` writes for its kind (keys, types, a plain
  strided ``torch.Tensor`` or a number per output, as many timed rows as the request picks
  from), and the request's size set and trial must exist;
- the outputs' count, shapes and dtypes are compared with the reference's on the host
  (`compare.structure_error`) before any output is moved to the device, so an oversized output
  cannot exhaust the GPU's memory in the judge.

What fails these is `Refused`; the judge answers it as a forged result file
(`messages.Judged.forged`), the candidate's verdict (`hacked`, `sandbox_escape`), never as its
own failure.
"""

from __future__ import annotations

from typing import Any

import torch


class Refused(Exception):
    """The file (or its request) is not what an honest harness writes (the message says why)."""


def _load(path: str) -> dict[str, Any]:
    try:
        got = torch.load(path, weights_only=True, map_location="cpu")
    except (MemoryError, torch.OutOfMemoryError):
        raise
    except Exception as e:  # noqa: BLE001 - whatever the bytes are, they are not a harness's file
        why = f"{type(e).__name__}: {str(e)[:200]}"
        raise Refused(f"the result file cannot be read as a harness's file ({why})") from None
    if not isinstance(got, dict):
        raise Refused(f"the result file holds a {type(got).__name__}, not the harness's record")
    return got


def _keys(got: dict[str, Any], keys: set[str]) -> None:
    if set(got) != keys:
        has = sorted(map(str, got))
        raise Refused(f"the result file's record has the keys {has}, the harness writes {sorted(keys)}")


def _plain(t: Any, what: str) -> torch.Tensor:
    if type(t) is not torch.Tensor or t.layout != torch.strided:
        raise Refused(f"{what} is not a plain tensor")
    return t


def _outputs(run: Any, what: str) -> list[Any]:
    if not isinstance(run, list):
        raise Refused(f"{what} is a {type(run).__name__}, not a list of outputs")
    for i, o in enumerate(run):
        if isinstance(o, torch.Tensor):
            _plain(o, f"{what}, output {i},")
        elif o is not None and not isinstance(o, (int, float, bool)):
            raise Refused(f"{what}, output {i}, is a {type(o).__name__}")
    return run


def index(value: Any, count: int, what: str) -> int:
    """`value` as an index below `count` (a request's trial or size set, as the harness named it)."""
    if type(value) is not int or not 0 <= value < count:
        raise Refused(f"{what} {value!r} does not exist (there are {count})")
    return value


def correctness(path: str) -> dict[str, Any]:
    """A correctness call's record (a trial, a hidden size set, the identity check): ``runs`` (one
    or two lists of outputs), ``mutated``, ``alias``, ``repeat_ok``."""
    got = _load(path)
    _keys(got, {"runs", "mutated", "alias", "repeat_ok"})
    runs = got["runs"]
    if not isinstance(runs, list) or not 1 <= len(runs) <= 2:
        raise Refused("the result file's runs are not one or two lists of outputs")
    for r, run in enumerate(runs):
        _outputs(run, f"run {r}")
    if not isinstance(got["mutated"], bool) or got["repeat_ok"] not in (None, True, False):
        raise Refused("the result file's mutation or repeat fact is not a boolean")
    if not isinstance(got["alias"], list) or not all(isinstance(a, bool) for a in got["alias"]):
        raise Refused("the result file's alias facts are not booleans")
    return got


def timed(path: str, rows: list[Any]) -> dict[str, Any]:
    """The timed calls' record (`candidate_child.TimedCalls.save`): per call its seed, its keys,
    the digests of its outputs and of its inputs, with the outputs' signature and the rows whose
    structure changed; `rows` (the calls the worker picked) must all be there."""
    got = _load(path)
    _keys(got, {"seeds", "keys", "outputs", "inputs", "signature", "changed"})
    seeds = _plain(got["seeds"], "the timed calls' seeds")
    keys = _plain(got["keys"], "the timed calls' keys")
    n = seeds.numel()
    if seeds.dtype != torch.int64 or seeds.dim() != 1:
        raise Refused("the timed calls' seeds are not a vector of int64")
    if keys.dtype != torch.int64 or tuple(keys.shape) != (n, 2):
        raise Refused(f"the timed calls' keys are not {n} pairs of int64")
    for name in ("outputs", "inputs"):
        digests = got[name]
        if not isinstance(digests, list) or len(digests) != n:
            raise Refused(f"the timed calls' {name} digests are not one per call ({n})")
        for i, d in enumerate(digests):
            if _plain(d, f"the {name} digest of timed call {i}").dtype != torch.float64 or d.dim() != 1:
                raise Refused(f"the {name} digest of timed call {i} is not a vector of float64")
    if not isinstance(got["signature"], list):
        raise Refused("the timed calls' signature is not a list")
    if not isinstance(got["changed"], list) or not all(type(c) is int for c in got["changed"]):
        raise Refused("the timed calls' changed rows are not numbers")
    if not isinstance(rows, list):
        raise Refused("the picked rows are not a list")
    for row in rows:
        index(row, n, "timed call")
    return got
