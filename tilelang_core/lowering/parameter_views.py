"""GPU kernels given one tensor's storage twice get no ``__restrict__`` pointer parameters.

``T.view(A, ...)`` and ``T.reshape(A, ...)`` of a tensor parameter declare a second buffer on
``A``'s storage, and a device kernel using both takes that storage twice (``A_ptr`` and
``A_ptr_1``, one pointer per buffer). CUDA's code generator marks every pointer parameter of a
function with ``tirx.noalias`` (which ``SplitHostDevice`` gives every kernel) ``__restrict__``:
a promise to nvcc that the two do not alias, which lets it move a store through one past a load
through the other, or read the other through the read-only data cache.
:func:`allow_aliased_pointers` turns ``tirx.noalias`` off for the kernels whose launch passes
one tensor parameter to two pointer parameters (the kernels' arguments as
``codegen.gpu_device_kernels`` resolved them), before their source is generated; other kernels
keep ``__restrict__``.
"""

from __future__ import annotations

from typing import Any, Iterable

__all__ = ["aliased_kernels", "allow_aliased_pointers"]

_NOALIAS = "tirx.noalias"


def aliased_kernels(kernels: Iterable[Any]) -> set:
    """Names of the device kernels (``DeviceKernel``) with two pointer arguments from one tensor
    parameter."""
    names = set()
    for kernel in kernels:
        pointers = [arg.param_index for arg in kernel.args if arg.kind == "pointer" and arg.param_index is not None]
        if len(pointers) != len(set(pointers)):
            names.add(kernel.name)
    return names


def allow_aliased_pointers(device_mods: dict, kernels: Iterable[Any]) -> dict:
    """``device_mods`` (target -> IRModule of device functions) with ``tirx.noalias`` off for the
    :func:`aliased_kernels`."""
    names = aliased_kernels(kernels)
    if not names:
        return device_mods
    import tvm
    out = {}
    for target, dmod in device_mods.items():
        funcs = {}
        for gv, fn in dmod.functions.items():
            symbol = str(fn.attrs.get("global_symbol", gv.name_hint)) if fn.attrs is not None else gv.name_hint
            funcs[gv] = fn.with_attr(_NOALIAS, False) if symbol in names else fn
        out[target] = tvm.IRModule(funcs, attrs=dmod.attrs)
    return out
