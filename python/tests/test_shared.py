"""What the probe runner and the evaluator worker share (`ksmith.shared`): one definition of a
module-level size constant, read and rewritten in place, and one way to tell whether two runs'
outputs agree."""

from __future__ import annotations

import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import pytest  # noqa: E402
import torch  # noqa: E402
from ksmith.shared import constants as K  # noqa: E402
from ksmith.shared import outputs  # noqa: E402

# --- constants ---------------------------------------------------------------------------------


def test_constants_are_read_and_rewritten_in_place():
    text = "import torch\n\nbatch_size = 16  # rows\ndim = -3\nx = y = 2\nn = 1\nn = 2\nflag = True\n"
    assert K.int_constants(text) == {"batch_size": 16, "dim": -3}
    new = K.set_constants(text, {"batch_size": 1024, "dim": 7})
    assert new == text.replace("16", "1024").replace("-3", "7")
    with pytest.raises(KeyError, match="n"):
        K.set_constants(text, {"n": 3})
    with pytest.raises(TypeError):
        K.set_constants(text, {"dim": 2.5})


def test_a_constant_is_one_top_level_binding_to_integer_arithmetic():
    """The probe read only literals, the evaluator also arithmetic and annotated assignments, and
    each bound names differently: on this program one found 1 constant, the other 3."""
    text = (
        "import torch\n"
        "batch_size = 16\n"
        "dim = 2 ** 11\n"
        "eps: int = 3\n"
        "blocks = 64 * 1024 // 8\n"
        "ODD = -(7)\n"
        "FLAG = True\n"
        "twice = 1\ntwice = 2\n"
        "a, b = 4, 8\n"
        "x = y = 5\n"
        "name = 'x'\n"
        "looped = 1\nfor looped in range(3):\n    pass\n"
        "imported = 1\nfrom os import sep as imported\n"
        "def get_inputs():\n    return [torch.randn(batch_size, dim)]\n"
    )
    assert K.int_constants(text) == {"batch_size": 16, "dim": 2048, "eps": 3, "blocks": 8192, "ODD": -7}
    new = K.set_constants(text, {"dim": 100, "eps": 4, "ODD": 9})
    assert "dim = 100\n" in new and "eps: int = 4\n" in new and "ODD = 9\n" in new
    assert K.int_constants(new)["dim"] == 100
    assert K.set_constants(text, {}) == text
    for not_constant in ("FLAG", "twice", "a", "x", "y", "name", "looped", "imported"):
        with pytest.raises(KeyError):
            K.set_constants(text, {not_constant: 1})
    with pytest.raises(SyntaxError):
        K.int_constants("def broken(:\n")


def test_rewriting_keeps_every_other_byte_with_non_ascii_text():
    text = "# größe: ünïcode\nN = 4  # é\nM = 2 * 3\nprint('ß', N, M)\n"
    assert K.set_constants(text, {"N": 12, "M": 5}) == "# größe: ünïcode\nN = 12  # é\nM = 5\nprint('ß', N, M)\n"


def test_new_constant_names_avoid_names_the_program_reads():
    text = (
        "import torch\nsize = 3\n\ndef f(x):\n    return x + dim\n\n"
        "class C:\n    def g(self, channels):\n        return channels\n"
    )
    taken = K.taken_names(text)
    assert {"size", "dim", "torch", "f", "C", "len"} <= taken
    assert "channels" not in taken  # a parameter: a constant of that name changes nothing


# --- outputs -----------------------------------------------------------------------------------


def test_same_values_is_bitwise_with_nan_matching_nan():
    nan = math.nan
    a = torch.tensor([1.0, nan, 3.0])
    assert outputs.same_values([a, 2], [a.clone(), 2])
    assert outputs.same_values([torch.tensor([nan])], [torch.tensor([nan])])
    assert not outputs.same_values([a], [torch.tensor([1.0, 2.0, 3.0])])
    assert not outputs.same_values([torch.tensor([nan])], [torch.tensor([0.125])])
    assert not outputs.same_values([torch.tensor([math.inf])], [torch.tensor([torch.finfo(torch.float32).max])])
    assert not outputs.same_values([a], [a.nextafter(torch.tensor(10.0))])
    assert not outputs.same_values([a], [a, a]), "another count"
    assert not outputs.same_values([a], [a.double()]), "another dtype"
    assert not outputs.same_values([a], [a.reshape(3, 1)]), "another shape"
    assert not outputs.same_values([a], [1.0]), "a tensor against a number"
    assert not outputs.same_values([2], [3])
    ints = torch.arange(4)
    assert outputs.same_values([ints], [ints.clone()]) and not outputs.same_values([ints], [ints + 1])


def test_same_values_walks_dicts_lists_and_tuples_of_tensors():
    a = torch.arange(6.0).reshape(2, 3)
    inputs = [{"x": a, "mask": a > 2}, (a, [a, 1])]
    again = [{"x": a.clone(), "mask": (a > 2).clone()}, (a.clone(), [a.clone(), 1])]
    assert outputs.same_values(inputs, again)
    assert not outputs.same_values(inputs, [{"x": a + 1, "mask": a > 2}, again[1]]), "a value inside a dict"
    assert not outputs.same_values(inputs, [{"x": a}, again[1]]), "other keys"
    assert not outputs.same_values(inputs, [again[0], [a, [a, 1]]]), "a list for a tuple"
    assert not outputs.same_values(inputs, [again[0], (a, [a, 2])]), "a number inside a list"
    assert outputs.close([{"x": a}], [{"x": a + 1e-7}], lambda _dtype: (1e-5, 1e-5))


def test_close_uses_the_dtype_tolerance_and_matches_nan():
    tol = {torch.float32: (1e-4, 1e-4), torch.float16: (1e-2, 1e-2)}.__getitem__
    x = torch.tensor([1.0, 100.0, math.nan])
    assert outputs.close([x], [x + 1e-5], tol)
    assert outputs.close([x], [x * (1 + 5e-5)], tol), "relative to the second value"
    assert not outputs.close([x], [x + 1e-2], tol)
    h = x.half()
    assert outputs.close([h], [h + 5e-3], tol) and not outputs.close([h], [h + 0.5], tol)
    assert not outputs.close([torch.tensor([math.nan])], [torch.tensor([0.0])], tol)
    assert outputs.close([torch.arange(3)], [torch.arange(3)], tol)
    assert not outputs.close([torch.arange(3)], [torch.arange(3) + 1], tol)
    assert not outputs.close([x], [x.half()], tol) and not outputs.close([x], [], tol)
    assert outputs.close([x, "label"], [x, "label"], tol) and not outputs.close([x, 1], [x, 2], tol)


def test_within_matches_only_the_same_infinity_and_compares_complex_values_whole():
    inf = math.inf
    ref = torch.tensor([1.0, inf, -inf])
    assert outputs.within(ref.clone(), ref, 1e-4, 1e-4)
    assert not outputs.within(torch.tensor([1.0, -inf, -inf]), ref, 1e-4, 1e-4), "opposite infinities"
    assert not outputs.within(torch.tensor([1.0, 1e30, -inf]), ref, 1e-4, 1e-4), "finite for infinite"
    z = torch.tensor([1 + 1j, 2 - 1j])
    assert outputs.within(z + 1e-6, z, 1e-4, 1e-4)
    assert not outputs.within(z + 1e-2j, z, 1e-4, 1e-4), "the imaginary part counts"
    assert outputs.wide(torch.bfloat16) == torch.float32 and outputs.wide(torch.float64) == torch.float64
    assert outputs.wide(torch.complex32) == torch.complex64 and outputs.wide(torch.complex128) == torch.complex128
