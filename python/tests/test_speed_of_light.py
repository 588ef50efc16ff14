"""The speed-of-light formula, the peaks table and the TF32 policy."""

from __future__ import annotations

import pytest
from ksmith.evaluator import speed_of_light as S

TABLE = S.load_peaks()


def test_the_table_covers_the_gpus_the_issue_names_and_cites_its_sources():
    names = {
        "NVIDIA H100 80GB HBM3": "H100 SXM",
        "NVIDIA H100 PCIe": "H100 PCIe",
        "NVIDIA H200": "H200 SXM",
        "NVIDIA A100-SXM4-80GB": "A100 SXM 80GB",
        "NVIDIA A100-SXM4-40GB": "A100 SXM 40GB",
        "NVIDIA A100 80GB PCIe": "A100 PCIe 80GB",
        "NVIDIA L40S": "L40S",
        "NVIDIA B200": "B200",
        "AMD Instinct MI300X": "MI300X",
    }
    for device, entry in names.items():
        assert S.peaks_for(device, TABLE)["name"] == entry, device
    for entry in TABLE:
        assert entry["source"] and entry["bytes_per_s"] > 0
        assert set(entry["flops"]) == {"float32", "tf32", "bfloat16", "float16", "float64"}


def test_sol_is_the_larger_of_compute_and_memory_time():
    # H200: 4.8 TB/s, float32 66.9 TFLOP/s, TF32 494.7 TFLOP/s.
    mem = S.sol("NVIDIA H200", "float32", {"matmul": 0.0}, 4.8e9, {"matmul": False}, TABLE)
    assert mem["ms"] == pytest.approx(1.0) and mem["bound"] == "memory"
    comp = S.sol("NVIDIA H200", "float32", {"matmul": 66.9e9}, 4.8e6, {"matmul": False}, TABLE)
    assert comp["ms"] == pytest.approx(1.0) and comp["bound"] == "compute"
    assert comp["memory_ms"] == pytest.approx(0.001)
    tf32 = S.sol("NVIDIA H200", "float32", {"matmul": 494.7e9}, 0.0, {"matmul": True}, TABLE)
    assert tf32["ms"] == pytest.approx(1.0) and tf32["precision"] == {"matmul": "tf32"}
    # classes add up: half a ms of convolution at TF32 and half a ms of matmul at float32
    eager_flags = S.tf32_classes("torch_flags", False, True)
    both = S.sol("NVIDIA H200", "float32", {"conv": 247.35e9, "matmul": 33.45e9}, 0.0, eager_flags, TABLE)
    assert both["ms"] == pytest.approx(1.0)
    half = S.sol("NVIDIA H200", "bfloat16", {"matmul": 989.4e9}, 0.0, {"matmul": False}, TABLE)
    assert half["ms"] == pytest.approx(1.0) and half["precision"] == {"matmul": "bfloat16"}


def test_the_tf32_policy_is_explicit():
    assert S.tf32_classes("torch_flags", False, True) == {"matmul": False, "conv": True}
    assert S.tf32_classes("never", True, True) == {"matmul": False, "conv": False}
    assert S.tf32_classes("always", False, False) == {"matmul": True, "conv": True}
    with pytest.raises(ValueError, match="unknown TF32 policy"):
        S.tf32_classes("sometimes", False, False)


def test_an_unknown_device_or_dtype_has_no_sol_and_says_why():
    cpu = S.sol("cpu (triton interpreter)", "float32", {"matmul": 1.0}, 1.0, {}, TABLE)
    assert cpu["ms"] is None and "no peaks known" in cpu["why"]
    odd = S.sol("NVIDIA H100 80GB HBM3", "int8", {"matmul": 1.0}, 1.0, {}, TABLE)
    assert odd["ms"] is None and "int8" in odd["why"]
    assert S.fraction(None, 1.0) is None and S.fraction(0.5, 2.0) == 0.25 and S.fraction(1.0, 0.0) is None


def test_flop_counts_split_convolutions_from_the_rest():
    counts = {"aten.convolution.default": 10.0, "aten.mm.default": 5.0, "aten.bmm.default": 1.0}
    assert S.flop_classes(counts) == {"conv": 10.0, "matmul": 6.0}
