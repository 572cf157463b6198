"""The launch plan: which device kernels to launch, in which order, with what.

Made from the artifact at build time, saved as JSON next to the cubin, and compared with the
cubin itself (every kernel present, every parameter of the size the plan passes). Layout,
format 1::

    {
      "format": 1, "name": "vector_add", "arch": "sm_90", "outputs": [2],
      "cubin": "kernel.cubin", "cubin_sha256": "...", "nvrtc": "13.5", "headers": "standin",
      "options": ["--gpu-architecture=sm_90", ...],
      "kernels": [                                  # launched in this order, on one stream
        {"name": "main_kernel",
         "grid": ["(n + 127) // 128", 1, 1], "block": [128, 1, 1], "dynamic_shared_memory": 0,
         "args": [{"name": "A", "kind": "pointer", "dtype": "float32", "param_index": 0, "bytes": 8},
                  {"name": "n", "kind": "scalar", "dtype": "int32", "symbol": "n", "bytes": 4}]}
      ]
    }
"""

from __future__ import annotations

import ctypes
import math
import struct
from dataclasses import dataclass
from typing import Any, Callable, Optional

from tilelang_core import symbolic
from tilelang_core.artifact import KernelArtifact
from tilelang_core.errors import BuildError

from .cubin import CubinInfo

PLAN_FORMAT = 1

#: ctypes type and byte size of each scalar dtype a kernel argument may have.
_SCALAR_CTYPES: dict[str, Any] = {
    "bool": ctypes.c_bool,
    "int8": ctypes.c_int8,
    "int16": ctypes.c_int16,
    "int32": ctypes.c_int32,
    "int64": ctypes.c_int64,
    "uint8": ctypes.c_uint8,
    "uint16": ctypes.c_uint16,
    "uint32": ctypes.c_uint32,
    "uint64": ctypes.c_uint64,
    "float32": ctypes.c_float,
    "float64": ctypes.c_double,
    "float16": ctypes.c_uint16,  # passed as its bit pattern, see scalar_packer
    "bfloat16": ctypes.c_uint16,
}


def _fits_or_infinity(value: float, code: str) -> float:
    """``value``, or the infinity of its sign when it is too large for the ``struct`` float
    ``code`` ('e' half, 'f' float): what a C conversion gives (70000.0 is +inf in float16). The
    call checker takes any float a double holds (docs/backend-conventions.md)."""
    try:
        struct.pack("<" + code, value)
    except OverflowError:
        return math.copysign(math.inf, value)
    return value


def _half_bits(value: float) -> int:
    """The float16 bit pattern of ``value`` (round to nearest even, +-inf past the largest)."""
    return struct.unpack("<H", struct.pack("<e", _fits_or_infinity(value, "e")))[0]


def _bfloat16_bits(value: float) -> int:
    """The bfloat16 bit pattern of ``value`` (the float32's rounded to nearest even, +-inf past
    the largest, a NaN stays a quiet NaN)."""
    (bits,) = struct.unpack("<I", struct.pack("<f", _fits_or_infinity(value, "f")))
    if (bits & 0x7F800000) == 0x7F800000 and bits & 0x7FFFFF:  # NaN stays a (quiet) NaN
        return (bits >> 16) | 0x40
    return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # round to nearest even


def scalar_packer(dtype: str) -> Optional[Callable[[Any], Any]]:
    """A function turning a checked Python value into what ctypes gets, or None for "as is"."""
    if dtype == "float16":
        return lambda v: _half_bits(float(v))
    if dtype == "bfloat16":
        return lambda v: _bfloat16_bits(float(v))
    return None


def scalar_ctype(dtype: str) -> Any:
    """The ctypes type of a scalar kernel argument; :raises BuildError: unsupported dtype."""
    ctype = _SCALAR_CTYPES.get(dtype)
    if ctype is None:
        raise BuildError(
            f"nvrtc: a device kernel takes a scalar of dtype {dtype!r}, which this backend cannot pass "
            f"(it passes {', '.join(_SCALAR_CTYPES)})"
        )
    return ctype


def make_plan(artifact: KernelArtifact, out_idx: list[int], arch: str) -> dict[str, Any]:
    """The launch plan of ``artifact`` (without the cubin fields, which the build adds)."""
    if not artifact.device_kernels:
        raise BuildError(f"nvrtc: kernel {artifact.name!r} has no device kernels to launch")
    kernels = []
    for kernel in artifact.device_kernels:
        if kernel.launch is None:
            raise BuildError(f"nvrtc: device kernel {kernel.name!r} of {artifact.name!r} has no launch configuration")
        args = []
        for arg in kernel.args:
            size = 8 if arg.kind == "pointer" else ctypes.sizeof(scalar_ctype(arg.dtype))
            entry: dict[str, Any] = {"name": arg.name, "kind": arg.kind, "dtype": arg.dtype, "bytes": size}
            if arg.param_index is not None:
                entry["param_index"] = arg.param_index
            elif arg.symbol is not None:
                entry["symbol"] = arg.symbol
            else:
                raise BuildError(f"nvrtc: argument {arg.name!r} of device kernel {kernel.name!r} comes from nowhere")
            args.append(entry)
        launch = kernel.launch
        kernels.append(
            {
                "name": kernel.name,
                "grid": list(launch.grid),
                "block": list(launch.block),
                "dynamic_shared_memory": launch.dynamic_shared_memory,
                "args": args,
            }
        )
    return {
        "format": PLAN_FORMAT,
        "name": artifact.name,
        "arch": arch,
        "outputs": sorted(out_idx),
        "kernels": kernels,
    }


def check_plan_against_cubin(plan: dict[str, Any], info: CubinInfo) -> Optional[str]:
    """Why the cubin does not fit the plan (a kernel missing, a parameter of another size), or None."""
    for kernel in plan["kernels"]:
        name = kernel["name"]
        if name not in info.functions:
            return f"the cubin has no kernel {name!r} (it has: {', '.join(info.functions) or 'none'})"
        recorded = info.kernels.get(name)
        if recorded is None:
            return f"the cubin records no parameter layout for kernel {name!r}"
        sizes = [a["bytes"] for a in kernel["args"]]
        if recorded.param_sizes != sizes:
            return (
                f"kernel {name!r} takes parameters of {recorded.param_sizes} bytes in the cubin, "
                f"but the launch plan passes {sizes}"
            )
    return None


@dataclass
class KernelLaunch:
    """One device kernel, ready to launch: compiled size expressions and argument sources."""

    name: str
    grid: list[Callable[[dict], int]]
    block: list[Callable[[dict], int]]
    shared: Callable[[dict], int]
    static_dims: Optional[tuple[int, ...]]
    """(gx, gy, gz, bx, by, bz, smem) when none depends on a symbol."""
    args: list[tuple[str, Any, Optional[Callable]]]
    """Per argument: ('pointer', param index, None), ('param', param index, packer) for a scalar
    parameter, or ('symbol', name, packer)."""
    types: tuple
    """ctypes type of every argument, for cuLaunchKernel."""


def launches(plan: dict[str, Any]) -> list[KernelLaunch]:
    """Turn the plan's kernels into :class:`KernelLaunch` objects (size expressions compiled once)."""
    result = []
    for kernel in plan["kernels"]:
        exprs = [*kernel["grid"], *kernel["block"], kernel["dynamic_shared_memory"]]
        compiled = [symbolic.compile_expr(e) for e in exprs]
        static = tuple(int(e) for e in exprs) if all(isinstance(e, int) for e in exprs) else None
        args = []
        types = []
        for arg in kernel["args"]:
            if arg["kind"] == "pointer":
                types.append(ctypes.c_void_p)
                args.append(("pointer", arg["param_index"], None))
                continue
            types.append(scalar_ctype(arg["dtype"]))
            packer = scalar_packer(arg["dtype"])
            if "param_index" in arg:
                args.append(("param", arg["param_index"], packer))
            else:
                args.append(("symbol", arg["symbol"], packer))
        result.append(
            KernelLaunch(
                name=kernel["name"],
                grid=compiled[0:3],
                block=compiled[3:6],
                shared=compiled[6],
                static_dims=static,
                args=args,
                types=tuple(types),
            )
        )
    return result
