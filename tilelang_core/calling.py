"""The calling convention of built kernels, in plain Python: check a call, bind symbols, allocate outputs.

A backend's build hook returns a callable that validates its arguments exactly as
docs/backend-conventions.md prescribes (same exception classes, same texts in every backend),
including the two rules that keep a wrong call from computing garbage: the 32-bit index range of
dynamic-shape tensors (``TensorParam.index_limit``: inputs, and ``out_idx`` outputs before they
are allocated) and overlapping arguments (``TensorParam.written``: a written tensor sharing a
byte with another tensor argument).
The bundled native backends do it in compiled code; a backend written in Python does not have
to write it again::

    from tilelang_core.calling import CallChecker

    checker = CallChecker(artifact, options.out_idx)   # once, at build time (imports torch)

    def kernel(*args, **kwargs):
        call = checker.bind(args, kwargs)              # raises the table's TypeError/ValueError
        rc = entry(*[v.data_ptr() if isinstance(v, torch.Tensor) else v for v in call.values])
        call.check_status(rc)                          # RuntimeError for a non-zero status
        return call.result()                           # None, the output, or a list of outputs

``call.values`` holds every parameter's value in the kernel's order (checked tensors, the
allocated outputs, scalars as plain Python values), ``call.symbols`` the bound dynamic sizes.

What differs between devices is declared, never guessed from a name:

* ``device_type``: the torch device type every tensor must be on (``"mps"``, or ``"cpu"`` for a
  CPU stand-in of a device in tests); the messages then name it. By default each parameter's
  device family decides (:func:`tilelang_core.devices.torch_device_type`) and the messages name
  the family.
* ``overlap``: ``"address"`` (default) compares the tensors' byte ranges in one address space;
  ``"storage"`` is for devices whose ``data_ptr()`` is a buffer handle plus an offset rather than
  an address (Metal's ``MTLBuffer``): only views of one storage can overlap, compared by their
  offsets in it.
* outputs: ``bind(..., allocate=False)`` checks everything (output sizes included) and leaves the
  allocation to :meth:`CallChecker.allocate`, for a backend that must allocate in a context of its
  own (a CUDA stream's).

The ``stream`` keyword is checked the same way everywhere (:func:`check_keywords`); what a kernel
does with the handle is its backend's business (``cuda_streams`` in its capability declaration).

A call costs one loop over entries prepared when the kernel is built (about a microsecond per
argument); the conformance suite (``tilelang backends check``) checks a backend against the same
table either way.
"""

from __future__ import annotations

import builtins
import numbers
import operator
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from .artifact import KernelArtifact, TensorParam
from .devices import TORCH_DEVICE_TYPES
from .errors import BuildError
from .symbolic import compile_expr

#: Status of a C entry point one of whose dynamic sizes is negative (lowering/codegen.py).
NEGATIVE_SIZE = -1
#: Status of a C entry point that could not allocate a workspace (lowering/workspaces.py).
WORKSPACE_ALLOC_FAILED = -2
#: Status of a C entry point whose first ``T.device_assert`` failed (lowering/device_assert.py),
#: or that divided an integer by zero (lowering/checked_divisions.py): every status from -3 down is
#: a failed check, the k-th check of the kernel returning :func:`assertion_status` ``(k)``.
DEVICE_ASSERT_FAILED = -3


def assertion_status(k: int) -> int:
    """The status a C entry point returns when its ``k``-th (from 0) check failed: -3 - k."""
    return DEVICE_ASSERT_FAILED - k


#: What the other statuses of a C entry point mean, for the error a backend raises
#: (``RuntimeError("<kernel>() failed: <text> (error N)")``, :meth:`BoundCall.check_status`).
STATUS_TEXTS = {
    NEGATIVE_SIZE: "a dynamic size of the call is negative",
    WORKSPACE_ALLOC_FAILED: (
        "a workspace (T.alloc_global, or a tile whose size is known at call time only) could not be "
        "allocated: out of memory, or more elements for this call's sizes than its 32-bit indices reach "
        "(2**31 - 1; declare the sizes int64: T.dynamic('n', 'int64'))"),
}
#: How the text of a failed ``T.device_assert`` starts.
DEVICE_ASSERT_TEXT = "T.device_assert failed at "
#: How the text of a failed Python ``assert`` statement of a kernel body starts
#: (language/kernel_asserts.py; lowered as a ``T.device_assert``).
KERNEL_ASSERT_TEXT = "assert failed at "
#: How the text of an integer division by zero in a CPU kernel starts.
DIVISION_BY_ZERO_TEXT = "integer division by zero at "
#: Texts of the checks the lowering puts in CPU kernels; the error is ``RuntimeError("<kernel>()
#: failed: <text>")`` on every backend (docs/backend-conventions.md, "Status").
KERNEL_CHECK_TEXTS = (DEVICE_ASSERT_TEXT, KERNEL_ASSERT_TEXT, DIVISION_BY_ZERO_TEXT)


def kernel_check_text(error: Any) -> Optional[str]:
    """The text of a failed kernel check (:data:`KERNEL_CHECK_TEXTS`) inside ``error`` (an exception
    or its text: a TVM runtime module raises the text within its own error), or None for any other
    error. A backend whose runtime raises the text re-raises it as ``RuntimeError("<kernel>()
    failed: <text>")``."""
    for line in str(error).splitlines():
        found = [at for at in (line.find(t) for t in KERNEL_CHECK_TEXTS) if at >= 0]
        if found:
            return line[min(found):].strip()
    return None

#: (lowest, highest) value of each integer scalar dtype.
INT_RANGES = {
    **{f"int{b}": (-(1 << (b - 1)), (1 << (b - 1)) - 1) for b in (8, 16, 32, 64)},
    **{f"uint{b}": (0, (1 << b) - 1) for b in (8, 16, 32, 64)},
}
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")

#: torch device type of each artifact device family (the one mapping, :mod:`tilelang_core.devices`).
TORCH_DEVICE = TORCH_DEVICE_TYPES

#: The remedy every index-range error ends with.
WIDE_INDEX_HINT = "compile it with pass_configs={'tl.config_index_bitwidth': 64}"

#: How the overlap check compares two tensors' memory (see the module docstring).
OVERLAP_RULES = ("address", "storage")


def symbol_high(dtype: str) -> Optional[int]:
    """Largest value a symbol of ``dtype`` holds, when a size or stride can pass it (a torch size
    or stride is at most 2**63 - 1): 2**31 - 1 for int32; None for int64 and uint64 (never)."""
    high = INT_RANGES.get(dtype, INT_RANGES["int64"])[1]
    return high if high < INT_RANGES["int64"][1] else None


def narrow_symbols(symbols: Any) -> dict[str, tuple[int, str]]:
    """``{name: (largest value, dtype)}`` of the ``SymbolBinding``s a size or stride can overflow
    (int32 ones): a call binding a larger value is refused, never narrowed."""
    return {s.name: (high, s.dtype) for s in symbols if (high := symbol_high(s.dtype)) is not None}


def symbol_range_message(where: str, symbol: str, value: int, dtype: str) -> str:
    """The text of the error for a size or stride too large for its symbol's dtype.

    :param where: what gives the value, e.g. ``"add() argument 'A' (#0): shape[0]"``.
    """
    high = INT_RANGES.get(dtype, INT_RANGES["int64"])[1]
    return (f"{where} = {value} binds symbol '{symbol}', which is {dtype} (at most {high}); "
            f"declare it T.dynamic('{symbol}', 'int64')")


def scalar_kind(dtype: str) -> str:
    """``"float"``, ``"int"`` or ``"bool"``: how a Python value is read for a scalar of ``dtype``."""
    if dtype == "bool":
        return "bool"
    return "float" if dtype in FLOAT_DTYPES or dtype.startswith("float") else "int"


def type_name(value: Any) -> str:
    """The short type name the error messages use (``Tensor``, ``list``, ``NoneType``); a type
    named like a builtin one keeps its module (``numpy.bool``, not ``bool``)."""
    kind = type(value)
    if kind.__module__ != "builtins" and kind.__name__ in _BUILTIN_NAMES:
        return f"{kind.__module__}.{kind.__name__}"
    return kind.__name__


_BUILTIN_NAMES = frozenset(name for name, v in vars(builtins).items() if isinstance(v, type))


def is_complex_number(value: Any) -> bool:
    """Whether ``value`` is Python's complex or one of numpy's complex scalars, which a float
    scalar parameter refuses (``float()`` of numpy's drops the imaginary part with a warning)."""
    kind = type(value)
    return isinstance(value, complex) or (kind.__module__ == "numpy" and (kind.__name__.startswith("complex")
                                                                          or kind.__name__ == "clongdouble"))


def is_numpy_bool(value: Any) -> bool:
    """Whether ``value`` is numpy's bool scalar (``numpy.bool``, ``numpy.bool_`` before numpy 2),
    which a bool or int scalar parameter takes as ``True``/``False``: unlike Python's bool it is
    no int (it has no ``__index__``). Tested by name, so numpy is never imported for it."""
    kind = type(value)
    return kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_")


def dynamic_dims(dims: Sequence[Any], shape: Sequence[int]) -> str:
    """``'m' = 32769, 'n + 1' = 8``: the sizes of a tensor's dynamic dimensions, for messages."""
    return ", ".join(f"'{dim.strip()}' = {got}" for dim, got in zip(dims, shape) if not isinstance(dim, int))


def index_reach_text(reach: int, dims: Sequence[Any], shape: Sequence[int], strides: Optional[Sequence[int]]) -> str:
    """``5000 elements ('m' = 5000)`` of a compact tensor, or ``2147483642 elements from its first to its
    last in memory ('m' = 2, strides (2147483638, 1))`` of one with declared strides (``strides``): what
    an index-limit message says is too many (the backends' dispatchers word it alike)."""
    details = dynamic_dims(dims, shape)
    if strides is None:
        return f"{reach} elements ({details})"
    details = ", ".join(t for t in (details, f"strides {tuple(strides)}") if t)
    return f"{reach} elements from its first to its last in memory ({details})"


def strides_mismatch_text(declared: Sequence[Any], want: Sequence[int], got: Sequence[int]) -> str:
    """``expected strides (S, 1) = (1, 1), got strides (1, 4)``: the explicit-strides error of every
    backend. The declared strides are shown beside their values when a symbol or expression is among
    them (a symbol bound from another stride of the same tensor is otherwise invisible); all-constant
    strides are shown once."""
    texts = [str(s).strip() for s in declared]
    shown = "(" + ", ".join(texts) + ("," if len(texts) == 1 else "") + ")"
    values = str(tuple(want))
    if shown != values:
        shown = f"{shown} = {values}"
    return f"expected strides {shown}, got strides {tuple(got)}"


#: The fix a nested tensor's error gives (the error table's ``nested_tensor`` row).
NESTED_TENSOR_FIX = "pass its components (.unbind()) or .to_padded_tensor(0.0)"


def not_dense_message(x: Any) -> str:
    """Why tensor ``x``, nested or of a layout other than strided, is refused (after the argument's
    name; the error table's ``sparse_tensor`` and ``nested_tensor`` rows). A nested tensor is
    named as such first: the older kind reports the strided layout and the jagged kind's fix is
    not ``.to_dense()``."""
    if x.is_nested:
        return f"expected a dense (strided) tensor, got a nested tensor; {NESTED_TENSOR_FIX}"
    return f"expected a dense (strided) tensor, got layout {x.layout}; call .to_dense()"


def storage_too_small_message(nbytes: int) -> str:
    """Why a tensor whose storage is smaller than its view is refused (the conformance error
    table's ``freed_storage`` row: a backend with a native dispatcher words it the same)."""
    return (f"expected a tensor whose storage holds its elements, got one whose storage holds {nbytes} bytes, "
            "fewer than its shape, strides and offset reach (a storage freed or shrunk with "
            "untyped_storage().resize_()); pass a tensor with its data")


#: Why a tensor whose storage has bytes but no memory is refused (a NULL data pointer: a
#: FakeTensor, as torch.compile and torch.export trace with, or a ``_make_wrapper_subclass``
#: tensor, whose storage cannot even give its pointer); the cython dispatcher words it the same.
NO_MEMORY_MESSAGE = ("expected a tensor with its data in memory, got one whose storage has no memory (a NULL data "
                     "pointer, as a FakeTensor or a wrapper subclass has); pass a real tensor (under torch.compile or "
                     "torch.export, call the kernel from a torch.library.custom_op with a fake implementation)")


def storage_error(prefix: str, x: Any) -> Optional[ValueError]:
    """The error for a tensor with elements whose storage does not hold every element its view
    reaches, that has no storage at all (a vmap-batched tensor), or whose storage has no memory
    (a FakeTensor: a kernel given its NULL data pointer crashed the process); None when it is fine.
    ``prefix`` names the argument (``"add() argument 'A' (#0)"``)."""
    if not x.numel():
        return None
    try:
        storage = x.untyped_storage()
        nbytes = storage.nbytes()
    except (RuntimeError, NotImplementedError) as exc:  # vmap-batched, functional wrappers, ...
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return ValueError(f"{prefix}: expected a dense tensor with storage, got one without ({first}); pass a plain tensor")
    if (x.storage_offset() + element_reach(x)) * x.element_size() > nbytes:
        return ValueError(f"{prefix}: {storage_too_small_message(nbytes)}")
    try:
        if type(x).__name__ == "Tensor":
            address = storage.data_ptr()
        else:  # a subclass: a FakeTensor's storage warns that its pointer is read (this is why)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                address = storage.data_ptr()
    except RuntimeError:  # "invalid python storage": a _make_wrapper_subclass tensor
        address = 0
    if address == 0:
        return ValueError(f"{prefix}: {NO_MEMORY_MESSAGE}")
    return None


def elements_overlap(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether two elements of a tensor of ``shape`` and ``strides`` (in elements) may share memory.

    Dimensions of size 1 are ignored and a tensor without elements overlaps nothing; a dimension
    of size > 1 with stride 0 overlaps. The others, sorted by ``|stride|``, must each have a stride
    of at least the previous stride times the previous size (the previous dimensions' elements
    then all lie below one step of it): that is sufficient for no two elements to share an
    address, and whatever fails it is called overlapping. It is not necessary, so an exotic
    interleaving of non-overlapping elements (strides (3, 2) for shape (2, 3): offsets 0, 2, 4, 3,
    5, 7) is a false positive; no tensor torch makes by slicing, transposing or expanding is one.
    """
    dims = []
    for n, st in zip(shape, strides):
        if n == 0:
            return False
        if n != 1:
            if st == 0:
                return True
            dims.append((abs(st), n))
    if len(dims) < 2:
        return False
    dims.sort()
    reach = dims[0][0] * dims[0][1]
    for st, n in dims[1:]:
        if st < reach:
            return True
        reach = st * n
    return False


def footprints_disjoint(a: tuple[int, Sequence[int], Sequence[int], int],
                        b: tuple[int, Sequence[int], Sequence[int], int]) -> bool:
    """Whether two strided footprints provably share no byte, though their byte ranges meet.

    Each footprint is ``(first byte, shape, strides in elements, element size)``. The test looks
    for a period ``P`` (a byte stride of one of the two) such that, for both, every dimension of
    size > 1 either steps by a multiple of ``P`` or lies below it, with the dimensions below it
    spanning at most ``P`` bytes: each footprint then stays, modulo ``P``, inside one interval of
    that span from its first byte, and two such intervals that do not meet (as arcs of a circle of
    length ``P``) keep the footprints apart. That covers the views interleaved code passes: the
    column halves of one matrix (``qkv[:, :d]`` and ``qkv[:, d:2 * d]``), even and odd rows
    (``x[0::2]``, ``x[1::2]``), one head of a fused ``(B, S, 3, H, D)`` tensor next to another. It
    is sufficient, not necessary: False means "may share a byte" (the call is then refused).
    """
    def dims(footprint):
        _, shape, strides, size = footprint
        return [(abs(st) * size, n) for n, st in zip(shape, strides) if n != 1]

    dims_a, dims_b = dims(a), dims(b)
    if any(n == 0 for _, n in dims_a + dims_b):
        return True  # no elements: nothing to share
    for period in sorted({st for st, _ in dims_a + dims_b if st > 0}):
        arcs = []
        for (start, _, _, size), ds in ((a, dims_a), (b, dims_b)):
            if any(st % period and st > period for st, _ in ds):
                break  # a step neither below the period nor a multiple of it
            span = size + sum((n - 1) * st for st, n in ds if st < period)
            if span > period:
                break
            arcs.append((start % period, span))
        else:
            (x, span_x), (y, span_y) = arcs
            if (y - x) % period >= span_x and (x - y) % period >= span_y:
                return True
    return False


def tensors_disjoint(x: Any, y: Any, by_storage: bool = False) -> bool:
    """Whether two tensors whose byte ranges meet share no byte (:func:`footprints_disjoint`);
    ``by_storage``: their offsets in one storage (``overlap="storage"``), else their addresses.
    The overlap check asks it only for the pairs whose ranges meet, so it costs nothing otherwise."""
    def footprint(t):
        start = t.storage_offset() * t.element_size() if by_storage else t.data_ptr()
        return start, tuple(t.shape), tuple(t.stride()), t.element_size()

    return footprints_disjoint(footprint(x), footprint(y))


def self_overlap_message(x: Any) -> Optional[str]:
    """Why a tensor the kernel writes is refused when its elements overlap one another (after the
    argument's name; :func:`elements_overlap`); None when they do not. Reading such a tensor is
    fine (the check applies to written parameters with declared strides: compact ones hold
    contiguous tensors)."""
    shape, strides = tuple(x.shape), tuple(x.stride())
    if not elements_overlap(shape, strides):
        return None
    return (f"expected a tensor whose elements do not overlap (it is written), got strides {strides} for shape "
            f"{shape}; pass a tensor with its own memory per element (.contiguous())")


def element_reach(x: Any) -> int:
    """Elements from a tensor's first to its last element, + 1 (its ``numel`` when compact, 0 when empty)."""
    if x.numel() == 0:
        return 0
    return 1 + sum((n - 1) * abs(st) for n, st in zip(x.shape, x.stride()))


def byte_range(x: Any) -> tuple[int, int]:
    """``(first byte, length)`` of a tensor's data: from its data pointer to the end of its last element."""
    reach = element_reach(x)
    return x.data_ptr(), reach * x.element_size()


def storage_byte_range(x: Any) -> tuple[int, int, int]:
    """``(storage handle, first byte, length)`` of a tensor's data, the bytes counted from the start
    of its storage: for devices whose ``data_ptr()`` is a buffer handle plus an offset rather than
    an address (``overlap="storage"``), where two storages' numbers say nothing about each other."""
    size = x.element_size()
    return x.untyped_storage().data_ptr(), x.storage_offset() * size, element_reach(x) * size


#: The ints a ``cudaStream_t`` handle may be given as: a pointer's 64 bits, read signed or unsigned.
STREAM_HANDLE_RANGE = (-(1 << 63), (1 << 64) - 1)


def stream_handle(name: str, stream: Any) -> Optional[int]:
    """The raw ``cudaStream_t`` of a ``stream=`` keyword: None, an int, or an object with ``cuda_stream``.

    :raises TypeError: another type (a bool too), as the error table's ``stream_type`` row says.
    :raises ValueError: an int outside :data:`STREAM_HANDLE_RANGE` (the ``stream_range`` row).
    """
    if stream is None:
        return None
    if isinstance(stream, int) and not isinstance(stream, bool):
        handle = stream
    else:
        handle = getattr(stream, "cuda_stream", None)
        if not isinstance(handle, int) or isinstance(handle, bool):
            raise TypeError(f"{name}() keyword 'stream': expected an int (a cudaStream_t) or a torch.cuda.Stream, "
                            f"got {type_name(stream)}")
    low, high = STREAM_HANDLE_RANGE
    if not low <= handle <= high:
        raise ValueError(f"{name}() keyword 'stream': expected a cudaStream_t handle of 64 bits, got {handle}")
    return handle


def check_keywords(name: str, kwargs: dict[str, Any]) -> Optional[int]:
    """Check a call's keywords (only ``stream`` is accepted); the raw stream handle, or None.

    :raises TypeError: another keyword, or a ``stream`` that is not a stream (the table's texts).
    """
    stream = None
    for key, value in kwargs.items():
        if key != "stream":
            raise TypeError(f"{name}() got an unexpected keyword argument '{key}' (only 'stream' is accepted)")
        stream = stream_handle(name, value)
    return stream


def _size_fn(expr: Any) -> Callable[[dict], int]:
    """``f(symbols)`` for a size: a bare symbol is looked up, an expression evaluated."""
    if isinstance(expr, str) and expr.strip().isidentifier():
        return operator.itemgetter(expr.strip())
    return compile_expr(expr)


@dataclass
class BoundCall:
    """One checked call: a value per kernel parameter (tensors and converted scalars), the symbols.

    ``device`` is the ``torch.device`` of the tensor arguments (None when there are none);
    ``output_shapes`` the shapes of the ``out_idx`` outputs, in ``out_idx`` order.
    """

    name: str
    values: list[Any]
    symbols: dict[str, int]
    outputs: list[Any] = field(default_factory=list)
    stream: Optional[int] = None
    device: Any = None
    output_shapes: list[list[int]] = field(default_factory=list)

    def check_status(self, status: Any, assert_message: Optional[Callable[[int], Any]] = None) -> None:
        """Raise ``RuntimeError`` when a CPU entry function returned a non-zero status.

        :param assert_message: the entry's ``DeviceKernel.assert_message`` function, called with
            the status when it says a ``T.device_assert`` failed (-3 or less); it returns the
            assertion's text (a ``str``, ``bytes`` or None), which is the message
            (``"<kernel>() failed: T.device_assert failed at ..."``).
        """
        if not status:
            return
        if status <= DEVICE_ASSERT_FAILED and assert_message is not None:
            if not callable(assert_message):
                raise TypeError(
                    f"check_status: assert_message must be a function that takes the status and returns the "
                    f"assertion's text (calling.ctypes_assert_message(library, entry) makes one for a ctypes library), "
                    f"got {type(assert_message).__name__} {assert_message!r:.80}; this is a bug in the backend")
            text = assert_message(int(status))
            if isinstance(text, bytes):
                text = text.decode("utf-8", "replace")
            if text:
                raise RuntimeError(f"{self.name}() failed: {text}")
        if int(status) in STATUS_TEXTS:
            raise RuntimeError(f"{self.name}() failed: {STATUS_TEXTS[int(status)]} (error {int(status)})")
        raise RuntimeError(f"{self.name}() failed: the kernel returned error code {int(status)}")

    def result(self) -> Any:
        """What the kernel call returns: None, the single output, or a list of outputs."""
        if not self.outputs:
            return None
        return self.outputs[0] if len(self.outputs) == 1 else list(self.outputs)


@dataclass(frozen=True)
class _TensorEntry:
    """What a call checks of one tensor argument, prepared at build time."""

    index: int
    dtype: Any
    ndim: int
    static: tuple[tuple[int, int], ...]  # (dimension, size)
    binds: tuple[tuple[int, str], ...]  # (dimension, symbol)
    stride_binds: tuple[tuple[int, str], ...]  # (dimension, symbol) of SymbolBinding.stride
    narrow: tuple[tuple[str, int, str, int, str], ...]  # ("shape"/"stride", dimension, symbol, highest, dtype)
    device_type: str
    device_text: str  # how messages name the expected device
    compact: bool
    maybe_conj: bool  # only complex tensors can be lazy conjugate views
    self_overlap: bool  # written with declared strides: refused when its elements overlap one another


class CallChecker:
    """Checks calls of one built kernel against its artifact (see the module docstring).

    :param artifact: the kernel artifact the build hook received.
    :param out_idx: the normalised output indices from ``BuildOptions.out_idx``.
    :param device_type: the torch device type every tensor must be on, named in the messages;
        None: each parameter's device family's (:data:`tilelang_core.devices.TORCH_DEVICE_TYPES`),
        the family named in the messages.
    :param overlap: ``"address"`` or ``"storage"`` (:data:`OVERLAP_RULES`, module docstring).
    :raises BuildError: a tensor dtype torch does not have, or an unknown ``overlap`` rule.
    """

    def __init__(self, artifact: KernelArtifact, out_idx: Sequence[int] = (), *, device_type: Optional[str] = None,
                 overlap: str = "address") -> None:
        import torch

        if overlap not in OVERLAP_RULES:
            raise BuildError(f"CallChecker: overlap must be one of {', '.join(OVERLAP_RULES)}, got {overlap!r}")
        self._torch = torch
        self._tensor_type, self._strided = torch.Tensor, torch.strided
        self.name = artifact.name
        self.params = list(artifact.params)
        self.out_idx = sorted(set(out_idx))
        self.inputs = [i for i in range(len(self.params)) if i not in self.out_idx]
        self.names = ", ".join(self.params[i].name for i in self.inputs)
        self.device_type = device_type
        self.overlap = overlap
        self._position = {p: pos for pos, p in enumerate(self.inputs)}
        self._symbol_of_scalar = {s.param_index: s.name for s in artifact.symbols if s.dim is None}
        stride_binds: dict[int, list] = {}
        for s in artifact.symbols:
            if s.stride:
                stride_binds.setdefault(s.param_index, []).append((s.dim, s.name))
        #: symbol -> (highest value, dtype), for symbols narrower than a torch size (int32)
        self._symbol_high = narrow_symbols(artifact.symbols)
        self._kinds = {i: scalar_kind(p.dtype) for i, p in enumerate(self.params) if not isinstance(p, TensorParam)}
        self._dtype = {i: self._torch_dtype(p) for i, p in enumerate(self.params) if isinstance(p, TensorParam)}
        self._deferred: list[tuple[int, str, int, Any, Any]] = []  # (param, what, dim, fn, text or declared strides)
        #: one entry per caller argument: a _TensorEntry, or the scalar's parameter index
        self._entries: list[Any] = []
        for index in self.inputs:
            p = self.params[index]
            if not isinstance(p, TensorParam):
                self._entries.append(index)
                continue
            static, binds = [], []
            for d, dim in enumerate(p.shape):
                if isinstance(dim, int):
                    static.append((d, dim))
                elif dim.strip().isidentifier():
                    binds.append((d, dim.strip()))
                else:
                    self._deferred.append((index, "shape", d, compile_expr(dim), dim))
            if p.strides is not None:
                self._deferred.append((index, "strides", 0, [compile_expr(s) for s in p.strides], p.strides))
            want = device_type or TORCH_DEVICE_TYPES.get(p.device, p.device)
            narrow = tuple((what, d, sym, *self._symbol_high[sym])
                           for what, pairs in (("shape", binds), ("stride", stride_binds.get(index, ())))
                           for d, sym in pairs if sym in self._symbol_high)
            self._entries.append(_TensorEntry(index, self._dtype[index], len(p.shape), tuple(static), tuple(binds),
                                              tuple(stride_binds.get(index, ())), narrow, want, device_type or p.device,
                                              p.strides is None, self._dtype[index].is_complex,
                                              p.written and p.strides is not None))
        #: parameter index -> 32-bit index limit (dynamic shapes indexed with 32-bit integers)
        self._limit = {i: p.index_limit for i, p in enumerate(self.params)
                       if isinstance(p, TensorParam) and p.index_limit is not None}
        # tensor inputs, in call order, and the pairs of them of which the kernel writes one: the
        # overlap check (empty when the kernel writes no tensor input, as with out_idx outputs)
        tensors = [i for i in self.inputs if isinstance(self.params[i], TensorParam)]
        self._overlap_pairs = [(a, b) for k, a in enumerate(tensors) for b in tensors[k + 1:]
                               if self.params[a].written or self.params[b].written]
        # each tensor of those pairs, and whether it is compact (its byte length is then its nbytes)
        self._overlap_tensors = [(i, self.params[i].strides is None) for i in tensors
                                 if any(i in pair for pair in self._overlap_pairs)]
        # per output: (param index, shape functions, stride functions or None)
        self._outputs = [(i, [_size_fn(d) for d in self.params[i].shape],
                          None if self.params[i].strides is None else [_size_fn(s) for s in self.params[i].strides])
                         for i in self.out_idx]
        self._device_kinds: dict[Any, str] = {}  # torch.device -> its type (reading .type costs more)

    def _torch_dtype(self, p: TensorParam) -> Any:
        dtype = getattr(self._torch, p.dtype, None)
        if not isinstance(dtype, self._torch.dtype):
            raise BuildError(f"{self.name}: parameter {p.name!r} has dtype {p.dtype!r}, which has no torch "
                             "equivalent; cannot pass or allocate it")
        return dtype

    # -- errors ---------------------------------------------------------------------------------

    def _prefix(self, index: int) -> str:
        return f"{self.name}() argument '{self.params[index].name}' (#{self._position[index]})"

    def _bind(self, index: int, what: str, symbol: str, value: int, symbols: dict, source: dict) -> None:
        if symbol not in symbols:
            symbols[symbol], source[symbol] = value, index
        elif symbols[symbol] != value:
            other = self.params[source[symbol]].name
            raise ValueError(
                f"{self._prefix(index)}: {what} binds symbol '{symbol}' = {value}, but argument '{other}' "
                f"bound it to {symbols[symbol]}"
            )

    # -- one argument ---------------------------------------------------------------------------

    def _tensor(self, e: _TensorEntry, x: Any, symbols: dict, source: dict, first: Any) -> Any:
        """Check tensor argument ``x``; its device (``first``: the device of the tensors before it)."""
        if not isinstance(x, self._tensor_type):
            raise TypeError(f"{self._prefix(e.index)}: expected a torch.Tensor, got {type_name(x)}")
        if x.layout is not self._strided or x.is_nested:
            raise ValueError(f"{self._prefix(e.index)}: {not_dense_message(x)}")
        where = x.device
        kind = self._device_kinds.get(where)
        if kind is None:
            kind = self._device_kinds.setdefault(where, where.type)
        if kind == "meta":
            raise ValueError(f"{self._prefix(e.index)}: expected a tensor on {e.device_text}, got meta")
        if x.dtype is not e.dtype:
            raise ValueError(f"{self._prefix(e.index)}: expected dtype {self.params[e.index].dtype}, "
                             f"got {str(x.dtype).replace('torch.', '')}")
        shape = x.shape
        if len(shape) != e.ndim:
            raise ValueError(f"{self._prefix(e.index)}: expected {e.ndim} dimensions, got {len(shape)}")
        for d, want in e.static:
            if shape[d] != want:
                raise ValueError(f"{self._prefix(e.index)}: expected shape[{d}] == {want}, got {shape[d]}")
        for d, symbol in e.binds:
            got, bound = shape[d], symbols.get(symbol)
            if bound is None:
                symbols[symbol], source[symbol] = got, e.index
            elif bound != got:
                self._bind(e.index, f"shape[{d}]", symbol, got, symbols, source)
        for d, symbol in e.stride_binds:  # bound here first: the strides check compares the others
            self._bind(e.index, f"stride[{d}]", symbol, x.stride(d), symbols, source)
        limit = self._limit.get(e.index) if self._limit else None
        if limit is not None:  # elements (compact) or largest offset + 1 (declared strides)
            reach = x.numel() if e.compact else element_reach(x)
            if reach > limit:
                raise ValueError(f"{self._prefix(e.index)}: "
                                 f"{index_reach_text(reach, self.params[e.index].shape, shape, None if e.compact else x.stride())}"
                                 f" exceed this kernel's 32-bit index limit of {limit}; {WIDE_INDEX_HINT}")
        if e.narrow:
            for what, d, symbol, high, dtype in e.narrow:  # an int32 symbol: never narrow (after the index limit)
                got = shape[d] if what == "shape" else x.stride(d)
                if got > high:
                    raise ValueError(symbol_range_message(f"{self._prefix(e.index)}: {what}[{d}]", symbol, got, dtype))
        if kind != e.device_type:
            raise ValueError(f"{self._prefix(e.index)}: expected a tensor on {e.device_text}, got {where}")
        if first is not None and where != first:
            raise ValueError(f"{self._prefix(e.index)}: expected a tensor on {first}, got {where}")
        if e.compact and not x.is_contiguous():
            raise ValueError(f"{self._prefix(e.index)}: expected a contiguous tensor, got strides {tuple(x.stride())}; "
                             "call .contiguous()")
        if (e.maybe_conj and x.is_conj()) or x.is_neg():
            view, fix = ("conjugate", "resolve_conj") if x.is_conj() else ("negative", "resolve_neg")
            raise ValueError(f"{self._prefix(e.index)}: expected a tensor with its data materialized, got a lazy "
                             f"{view} view; call .{fix}()")
        err = storage_error(self._prefix(e.index), x)
        if err is not None:
            raise err
        if e.self_overlap:  # written, declared strides (compact tensors never overlap themselves)
            text = self_overlap_message(x)
            if text is not None:
                raise ValueError(f"{self._prefix(e.index)}: {text}")
        return where

    def _scalar(self, index: int, x: Any, symbols: dict, source: dict) -> Any:
        p = self.params[index]
        kind = self._kinds[index]
        if kind == "float" and type(x) is float:
            return x
        if kind == "int" and type(x) is int:
            value = x
        else:
            pre = self._prefix(index)
            if isinstance(x, self._tensor_type):
                raise TypeError(f"{pre}: expected {'a float' if kind == 'float' else 'an int' if kind == 'int' else 'a bool'}, "
                                f"got Tensor")
            if kind == "float":
                if isinstance(x, (str, bytes)) or not hasattr(type(x), "__float__") or is_complex_number(x):
                    raise TypeError(f"{pre}: expected a float, got {type_name(x)}")
                try:
                    return float(x)
                except OverflowError:
                    raise ValueError(f"{pre}: expected a float, got {type_name(x)} out of range") from None
                except (TypeError, ValueError):  # no number after all (a numpy array of several)
                    raise TypeError(f"{pre}: expected a float, got {type_name(x)}") from None
            what = "a bool" if kind == "bool" else "an int"
            if is_numpy_bool(x):
                value = int(bool(x))
            elif isinstance(x, float) or not hasattr(type(x), "__index__"):
                raise TypeError(f"{pre}: expected {what}, got {type_name(x)}")
            else:
                try:
                    value = operator.index(x)
                except TypeError:  # __index__ refused (a numpy array that is not one integer)
                    raise TypeError(f"{pre}: expected {what}, got {type_name(x)}") from None
            if kind == "bool":
                if value not in (0, 1):
                    raise ValueError(f"{pre}: expected a bool (True/False, 0 or 1), got {value}")
                return bool(value)
        low, high = INT_RANGES.get(p.dtype, INT_RANGES["int64"])
        if not low <= value <= high:
            raise ValueError(f"{self._prefix(index)}: value {value} does not fit in {p.dtype}")
        symbol = self._symbol_of_scalar.get(index)
        if symbol is not None:
            if value < 0:
                raise ValueError(f"{self._prefix(index)}: gives symbol '{symbol}' = {value}, but a dimension cannot "
                                 "be negative")
            self._bind(index, "value", symbol, value, symbols, source)
        return value

    # -- the call -------------------------------------------------------------------------------

    def bind(self, args: Sequence[Any], kwargs: Optional[dict[str, Any]] = None, *, allocate: bool = True) -> BoundCall:
        """Check one call (positional ``args``, keyword ``kwargs``); allocate the outputs.

        :param allocate: False: check the outputs' sizes but leave them unallocated (``None`` in
            ``values``) for :meth:`allocate`.
        :raises TypeError, ValueError: with the texts of docs/backend-conventions.md.
        """
        stream = check_keywords(self.name, kwargs) if kwargs else None
        if len(args) != len(self._entries):
            raise TypeError(f"{self.name}() takes {len(self.inputs)} tensor/scalar arguments ({self.names}), got {len(args)}")
        values: list[Any] = [None] * len(self.params)
        symbols: dict[str, int] = {}
        source: dict[str, int] = {}
        device = None
        for entry, x in zip(self._entries, args):
            if entry.__class__ is int:
                values[entry] = self._scalar(entry, x, symbols, source)
            else:
                device = self._tensor(entry, x, symbols, source, device)
                values[entry.index] = x
        if self._overlap_pairs:
            self._check_overlap(values)
        if self._deferred:
            self._check_deferred(values, symbols)
        call = BoundCall(self.name, values, symbols, [], stream, device)
        if self._outputs:
            call.output_shapes = self.output_shapes(symbols)
            if allocate:
                self.allocate(call)
        return call

    def _check_overlap(self, values: list[Any]) -> None:
        """Refuse a call in which a tensor the kernel writes shares a byte with another tensor
        argument: the first such pair in call order (tensors without elements overlap nothing).
        Runs after every argument was checked, so compact parameters hold contiguous tensors."""
        ranges = {}
        by_storage = self.overlap == "storage"
        for i, compact in self._overlap_tensors:
            x = values[i]
            if by_storage:
                ranges[i] = storage_byte_range(x)
            else:
                ranges[i] = (None, x.data_ptr(), x.nbytes) if compact else (None, *byte_range(x))
        for a, b in self._overlap_pairs:
            (base_a, lo_a, n_a), (base_b, lo_b, n_b) = ranges[a], ranges[b]
            if (n_a and n_b and base_a == base_b and lo_a < lo_b + n_b and lo_b < lo_a + n_a
                    and not tensors_disjoint(values[a], values[b], by_storage)):  # interleaved views pass
                pa, pb = self.params[a], self.params[b]
                raise ValueError(
                    f"{self.name}() arguments '{pa.name}' (#{self._position[a]}) and '{pb.name}' "
                    f"(#{self._position[b]}) overlap in memory, and the kernel writes "
                    f"'{pa.name if pa.written else pb.name}'; pass tensors that do not share memory (for example a .clone())"
                )

    def _check_deferred(self, values: list[Any], symbols: dict[str, int]) -> None:
        for index, what, d, fn, text in self._deferred:
            x = values[index]
            pre = self._prefix(index)
            if what == "shape":
                want = fn(symbols)
                if x.shape[d] != want:
                    raise ValueError(f"{pre}: expected shape[{d}] == {text} = {want}, got {x.shape[d]}")
            else:
                want_strides = tuple(f(symbols) for f in fn)
                got = tuple(x.stride())
                if any(w != g and size != 1 for w, g, size in zip(want_strides, got, x.shape)):
                    raise ValueError(f"{pre}: {strides_mismatch_text(text, want_strides, got)}")

    def output_shapes(self, symbols: dict[str, int]) -> list[list[int]]:
        """Every output's shape, refused when negative or over the 32-bit index limit (before any
        output is allocated)."""
        shapes = []
        for index, dims, _ in self._outputs:
            p = self.params[index]
            shape = [f(symbols) for f in dims]
            if any(s < 0 for s in shape):
                raise ValueError(f"{self.name}(): output '{p.name}' would have shape {shape} for these inputs")
            limit = self._limit.get(index)
            if limit is not None:
                total = 1
                for n in shape:
                    total *= n
                if total > limit:
                    raise ValueError(f"{self.name}(): output '{p.name}' would have {total} elements "
                                     f"({dynamic_dims(p.shape, shape)}), over this kernel's 32-bit index limit of "
                                     f"{limit}; {WIDE_INDEX_HINT}")
            shapes.append(shape)
        return shapes

    def allocate(self, call: BoundCall) -> list[Any]:
        """Allocate the outputs of a call checked by :meth:`bind` (``allocate=False``) on its
        tensors' device (else the parameter's device type), in torch's current context; they go
        into ``call.values`` and ``call.outputs``."""
        torch = self._torch
        for (index, _, strides), shape in zip(self._outputs, call.output_shapes):
            p = self.params[index]
            where = call.device if call.device is not None else self.device_type or TORCH_DEVICE_TYPES.get(p.device, p.device)
            if strides is None:
                out = torch.empty(shape, dtype=self._dtype[index], device=where)
            else:
                out = torch.empty_strided(shape, [f(call.symbols) for f in strides], dtype=self._dtype[index], device=where)
            call.values[index] = out
            call.outputs.append(out)
        return call.outputs


#: Scalar dtypes :func:`ctypes_type` can pass (``ctypes`` has no half-precision type, and
#: ``_Float16`` travels in floating-point registers, so float16/bfloat16 scalars cannot be passed).
CTYPES_SCALAR_DTYPES = ("bool", "float32", "float64", *INT_RANGES)


def ctypes_type(dtype: str) -> Callable:
    """The ``ctypes`` type of a C scalar argument of TVM dtype ``dtype`` (one of :data:`CTYPES_SCALAR_DTYPES`)."""
    import ctypes

    table = {
        "bool": ctypes.c_bool, "float32": ctypes.c_float, "float64": ctypes.c_double,
        **{f"int{b}": getattr(ctypes, f"c_int{b}") for b in (8, 16, 32, 64)},
        **{f"uint{b}": getattr(ctypes, f"c_uint{b}") for b in (8, 16, 32, 64)},
    }
    return table[dtype]


def ctypes_assert_message(library: Any, entry: Any) -> Optional[Callable[[int], Any]]:
    """The ``DeviceKernel.assert_message`` function of ``entry`` in a ``ctypes.CDLL`` ``library``,
    ready for :meth:`BoundCall.check_status`; None when the kernel has no ``T.device_assert``."""
    if not entry.assert_message:
        return None
    import ctypes

    function = getattr(library, entry.assert_message)
    function.restype, function.argtypes = ctypes.c_char_p, [ctypes.c_int32]
    return function


def pointer_arguments(artifact: KernelArtifact, out_idx: Sequence[int] = ()) -> Optional[Callable[[tuple], tuple]]:
    """The conversion of a call's pointer arguments (``a: T.ptr`` parameters), or None when the
    kernel has none.

    A pointer parameter is an int64 scalar to backends (``ScalarParam.pointer``). The returned
    function takes a call's positional arguments and gives them back with each pointer argument
    as an int: a torch tensor on the parameter's device gives its ``data_ptr()``; a Python int is
    an address and passes as given, unchecked (like ``t.data_ptr()``, the caller keeps the memory
    alive and makes it hold what the kernel reads). Anything else raises. A call with the wrong
    number of arguments passes unchanged, for the backend's own message.

    :raises TypeError: None, a float, a string, ... for a pointer parameter.
    :raises ValueError: a tensor on another device than the kernel's.
    """
    outputs = set(out_idx)
    inputs = [i for i in range(len(artifact.params)) if i not in outputs]
    slots = [(pos, i, artifact.params[i]) for pos, i in enumerate(inputs)
             if getattr(artifact.params[i], "pointer", None) is not None]
    if not slots:
        return None
    import torch

    tensor_type = torch.Tensor
    name = artifact.name
    checks = [(pos, p.name, TORCH_DEVICE_TYPES.get(p.pointer, p.pointer), p.pointer) for pos, _, p in slots]
    count = len(inputs)

    def convert(args: tuple) -> tuple:
        if len(args) != count:
            return args
        out = list(args)
        for pos, pname, want, family in checks:
            x = out[pos]
            if type(x) is int:
                continue
            prefix = f"{name}() argument '{pname}' (#{pos})"
            if isinstance(x, tensor_type):
                if x.device.type != want:
                    raise ValueError(f"{prefix}: expected a pointer to {family} memory (a tensor on {want} or an int "
                                     f"address), got a tensor on {x.device}")
                # no memory behind it (a FakeTensor, a freed storage): its NULL data pointer crashed
                # the process on every backend
                err = storage_error(prefix, x)
                if err is not None:
                    raise err
                address = x.data_ptr()
                if not address:  # an empty tensor: the kernel reads what its code says, not numel()
                    raise ValueError(f"{prefix}: expected a tensor with memory behind it, got one whose data pointer "
                                     f"is NULL (an empty tensor, shape {tuple(x.shape)}); pass a tensor holding the "
                                     f"elements the kernel reads")
                out[pos] = address
                continue
            if isinstance(x, bool) or not isinstance(x, numbers.Integral):
                raise TypeError(f"{prefix}: expected a pointer: a torch.Tensor on {want} or an int address "
                                f"(such as t.data_ptr()), got {type_name(x)}")
            out[pos] = int(x)  # an int subclass, a NumPy integer
        return tuple(out)

    return convert
