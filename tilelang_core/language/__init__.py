"""The kernel language, used as ``import tilelang.language as T``.

Everything of TVMScript's ``tirx`` dialect (``T.prim_func``, ``T.Buffer``, dtypes, math
intrinsics, ``T.launch_thread``, ``T.thread_binding``, ``T.alloc_shared``, ``T.serial``,
``T.grid``, ``T.macro``, ...) plus the TileLang-style constructs of
:mod:`tilelang_core.language.core`: ``T.Tensor``, ``T.dynamic``/``T.symbolic``,
``T.ceildiv``, ``T.Kernel``, ``T.Parallel``, ``T.alloc_fragment``. See docs/language.md.
"""

import sys as _sys

from ..dependencies import require as _require

_require("tvm", needed_by="tilelang.language")  # a clear MissingDependencyError without TVM

from tvm.script.tirx import *  # noqa: F401,F403,E402 - the whole TVMScript tirx surface

from ..ast_lock import lock_tvmscript_parsing as _lock_tvmscript_parsing  # noqa: E402

_lock_tvmscript_parsing()  # TVMScript's own parse holds the core's AST lock too (ast_lock.py)

from .core import (  # noqa: F401 - public API
    FragmentBuffer,
    Kernel,
    LocalBuffer,
    Parallel,
    Persistent,
    SharedBuffer,
    StridedTensor,
    Tensor,
    alloc_buffer,
    alloc_fragment,
    alloc_local,
    alloc_shared,
    ceildiv,
    const,
    dtype_name,
    dynamic,
    empty,
    macro,
    prim_func,
    symbolic,
)

from .tile_schedule import PersistentTileScheduler  # noqa: F401,E402 - public API

# Pointer parameters and tensors at an address (language/pointers.py); T.ptr replaces TVMScript's,
# which needs a dtype, so that a bare `a: T.ptr` annotation declares a pointer parameter.
from .pointers import make_tensor, make_tensor_from_addr, ptr  # noqa: F401,E402 - public API

# Tile operators and intrinsics (docs/tile-operators.md); their list is tileops.__all__.
from .tileops import *  # noqa: F401,F403,E402 - public API

# Dtypes as values (docs/language.md, "Dtypes"): T.float16 & co. replace TVMScript's dtype
# constructors with str-like dtype objects that also construct expressions; T.dtype(...) converts.
from . import dtypes  # noqa: E402
from .dtypes import dtype  # noqa: E402,F401 - public API

globals().update(dtypes.DTYPES)
from .dtypes import (  # noqa: E402,F401 - TileLang's dtype helpers
    AnyDType,
    get_tvm_dtype,
    is_f8f6f4_family,
    is_float4,
    is_float4_e2m1_unpacked,
    is_float4_e2m1fn,
)

# TileLang's names for TVM types and helpers.
import tvm as _tvm  # noqa: E402

from . import tvm_names as _tvm_names  # noqa: E402

_tvm_names.install()  # tvm.tirx.Call, tvm.arith, expr.dtype, ... as TileLang code spells them

from . import ir_pickling as _ir_pickling  # noqa: E402

_ir_pickling.install()  # pickle/copy of a T.prim_func or an expression: TypeError (TVM 0.27 crashed the process)

from . import literals as _literals  # noqa: E402

_literals.install()  # x & 0x7FFFFFFFFFFFFFFF and x64 * 1e300 keep their literals (TVM 0.27 cuts them to 32 bits)

from . import bfloat16_math as _bfloat16_math  # noqa: E402

_bfloat16_math.install()  # T.pow / T.isnan / T.isinf / T.isfinite of bfloat16 (TVM 0.27 refuses them)

from . import float_modulo as _float_modulo  # noqa: E402

_float_modulo.install()  # x % y and x // y of floats: Python's floor remainder and quotient (TVM 0.27 builds integer floormod only)

from . import kept_effects as _kept_effects  # noqa: E402

_kept_effects.install()  # atomic(..., return_prev=True) * 0 keeps the atomic (TVM 0.27 folded it away); around the wrappers above

from . import mixed_comparisons as _mixed_comparisons  # noqa: E402

_mixed_comparisons.install()  # i < m of an int32 i and an int16 m (TVMScript refused two dtypes in a comparison)

from . import uncaught_diagnostics as _uncaught_diagnostics  # noqa: E402

_uncaught_diagnostics.install()  # an uncaught kernel DiagnosticError shows its message, not only TVM's note

from . import chained_assign as _chained_assign  # noqa: E402

_chained_assign.install()  # A[i] = B[i] = value in kernels (TVMScript refuses a = b = c)

from . import python_conditions as _python_conditions  # noqa: E402

_python_conditions.install()  # if None: / if 0: / if []: choose a branch by Python truthiness, as in TileLang

from . import body_annotations as _body_annotations  # noqa: E402

_body_annotations.install()  # def k(A): A: T.Tensor[...] (parameters typed in the body)

from . import tuple_assign as _tuple_assign  # noqa: E402

_tuple_assign.install()  # A[0], A[1] = A[1], A[0] and a, b = b, a (values first, then stores)

from . import loop_targets as _loop_targets  # noqa: E402

_loop_targets.install()  # for i, j in T.Parallel(16, 16, 1): the names must match the loop variables (TVMScript: "too many values to unpack")

from . import element_stores as _element_stores  # noqa: E402

_element_stores.install()  # B[0, 0] = A[0:4, 0] names the store (TVM printed BufferStore's FFI signature; None crashed)

from . import python_values as _python_values  # noqa: E402

_python_values.install()  # dtype = "float16", op = T.max in kernels: Python values, as in TileLang

from . import kernel_asserts as _kernel_asserts  # noqa: E402

_kernel_asserts.install()  # assert cond, msg in a kernel body: checked as T.device_assert (a constant one at definition)

from . import kernel_returns as _kernel_returns  # noqa: E402

_kernel_returns.install()  # return in a kernel body: refused at its line, saying what to write

from . import python_loops as _python_loops  # noqa: E402

_python_loops.install()  # for w in (1.0, 2.0): unrolled when the kernel is parsed, as in TileLang

from . import loop_rebinding as _loop_rebinding  # noqa: E402

_loop_rebinding.install()  # i = i + 1 on a loop variable: the name is the new value after it, as in Python

from . import named_expressions as _named_expressions  # noqa: E402

_named_expressions.install()  # (t := A[i] * 2) > 1 in a kernel binds t, as in TileLang (TVMScript: "Undefined variable: t")

from . import python_statements as _python_statements  # noqa: E402

_python_statements.install()  # global / nonlocal / del: accepted as in TileLang; try: refused; raise: raised when parsed

from . import region_subscripts as _region_subscripts  # noqa: E402

_region_subscripts.install()  # A[i][j] of a 2-D A: refused, saying to write A[i, j] (TVM re-indexed the region's first axis)

from . import membership as _membership  # noqa: E402

_membership.install()  # A[i] in (1, 2) / i in range(a, b): tested when the kernel runs (TVMScript: a constant False)

from . import while_loops as _while_loops  # noqa: E402

_while_loops.install()  # while True: without a break is refused at its line, as in TileLang (the kernel would hang)

from . import macro_arguments as _macro_arguments  # noqa: E402

_macro_arguments.install()  # a macro with statements right of a run-time and/or is refused (its statements ran always)

from . import inferred_scalars as _inferred_scalars  # noqa: E402

_inferred_scalars.install()  # s = 0; s += A[i] of a float A: refused at the store (it truncated s at each step)

from . import match_statements as _match_statements  # noqa: E402

_match_statements.install()  # match op: case "add": ... in a kernel: an if/elif chain of its cases, as in TileLang

from . import python_calls as _python_calls  # noqa: E402

_python_calls.install()  # min(A[i], 3.0) / math.exp(x) / a helper's `if x > 0`: say which call and what to write

from . import generator_expressions as _generator_expressions  # noqa: E402

_generator_expressions.install()  # sum(A[j] for j in range(4)) as sum([A[j] for j in range(4)]) (TVMScript: "Undefined variable: j")

from .dtype_limits import infinity, max_value, min_value  # noqa: E402,F401 - bfloat16/float8 limits TVM 0.27 got wrong or lacked

from .tileops import loops as _loops  # noqa: E402

_loops.install()  # a plain break in a kernel is T.loop_break() (checked against the loop it leaves)

#: ``T.PrimExpr``: the type of TIR expressions (TVM 0.27 calls it ``tvm.tirx.Expr``).
PrimExpr = _tvm.tirx.Expr
PrimFunc = _tvm.tirx.PrimFunc
StringImm = _tvm.ir.StringImm
#: ``T.cdiv``: TileLang's other name of :func:`ceildiv`.
cdiv = ceildiv

# T.cast with TileLang's rounding arguments (round=, sat=, rbits=); the default is TVM's cast.
from .tir.ir import cast  # noqa: E402,F401

from . import operand_checks as _operand_checks  # noqa: E402

_operand_checks.install(globals())  # T.if_then_else / T.max / T.min name a wrong operand (TVM crashed or printed its FFI signature)

# T.reinterpret in TileLang's order (value, dtype) as well as TVMScript's (dtype, value).
from .reinterpret import reinterpret  # noqa: E402,F401

# TileLang's layout and block-order hints: accepted, no effect (docs/compatibility.md).
from .hints import (  # noqa: E402,F401
    annotate_consumer_reg_alloc,
    annotate_layout,
    annotate_pass_configs,
    annotate_producer_reg_dealloc,
    disable_warp_group_reg_alloc,
    no_set_max_nreg,
    use_swizzle,
)

# TileLang's T.Layout(shape, fn) / T.Fragment(...) are layout hints here, not TVM's tirx Layout.
from .layout_hints import Fragment, Layout, PartialFragment  # noqa: E402,F401

#: The dialect of this module: the whole language (tilelang_core/language/dialects.py).
__tilelang_dialect__ = "cuda"
#: Every public name: TVMScript's tirx names, TileLang's constructs and tile operators, dtypes.
__all__ = sorted(
    {n for n, v in globals().items() if not n.startswith("_") and not isinstance(v, type(_tvm))} | set(tileops.__all__)
)


def __getattr__(name: str):
    """A name this module lacks: ``AttributeError``, with the reason and what to do instead when
    it is a name of upstream TileLang's ``T.`` namespace (language/not_provided.py)."""
    from .not_provided import why_not_provided

    why = None if name.startswith("__") else why_not_provided(name)
    message = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(f"{message}: T.{name} is not provided by tilelang-core: {why}" if why else message, name=name,
                         obj=_sys.modules[__name__])
