"""The attributes of one ATen call that decide its kernel: what dedup and cluster compare when
they ask whether two modules compute the same thing.

A call is written ``aten::name(attr,attr,...)@dtype``: the operator as ``aten_trace`` names it,
then the attributes that make a different kernel of the same operator (none: no parentheses), then
the dtype of its first tensor input when that is not ``float32``. Sizes are not attributes (the
same computation at other sizes is the same kernel problem up to its sizes); what the sizes leave
to the kernel is:

- **Layout.** Dimensions are described in memory order (by stride, outermost first, size-1
  dimensions left out) and runs of neighbouring dimensions that stay together are merged, so
  the description does not depend on how many dimensions a tensor happens to have. A reduction,
  a softmax, a normalization or a concatenation writes the dimensions it works along as ``R`` and
  the others as ``K``, neighbouring ``R`` merged and the leading ``K`` too: ``KR`` is the
  innermost block (a last-dim norm of any rank, a spatial mean), ``KRKK`` the channels of an
  NCHW tensor (a channels-first norm), ``KRK`` its height, ``RK`` the outermost of a matrix,
  ``R`` everything.
  ``permute``/``transpose``/``t`` write their merged permutation (``p=021``: the two inner
  blocks swap), copies the memory order of a non-contiguous source (``m=021``: a transposing
  copy), and an element-wise call whose tensors are laid out differently ``x``.
- **Convolutions.** Dimensionality, kernel, stride, padding, dilation (``2d,k3x3,s1,p1,d1``), the
  grouping (``dense``, ``dw`` depthwise: one input channel per group, ``grp`` otherwise),
  ``T`` transposed, ``nobias``, ``cl`` an input not laid out NCHW-contiguous, ``dyn`` a weight
  that is not a parameter of the module.
- **Matrix products.** The role of each factor: ``w`` a parameter or buffer of the module (or a
  view of one), ``a`` anything else (``mm(a,w)`` is a linear layer, ``bmm(a,a)`` attention).
- **Normalizations.** Their pattern (as above), ``train``/``eval`` for batch norms, the grouping of
  group norms (``g1``, ``gC`` one channel per group, ``grp``), ``noaffine``.
- **Others.** Pooling kernel and stride (``global`` for an adaptive pool to one element),
  attention's ``causal`` and ``mask``, ``gelu``'s ``tanh``, interpolation's ``ac``
  (align_corners), an element-wise call's broadcasting (``s`` with a scalar operand, ``b=KR``
  with a smaller operand varying along the dimensions marked ``R``: a bias over the last
  dimension is no per-channel scale of an NCHW tensor, ``b=KRKK``), a cast's target dtype
  (``to=bf16``). Views of a parameter are
  marked ``w`` (a transposed weight is no data movement of the computation).
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

DTYPES = {
    "float32": None,
    "float16": "f16",
    "bfloat16": "bf16",
    "float64": "f64",
    "int64": "i64",
    "int32": "i32",
    "int16": "i16",
    "int8": "i8",
    "uint8": "u8",
    "bool": "b",
    "complex64": "c64",
    "complex128": "c128",
}

#: The view operators, one list with ksmith-embed's `Kind::View` (`aten_views.json`).
_VIEW_LISTS = json.loads(pathlib.Path(__file__).with_name("aten_views.json").read_text())
#: Views in the same memory order: only whether they view a weight is written.
VIEWS = frozenset(_VIEW_LISTS["reshape"])
#: Views that reorder dimensions: their merged permutation is written.
PERMUTES = frozenset(_VIEW_LISTS["permute"])
COPIES = {"clone", "contiguous", "copy", "_to_copy", "to", "_copy_from"}
MATMULS = {
    "mm": ("self", "mat2"),
    "addmm": ("mat1", "mat2"),
    "_addmm_activation": ("mat1", "mat2"),
    "bmm": ("self", "mat2"),
    "baddbmm": ("batch1", "batch2"),
    "addbmm": ("batch1", "batch2"),
    "addmv": ("mat", "vec"),
    "mv": ("self", "vec"),
    "dot": ("self", "tensor"),
    "vdot": ("self", "other"),
    "matmul": ("self", "other"),
    "linear": ("input", "weight"),
    "outer": ("self", "vec2"),
}


class Weights:
    """The storages of a module's parameters and buffers: a tensor on one of them is (a view of)
    a weight."""

    def __init__(self, model, torch):
        self.torch = torch
        self.ptrs: set[int] = set()
        tensors = []
        if isinstance(model, torch.nn.Module):
            tensors = [*model.parameters(), *model.buffers()]
        for t in tensors:
            ptr = _storage_ptr(t)
            if ptr:
                self.ptrs.add(ptr)

    def holds(self, t) -> bool:
        """True when ``t`` lives on a parameter's or buffer's storage."""
        ptr = _storage_ptr(t)
        return bool(ptr) and ptr in self.ptrs


def _storage_ptr(t) -> int:
    try:
        return int(t.untyped_storage().data_ptr())
    except Exception:  # noqa: BLE001 - tensors without storage (sparse, nested) are no weight
        return 0


def signature(func, args, kwargs, weights: Weights) -> str:
    """The call written as ``aten::name(attrs)@dtype`` (see the module's documentation)."""
    torch = weights.torch
    packet = getattr(func, "overloadpacket", None)
    name = getattr(packet, "_qualified_op_name", None) or str(func)
    named = _bind(func, args, kwargs or {})
    first = _first_tensor(args, torch)
    try:
        attrs = _attributes(_base(name), getattr(func, "_overloadname", ""), named, first, weights)
    except Exception:  # noqa: BLE001 - an attribute that cannot be read is left out, never a failure
        attrs = ["?"]
    out = name + (f"({','.join(attrs)})" if attrs else "")
    if first is not None:
        dtype = str(first.dtype).removeprefix("torch.")
        short = DTYPES.get(dtype, dtype)
        if short:
            out += f"@{short}"
    return out


def _base(name: str) -> str:
    base = name.rsplit("::", 1)[-1]
    return base[:-1] if base.endswith("_") else base


def _bind(func, args, kwargs) -> dict[str, Any]:
    """The call's arguments by their schema names (positional ones first)."""
    out: dict[str, Any] = {}
    schema = getattr(func, "_schema", None)
    names = [a.name for a in schema.arguments] if schema is not None else []
    for i, value in enumerate(args):
        out[names[i] if i < len(names) else f"arg{i}"] = value
    out.update(kwargs)
    return out


def _first_tensor(args, torch):
    for a in args:
        if isinstance(a, torch.Tensor):
            return a
        if isinstance(a, (list, tuple)):
            for b in a:
                if isinstance(b, torch.Tensor):
                    return b
    return None


def _attributes(base: str, overload: str, named: dict[str, Any], first, weights: Weights) -> list[str]:
    torch = weights.torch
    if base in VIEWS:
        return ["w"] if first is not None and weights.holds(first) else []
    if base in PERMUTES:
        if first is not None and weights.holds(first):
            return ["w"]
        perm = _permutation(base, named, first)
        return [f"p={_digits(perm)}"] if perm is not None else ["p=id"]
    if base in COPIES:
        return _copy_attributes(named, first, torch)
    if base in ("convolution", "_convolution", "conv1d", "conv2d", "conv3d", "mkldnn_convolution"):
        return _conv_attributes(named, first, weights)
    if base in MATMULS:
        return _matmul_attributes(base, named, weights)
    if "norm" in base and ("batch" in base or "layer" in base or "group" in base or "instance" in base):
        return _norm_attributes(base, named, first)
    if "pool" in base:
        return _pool_attributes(base, named)
    if base.startswith("_scaled_dot_product") or base == "scaled_dot_product_attention":
        out = []
        if named.get("is_causal"):
            out.append("causal")
        if named.get("attn_mask") is not None or named.get("attn_bias") is not None:
            out.append("mask")
        if (named.get("dropout_p") or 0) > 0:
            out.append("drop")
        return out
    if base == "gelu":
        return ["tanh"] if named.get("approximate") == "tanh" else []
    if base.startswith("upsample") or base.startswith("_upsample") or base.startswith("grid_sampler"):
        return ["ac"] if named.get("align_corners") else []
    if "dim" in named and first is not None and overload not in ("other", "binary"):
        return [_pattern(first, _dims(named.get("dim"), first.dim()))]
    if base in ("max", "min") and overload == "default" and first is not None:
        return [_pattern(first, set(range(first.dim())))]
    if base in ("amax", "amin", "sum", "mean", "prod", "logsumexp", "var", "std", "norm", "nansum"):
        if first is not None:
            return [_pattern(first, set(range(first.dim())))]
    return _broadcast(named, torch)


def _dims(dim, rank: int) -> set[int]:
    """Dimension argument(s) as non-negative dims; none or an empty list is every dimension."""
    if rank == 0:
        return set()
    if dim is None:
        return set(range(rank))
    if isinstance(dim, int):
        return {dim % rank}
    dims = {int(d) % rank for d in dim}
    return dims or set(range(rank))


def _memory_order(t) -> list[int]:
    """The dimensions of ``t`` longer than one, outermost in memory first (ties: logical order)."""
    dims = [d for d in range(t.dim()) if t.shape[d] != 1]
    return sorted(dims, key=lambda d: -t.stride(d))


def _pattern(t, marked: set[int]) -> str:
    """``R``/``K`` for each dimension in memory order (``KRKK``: the channels of an NCHW
    tensor), with neighbouring ``R`` merged (they work as one flattened dimension) and the
    leading ``K`` merged (batch dimensions, however many); ``-`` for a tensor with no dimension
    longer than one."""
    labels = ["R" if d in marked else "K" for d in _memory_order(t)]
    out = []
    for i, c in enumerate(labels):
        leading = c == "K" and "R" not in labels[:i]
        if i > 0 and labels[i - 1] == c and (c == "R" or leading):
            continue
        out.append(c)
    return "".join(out) or "-"


def _merged(order: list[int]) -> list[int] | None:
    """A permutation of dimensions with runs of consecutive dimensions merged and the result
    renumbered (``[0, 2, 3, 1]`` -> ``[0, 2, 1]``); none for the identity."""
    if not order:
        return None
    blocks = [[order[0]]]
    for d in order[1:]:
        if d == blocks[-1][-1] + 1:
            blocks[-1].append(d)
        else:
            blocks.append([d])
    starts = sorted(b[0] for b in blocks)
    perm = [starts.index(b[0]) for b in blocks]
    return None if perm == sorted(perm) else perm


def _digits(perm: list[int]) -> str:
    return "".join(str(p) if p < 10 else f"[{p}]" for p in perm)


def _permutation(base: str, named: dict[str, Any], t) -> list[int] | None:
    if t is None:
        return None
    rank = t.dim()
    if base == "permute":
        perm = [int(d) % rank for d in named.get("dims", [])]
    elif base in ("transpose", "swapaxes", "swapdims"):
        a, b = (int(named.get(k, 0)) % max(rank, 1) for k in ("dim0", "dim1"))
        perm = list(range(rank))
        perm[a], perm[b] = perm[b], perm[a]
    elif base in ("t", "numpy_T"):
        perm = list(range(rank))[::-1]
    else:
        return None
    # Where the dimensions longer than one go, renumbered among themselves.
    kept = [d for d in perm if t.shape[d] != 1]
    return _merged([sorted(kept).index(d) for d in kept])


def _layout(t) -> list[int] | None:
    """The merged memory order of ``t`` (none when it is laid out in logical order)."""
    order = _memory_order(t)
    return _merged([sorted(order).index(d) for d in order])


def _copy_attributes(named: dict[str, Any], first, torch) -> list[str]:
    out = []
    src = named.get("src", first)
    if isinstance(src, torch.Tensor):
        layout = _layout(src)
        if layout is not None:
            out.append(f"m={_digits(layout)}")
    dtype = named.get("dtype")
    if dtype is not None and first is not None and dtype != first.dtype:
        short = str(dtype).removeprefix("torch.")
        out.append(f"to={DTYPES.get(short) or short}")
    return out


def _uniform(values, prefix: str) -> str:
    values = [int(v) for v in values]
    if values and all(v == values[0] for v in values):
        return f"{prefix}{values[0]}"
    return prefix + "x".join(str(v) for v in values)


def _conv_attributes(named: dict[str, Any], first, weights: Weights) -> list[str]:
    weight = named.get("weight")
    if weight is None or first is None:
        return ["?"]
    nd = weight.dim() - 2
    transposed = bool(named.get("transposed", False))
    out = [
        f"{nd}d",
        "k" + "x".join(str(int(k)) for k in weight.shape[2:]),
        _uniform(named.get("stride") or [1] * nd, "s"),
        _uniform(named.get("padding") or [0] * nd, "p"),
        _uniform(named.get("dilation") or [1] * nd, "d"),
    ]
    groups = int(named.get("groups", 1) or 1)
    in_channels = first.shape[1] if first.dim() > 1 else 1
    if groups == 1:
        out.append("dense")
    elif groups == in_channels:
        out.append("dw")
    else:
        out.append("grp")
    if transposed:
        out.append("T")
    if named.get("bias") is None:
        out.append("nobias")
    if _layout(first) is not None:
        out.append("cl")
    if not weights.holds(weight):
        out.append("dyn")
    return out


def _matmul_attributes(base: str, named: dict[str, Any], weights: Weights) -> list[str]:
    roles = []
    for key in MATMULS[base]:
        t = named.get(key)
        if t is None:
            continue
        roles.append("w" if weights.holds(t) else "a")
    if base == "_addmm_activation":
        roles.append("gelu" if named.get("use_gelu") else "relu")
    return roles


def _norm_attributes(base: str, named: dict[str, Any], first) -> list[str]:
    if first is None:
        return ["?"]
    rank = first.dim()
    out = []
    if "layer_norm" in base:
        k = len(named.get("normalized_shape") or [])
        out.append(_pattern(first, set(range(rank - k, rank))))
        if named.get("weight") is None:
            out.append("noaffine")
    elif "group_norm" in base:
        groups, channels = int(named.get("group", 1)), int(named.get("C", 0))
        out.append("g1" if groups == 1 else "gC" if groups == channels else "grp")
        if named.get("weight") is None:
            out.append("noaffine")
    else:
        out.append(_pattern(first, set(range(rank)) - {1}))
        training = named.get("training")
        out.append("eval" if "no_training" in base or training is False else "train")
        if named.get("weight") is None:
            out.append("noaffine")
    return out


def _pool_attributes(base: str, named: dict[str, Any]) -> list[str]:
    if "adaptive" in base:
        size = named.get("output_size") or []
        return ["global" if all(int(s) == 1 for s in size) else "out"]
    kernel = named.get("kernel_size") or []
    stride = named.get("stride") or kernel
    out = [_uniform(kernel, "k"), _uniform(stride, "s")]
    padding = named.get("padding")
    if padding:
        out.append(_uniform(padding, "p"))
    return out


def _broadcast(named: dict[str, Any], torch) -> list[str]:
    """``s`` when an operand is a scalar (or one element); ``b=<pattern>`` when a smaller tensor
    is broadcast over the largest, the pattern (as for reductions, in the largest tensor's memory
    order) marking ``R`` where the smaller one varies (``b=KR`` a bias over the last dimension,
    ``b=KRKK`` a per-channel scale of an NCHW tensor); ``x`` when same-shaped operands are laid
    out differently; nothing for unary calls."""
    operands = [v for k, v in named.items() if k != "out" and isinstance(v, (torch.Tensor, int, float, bool))]
    tensors = [v for v in operands if isinstance(v, torch.Tensor)]
    if len(operands) < 2 or not tensors:
        return []
    out = []
    if any(not isinstance(v, torch.Tensor) or v.numel() == 1 for v in operands):
        out.append("s")
    big = [t for t in tensors if t.numel() > 1]
    if len({tuple(t.shape) for t in big}) > 1:
        full = max(big, key=lambda t: t.numel())
        other = next(t for t in big if tuple(t.shape) != tuple(full.shape))
        offset = full.dim() - other.dim()
        varies = {offset + i for i in range(other.dim()) if other.shape[i] > 1 and offset + i >= 0}
        out.append(f"b={_pattern(full, varies)}")
    elif len({tuple(_memory_order(t)) for t in big}) > 1:
        out.append("x")
    return out
