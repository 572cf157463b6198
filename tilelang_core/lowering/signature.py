"""The kernel's signature as the artifact describes it: params, symbols, symbolic expressions."""

from __future__ import annotations

import re
from typing import Any, Optional, Union

import tvm
import tvm_ffi
from tvm import tirx

from ..artifact import Dim, ScalarParam, SymbolBinding, TensorParam
from ..errors import LoweringError

_BINOPS = {
    "Add": "+",
    "Sub": "-",
    "Mul": "*",
    "FloorDiv": "//",
    "Div": "//",  # integer division of non-negative sizes
    "FloorMod": "%",
    "Mod": "%",
}


def param_name(var: Any) -> str:
    """The name the kernel author gave a parameter, as a valid identifier.

    ``str()`` of a one-element buffer parameter ``C`` prints ``C.source`` (TVMScript treats it as a
    scalar buffer); the variable's own ``name`` is ``C``. Characters that cannot appear in a C
    identifier are replaced by ``_`` so the generated sources stay valid.
    """
    name = getattr(var, "name", None)
    if not isinstance(name, str) or not name:
        name = str(var)
    if name.endswith(".source") and name[: -len(".source")].isidentifier():
        name = name[: -len(".source")]
    if not name.isidentifier():
        name = re.sub(r"\W", "_", name)
        if not name or not (name[0].isalpha() or name[0] == "_"):
            name = "_" + name
    return name


def element_alignment(dtype: Any) -> int:
    """Bytes of one element of ``dtype`` (at least 1): the alignment any tensor view guarantees."""
    dt = tvm.runtime.DataType(str(dtype))
    return max(1, (int(dt.bits) * max(1, int(dt.lanes)) + 7) // 8)


def relax_param_alignment(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """Declare every tensor parameter aligned to its element size only (``offset_factor`` 1).

    TVMScript declares buffer parameters 64-byte aligned, and TVM's LLVM code generator then
    assumes it (``llvm.assume align 64``, aligned vector loads): a torch view with a storage offset
    (``x[1:]``) would crash such code. With the element size as the declared alignment no
    backend relies on more than any tensor view guarantees.
    """

    def retype(ty: Any) -> Optional[dict]:
        align = element_alignment(ty.dtype)
        if int(ty.data_alignment) == align and int(ty.offset_factor) == 1:
            return None
        return {"data_alignment": align, "offset_factor": 1}

    return _retyped_tensor_params(func, retype)


def constant_strides_in_size_dtype(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with each constant stride (or size) of a tensor parameter in the dtype of its
    dimension's symbolic size (or stride): ``T.StridedTensor((m, k), (s, 1))`` with int64
    symbols has an int32 literal ``1`` beside the int64 ``k``, which TVM's packed host code
    cannot compare (``_check_runtime_module_strides``); the value is the same in either dtype.

    Where both are constants, the narrower one takes the wider dtype: the stride ``2**31 + 100``
    of ``T.StridedTensor((2, 64), (2**31 + 100, 1))`` is an int64 beside the int32 ``2``, and
    rebuilding it as an int32 stopped with TVM's "Literal value 2147483748 exceeds range of
    int32". A constant that does not fit a symbol's dtype is left as it is (the check then
    names the parameter)."""

    def fits(value: int, dtype: str) -> bool:
        info = tvm.runtime.DataType(dtype)
        bits = int(info.bits)
        if dtype.startswith("uint"):
            return 0 <= value < 2**bits
        return -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)

    def retype(ty: Any) -> Optional[dict]:
        if not len(ty.strides):
            return None
        shape, strides = list(ty.shape), list(ty.strides)
        for d, (size, stride) in enumerate(zip(shape, strides)):
            if str(size.dtype) == str(stride.dtype):
                continue
            both = isinstance(stride, tirx.IntImm) and isinstance(size, tirx.IntImm)
            if both and int(tvm.runtime.DataType(str(stride.dtype)).bits) > int(tvm.runtime.DataType(str(size.dtype)).bits):
                shape[d] = tirx.IntImm(str(stride.dtype), int(size.value))
            elif isinstance(stride, tirx.IntImm) and fits(int(stride.value), str(size.dtype)):
                strides[d] = tirx.IntImm(str(size.dtype), int(stride.value))
            elif isinstance(size, tirx.IntImm) and fits(int(size.value), str(stride.dtype)):
                shape[d] = tirx.IntImm(str(stride.dtype), int(size.value))
        if all(a.same_as(b) for a, b in zip(strides, ty.strides)) and all(a.same_as(b) for a, b in zip(shape, ty.shape)):
            return None
        return {"shape": shape, "strides": strides}

    return _retyped_tensor_params(func, retype)


def _retyped_tensor_params(func: tirx.PrimFunc, retype: Any) -> tirx.PrimFunc:
    """``func`` with the type of each tensor parameter for which ``retype(type)`` gives changes
    (``{"shape"|"strides"|"data_alignment"|"offset_factor": value}``) rebuilt with them, and the
    body reading the new parameter variables."""
    from tvm.tirx import _ffi_api

    mapping = []
    params = []
    for var in func.params:
        ty = getattr(var, "ty", None)
        changes = retype(ty) if is_tensor_param(var) else None
        if not changes:
            params.append(var)
            continue
        new_ty = _ffi_api.BufferType(
            ty.storage_scope,
            ty.dtype,
            list(changes.get("shape", ty.shape)),
            list(changes.get("strides", ty.strides)),
            ty.elem_offset,
            changes.get("data_alignment", ty.data_alignment),
            changes.get("offset_factor", ty.offset_factor),
            ty.layout,
            list(ty.allocated_addr),
            ty.span,
        )
        new = _ffi_api.BufferVar(var.name, new_ty, var.span)
        mapping.append((var, new))
        params.append(new)
    if not mapping:
        return func
    return tirx.PrimFunc(params, _substitute(func.body, mapping), func.ret_type, func.attrs, func.span)


def _substitute(node: Any, mapping: list) -> Any:
    """``node`` with each variable ``old`` of the ``(old, new)`` pairs of ``mapping`` replaced by ``new``."""

    def on_var(v):
        for old, new in mapping:
            if v.same_as(old):
                return new
        return v

    return tvm_ffi.structural_map(node, [(tvm.ir.Var, on_var)])


def is_tensor_param(var: Any) -> bool:
    """Whether a PrimFunc parameter is a buffer (tensor) parameter."""
    return bool(tirx.buffer.is_buffer_var(var))


def expr_to_dim(expr: Any, where: str) -> Dim:
    """An int, or a Python-syntax expression over symbol names (see tilelang_core.symbolic)."""
    if isinstance(expr, int):
        return expr
    text = _expr_text(expr, where, top=True)
    try:
        return int(text)
    except ValueError:
        return text


def _expr_text(expr: Any, where: str, top: bool = False) -> str:
    kind = type(expr).__name__
    if kind == "IntImm":
        return str(int(expr.value))
    if kind == "Var":
        return str(expr)
    if kind == "Cast":
        return _expr_text(expr.value, where, top)
    if kind in _BINOPS:
        text = f"{_expr_text(expr.a, where)} {_BINOPS[kind]} {_expr_text(expr.b, where)}"
        return text if top else f"({text})"
    if kind in ("Min", "Max"):
        return f"{kind.lower()}({_expr_text(expr.a, where, True)}, {_expr_text(expr.b, where, True)})"
    raise LoweringError(f"{where}: expression {expr} ({kind}) cannot be described to execution backends")


def inline_binds(expr: Any, binds: dict) -> Any:
    """``expr`` with the variables of ``Bind`` statements (``{var: value}``) replaced by their
    values, again for the variables those values use (bounded depth)."""
    for _ in range(16):
        changed = [False]

        def on_var(var):
            value = binds.get(var)
            if value is not None:
                changed[0] = True
                return value
            return var

        expr = tvm_ffi.structural_map(expr, [(tvm.ir.Var, on_var)])
        if not changed[0]:
            break
    return expr


def free_vars(expr: Any) -> list:
    """Scalar ``Var`` objects used in an expression, in first-use order."""
    found: list = []
    _collect_vars(expr, found)
    return found


def _collect_vars(expr: Any, found: list) -> None:
    kind = type(expr).__name__
    if kind == "Var":
        if not any(expr.same_as(v) for v in found):
            found.append(expr)
        return
    for attr in ("a", "b", "value"):
        child = getattr(expr, attr, None) if kind not in ("IntImm", "FloatImm") else None
        if child is not None and isinstance(child, tvm.ir.Expr):
            _collect_vars(child, found)


def declared_param_dtypes(func: tirx.PrimFunc) -> list[tuple[str, str, bool]]:
    """``(name, dtype, is_tensor)`` of each parameter as the kernel declares it, before lowering
    (what :func:`describe_params` will put in the artifact for tensors and plain scalars)."""
    out = []
    for var in func.params:
        if is_tensor_param(var):
            out.append((param_name(var), str(var.dtype), True))
        else:
            ty = getattr(var, "ty", None)
            out.append((param_name(var), str(ty.dtype) if hasattr(ty, "dtype") else str(getattr(var, "dtype", ty)), False))
    return out


def describe_params(func: tirx.PrimFunc, device: str, location: str):
    """``(params, symbols, symbol_vars)`` of a PrimFunc for the artifact.

    ``symbols`` lists each dynamic variable once with where its value comes from: a scalar
    parameter that *is* the variable, else the first tensor dimension that is exactly the
    variable, else a tensor stride that is exactly the variable (``stride=True``).
    """
    params: list[Union[TensorParam, ScalarParam]] = []
    scalar_vars: dict[int, Any] = {}
    for index, var in enumerate(func.params):
        name = param_name(var)
        if is_tensor_param(var):
            ty = var.ty
            where = f"{location}: parameter '{name}'"
            scope = str(ty.storage_scope)
            if scope not in ("", "global"):
                raise LoweringError(
                    f"{where} is declared in {scope!r} memory, but a kernel's tensor parameters are global "
                    "memory (the caller's tensors); declare it with T.Tensor, and keep T.SharedBuffer, "
                    "T.FragmentBuffer and T.LocalBuffer for T.macro parameters"
                )
            shape = [expr_to_dim(d, where) for d in ty.shape]
            strides = [expr_to_dim(s, where) for s in ty.strides] if len(ty.strides) else None
            params.append(
                TensorParam(name=name, dtype=str(var.dtype), shape=shape, strides=strides, device=device)
            )
        else:
            dtype = str(var.ty.dtype) if hasattr(var.ty, "dtype") else str(var.ty)
            params.append(ScalarParam(name=name, dtype=dtype))
            scalar_vars[index] = var
    symbol_vars = shape_symbols(func)
    _check_symbol_names(symbol_vars, location)
    symbols: list[SymbolBinding] = []
    for sym in symbol_vars:
        binding = _find_binding(func, sym, scalar_vars)
        if binding is None:
            raise LoweringError(
                f"{location}: dynamic dimension '{sym}' is only used inside expressions (such as "
                f"'{sym} + 1'); make it exactly the size or the stride of some dimension of an input "
                "tensor, or pass it as a scalar parameter, so its value can be read at call time"
            )
        symbols.append(binding)
    return params, symbols, symbol_vars


def shape_symbols(func: tirx.PrimFunc) -> list:
    """The variables used in the shapes and strides of ``func``'s tensor parameters, each once,
    in the order the parameters use them."""
    symbols: list = []
    for var in func.params:
        if is_tensor_param(var):
            for d in list(var.ty.shape) + list(var.ty.strides):
                for v in free_vars(d):
                    if not any(v.same_as(s) for s in symbols):
                        symbols.append(v)
    return symbols


def _check_symbol_names(symbol_vars: list, location: str) -> None:
    """Symbols are named in the artifact (``"n + 1"``) and bound by name at call time, so each
    name must parse in a shape expression (:func:`distinct_symbol_names` made them unique)."""
    from ..symbolic import unusable_symbol_name

    for sym in symbol_vars:
        why = unusable_symbol_name(str(sym))
        if why:
            raise LoweringError(f"{location}: dynamic dimension {str(sym)!r}: {why}, which cannot name a dimension in "
                                "the kernel's signature; give the symbol another name")


def distinct_symbol_names(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with the second and later of different symbol variables of one name (two
    ``T.dynamic("n")`` objects) renamed ``n_1``, ``n_2``, ...

    They are different dimensions to TVM, which may differ in a call; the artifact and the
    backends bind symbols by name, so without this each backend mixed them up its own way (one
    refused a valid call, one failed to lower, one ran it right).
    """
    symbols = shape_symbols(func)
    taken = {str(v) for v in symbols} | {param_name(v) for v in func.params}
    seen: set = set()
    mapping: list = []
    for sym in symbols:
        name = str(sym)
        if name not in seen:
            seen.add(name)
            continue
        k = 1
        while f"{name}_{k}" in taken:
            k += 1
        taken.add(f"{name}_{k}")
        mapping.append((sym, tirx.Var(f"{name}_{k}", sym.dtype)))
    if not mapping:
        return func
    return _substitute(func, mapping)


def _find_binding(func: tirx.PrimFunc, sym: Any, scalar_vars: dict) -> Optional[SymbolBinding]:
    for index, var in scalar_vars.items():
        if var.same_as(sym):
            return SymbolBinding(name=str(sym), param_index=index, dim=None, dtype=str(sym.dtype))
    for index, var in enumerate(func.params):
        if not is_tensor_param(var):
            continue
        for dim, extent in enumerate(var.ty.shape):
            if type(extent).__name__ == "Var" and extent.same_as(sym):
                return SymbolBinding(name=str(sym), param_index=index, dim=dim, dtype=str(sym.dtype))
    # a stride that is exactly the symbol; preferably of a dimension not declared with size 1
    # (the stride of a size-1 dimension can be anything in a call)
    strides = [
        (int(_is_one(var.ty.shape[dim])), index, dim)
        for index, var in enumerate(func.params) if is_tensor_param(var)
        for dim, stride in enumerate(var.ty.strides)
        if type(stride).__name__ == "Var" and stride.same_as(sym)
    ]
    if strides:
        _, index, dim = min(strides)
        return SymbolBinding(name=str(sym), param_index=index, dim=dim, stride=True, dtype=str(sym.dtype))
    return None


def _is_one(extent: Any) -> bool:
    return type(extent).__name__ == "IntImm" and int(extent.value) == 1


def written_params(func: tirx.PrimFunc) -> set[int]:
    """Indices of the tensor parameters ``func`` may write: targets of buffer stores, buffers whose
    element address is taken (``T.address_of(A[i])``, as atomics do), whose data pointer is
    passed to a call, or that a ``T.access_ptr`` for writing (``"w"``, ``"rw"``) points into. Run on the frontend step's output (tile operators are loops by then)."""
    targets: list = []

    def on_store(node):
        targets.append(node.buffer)
        return node

    def on_call(node):
        name = getattr(node.op, "name", "")
        if name == "tl.access_ptr" and int(getattr(node.args[2], "value", 3)) & 2:
            targets.append(node.args[0].source)
        for arg in node.args:
            if name == "tirx.address_of" and isinstance(arg, tvm.ir.TensorLoad):
                targets.append(arg.source)
            elif isinstance(arg, tvm.ir.Var) and is_tensor_param(arg):
                targets.append(arg)
            elif isinstance(arg, tvm.ir.Call) and getattr(arg.op, "name", "") == "tirx.buffer_data":
                targets.extend(a for a in arg.args if isinstance(a, tvm.ir.Var))
        return node

    import tvm_ffi

    tvm_ffi.structural_map(func.body, [(tirx.BufferStore, on_store), (tvm.ir.Call, on_call)])
    return {i for i, var in enumerate(func.params) if is_tensor_param(var) and any(var.same_as(t) for t in targets)}


#: Largest element count (largest offset + 1) of a tensor that 32-bit index arithmetic addresses
#: safely: 2**31 less 2**20 of head room for index expressions that run a little past a tensor's
#: last element (the guard of a last, partial block; a ceildiv). Recorded as
#: ``TensorParam.index_limit`` for tensors with dynamic shapes and checked by backends at call time.
INDEX_LIMIT_32 = 2**31 - 2**20


def static_span(param: Any) -> Optional[int]:
    """Elements from a tensor's first to its last element (+1), when its shape and strides are static."""
    shape = [_int_or_none(d) for d in param.shape]
    if any(d is None for d in shape):
        return None
    if any(d == 0 for d in shape):
        return 0
    if param.strides:
        strides = [_int_or_none(st) for st in param.strides]
        if any(st is None for st in strides):
            return None
        return 1 + sum((d - 1) * abs(st) for d, st in zip(shape, strides))
    total = 1
    for d in shape:
        total *= d
    return total


def _int_or_none(value: Any) -> Optional[int]:
    return value if isinstance(value, int) else None


def index_plan(params: list, bits: int) -> tuple[set[int], dict[int, int]]:
    """``(widened, limits)``: which tensor params get 64-bit index arithmetic, and the call-time
    element limit of the others that have dynamic shapes.

    With 32-bit indices (the default) a tensor whose static span passes :data:`INDEX_LIMIT_32` is
    indexed in 64 bits, one with a dynamic shape keeps 32-bit indices and records the limit; with
    ``bits == 64`` every tensor is indexed in 64 bits and nothing is recorded. (The pass list's
    ``NarrowDataType(32)`` narrows back what static shapes prove to fit.)
    """
    widened: set[int] = set()
    limits: dict[int, int] = {}
    for i, p in enumerate(params):
        if not isinstance(p, TensorParam):
            continue
        span = static_span(p)
        if bits == 64 or (span is not None and span > INDEX_LIMIT_32):
            widened.add(i)
        elif span is None:
            limits[i] = INDEX_LIMIT_32
    return widened, limits


_BINARY_INT64 = ("Add", "Sub", "Mul", "FloorDiv", "FloorMod", "Div", "Mod", "Min", "Max")


def to_int64(expr: Any) -> Any:
    """``expr`` computed in int64 from its leaves (not just cast at the end, which would overflow first).

    Iterative (an expression as deep as the frontend accepts, about 1,000 levels, passed Python's
    recursion limit here: "maximum recursion depth exceeded" for a deep ``T.Kernel`` grid extent)."""
    done: dict[int, Any] = {}  # a node's handle -> its int64 form
    pending = [expr]
    while pending:
        node = pending[-1]
        handle = node.__chandle__()
        if handle in done:
            pending.pop()
            continue
        dtype = str(node.ty.dtype)
        kind = type(node).__name__
        if dtype == "int64" or not (dtype.startswith("int") or dtype.startswith("uint")):
            done[handle] = node
        elif kind == "IntImm":
            done[handle] = tirx.IntImm("int64", int(node.value))
        elif kind in _BINARY_INT64 or kind == "Select":
            operands = (node.a, node.b) if kind != "Select" else (node.true_value, node.false_value)
            missing = [o for o in operands if o.__chandle__() not in done]
            if missing:
                pending.extend(missing)
                continue
            first, second = (done[o.__chandle__()] for o in operands)
            if kind == "Select":
                done[handle] = tirx.Select(node.condition, first, second)
            else:
                done[handle] = getattr(tirx, kind)(first, second)
        else:
            done[handle] = tirx.Cast("int64", node)
        pending.pop()
    return done[expr.__chandle__()]


def widen_indices(func: tirx.PrimFunc, widened: set[int]) -> tirx.PrimFunc:
    """Compute the indices of every access to the ``widened`` tensor params in 64 bits."""
    buffers = [var for i, var in enumerate(func.params) if i in widened]
    if not buffers:
        return func

    def hit(buffer) -> bool:
        return any(buffer.same_as(b) for b in buffers)

    def on_load(node):
        if not hit(node.source):
            return node
        return tirx.BufferLoad(node.source, [to_int64(i) for i in node.indices])

    def on_store(node):
        if not hit(node.buffer):
            return node
        return tirx.BufferStore(node.buffer, node.value, [to_int64(i) for i in node.indices])

    import tvm_ffi

    body = tvm_ffi.structural_map(func.body, [(tvm.ir.TensorLoad, on_load), (tirx.BufferStore, on_store)])
    return func.with_body(body)
