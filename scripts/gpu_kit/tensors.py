"""Tensors of a kit case, made the same way on the build machine and on the GPU machine.

A case lists every kernel parameter as a *tensor spec* (plain JSON, stored in MANIFEST.json)::

    {"name": "A", "shape": [96, 72], "dtype": "float16", "init": "randn", "seed": 1234, "role": "in"}

``init`` is ``randn`` (standard normal from ``seed``, drawn in float32 on the CPU by a private
``torch.Generator`` and then cast), ``randint`` (integers in [``low``, ``high``) from ``seed``,
then cast), ``zeros``, ``ones`` or ``nan`` (NaN for floating types, -1 for integers: cells a
kernel must overwrite); ``nan_at`` (optional) lists flat indices then set to NaN. ``role`` is ``in`` (read by the kernel), ``out`` (passed
in and written by the kernel) or ``ret`` (allocated by the kernel through ``out_idx`` and returned;
not passed). Values are always drawn on the CPU, so the GPU machine gets the bytes the build
machine computed its expected outputs from; :func:`digest` proves it (the build stores it).

Needs only torch.
"""

from __future__ import annotations

import hashlib
from typing import Any

INITS = ("randn", "randint", "zeros", "ones", "nan")
ROLES = ("in", "out", "ret")


def torch_dtype(name: str) -> Any:
    """``torch.float16`` for ``"float16"`` (ValueError for an unknown name)."""
    import torch

    value = getattr(torch, name, None)
    if not isinstance(value, torch.dtype):
        raise ValueError(f"unknown tensor dtype {name!r} in a kit tensor spec")
    return value


def make(spec: dict[str, Any], device: Any = "cpu") -> Any:
    """The tensor ``spec`` describes, made on the CPU, then moved to ``device``."""
    import torch

    shape = tuple(int(n) for n in spec["shape"])
    dtype = torch_dtype(spec["dtype"])
    init = spec.get("init", "zeros")
    if init == "randn":
        generator = torch.Generator().manual_seed(int(spec["seed"]))
        tensor = torch.randn(shape, generator=generator, dtype=torch.float32).to(dtype)
    elif init == "randint":
        generator = torch.Generator().manual_seed(int(spec["seed"]))
        tensor = torch.randint(int(spec["low"]), int(spec["high"]), shape, generator=generator, dtype=torch.int64).to(dtype)
    elif init == "zeros":
        tensor = torch.zeros(shape, dtype=dtype)
    elif init == "ones":
        tensor = torch.ones(shape, dtype=dtype)
    elif init == "nan":
        fill = float("nan") if dtype.is_floating_point else -1
        tensor = torch.full(shape, fill, dtype=dtype)
    else:
        raise ValueError(f"tensor spec {spec.get('name')!r}: init must be one of {', '.join(INITS)}, got {init!r}")
    for index in spec.get("nan_at") or ():  # flat indices set to NaN (floating types)
        tensor.view(-1)[int(index)] = float("nan")
    return tensor.to(device) if str(device) != "cpu" else tensor


def digest(tensor: Any) -> str:
    """SHA-256 of the tensor's dtype, shape and bytes (on the CPU)."""
    data = tensor.detach().to("cpu").contiguous().clone()
    h = hashlib.sha256(f"{data.dtype}:{tuple(data.shape)}:".encode())
    h.update(bytes(data.untyped_storage()))
    return h.hexdigest()


def call_arguments(specs: list[dict[str, Any]], device: Any = "cpu") -> dict[str, Any]:
    """name -> tensor for every parameter that is passed (roles ``in`` and ``out``), in order."""
    return {s["name"]: make(s, device) for s in specs if s["role"] != "ret"}


def reset_outputs(specs: list[dict[str, Any]], tensors: dict[str, Any]) -> None:
    """Give the ``out`` tensors their initial values again (in place: CUDA graphs keep addresses)."""
    for s in specs:
        if s["role"] == "out":
            tensors[s["name"]].copy_(make(s))


def outputs_of(specs: list[dict[str, Any]], tensors: dict[str, Any], returned: Any) -> dict[str, Any]:
    """name -> tensor of every output: the ``out`` tensors passed in, and what the call returned
    for the ``ret`` parameters (one tensor, or a tuple/list in parameter order)."""
    ret_names = [s["name"] for s in specs if s["role"] == "ret"]
    if len(ret_names) == 1 and not isinstance(returned, (list, tuple)):
        returned = [returned]
    returned = list(returned) if ret_names else []
    if len(returned) != len(ret_names):
        raise ValueError(f"the kernel returned {len(returned)} tensors, the case expects {len(ret_names)} ({ret_names})")
    out = {s["name"]: tensors[s["name"]] for s in specs if s["role"] == "out"}
    out.update(zip(ret_names, returned))
    return {s["name"]: out[s["name"]] for s in specs if s["name"] in out}
