"""Whether a program that runs on the CPU also runs on a GPU as the evaluator runs it: built on the
CPU, moved with ``Model.to(device)``, called on inputs made on the device.

On the CPU every tensor is on one device, so a forward that makes a tensor without a device
(``torch.tensor(1. / 0.01)`` inside ``forward``) or keeps one outside its parameters and buffers
(a plain attribute, which ``.to(device)`` does not move) runs there, and fails on the GPU:
``Expected all tensors to be on the same device`` (Swin-V2's ``torch.clamp(self.logit_scale,
max=torch.log(torch.tensor(1. / 0.01)))``, on every task of that model, found only on an H200).

:func:`check` stands the ``meta`` device for the GPU: the model built on the CPU is moved to
``meta``, its inputs are made there, and one forward runs under a dispatch mode that looks at
every operator's tensors. Where CPU tensors meet ``meta`` tensors, the call is one a GPU refuses
unless each CPU tensor is a 0-dimensional scalar passed to an operator that takes CPU scalars
beside device tensors (the elementwise binary operators, comparisons, ``where``,
``masked_fill``), or the operator moves or indexes across devices (``copy_``, ``.to``,
indexing with CPU indices). The first refused call is the finding.
"""

from __future__ import annotations

from typing import Any

from .loading import exec_program, seed_all, split_init

#: Operators (aten overload packets) that take a 0-dimensional CPU tensor beside device
#: tensors: TensorIterator's binary operators allow CPU scalars.
CPU_SCALAR_OPS = frozenset(
    """
    add sub rsub mul div true_divide floor_divide remainder fmod pow float_power atan2 hypot
    copysign maximum minimum fmax fmin eq ne lt le gt ge logical_and logical_or logical_xor
    bitwise_and bitwise_or bitwise_xor bitwise_left_shift bitwise_right_shift __and__ __or__
    __xor__ __lshift__ __rshift__ xlogy special_xlog1py nextafter heaviside ldexp where masked_fill
    lerp
    """.split()
)
#: Operators that move tensors between devices or take CPU index tensors for a device tensor.
CROSS_DEVICE_OPS = frozenset(
    """
    copy_ _to_copy to _copy_from _copy_from_and_resize index index_put_ index_put _index_put_impl_
    lift_fresh lift_fresh_copy
    """.split()
)


class Refused(Exception):
    """A call a GPU refuses: its operator and the CPU tensors it was given."""


def check(text: str, seed: int, torch) -> str | None:
    """The first operator call of ``text``'s forward that mixes CPU tensors with device tensors
    the way a GPU refuses, in words; None when there is none. Raises what the program raises on
    ``meta`` (then nothing is known)."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    ns = exec_program(text, "<ksmith-host-tensors>")
    seed_all(seed, torch)
    model = ns["Model"](*split_init(ns["get_init_inputs"]())).to("meta")
    with torch.device("meta"):
        inputs = ns["get_inputs"]()
    if not isinstance(inputs, (list, tuple)):
        inputs = [inputs]
    inputs = [x.to("meta") if isinstance(x, torch.Tensor) else x for x in inputs]

    class Mixed(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
            host = [t for t in tensors if t.device.type == "cpu"]
            if host and any(t.device.type == "meta" for t in tensors):
                name = func.overloadpacket.__name__
                scalars = all(t.dim() == 0 for t in host)
                if name not in CROSS_DEVICE_OPS and not (scalars and name in CPU_SCALAR_OPS):
                    shapes = ", ".join(str(list(t.shape)) for t in host)
                    raise Refused(f"aten.{func.__name__} is given CPU tensors ({shapes}) beside the model's")
            return func(*args, **kwargs)

    try:
        with torch.no_grad(), Mixed():
            model(*inputs)
    except Refused as found:
        return (
            f"on a GPU its forward fails: {found} (a tensor made without a device inside forward, or kept "
            "outside the module's parameters and buffers, stays on the CPU when the model moves)"
        )
    return None


def describe(found: str) -> dict[str, Any]:
    """The probe result's fields for a program whose forward a GPU refuses (`check`)."""
    return {"status": "degenerate", "error_class": "HostTensor", "error_message": found}
