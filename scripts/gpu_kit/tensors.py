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

A scalar parameter of the kernel (``n: T.int32``) is a *scalar spec*, passed at its place in the
call as a Python number and given to the case's reference at its place among the inputs::

    {"name": "n", "role": "scalar", "dtype": "int32", "value": 3}

``dtype`` is one of :data:`SCALAR_DTYPES`; ``value`` is a JSON number that fits it (an integer in
range for the integer types, a finite number for the floating ones, ``true``/``false`` for
``bool``). :func:`check_specs` says what is wrong with a list of specs (both halves call it).

Needs only torch.
"""

from __future__ import annotations

import hashlib
from typing import Any

INITS = ("randn", "randint", "zeros", "ones", "nan")
ROLES = ("in", "out", "ret", "scalar")
#: dtype of a scalar spec -> (kind, bits): kind ``int``, ``uint``, ``float`` or ``bool``.
SCALAR_DTYPES = {
    "int8": ("int", 8), "int16": ("int", 16), "int32": ("int", 32), "int64": ("int", 64),
    "uint8": ("uint", 8), "uint16": ("uint", 16), "uint32": ("uint", 32), "uint64": ("uint", 64),
    "float16": ("float", 16), "bfloat16": ("float", 16), "float32": ("float", 32), "float64": ("float", 64),
    "bool": ("bool", 1),
}


def torch_dtype(name: str) -> Any:
    """``torch.float16`` for ``"float16"`` (ValueError for an unknown name)."""
    import torch

    value = getattr(torch, name, None)
    if not isinstance(value, torch.dtype):
        raise ValueError(f"unknown tensor dtype {name!r} in a kit tensor spec")
    return value


def _scalar_problem(spec: dict[str, Any]) -> str:
    """What is wrong with the scalar spec ``spec`` ("" when nothing is)."""
    import math

    dtype, value = spec.get("dtype"), spec.get("value")
    if dtype not in SCALAR_DTYPES:
        return f"dtype must be one of {', '.join(SCALAR_DTYPES)}, got {dtype!r}"
    kind, bits = SCALAR_DTYPES[dtype]
    if kind == "bool":
        return "" if isinstance(value, bool) else f"value must be true or false for bool, got {value!r}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"value must be a number for {dtype}, got {value!r} ({type(value).__name__})"
    if kind == "float":
        return "" if math.isfinite(value) else f"value must be a finite number (JSON has no inf/nan), got {value!r}"
    if not isinstance(value, int):
        return f"value must be an integer for {dtype}, got {value!r}"
    low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if kind == "int" else (0, 2**bits - 1)
    return "" if low <= value <= high else f"value {value} does not fit {dtype} ([{low}, {high}])"


def check_specs(specs: Any) -> list[str]:
    """Every problem of a case's parameter specs (tensor and scalar), as sentences; [] when none.

    Checks what the run half relies on: a list of objects with unique names, known roles, and
    for tensors a dtype name, a shape of non-negative integers and a known ``init`` (``seed`` for
    random ones); for scalars :data:`SCALAR_DTYPES` and a value that fits. Standard library only
    (the run half's parent process has no torch)."""
    if not isinstance(specs, list):
        return [f"params must be a list of specs, got {type(specs).__name__}"]
    problems, seen = [], set()
    for i, spec in enumerate(specs):
        if not isinstance(spec, dict):
            problems.append(f"param {i}: a spec must be an object (dict), got {type(spec).__name__}")
            continue
        name = spec.get("name")
        where = f"param {i} ({name!r})"
        if not isinstance(name, str) or not name:
            problems.append(f"{where}: name must be a non-empty string")
        elif name in seen:
            problems.append(f"{where}: the name is used twice; each parameter needs its own")
        seen.add(name)
        role = spec.get("role")
        if role not in ROLES:
            problems.append(f"{where}: role must be one of {', '.join(ROLES)}, got {role!r}")
            continue
        if role == "scalar":
            problem = _scalar_problem(spec)
            if problem:
                problems.append(f"{where}: {problem}")
            extra = sorted(set(spec) - {"name", "role", "dtype", "value"})
            if extra:
                problems.append(f"{where}: a scalar spec has name, role, dtype and value only; remove {', '.join(extra)}")
            continue
        if not isinstance(spec.get("dtype"), str):  # a name torch knows: make() says which it does not
            problems.append(f"{where}: dtype must be a torch dtype name such as 'float32', got {spec.get('dtype')!r}")
        shape = spec.get("shape")
        if not isinstance(shape, list) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
            problems.append(f"{where}: shape must be a list of non-negative integers, got {shape!r}")
        init = spec.get("init", "zeros")
        if init not in INITS:
            problems.append(f"{where}: init must be one of {', '.join(INITS)}, got {init!r}")
        elif init in ("randn", "randint") and not isinstance(spec.get("seed"), int):
            problems.append(f"{where}: init {init!r} needs an integer seed")
        if "value" in spec:
            problems.append(f"{where}: a tensor spec has no value (a scalar parameter has role 'scalar')")
    return problems


def is_scalar(spec: dict[str, Any]) -> bool:
    """Whether ``spec`` is a scalar parameter (not a tensor)."""
    return spec.get("role") == "scalar"


def make(spec: dict[str, Any], device: Any = "cpu") -> Any:
    """The tensor ``spec`` describes, made on the CPU, then moved to ``device``; for a scalar
    spec, its value as a Python ``int``, ``float`` or ``bool``."""
    import torch

    if is_scalar(spec):
        problem = _scalar_problem(spec)
        if problem:
            raise ValueError(f"scalar spec {spec.get('name')!r}: {problem}")
        kind = SCALAR_DTYPES[spec["dtype"]][0]
        return {"bool": bool, "float": float}.get(kind, int)(spec["value"])

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
    """name -> argument for every parameter that is passed (roles ``in``, ``out`` and ``scalar``),
    in order: tensors on ``device``, scalars as Python numbers."""
    return {s["name"]: make(s, device) for s in specs if s["role"] != "ret"}


def reference_inputs(specs: list[dict[str, Any]], arguments: dict[str, Any]) -> list[Any]:
    """What a case's reference is called with: the ``in`` tensors and the scalars, in parameter order."""
    return [arguments[s["name"]] for s in specs if s["role"] in ("in", "scalar")]


def input_digests(specs: list[dict[str, Any]], arguments: dict[str, Any]) -> dict[str, str]:
    """name -> :func:`digest` of every tensor passed (scalars carry their value in the spec)."""
    return {s["name"]: digest(arguments[s["name"]]) for s in specs if s["role"] in ("in", "out")}


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
