"""The call plan: everything the native dispatcher checks and does on a call, decided once.

:func:`make_plan` reads a :class:`~tilelang_core.artifact.KernelArtifact` and the build options
and returns a JSON-compatible dict (saved next to the library by the save hook, so loading a
kernel needs neither TVM nor a compiler). Layout, format 1::

    {
      "format": 1, "name": "add", "device": "cpu" | "cuda",
      "entry": "__tl_cy_call", "error_string": null | "__tl_cy_error_string",
      "gil_release_elems": 65536 | null,
      "block_launcher": null | "main_kernel_block_launcher",  # set to the dispatcher's pool
      "assert_message": null | "main_kernel_assert_message",  # text of a failed T.device_assert
      "symbols": ["n", ...],                       # slot order of the symbol values
      "symbol_dtypes": ["int32", ...],             # per slot: a bound size/stride must fit (optional)
      "exprs": [{"text": "n + 1", "code": [...]}],  # bytecode for _dispatch_core.h
      "outputs": [2],                              # params allocated by the kernel (out_idx)
      "params": [
        {"name": "A", "kind": "tensor", "dtype": "float32", "dl": [2, 32, 1], "output": false,
         "written": false,                         # checked for overlap with other arguments
         "index_limit": null | 2146435072,         # most elements its 32-bit indices address
         "dims": [["static", 16] | ["sym", slot] | ["expr", index]],
         "strides": null | [["static", 1] | ["sym", slot] | ["expr", index]]},
        {"name": "k", "kind": "scalar", "dtype": "int32", "scalar_kind": "int", "bits": 32,
         "signed": true, "symbol": slot | -1, "output": false}
      ]
    }

The dispatcher holds a call's state in fixed arrays (``_dispatch_core.h``): at most
:data:`MAX_DIMS` dimensions per tensor, :data:`MAX_PARAMS` parameters, :data:`MAX_SYMBOLS`
symbols, :data:`MAX_DEFERRED` checks made once the symbols are bound (an input's dimensions given
by an expression, and its strides when they are fixed), and shape expressions nested at most
``exprs._MAX_DEPTH`` deep. :func:`make_plan` refuses a kernel past one of them with
``KernelNotSupportedError`` naming the limit, before anything is compiled: ``auto`` builds it with
another backend, and this one stays usable (a ``ValueError`` from the build hook marked the
backend broken for the rest of the process).
"""

from __future__ import annotations

import re
from typing import Any, Optional

from tilelang_core.artifact import BuildOptions, KernelArtifact, ScalarParam, TensorParam
from tilelang_core.calling import INT_RANGES
from tilelang_core.errors import BuildError, KernelNotSupportedError, OutIdxError

from .exprs import is_plain_symbol, to_bytecode

PLAN_FORMAT = 1
#: dtypes a symbol may have in "symbol_dtypes" (the dispatcher refuses larger sizes and strides)
SYMBOL_DTYPES = tuple(INT_RANGES)
ENTRY_SYMBOL = "__tl_cy_call"
ERROR_STRING_SYMBOL = "__tl_cy_error_string"

#: CPU kernels whose tensor inputs hold at least this many elements run with the GIL released.
GIL_RELEASE_ELEMS = 1 << 16

#: The dispatcher's limits (module docstring; TL_MAX_NDIM, TL_MAX_PARAMS and TL_MAX_SYMS of
#: _dispatch_core.h; its deferred checks live in arrays of TL_MAX_PARAMS entries).
MAX_DIMS = 16
MAX_PARAMS = 256
MAX_SYMBOLS = 64
MAX_DEFERRED = 256
#: What a kernel past a limit can use instead.
_ELSEWHERE = "use execution_backend='tvm_ffi'"

_FLOAT8 = {
    "float8_e3m4": 7,
    "float8_e4m3": 8,
    "float8_e4m3b11fnuz": 9,
    "float8_e4m3fn": 10,
    "float8_e4m3fnuz": 11,
    "float8_e5m2": 12,
    "float8_e5m2fnuz": 13,
    "float8_e8m0fnu": 14,
    "float6_e2m3fn": 15,
    "float6_e3m2fn": 16,
    "float4_e2m1fn": 17,
}


def dlpack_dtype(dtype: str) -> tuple[int, int, int]:
    """(code, bits, lanes) of a TVM dtype string as torch exports it through DLPack.

    :raises ValueError: a dtype the dispatcher cannot check.
    """
    m = re.fullmatch(r"(.+?\d)x(\d+)", dtype.strip())  # vector dtypes: float32x4 (not complex64)
    base, lanes = (m.group(1), int(m.group(2))) if m else (dtype.strip(), 1)
    if base == "bool":
        return (6, 8, lanes)
    if base in _FLOAT8:
        bits = int(base[5])
        return (_FLOAT8[base], bits, lanes)
    for prefix, code in (("uint", 1), ("int", 0), ("bfloat", 4), ("float", 2), ("complex", 5)):
        if base.startswith(prefix) and base[len(prefix):].isdigit():
            return (code, int(base[len(prefix):]), lanes)
    raise ValueError(f"dtype {dtype!r} is not supported by the cython backend")


def _scalar_info(p: ScalarParam) -> dict[str, Any]:
    dtype = p.dtype
    if dtype == "bool":
        return {"scalar_kind": "bool", "bits": 8, "signed": False}
    m = re.fullmatch(r"(u?int)(8|16|32|64)", dtype)
    if m:
        return {"scalar_kind": "int", "bits": int(m.group(2)), "signed": m.group(1) == "int"}
    m = re.fullmatch(r"(b?float)(16|32|64)", dtype)
    if m:
        return {"scalar_kind": "float", "bits": int(m.group(2)), "signed": True}
    raise BuildError(f"scalar parameter '{p.name}' has dtype {dtype!r}, which the cython backend cannot pass; "
                     f"use an int, uint, bool or float dtype")


def _refuse(what: str) -> KernelNotSupportedError:
    """The refusal of a kernel past one of the dispatcher's limits (``what``: which, and by how
    much; the core's message names the backend and the kernel)."""
    return KernelNotSupportedError(f"{what}; {_ELSEWHERE}")


def _check_sizes(artifact: KernelArtifact) -> None:
    """Refuse (:func:`_refuse`) a kernel with more parameters, or a tensor with more dimensions,
    than the dispatcher holds."""
    params = artifact.params
    if len(params) > MAX_PARAMS:
        raise _refuse(f"the cython backend supports at most {MAX_PARAMS} parameters, the kernel has {len(params)}")
    for p in params:
        if isinstance(p, TensorParam) and len(p.shape) > MAX_DIMS:
            raise _refuse(f"the cython backend supports at most {MAX_DIMS} dimensions per tensor, "
                          f"parameter '{p.name}' has {len(p.shape)}")


def _deferred_checks(out_params: list[dict[str, Any]]) -> int:
    """How many checks the dispatcher defers until the symbols are bound (as ``make_kernel``
    counts them): each input's dimensions of kind ``expr`` and its strides not of kind ``sym``."""
    count = 0
    for p in out_params:
        if p["kind"] != "tensor" or p["output"]:
            continue
        count += sum(1 for kind, _ in p["dims"] if kind == "expr")
        count += sum(1 for kind, _ in p["strides"] or () if kind != "sym")
    return count


def _check_counts(symbols: list[str], out_params: list[dict[str, Any]]) -> None:
    """Refuse (:func:`_refuse`) a plan with more symbols or deferred checks than the dispatcher holds."""
    if len(symbols) > MAX_SYMBOLS:
        raise _refuse(f"the cython backend supports at most {MAX_SYMBOLS} shape symbols, "
                      f"the kernel uses {len(symbols)}")
    deferred = _deferred_checks(out_params)
    if deferred > MAX_DEFERRED:
        raise _refuse(f"the cython backend checks at most {MAX_DEFERRED} input dimensions given by an "
                      f"expression and fixed strides per call, the kernel has {deferred}")


def make_plan(artifact: KernelArtifact, options: BuildOptions, *, device: Optional[str] = None) -> dict[str, Any]:
    """Build the call plan of ``artifact`` (see the module docstring for its layout).

    :param device: ``"cpu"`` or ``"cuda"``; by default from ``artifact.target_kind``.
    :raises OutIdxError: an ``out_idx`` entry is not a tensor parameter, or an output's shape uses a
        symbol that no input binds.
    :raises KernelNotSupportedError: the kernel is past one of the dispatcher's limits (module docstring).
    :raises BuildError: the artifact uses something the dispatcher cannot do.
    """
    _check_sizes(artifact)
    if device is None:
        device = "cuda" if artifact.target_kind == "cuda" else "cpu"
    params = artifact.params
    out_idx = sorted(set(options.out_idx))
    for i in out_idx:
        if i < 0 or i >= len(params):
            raise OutIdxError(f"out_idx {i} is out of range for kernel '{artifact.name}' with {len(params)} parameters")
        if not isinstance(params[i], TensorParam):
            raise OutIdxError(f"out_idx {i} names scalar parameter '{params[i].name}'; only tensors can be outputs")

    # symbol slots: declared bindings first, then any other name an expression uses
    symbols: list[str] = []

    def slot(name: str) -> int:
        if name not in symbols:
            symbols.append(name)
        return symbols.index(name)

    for b in artifact.symbols:
        slot(b.name)
    dtypes = {b.name: b.dtype for b in artifact.symbols}

    exprs: list[dict[str, Any]] = []
    expr_index: dict[str, int] = {}

    def expr(text: str) -> int:
        key = text.strip()
        if key not in expr_index:
            try:
                code = to_bytecode(key, slot)
            except KernelNotSupportedError as exc:  # nested too deeply
                raise _refuse(str(exc)) from None
            expr_index[key] = len(exprs)
            exprs.append({"text": key, "code": code})
        return expr_index[key]

    # which (param, dim) a declared binding reads; scalars bind through dim None
    bind_dim: dict[tuple[int, int], int] = {}
    bind_stride: dict[tuple[int, int], int] = {}  # SymbolBinding.stride: read from the tensor's stride
    scalar_symbol: dict[int, int] = {}
    for b in artifact.symbols:
        if b.param_index >= len(params):
            raise BuildError(f"symbol '{b.name}' is bound from parameter #{b.param_index}, "
                             f"but kernel '{artifact.name}' has {len(params)} parameters")
        if b.dim is None:
            scalar_symbol[b.param_index] = slot(b.name)
        elif b.stride:
            bind_stride[(b.param_index, b.dim)] = slot(b.name)
        else:
            bind_dim[(b.param_index, b.dim)] = slot(b.name)

    bound: set[str] = set()
    out_params: list[dict[str, Any]] = []
    for i, p in enumerate(params):
        is_out = i in out_idx
        if isinstance(p, TensorParam):
            try:
                dl = dlpack_dtype(p.dtype)
            except ValueError as exc:
                raise BuildError(f"parameter '{p.name}': {exc}") from None
            dims: list[list[Any]] = []
            for d, entry in enumerate(p.shape):
                if (i, d) in bind_dim and not is_out:
                    dims.append(["sym", bind_dim[(i, d)]])
                    bound.add(symbols[bind_dim[(i, d)]])
                elif isinstance(entry, int):
                    dims.append(["static", int(entry)])
                elif is_plain_symbol(entry):
                    dims.append(["sym", slot(entry.strip())])
                    if not is_out:
                        bound.add(entry.strip())
                else:
                    dims.append(["expr", expr(entry)])
            strides = None
            if p.strides is not None:
                strides = []
                for d, s in enumerate(p.strides):
                    if (i, d) in bind_stride and not is_out:
                        strides.append(["sym", bind_stride[(i, d)]])
                        bound.add(symbols[bind_stride[(i, d)]])
                    else:
                        strides.append(["static", int(s)] if isinstance(s, int) else ["expr", expr(s)])
            out_params.append({"name": p.name, "kind": "tensor", "dtype": p.dtype, "dl": list(dl),
                               "output": is_out, "written": bool(p.written), "index_limit": p.index_limit,
                               "dims": dims, "strides": strides})
        else:
            info = _scalar_info(p)
            sym = scalar_symbol.get(i, -1)
            if sym >= 0:
                if info["scalar_kind"] != "int":
                    raise BuildError(f"symbol '{symbols[sym]}' is bound from scalar '{p.name}' of dtype {p.dtype}; "
                                     f"symbols must come from integer scalars")
                bound.add(symbols[sym])
            out_params.append({"name": p.name, "kind": "scalar", "dtype": p.dtype, "output": False,
                               "symbol": sym, **info})

    # every symbol an expression (or an output shape) uses must be bound by an input
    unbound = [s for s in symbols if s not in bound]
    if unbound:
        users = []
        for i in out_idx:
            p = params[i]
            for e in p.shape:
                if isinstance(e, str) and any(u in _names(e) for u in unbound):
                    users.append(p.name)
        if users:
            raise OutIdxError(f"kernel '{artifact.name}': output(s) {sorted(set(users))} have shapes using symbol(s) "
                              f"{unbound} that no input binds; pass those outputs as arguments instead of out_idx")
        raise BuildError(f"kernel '{artifact.name}' uses symbol(s) {unbound} that no parameter binds")
    _check_counts(symbols, out_params)

    return {
        "format": PLAN_FORMAT,
        "name": artifact.name,
        "device": device,
        "entry": ENTRY_SYMBOL,
        "error_string": ERROR_STRING_SYMBOL,
        "gil_release_elems": GIL_RELEASE_ELEMS if device == "cpu" else None,
        "block_launcher": _entry_symbol(artifact, "block_launcher") if device == "cpu" else None,
        "assert_message": _entry_symbol(artifact, "assert_message") if device == "cpu" else None,
        "symbols": symbols,
        "symbol_dtypes": [dtypes.get(name, "int64") for name in symbols],
        "exprs": exprs,
        "outputs": out_idx,
        "params": out_params,
    }


def _entry_symbol(artifact: KernelArtifact, field: str) -> Optional[str]:
    """A C name the CPU entry's ``DeviceKernel`` gives in ``field`` (None when it gives none):
    ``block_launcher``, the variable through which it runs its parallel block loops, or
    ``assert_message``, the function that gives the text of a failed T.device_assert."""
    kernels = artifact.device_kernels
    name = getattr(kernels[0], field) if len(kernels) == 1 else None
    if name is not None and not name.isidentifier():
        raise BuildError(f"kernel '{artifact.name}': {field} {name!r} is not a C identifier")
    return name


def _names(expr: str) -> set[str]:
    from tilelang_core.symbolic import free_symbols

    return free_symbols(expr)


def check_plan(plan: Any) -> None:
    """Validate a call plan read back from disk before the native code trusts its indices.

    :raises ValueError: naming the first inconsistency.
    """
    from .exprs import OP_CONST, OP_END, OP_NEG, OP_SYM

    def fail(what: str) -> None:
        raise ValueError(f"invalid call plan: {what}")

    if not isinstance(plan, dict) or plan.get("format") != PLAN_FORMAT:
        fail(f"format {plan.get('format') if isinstance(plan, dict) else None!r} (expects {PLAN_FORMAT})")
    for key, typ in (("name", str), ("device", str), ("entry", str), ("symbols", list), ("exprs", list),
                     ("outputs", list), ("params", list)):
        if not isinstance(plan.get(key), typ):
            fail(f"'{key}' must be a {typ.__name__}")
    for key in ("block_launcher", "assert_message"):
        value = plan.get(key)
        if value is not None and not (isinstance(value, str) and value.isidentifier()):
            fail(f"'{key}' must be null or a C identifier")
    n_syms, n_exprs = len(plan["symbols"]), len(plan["exprs"])
    sym_dtypes = plan.get("symbol_dtypes")
    if sym_dtypes is not None and (not isinstance(sym_dtypes, list) or len(sym_dtypes) != n_syms
                                   or not all(d in SYMBOL_DTYPES for d in sym_dtypes)):
        fail(f"'symbol_dtypes' must list one of {', '.join(SYMBOL_DTYPES)} per symbol")
    for i, e in enumerate(plan["exprs"]):
        code = e.get("code") if isinstance(e, dict) else None
        if not isinstance(code, list) or not all(isinstance(c, int) and not isinstance(c, bool) for c in code):
            fail(f"expression #{i} has no integer code")
        depth, pc = 0, 0
        while True:
            if pc >= len(code):
                fail(f"expression #{i} does not end")
            op = code[pc]
            if op == OP_END:
                if depth != 1 or pc != len(code) - 1:
                    fail(f"expression #{i} is unbalanced")
                break
            if op in (OP_CONST, OP_SYM):
                if pc + 1 >= len(code) or (op == OP_SYM and not 0 <= code[pc + 1] < n_syms):
                    fail(f"expression #{i} has a bad operand")
                depth, pc = depth + 1, pc + 2
            elif op == OP_NEG:
                if depth < 1:
                    fail(f"expression #{i} is unbalanced")
                pc += 1
            elif 3 <= op <= 10:
                if depth < 2:
                    fail(f"expression #{i} is unbalanced")
                depth, pc = depth - 1, pc + 1
            else:
                fail(f"expression #{i} has opcode {op}")
            if depth > 30:
                fail(f"expression #{i} is too deep")

    def check_ref(kind: Any, value: Any, where: str) -> None:
        if kind == "static" and isinstance(value, int):
            return
        if kind == "sym" and isinstance(value, int) and 0 <= value < n_syms:
            return
        if kind == "expr" and isinstance(value, int) and 0 <= value < n_exprs:
            return
        fail(f"{where}: bad entry {[kind, value]!r}")

    for i, p in enumerate(plan["params"]):
        if not isinstance(p, dict) or not isinstance(p.get("name"), str):
            fail(f"parameter #{i} is malformed")
        if p.get("kind") == "tensor":
            dl = p.get("dl")
            if not (isinstance(dl, list) and len(dl) == 3 and all(isinstance(x, int) for x in dl)
                    and 0 <= dl[0] < 256 and 0 < dl[1] < 256 and 0 < dl[2] < 65536):
                fail(f"parameter '{p['name']}' has a bad dtype {dl!r}")
            if not isinstance(p.get("written", True), bool):
                fail(f"parameter '{p['name']}' has a non-bool 'written'")
            limit = p.get("index_limit")
            if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
                fail(f"parameter '{p['name']}' has a bad 'index_limit' {limit!r}")
            dims = p.get("dims")
            if not isinstance(dims, list) or len(dims) > 16:
                fail(f"parameter '{p['name']}' has bad dims")
            for d in dims:
                if not (isinstance(d, list) and len(d) == 2):
                    fail(f"parameter '{p['name']}' has bad dims")
                check_ref(d[0], d[1], f"parameter '{p['name']}'")
            strides = p.get("strides")
            if strides is not None:
                if not isinstance(strides, list) or len(strides) != len(dims):
                    fail(f"parameter '{p['name']}' has bad strides")
                for d in strides:
                    if not (isinstance(d, list) and len(d) == 2) or (d[0] == "sym" and p.get("output")):
                        fail(f"parameter '{p['name']}' has bad strides")
                    check_ref(d[0], d[1], f"parameter '{p['name']}'")
        elif p.get("kind") == "scalar":
            if p.get("scalar_kind") not in ("int", "float", "bool") or p.get("bits") not in (8, 16, 32, 64):
                fail(f"scalar '{p['name']}' is malformed")
            if not isinstance(p.get("symbol"), int) or not -1 <= p["symbol"] < n_syms:
                fail(f"scalar '{p['name']}' binds a bad symbol")
        else:
            fail(f"parameter #{i} has kind {p.get('kind')!r}")
    outs = [i for i, p in enumerate(plan["params"]) if p.get("output")]
    if outs != plan["outputs"] or any(plan["params"][i]["kind"] != "tensor" for i in outs):
        fail("'outputs' disagrees with the parameters")
