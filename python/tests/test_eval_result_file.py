"""The judge's reading of result files (`result_file`): what an honest harness writes is read
back as written; anything else, however it is crafted, is refused with why (the candidate's
verdict), never an exception of another kind that would fail the judge."""

from __future__ import annotations

import os

import pytest
import torch
from ksmith.evaluator import reference_child, result_file


def _saved(tmp_path, payload, name="out_0.pt") -> str:
    path = os.path.join(tmp_path, name)
    torch.save(payload, path)
    return path


def _honest_trial() -> dict:
    return {"runs": [[torch.ones(4)], [torch.ones(4)]], "mutated": False, "alias": [False], "repeat_ok": None}


def _honest_timed(n: int = 3) -> dict:
    return {
        "seeds": torch.arange(n, dtype=torch.int64),
        "keys": torch.zeros(n, 2, dtype=torch.int64),
        "outputs": [torch.zeros(5, dtype=torch.float64) for _ in range(n)],
        "inputs": [torch.zeros(10, dtype=torch.float64) for _ in range(n)],
        "signature": [[[4], "float32"]],
        "changed": [],
    }


def test_honest_files_are_read_as_written(tmp_path):
    got = result_file.correctness(_saved(tmp_path, _honest_trial()))
    assert torch.equal(got["runs"][1][0], torch.ones(4)) and got["alias"] == [False]
    number = {"runs": [[3.5, None, True]], "mutated": True, "alias": [], "repeat_ok": True}
    assert result_file.correctness(_saved(tmp_path, number))["runs"] == [[3.5, None, True]]
    timed = result_file.timed(_saved(tmp_path, _honest_timed()), [0, 2])
    assert timed["seeds"].tolist() == [0, 1, 2]


@pytest.mark.parametrize(
    "payload,why",
    [
        ("not a record", "holds a str"),
        ({"runs": 7, "mutated": False, "alias": [], "repeat_ok": None}, "runs are not one or two lists"),
        ({"runs": [], "mutated": False, "alias": [], "repeat_ok": None}, "runs are not one or two lists"),
        ({"runs": [[torch.ones(2)]] * 3, "mutated": False, "alias": [], "repeat_ok": None}, "not one or two"),
        ({"runs": [torch.ones(2)], "mutated": False, "alias": [], "repeat_ok": None}, "run 0 is a Tensor"),
        ({"runs": [["text"]], "mutated": False, "alias": [], "repeat_ok": None}, "output 0, is a str"),
        ({"runs": [[torch.ones(4).to_sparse()]], "mutated": False, "alias": [], "repeat_ok": None}, "plain tensor"),
        ({"runs": [[torch.ones(2)]], "mutated": "yes", "alias": [], "repeat_ok": None}, "not a boolean"),
        ({"runs": [[torch.ones(2)]], "mutated": False, "alias": [1], "repeat_ok": None}, "alias facts"),
        ({"runs": [[torch.ones(2)]], "mutated": False, "alias": []}, "has the keys"),
    ],
)
def test_a_crafted_correctness_file_is_refused(tmp_path, payload, why):
    with pytest.raises(result_file.Refused, match=why):
        result_file.correctness(_saved(tmp_path, payload))


def test_bytes_that_are_no_torch_file_are_refused(tmp_path):
    path = os.path.join(tmp_path, "out_0.pt")
    with open(path, "wb") as f:
        f.write(b"PK\x03\x04 not a zip at all")
    with pytest.raises(result_file.Refused, match="cannot be read"):
        result_file.correctness(path)


def test_a_file_of_objects_the_safe_loader_refuses_is_refused(tmp_path):
    with pytest.raises(result_file.Refused, match="cannot be read"):
        result_file.correctness(_saved(tmp_path, {"runs": [[object()]]}))


@pytest.mark.parametrize(
    "change,rows,why",
    [
        (lambda p: p, [3], "timed call 3 does not exist"),
        (lambda p: p, ["0"], "timed call '0' does not exist"),
        (lambda p: dict(p, keys=torch.zeros(2, 2, dtype=torch.int64)), [0], "keys are not 3 pairs"),
        (lambda p: dict(p, seeds=torch.zeros(3)), [0], "seeds are not a vector of int64"),
        (lambda p: dict(p, outputs=p["outputs"][:2]), [0], "outputs digests are not one per call"),
        (lambda p: dict(p, inputs=[torch.zeros(2, 2, dtype=torch.float64)] * 3), [0], "not a vector of float64"),
        (lambda p: dict(p, changed=["1"]), [0], "changed rows are not numbers"),
        (lambda p: dict(p, extra=1), [0], "has the keys"),
    ],
)
def test_a_crafted_timed_file_is_refused(tmp_path, change, rows, why):
    with pytest.raises(result_file.Refused, match=why):
        result_file.timed(_saved(tmp_path, change(_honest_timed())), rows)


def test_a_request_for_a_trial_or_size_set_that_does_not_exist_is_refused():
    assert result_file.index(2, 3, "trial") == 2
    for value in (3, -1, True, "1", None):
        with pytest.raises(result_file.Refused, match="does not exist"):
            result_file.index(value, 3, "trial")


def test_the_judge_answers_a_refused_file_as_a_forged_result():
    j = reference_child.forged({"label": "trial 0"}, "the result file holds a str")
    assert j.forged and not j.ok and j.structure == "the result file holds a str"
    from ksmith.evaluator import decide

    for kind in ("trial", "identity", "timed"):
        v = decide.early(kind, j)
        assert v is not None and (v.status, v.hack) == ("hacked", "sandbox_escape"), kind
        assert "not written by the harness" in v.message
