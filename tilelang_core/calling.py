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
        rc = entry(*call.pointers_and_scalars())       # or read call.values / call.symbols
        call.check_status(rc)                          # RuntimeError for a non-zero status
        return call.result()                           # None, the output, or a list of outputs

It costs a few microseconds per argument, which is fine for a backend whose kernels run long
(or for a first version); the conformance suite (``tilelang backends check``) checks a backend
against the same table either way.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from .artifact import KernelArtifact, TensorParam
from .symbolic import compile_expr

#: (lowest, highest) value of each integer scalar dtype.
INT_RANGES = {
    **{f"int{b}": (-(1 << (b - 1)), (1 << (b - 1)) - 1) for b in (8, 16, 32, 64)},
    **{f"uint{b}": (0, (1 << b) - 1) for b in (8, 16, 32, 64)},
}
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")

#: torch device type of each artifact device family.
TORCH_DEVICE = {"cpu": "cpu", "cuda": "cuda", "rocm": "cuda", "metal": "mps"}

#: The remedy every index-range error ends with.
WIDE_INDEX_HINT = "compile it with pass_configs={'tl.config_index_bitwidth': 64}"


def scalar_kind(dtype: str) -> str:
    """``"float"``, ``"int"`` or ``"bool"``: how a Python value is read for a scalar of ``dtype``."""
    if dtype == "bool":
        return "bool"
    return "float" if dtype in FLOAT_DTYPES or dtype.startswith("float") else "int"


def type_name(value: Any) -> str:
    """The short type name the error messages use (``Tensor``, ``list``, ``NoneType``)."""
    return type(value).__name__


def dynamic_dims(dims: Sequence[Any], shape: Sequence[int]) -> str:
    """``'m' = 32769, 'n + 1' = 8``: the sizes of a tensor's dynamic dimensions, for messages."""
    return ", ".join(f"'{dim.strip()}' = {got}" for dim, got in zip(dims, shape) if not isinstance(dim, int))


def element_reach(x: Any) -> int:
    """Elements from a tensor's first to its last element, + 1 (its ``numel`` when compact, 0 when empty)."""
    if x.numel() == 0:
        return 0
    return 1 + sum((n - 1) * abs(st) for n, st in zip(x.shape, x.stride()))


def byte_range(x: Any) -> tuple[int, int]:
    """``(first byte, length)`` of a tensor's data: from its data pointer to the end of its last element."""
    reach = element_reach(x)
    return x.data_ptr(), reach * x.element_size()


def stream_handle(name: str, stream: Any) -> Optional[int]:
    """The raw ``cudaStream_t`` of a ``stream=`` keyword: None, an int, or an object with ``cuda_stream``."""
    if stream is None:
        return None
    if isinstance(stream, int) and not isinstance(stream, bool):
        return stream
    handle = getattr(stream, "cuda_stream", None)
    if isinstance(handle, int):
        return handle
    raise TypeError(
        f"{name}() keyword 'stream': expected an int (a cudaStream_t) or a torch.cuda.Stream, got {type_name(stream)}"
    )


@dataclass
class BoundCall:
    """One checked call: a value per kernel parameter (tensors and converted scalars), the symbols."""

    name: str
    values: list[Any]
    symbols: dict[str, int]
    outputs: list[Any] = field(default_factory=list)
    stream: Optional[int] = None

    def check_status(self, status: Any) -> None:
        """Raise ``RuntimeError`` when a CPU entry function returned a non-zero status."""
        if status:
            raise RuntimeError(f"{self.name}() failed: the kernel returned error code {int(status)}")

    def result(self) -> Any:
        """What the kernel call returns: None, the single output, or a list of outputs."""
        if not self.outputs:
            return None
        return self.outputs[0] if len(self.outputs) == 1 else list(self.outputs)


class CallChecker:
    """Checks calls of one built kernel against its artifact (see the module docstring).

    :param artifact: the kernel artifact the build hook received.
    :param out_idx: the normalised output indices from ``BuildOptions.out_idx``.
    """

    def __init__(self, artifact: KernelArtifact, out_idx: Sequence[int] = ()) -> None:
        import torch

        self._torch = torch
        self.name = artifact.name
        self.params = list(artifact.params)
        self.out_idx = sorted(set(out_idx))
        self.inputs = [i for i in range(len(self.params)) if i not in self.out_idx]
        self.names = ", ".join(self.params[i].name for i in self.inputs)
        self._position = {p: pos for pos, p in enumerate(self.inputs)}
        self._symbol_of_scalar = {s.param_index: s.name for s in artifact.symbols if s.dim is None}
        symbols = set(artifact.symbol_names())
        self._deferred: list[tuple[int, str, int, Any, str]] = []  # (param, what, dim, fn, text)
        for index, p in enumerate(self.params):
            if not isinstance(p, TensorParam):
                continue
            for d, dim in enumerate(p.shape):
                if isinstance(dim, str) and dim not in symbols:
                    self._deferred.append((index, "shape", d, compile_expr(dim), dim))
            if p.strides is not None:
                self._deferred.append((index, "strides", 0, [compile_expr(s) for s in p.strides], ""))
        self._dtype = {i: getattr(torch, p.dtype, None) for i, p in enumerate(self.params) if isinstance(p, TensorParam)}
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

    def _tensor(self, index: int, x: Any, symbols: dict, source: dict, device: list) -> None:
        torch, p, pre = self._torch, self.params[index], self._prefix(index)
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{pre}: expected a torch.Tensor, got {type_name(x)}")
        if x.layout != torch.strided:
            raise ValueError(f"{pre}: expected a dense (strided) tensor, got layout {x.layout}; call .to_dense()")
        if x.device.type == "meta":
            raise ValueError(f"{pre}: expected a tensor on {p.device}, got meta")
        if x.dtype != self._dtype[index]:
            raise ValueError(f"{pre}: expected dtype {p.dtype}, got {str(x.dtype).replace('torch.', '')}")
        if x.dim() != len(p.shape):
            raise ValueError(f"{pre}: expected {len(p.shape)} dimensions, got {x.dim()}")
        for d, (want, got) in enumerate(zip(p.shape, x.shape)):
            if isinstance(want, int):
                if got != want:
                    raise ValueError(f"{pre}: expected shape[{d}] == {want}, got {got}")
            elif want.isidentifier():
                self._bind(index, f"shape[{d}]", want, got, symbols, source)
        limit = self._limit.get(index)
        if limit is not None:  # elements (compact) or largest offset + 1 (declared strides)
            reach = x.numel() if p.strides is None else element_reach(x)
            if reach > limit:
                raise ValueError(f"{pre}: {reach} elements ({dynamic_dims(p.shape, x.shape)}) exceed this kernel's "
                                 f"32-bit index limit of {limit}; {WIDE_INDEX_HINT}")
        where = str(x.device)
        if x.device.type != TORCH_DEVICE.get(p.device, p.device):
            raise ValueError(f"{pre}: expected a tensor on {p.device}, got {where}")
        if device and where != device[0]:
            raise ValueError(f"{pre}: expected a tensor on {device[0]}, got {where}")
        device.append(where)
        if p.strides is None and not x.is_contiguous():
            raise ValueError(f"{pre}: expected a contiguous tensor, got strides {tuple(x.stride())}; call .contiguous()")
        if x.is_conj() or x.is_neg():
            view, fix = ("conjugate", "resolve_conj") if x.is_conj() else ("negative", "resolve_neg")
            raise ValueError(f"{pre}: expected a tensor with its data materialized, got a lazy {view} view; call .{fix}()")

    def _scalar(self, index: int, x: Any, symbols: dict, source: dict) -> Any:
        p, pre = self.params[index], self._prefix(index)
        kind = scalar_kind(p.dtype)
        if isinstance(x, self._torch.Tensor):
            raise TypeError(f"{pre}: expected {'a float' if kind == 'float' else 'an int' if kind == 'int' else 'a bool'}, "
                            f"got Tensor")
        if kind == "float":
            if isinstance(x, (str, bytes)) or not hasattr(type(x), "__float__") and not hasattr(type(x), "__index__"):
                raise TypeError(f"{pre}: expected a float, got {type_name(x)}")
            try:
                return float(x)
            except OverflowError:
                raise ValueError(f"{pre}: expected a float, got {type_name(x)} out of range") from None
        if isinstance(x, float) or not hasattr(type(x), "__index__"):
            raise TypeError(f"{pre}: expected {'a bool' if kind == 'bool' else 'an int'}, got {type_name(x)}")
        value = operator.index(x)
        if kind == "bool":
            if value not in (0, 1):
                raise ValueError(f"{pre}: expected a bool (True/False, 0 or 1), got {value}")
            return bool(value)
        low, high = INT_RANGES.get(p.dtype, INT_RANGES["int64"])
        if not low <= value <= high:
            raise ValueError(f"{pre}: value {x!r} does not fit in {p.dtype}")
        symbol = self._symbol_of_scalar.get(index)
        if symbol is not None:
            if value < 0:
                raise ValueError(f"{pre}: gives symbol '{symbol}' = {value}, but a dimension cannot be negative")
            self._bind(index, "value", symbol, value, symbols, source)
        return value

    # -- the call -------------------------------------------------------------------------------

    def bind(self, args: Sequence[Any], kwargs: dict[str, Any]) -> BoundCall:
        """Check one call (positional ``args``, keyword ``kwargs``); allocate the outputs.

        :raises TypeError, ValueError: with the texts of docs/backend-conventions.md.
        """
        stream = None
        for key, value in kwargs.items():
            if key != "stream":
                raise TypeError(f"{self.name}() got an unexpected keyword argument '{key}' (only 'stream' is accepted)")
            stream = stream_handle(self.name, value)
        if len(args) != len(self.inputs):
            raise TypeError(f"{self.name}() takes {len(self.inputs)} tensor/scalar arguments ({self.names}), got {len(args)}")
        values: list[Any] = [None] * len(self.params)
        symbols: dict[str, int] = {}
        source: dict[str, int] = {}
        device: list[str] = []
        for index, x in zip(self.inputs, args):
            if isinstance(self.params[index], TensorParam):
                self._tensor(index, x, symbols, source, device)
                values[index] = x
            else:
                values[index] = self._scalar(index, x, symbols, source)
        if self._overlap_pairs:
            self._check_overlap(values)
        self._check_deferred(values, symbols)
        outputs = [self._allocate(index, symbols, device) for index in self.out_idx]
        for index, out in zip(self.out_idx, outputs):
            values[index] = out
        return BoundCall(self.name, values, symbols, outputs, stream)

    def _check_overlap(self, values: list[Any]) -> None:
        """Refuse a call in which a tensor the kernel writes shares a byte with another tensor
        argument: the first such pair in call order (tensors without elements overlap nothing).
        Runs after every argument was checked, so compact parameters hold contiguous tensors."""
        ranges = {}
        for i, compact in self._overlap_tensors:
            x = values[i]
            ranges[i] = (x.data_ptr(), x.nbytes) if compact else byte_range(x)
        for a, b in self._overlap_pairs:
            (lo_a, n_a), (lo_b, n_b) = ranges[a], ranges[b]
            if n_a and n_b and lo_a < lo_b + n_b and lo_b < lo_a + n_a:
                pa, pb = self.params[a], self.params[b]
                raise ValueError(
                    f"{self.name}() arguments '{pa.name}' (#{self._position[a]}) and '{pb.name}' "
                    f"(#{self._position[b]}) overlap in memory, and the kernel writes "
                    f"'{pa.name if pa.written else pb.name}'; pass tensors that do not share memory (for example a .clone())"
                )

    def _check_deferred(self, values: list[Any], symbols: dict[str, int]) -> None:
        for index, what, d, fn, text in self._deferred:
            x = values[index]
            if x is None:  # an output, allocated below with the right shape
                continue
            pre = self._prefix(index)
            if what == "shape":
                want = fn(symbols)
                if x.shape[d] != want:
                    raise ValueError(f"{pre}: expected shape[{d}] == {text} = {want}, got {x.shape[d]}")
            else:
                want_strides = tuple(f(symbols) for f in fn)
                got = tuple(x.stride())
                if any(w != g and size != 1 for w, g, size in zip(want_strides, got, x.shape)):
                    raise ValueError(f"{pre}: expected strides {want_strides}, got strides {got}")

    def _allocate(self, index: int, symbols: dict[str, int], device: list[str]) -> Any:
        p = self.params[index]
        shape = [d if isinstance(d, int) else compile_expr(d)(symbols) for d in p.shape]
        if any(s < 0 for s in shape):
            raise ValueError(f"{self.name}(): output '{p.name}' would have shape {shape} for these inputs")
        limit = self._limit.get(index)
        if limit is not None:  # before allocating: the output would be too large for 32-bit indices
            total = 1
            for n in shape:
                total *= n
            if total > limit:
                raise ValueError(f"{self.name}(): output '{p.name}' would have {total} elements "
                                 f"({dynamic_dims(p.shape, shape)}), over this kernel's 32-bit index limit of "
                                 f"{limit}; {WIDE_INDEX_HINT}")
        where = device[0] if device else TORCH_DEVICE.get(p.device, p.device)
        if p.strides is None:
            return self._torch.empty(shape, dtype=self._dtype[index], device=where)
        strides = [s if isinstance(s, int) else compile_expr(s)(symbols) for s in p.strides]
        return self._torch.empty_strided(shape, strides, dtype=self._dtype[index], device=where)


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
