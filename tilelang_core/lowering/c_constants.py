"""Float constants that TVM 0.27's C and CUDA code generators would print inexactly, made exact.

**C.** TVM prints a float32 or float64 constant in C with seven significant digits (``%e``):
``X[i] / 3.0000000000000004`` became ``X_ptr[i] / 3.000000e+00`` and ``Z[i] * 1.0000001`` became
``Z_ptr[i] * 1.000000e+00f``, so float64 kernels computed with constants off by up to 5e-7
(relative) and float32 kernels by an ulp or more, with no warning. Round-tripping needs 9
significant digits for float32 and 17 for float64. (Upstream TileLang's C output has the same
fault.)

:func:`exact_float_constants` replaces each constant that would not survive that printing with
a call of a small helper returning the constant's shortest exact decimal, defined once at the
top of the source::

    static inline double tl_f64_4008000000000001(void) { return 3.0000000000000004e+00; }

C compilers inline the helper and fold it back into the constant. Constants that print exactly
(``0.5``, ``1e-3``, most written by hand) are left as TVM prints them.

**CUDA.** TVM prints float64 constants in fixed point with 15 decimals, so ``1e-300`` became
``0.000000000000000``; :func:`exact_cuda_float64_constants` writes those as
``__longlong_as_double(<bits>)``. CUDA float32 constants are printed exactly (hexadecimal).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import tvm
import tvm_ffi
from tvm import tirx

from .source_imports import c_definitions, with_import

__all__ = ["exact_float_constants", "printed_exactly", "exact_cuda_float64_constants", "cuda_prints_exactly",
           "map_float_constants"]

_C_TYPE = {"float32": "float", "float64": "double"}


def map_float_constants(mod: tvm.IRModule, on_float: Callable[[Any], Any]) -> tvm.IRModule:
    """``mod`` with ``on_float`` applied to every ``FloatImm`` of its PrimFuncs."""
    funcs = {}
    for gv, fn in mod.functions.items():
        if isinstance(fn, tirx.PrimFunc):
            fn = fn.with_body(tvm_ffi.structural_map(fn.body, [(tirx.FloatImm, on_float)]))
        funcs[gv] = fn
    return tvm.IRModule(funcs, attrs=mod.attrs)


def printed_exactly(value: float, dtype: str) -> bool:
    """Whether TVM's ``%e`` printing (seven significant digits) gives back ``value`` in ``dtype``."""
    printed = float(f"{value:.6e}")
    if dtype == "float32":
        return bool(np.float32(printed) == np.float32(value))
    return printed == value


def _literal(value: float, dtype: str) -> str:
    if dtype == "float32":
        return np.format_float_scientific(np.float32(value), unique=True) + "f"
    return np.format_float_scientific(np.float64(value), unique=True)


def _helper_name(value: float, dtype: str) -> str:
    if dtype == "float32":
        return f"tl_f32_{int(np.float32(value).view(np.uint32)):08x}"
    return f"tl_f64_{int(np.float64(value).view(np.uint64)):016x}"


def exact_float_constants(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with every inexactly printed float32/float64 constant turned into a helper call.

    The helpers' C text (C99 and C++) is attached to the module's first function as a
    ``pragma_import_c`` attribute, which TVM's C code generator prints before the functions.
    """
    helpers: dict[str, str] = {}

    def on_float(imm: Any) -> Any:
        dtype = str(imm.ty.dtype)
        value = float(imm.value)
        if dtype not in _C_TYPE or not math.isfinite(value) or printed_exactly(value, dtype):
            return imm
        name = _helper_name(value, dtype)
        helpers[name] = (f"static inline {_C_TYPE[dtype]} {name}(void) "
                         f"{{ return {_literal(value, dtype)}; }}\n")
        return tirx.call_pure_extern(dtype, name)

    mapped = map_float_constants(mod, on_float)
    if not helpers:
        return mod
    funcs = dict(mapped.functions.items())
    text = c_definitions("\n/* tilelang float constants, exact (TVM prints seven digits) */\n",
                         (helpers[name] for name in sorted(helpers)))
    first = next(gv for gv, fn in funcs.items() if isinstance(fn, tirx.PrimFunc))
    fn = funcs[first]
    funcs[first] = fn.with_body(with_import(fn.body, "pragma_import_c", text))
    return tvm.IRModule(funcs, attrs=mod.attrs)


def cuda_prints_exactly(value: float) -> bool:
    """Whether TVM's CUDA printing of a float64 constant (fixed point, 15 decimals) gives back ``value``."""
    return float(f"{value:.15f}") == value


def exact_cuda_float64_constants(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` (CUDA device functions) with inexactly printed float64 constants made exact.

    TVM's CUDA generator prints float64 constants in fixed point with 15 decimals: ``1e-300``
    became ``0.000000000000000`` (a product with it was 0), ``1e-14`` kept one significant digit,
    ``1/3`` lost its last digits. Each such constant becomes ``__longlong_as_double(<its bits>)``,
    which is exact and which the CUDA compilers fold. (float32 constants are printed in
    hexadecimal, exactly.)
    """
    changed = []

    def on_float(imm: Any) -> Any:
        value = float(imm.value)
        if str(imm.ty.dtype) != "float64" or not math.isfinite(value) or cuda_prints_exactly(value):
            return imm
        changed.append(imm)
        bits = int(np.float64(value).view(np.int64))
        return tirx.call_pure_extern("float64", "__longlong_as_double", tirx.IntImm("int64", bits))

    mapped = map_float_constants(mod, on_float)
    return mapped if changed else mod
