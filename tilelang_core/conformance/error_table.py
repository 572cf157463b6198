"""The error table of the calling convention: every wrong call, and the exact error it raises.

This list is the one source of truth: ``scripts/gen_docs.py`` writes it into
docs/backend-conventions.md, and the conformance suite (``tilelang backends check``) makes each
row's call on the reference kernel named there, in a subprocess, and compares the exception's
class and text exactly. ``{device}`` in a message stands for the torch device type of the target's
tensors (``cpu``, ``cuda``, ``mps`` for Metal: ``tilelang_core.devices.TORCH_DEVICE_TYPES``).

Importing this module is cheap (no torch); a row's ``call`` receives a :class:`Maker` that
creates the tensors on the target's device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional


class Maker:
    """Makes the arguments of a row's call: tensors on the target's torch device."""

    def __init__(self, torch: Any, device: str) -> None:
        self.torch = torch
        self.device = device

    def t(self, *shape: int, dtype: str = "float32") -> Any:
        """Zeros of ``shape`` and ``dtype`` on the target's device."""
        return self.torch.zeros(*shape, dtype=getattr(self.torch, dtype), device=self.device)


Call = Callable[[Maker], tuple[tuple, dict]]


@dataclass(frozen=True)
class ErrorRow:
    """One row: a wrong call of a reference kernel and the error every backend must raise."""

    id: str
    problem: str
    kernel: str
    """Reference kernel id (:data:`tilelang_core.conformance.kernels.FACTORIES`, or ``status7``)."""
    call_text: str
    call: Call
    error: str
    """``TypeError``, ``ValueError`` or ``RuntimeError``."""
    message: str
    when: Optional[str] = None
    """``None`` (every target), ``"gpu"`` (GPU targets only) or ``"c_source"`` (backends that
    consume ``c`` device source: the row needs a hand-written artifact)."""
    capped: bool = False
    """The call names gigabytes it must not touch: on CPU targets (Linux) the suite makes it with
    the address space capped a little above what the process already uses, so that a backend
    which allocates or reads that much fails the row instead of exhausting the machine."""

    def expected(self, device: str) -> str:
        """The message for a target whose parameters live on ``device``."""
        return self.message.replace("{device}", device)


def _args(*args: Any, **kwargs: Any) -> tuple[tuple, dict]:
    return args, kwargs


#: The 32-bit index limit of a dynamic-shape tensor (``lowering.signature.INDEX_LIMIT_32``,
#: repeated here so that importing the table stays cheap; a test keeps the two equal).
INDEX_LIMIT_32 = 2**31 - 2**20
_WIDE = "compile it with pass_configs={'tl.config_index_bitwidth': 64}"
#: Elements of the index-range rows' input: one past 2**31 (a stride-0 view of one element).
_HUGE = 2**31


def _huge(m: Maker) -> Any:
    """A float32 tensor of :data:`_HUGE` elements that holds 4 bytes (every element is the same one)."""
    return m.t(1).expand(_HUGE)


def _freed(x: Any) -> Any:
    """``x`` with its storage freed: the shape stays, the memory is gone (data pointer NULL)."""
    x.untyped_storage().resize_(0)
    return x


def _without_memory(x: Any) -> Any:
    """A tensor of ``x``'s shape, dtype and device with no memory behind it: a
    ``_make_wrapper_subclass`` tensor (as torch's own wrappers are; a FakeTensor's storage is
    NULL the same way)."""
    import torch

    class Wrapper(torch.Tensor):
        @staticmethod
        def __new__(cls, inner: Any) -> Any:
            return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype, device=inner.device)

        @classmethod
        def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            raise NotImplementedError(f"{func} on a tensor without memory")

    return Wrapper(x)


def _nested(m: Maker) -> Any:
    """Two 16-element rows as one nested tensor on the CPU (torch's older, strided kind, whose
    ``layout`` says strided; the API is a prototype and warns about it when used)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return m.torch.nested.nested_tensor([m.torch.zeros(16), m.torch.zeros(16)])


def _same(m: Maker) -> tuple[tuple, dict]:
    a = m.t(16)
    return _args(a, m.t(16), a)


def _shifted(m: Maker) -> tuple[tuple, dict]:
    buf = m.t(17)
    return _args(buf[0:16], m.t(16), buf[1:17])


def _scalars(m: Maker, **change: Any) -> tuple[tuple, dict]:
    """A call of ``scalars`` (Y is allocated) with one scalar replaced."""
    values = {"i32": 8, "f32": 1.5, "flag": True, "u8": 7, "i64": -5, "u64": 2**64 - 1}
    values.update(change)
    return tuple(values.values()), {}


ROWS: tuple[ErrorRow, ...] = (
    ErrorRow("count", "wrong number of arguments", "vadd", "vadd(A, B)",
             lambda m: _args(m.t(16), m.t(16)),
             "TypeError", "vadd() takes 3 tensor/scalar arguments (A, B, C), got 2"),
    ErrorRow("count_outputs", "outputs allocated by out_idx are not arguments", "vadd_out", "vadd(A, B, C) with out_idx=[2]",
             lambda m: _args(m.t(16), m.t(16), m.t(16)),
             "TypeError", "vadd() takes 2 tensor/scalar arguments (A, B), got 3"),
    ErrorRow("not_a_tensor", "not a tensor", "vadd", "vadd(A, [0.0] * 16, C)",
             lambda m: _args(m.t(16), [0.0] * 16, m.t(16)),
             "TypeError", "vadd() argument 'B' (#1): expected a torch.Tensor, got list"),
    ErrorRow("none_tensor", "None for a tensor", "vadd", "vadd(None, B, C)",
             lambda m: _args(None, m.t(16), m.t(16)),
             "TypeError", "vadd() argument 'A' (#0): expected a torch.Tensor, got NoneType"),
    ErrorRow("dtype", "dtype", "vadd", "vadd(A.half(), B, C)",
             lambda m: _args(m.t(16, dtype="float16"), m.t(16), m.t(16)),
             "ValueError", "vadd() argument 'A' (#0): expected dtype float32, got float16"),
    ErrorRow("rank", "rank", "rows", "rows(X, S[:, None], Y)",
             lambda m: _args(m.t(8, 4), m.t(8, 1), m.t(8, 4)),
             "ValueError", "rows() argument 'S' (#1): expected 1 dimensions, got 2"),
    ErrorRow("static_dimension", "static dimension", "rows", "rows(X of shape (8, 3), S, Y)",
             lambda m: _args(m.t(8, 3), m.t(8), m.t(8, 4)),
             "ValueError", "rows() argument 'X' (#0): expected shape[1] == 4, got 3"),
    ErrorRow("expression_dimension", "dimension given by an expression", "pad", "pad(A of 6, Out of 7)",
             lambda m: _args(m.t(6), m.t(7)),
             "ValueError", "pad() argument 'Out' (#1): expected shape[0] == n + 2 = 8, got 7"),
    ErrorRow("symbol_clash", "two dimensions bind one symbol to different values", "rows", "rows(X (8, 4), S (7,), Y (8, 4))",
             lambda m: _args(m.t(8, 4), m.t(7), m.t(8, 4)),
             "ValueError", "rows() argument 'S' (#1): shape[0] binds symbol 'n' = 7, but argument 'X' bound it to 8"),
    ErrorRow("scalar_symbol_clash", "a scalar and a dimension bind one symbol to different values", "iota", "iota(A of 3, m=50)",
             lambda m: _args(m.t(3, dtype="int32"), 50),
             "ValueError", "iota() argument 'm' (#1): value binds symbol 'm' = 50, but argument 'A' bound it to 3"),
    ErrorRow("negative_size", "a negative size", "iota_out", "iota(-1) with out_idx=[0]",
             lambda m: _args(-1),
             "ValueError", "iota() argument 'm' (#0): gives symbol 'm' = -1, but a dimension cannot be negative"),
    ErrorRow("index_input", "a dynamic-shape input over the 32-bit index limit (checked before the layout)", "vadd_dyn",
             f"vadd_dyn(zeros(1).expand({_HUGE}), B) with out_idx=[2]",
             lambda m: _args(_huge(m), _huge(m)),
             "ValueError", f"vadd_dyn() argument 'A' (#0): {_HUGE} elements ('n' = {_HUGE}) exceed this kernel's "
             f"32-bit index limit of {INDEX_LIMIT_32}; {_WIDE}", capped=True),
    ErrorRow("index_output", "an out_idx output that would be over the 32-bit index limit (refused before allocating)",
             "iota_out", "iota(2**31 - 1) with out_idx=[0]",
             lambda m: _args(2**31 - 1),
             "ValueError", f"iota(): output 'A' would have {2**31 - 1} elements ('m' = {2**31 - 1}), over this kernel's "
             f"32-bit index limit of {INDEX_LIMIT_32}; {_WIDE}", capped=True),
    ErrorRow("symbol_size_range", "a size too large for the int32 symbol it binds (never narrowed; after the "
             "index limit)", "rowstride", f"rowstride(zeros(4).as_strided(({_HUGE}, 4), (0, 1)))",
             lambda m: _args(m.t(4).as_strided((_HUGE, 4), (0, 1))),
             "ValueError", f"rowstride() argument 'X' (#0): shape[0] = {_HUGE} binds symbol 'm', which is int32 "
             f"(at most {_HUGE - 1}); declare it T.dynamic('m', 'int64')", capped=True),
    ErrorRow("symbol_stride_range", "a stride too large for the int32 symbol it binds", "rowstride",
             f"rowstride(zeros(4).as_strided((1, 4), ({_HUGE}, 1)))",
             lambda m: _args(m.t(4).as_strided((1, 4), (_HUGE, 1))),
             "ValueError", f"rowstride() argument 'X' (#0): stride[0] = {_HUGE} binds symbol 's', which is int32 "
             f"(at most {_HUGE - 1}); declare it T.dynamic('s', 'int64')"),
    ErrorRow("meta_tensor", "a meta tensor (no data)", "vadd", "vadd(A, B.to('meta'), C)",
             lambda m: _args(m.t(16), m.torch.empty(16, device="meta"), m.t(16)),
             "ValueError", "vadd() argument 'B' (#1): expected a tensor on {device}, got meta"),
    ErrorRow("device", "a tensor on another device", "vadd", "vadd(A.cpu(), B, C)",
             lambda m: _args(m.torch.zeros(16), m.t(16), m.t(16)),
             "ValueError", "vadd() argument 'A' (#0): expected a tensor on {device}, got cpu", when="gpu"),
    ErrorRow("sparse_tensor", "a sparse tensor", "vadd", "vadd(A.to_sparse(), B, C)",
             lambda m: _args(m.t(16).to_sparse(), m.t(16), m.t(16)),
             "ValueError", "vadd() argument 'A' (#0): expected a dense (strided) tensor, got layout torch.sparse_coo; "
             "call .to_dense()"),
    ErrorRow("nested_tensor", "a nested tensor (made on the CPU: the check comes before the device's)", "vadd",
             "vadd(torch.nested.nested_tensor([zeros(16), zeros(16)]), B, C)",
             lambda m: _args(_nested(m), m.t(16), m.t(16)),
             "ValueError", "vadd() argument 'A' (#0): expected a dense (strided) tensor, got a nested tensor; "
             "pass its components (.unbind()) or .to_padded_tensor(0.0)"),
    ErrorRow("layout", "not contiguous", "vadd", "vadd(zeros(32)[::2], B, C)",
             lambda m: _args(m.t(32)[::2], m.t(16), m.t(16)),
             "ValueError", "vadd() argument 'A' (#0): expected a contiguous tensor, got strides (2,); call .contiguous()"),
    ErrorRow("layout_transposed", "a transposed view", "rows", "rows(zeros(4, 8).t(), S, Y)",
             lambda m: _args(m.t(4, 8).t(), m.t(8), m.t(8, 4)),
             "ValueError", "rows() argument 'X' (#0): expected a contiguous tensor, got strides (1, 8); call .contiguous()"),
    ErrorRow("explicit_strides", "other strides than the parameter declares", "colmajor",
             "colmajor(X of shape (5, 4), row-major) for strides (1, n)",
             lambda m: _args(m.t(5, 4)),
             "ValueError", "colmajor() argument 'X' (#0): expected strides (1, n) = (1, 5), got strides (4, 1)"),
    ErrorRow("negative_view", "a real tensor with torch's lazy negative bit (as `z.conj().imag` has) for declared strides",
             "rowstride", "rowstride(zeros(3, 8)[:, :4]._neg_view())",
             lambda m: _args(m.t(3, 8)[:, :4]._neg_view()),
             "ValueError", "rowstride() argument 'X' (#0): expected a tensor with its data materialized, got a lazy "
             "negative view; call .resolve_neg()"),
    ErrorRow("negative_view_one_element", "a one-element tensor with the lazy negative bit (contiguous)", "vadd_dyn",
             "vadd_dyn(zeros(1)._neg_view(), B) with out_idx=[2]",
             lambda m: _args(m.t(1)._neg_view(), m.t(1)),
             "ValueError", "vadd_dyn() argument 'A' (#0): expected a tensor with its data materialized, got a lazy "
             "negative view; call .resolve_neg()"),
    ErrorRow("negative_view_compact", "a compact tensor of 16 elements with the lazy negative bit "
             "(`._neg_view()`, or `.as_strided()` of `z.conj().imag`)", "vadd_dyn",
             "vadd_dyn(ones(16)._neg_view(), B) with out_idx=[2]",
             lambda m: _args(m.t(16)._neg_view(), m.t(16)),
             "ValueError", "vadd_dyn() argument 'A' (#0): expected a tensor with its data materialized, got a lazy "
             "negative view; call .resolve_neg()"),
    ErrorRow("freed_storage", "a tensor whose storage was freed (as FSDP and activation offloading do)", "vadd",
             "vadd(A with untyped_storage().resize_(0), B, C)",
             lambda m: _args(_freed(m.t(16)), m.t(16), m.t(16)),
             "ValueError", "vadd() argument 'A' (#0): expected a tensor whose storage holds its elements, got one whose "
             "storage holds 0 bytes, fewer than its shape, strides and offset reach (a storage freed or shrunk with "
             "untyped_storage().resize_()); pass a tensor with its data"),
    ErrorRow("no_memory", "a tensor whose storage has no memory (a FakeTensor, a wrapper subclass)", "vadd",
             "vadd(A made by torch.Tensor._make_wrapper_subclass, B, C)",
             lambda m: _args(_without_memory(m.t(16)), m.t(16), m.t(16)),
             "ValueError", "vadd() argument 'A' (#0): expected a tensor with its data in memory, got one whose storage "
             "has no memory (a NULL data pointer, as a FakeTensor or a wrapper subclass has); pass a real tensor "
             "(under torch.compile or torch.export, call the kernel from a torch.library.custom_op with a fake "
             "implementation)"),
    ErrorRow("overlap_same", "a written tensor passed again as another argument", "vadd", "vadd(A, B, A)",
             _same,
             "ValueError", "vadd() arguments 'A' (#0) and 'C' (#2) overlap in memory, and the kernel writes 'C'; "
             "pass tensors that do not share memory (for example a .clone())"),
    ErrorRow("overlap_shifted", "a written view sharing bytes with another argument", "vadd",
             "vadd(buf[0:16], B, buf[1:17])",
             _shifted,
             "ValueError", "vadd() arguments 'A' (#0) and 'C' (#2) overlap in memory, and the kernel writes 'C'; "
             "pass tensors that do not share memory (for example a .clone())"),
    ErrorRow("int_type", "an int scalar given a str", "scalars", "scalars(i32='8', ...)",
             lambda m: _scalars(m, i32="8"),
             "TypeError", "scalars() argument 'i32' (#0): expected an int, got str"),
    ErrorRow("int_from_float", "an int scalar given a float", "scalars", "scalars(i32=8.0, ...)",
             lambda m: _scalars(m, i32=8.0),
             "TypeError", "scalars() argument 'i32' (#0): expected an int, got float"),
    ErrorRow("int_from_tensor", "an int scalar given a tensor", "scalars", "scalars(i32=torch.tensor(8), ...)",
             lambda m: _scalars(m, i32=m.torch.tensor(8)),
             "TypeError", "scalars() argument 'i32' (#0): expected an int, got Tensor"),
    ErrorRow("int32_range", "out of range (int32)", "scalars", "scalars(i32=2**32, ...)",
             lambda m: _scalars(m, i32=2**32),
             "ValueError", "scalars() argument 'i32' (#0): value 4294967296 does not fit in int32"),
    ErrorRow("int64_range", "out of range (int64)", "scalars", "scalars(i64=2**63, ...)",
             lambda m: _scalars(m, i64=2**63),
             "ValueError", "scalars() argument 'i64' (#4): value 9223372036854775808 does not fit in int64"),
    ErrorRow("uint64_range", "out of range (uint64)", "scalars", "scalars(u64=2**64, ...)",
             lambda m: _scalars(m, u64=2**64),
             "ValueError", "scalars() argument 'u64' (#5): value 18446744073709551616 does not fit in uint64"),
    ErrorRow("unsigned_negative", "a negative value for an unsigned scalar", "scalars", "scalars(u8=-1, ...)",
             lambda m: _scalars(m, u8=-1),
             "ValueError", "scalars() argument 'u8' (#3): value -1 does not fit in uint8"),
    ErrorRow("float_type", "a float scalar given a str", "scalars", "scalars(f32='1', ...)",
             lambda m: _scalars(m, f32="1"),
             "TypeError", "scalars() argument 'f32' (#1): expected a float, got str"),
    ErrorRow("float_none", "a float scalar given None", "scalars", "scalars(f32=None, ...)",
             lambda m: _scalars(m, f32=None),
             "TypeError", "scalars() argument 'f32' (#1): expected a float, got NoneType"),
    ErrorRow("float_range", "a float scalar given an int too large for a double", "scalars", "scalars(f32=10**400, ...)",
             lambda m: _scalars(m, f32=10**400),
             "ValueError", "scalars() argument 'f32' (#1): expected a float, got int out of range"),
    ErrorRow("bool_type", "a bool scalar given a str", "scalars", "scalars(flag='no', ...)",
             lambda m: _scalars(m, flag="no"),
             "TypeError", "scalars() argument 'flag' (#2): expected a bool, got str"),
    ErrorRow("bool_from_float", "a bool scalar given a float", "scalars", "scalars(flag=1.0, ...)",
             lambda m: _scalars(m, flag=1.0),
             "TypeError", "scalars() argument 'flag' (#2): expected a bool, got float"),
    ErrorRow("bool_value", "a bool scalar given another int", "scalars", "scalars(flag=2, ...)",
             lambda m: _scalars(m, flag=2),
             "ValueError", "scalars() argument 'flag' (#2): expected a bool (True/False, 0 or 1), got 2"),
    ErrorRow("unknown_keyword", "an unknown keyword", "vadd", "vadd(A, B, C, out=C)",
             lambda m: ((m.t(16), m.t(16), m.t(16)), {"out": m.t(16)}),
             "TypeError", "vadd() got an unexpected keyword argument 'out' (only 'stream' is accepted)"),
    ErrorRow("stream_type", "a stream that is not a stream", "vadd", "vadd(A, B, C, stream='s')",
             lambda m: ((m.t(16), m.t(16), m.t(16)), {"stream": "s"}),
             "TypeError", "vadd() keyword 'stream': expected an int (a cudaStream_t) or a torch.cuda.Stream, got str"),
    ErrorRow("stream_bool", "a bool as the stream", "vadd", "vadd(A, B, C, stream=True)",
             lambda m: ((m.t(16), m.t(16), m.t(16)), {"stream": True}),
             "TypeError", "vadd() keyword 'stream': expected an int (a cudaStream_t) or a torch.cuda.Stream, got bool"),
    ErrorRow("stream_range", "a stream handle wider than 64 bits", "vadd", "vadd(A, B, C, stream=2**70)",
             lambda m: ((m.t(16), m.t(16), m.t(16)), {"stream": 2**70}),
             "ValueError", "vadd() keyword 'stream': expected a cudaStream_t handle of 64 bits, got "
             "1180591620717411303424"),
    ErrorRow("kernel_status", "the kernel returns a non-zero status", "status7", "status7(A), whose C entry returns 7",
             lambda m: _args(m.t(4)),
             "RuntimeError", "status7() failed: the kernel returned error code 7", when="c_source"),
)


def rows_for(gpu: bool, c_source: bool) -> list[ErrorRow]:
    """The rows that apply to a target: GPU rows only on GPU targets, ``c_source`` rows only for
    backends that consume ``c`` device source."""
    return [r for r in ROWS if r.when is None or (r.when == "gpu" and gpu) or (r.when == "c_source" and c_source)]


def markdown() -> str:
    """The table as Markdown (docs/backend-conventions.md embeds it; scripts/gen_docs.py writes it)."""
    when = {"gpu": " (GPU targets)", "c_source": " (backends consuming `c` device source)"}
    lines = ["| problem | the kit's call | raises |", "| --- | --- | --- |"]
    for r in ROWS:
        message = r.message.replace("|", "\\|")
        lines.append(f"| {r.problem}{when.get(r.when or '', '')} | `{r.call_text}` | `{r.error}`: `{message}` |")
    return "\n".join(lines)
