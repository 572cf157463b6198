"""The kernel artifact: everything the lowering pipeline hands to an execution backend.

A :class:`KernelArtifact` describes one compiled kernel: its parameters, where each dynamic
symbol is read from, the device kernels with their launch configuration, and the generated
sources. Everything except the TVM objects serialises to JSON and back without loss, so a cached
or exported kernel can be loaded without lowering again and without importing TVM.

Shape entries, strides, grid and block sizes are either ints or *expressions* over symbol names
written in Python syntax (``"n"``, ``"n + 1"``, ``"(n + 127) // 128"``); see
:mod:`tilelang_core.symbolic` for how they are evaluated.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Literal, Optional, Union

from annotated_types import Ge, Len

from . import schema

#: Version of the artifact's JSON layout; bumped on incompatible changes.
ARTIFACT_FORMAT_VERSION = 1

Dim = Union[int, str]

#: pydantic configuration of every dataclass here: unknown fields are errors, and each field's
#: docstring is its description in the JSON schema.
_STRICT = {"extra": "forbid", "use_attribute_docstrings": True}


@dataclass(kw_only=True)
class TensorParam:
    """A tensor parameter of the kernel."""

    __pydantic_config__ = _STRICT

    kind: Literal["tensor"] = "tensor"
    name: str
    dtype: str
    """TVM dtype string, e.g. 'float32', 'float16', 'int32'."""
    shape: list[Dim]
    """Per dimension: an int, or an expression over symbols."""
    strides: Optional[list[Dim]] = None
    """Required strides in elements; None means compact row-major."""
    device: str
    """'cpu', 'cuda', 'metal', ... (DLPack device family)."""
    written: bool = True
    """Whether the kernel may store into this tensor (found in the TIR by the pipeline; True when
    unknown). Backends refuse a call in which a written tensor overlaps another tensor argument
    (docs/backend-conventions.md)."""
    index_limit: Optional[int] = None
    """Largest number of elements (largest offset + 1) this tensor may have: the generated code
    indexes it with 32-bit integers and its shape is dynamic. Backends refuse larger arguments and
    outputs at call time (docs/backend-conventions.md); None: no limit (a static shape, or 64-bit
    indices)."""


@dataclass(kw_only=True)
class ScalarParam:
    """A scalar parameter of the kernel (passed as a Python int/float/bool)."""

    __pydantic_config__ = _STRICT

    kind: Literal["scalar"] = "scalar"
    name: str
    dtype: str
    pointer: Optional[str] = None
    """Set for a pointer parameter (``a: T.ptr``): the device family ('cpu', 'cuda', ...) of the
    memory its address points into. It is an int64 scalar to backends; callers may also pass a
    torch tensor on that device, whose ``data_ptr()`` the core passes instead
    (:func:`tilelang_core.calling.pointer_arguments`). None: a plain scalar."""


Param = Union[TensorParam, ScalarParam]


@dataclass(kw_only=True)
class SymbolBinding:
    """Where the value of a dynamic symbol comes from at call time."""

    __pydantic_config__ = _STRICT

    name: str
    param_index: Annotated[int, Ge(0)]
    """Index into KernelArtifact.params."""
    dim: Optional[int] = None
    """Dimension of that tensor parameter; None for a scalar parameter."""
    stride: bool = False
    """True: the value is the stride (in elements) of dimension ``dim`` of that tensor, not its
    size (a ``T.StridedTensor`` whose stride is a symbol no size or scalar gives). Only backends
    whose capability declares ``dynamic_strides`` get such kernels. When that dimension has size 1
    in a call, its stride is whatever the tensor says (any value addresses the same elements)."""
    dtype: str = "int64"
    """The symbol's integer dtype (``T.dynamic("n")`` is int32, ``T.dynamic("n", "int64")``
    int64). The generated code holds the symbol in it, so backends refuse a call that binds a
    size or stride outside its range (docs/backend-conventions.md) instead of narrowing it.
    Artifacts written before this field read as int64 (nothing to refuse)."""


@dataclass(kw_only=True)
class KernelArg:
    """One argument of a device kernel (or of the CPU entry function), in call order."""

    __pydantic_config__ = _STRICT

    name: str
    kind: Literal["pointer", "scalar"]
    dtype: str
    """Element dtype for pointers, value dtype for scalars."""
    param_index: Optional[int] = None
    """Kernel parameter it comes from (data pointer or scalar value)."""
    symbol: Optional[str] = None
    """Dynamic symbol whose value is passed."""


@dataclass(kw_only=True)
class LaunchConfig:
    """Launch configuration of a GPU kernel, as expressions over the symbols."""

    __pydantic_config__ = _STRICT

    grid: Annotated[list[Dim], Len(3, 3)]
    block: Annotated[list[Dim], Len(3, 3)]
    dynamic_shared_memory: Dim = 0


@dataclass(kw_only=True)
class ScalarSlot:
    """Where one scalar argument of a device kernel lies in its packed scalar struct."""

    __pydantic_config__ = _STRICT

    arg: Annotated[int, Ge(0)]
    """Index into DeviceKernel.args of the 'scalar' argument stored here."""
    field: str
    """Member name in the source's struct (the argument's name)."""
    offset: Annotated[int, Ge(0)]
    """Byte offset of the value from the start of the struct."""
    dtype: str
    """How the value is stored at ``offset``, little-endian: 'int8' .. 'uint64', 'float16' (IEEE
    half), 'bfloat16' (the upper 16 bits of a float32), 'float32', 'bool' (one byte, 0 or 1)."""
    size: Annotated[int, Ge(1)]
    """Bytes the slot occupies (the value's bytes plus padding up to the next slot)."""


@dataclass(kw_only=True)
class ScalarStruct:
    """How a device kernel takes its scalar arguments packed into one constant struct.

    Metal kernels from TVM bind the pointer arguments to ``[[buffer(0)]] .. [[buffer(p-1)]]`` in
    ``DeviceKernel.args`` order and every scalar argument (dynamic sizes included) to one
    ``constant <type_name>& arg [[buffer(p)]]``; this is that struct's layout, read from the
    generated source, so a backend packs the bytes from data.
    """

    __pydantic_config__ = _STRICT

    type_name: str
    """The struct's name in the device source, e.g. 'main_kernel_args_t'."""
    binding: Annotated[int, Ge(0)]
    """The buffer index the struct is bound to (the number of pointer arguments)."""
    size: Annotated[int, Ge(0)]
    """Bytes of the whole struct (what the backend passes)."""
    slots: list[ScalarSlot]
    """One per scalar argument, in struct order (which is DeviceKernel.args order)."""


@dataclass(kw_only=True)
class DeviceKernel:
    """A function of the generated device source that a backend calls or launches."""

    __pydantic_config__ = _STRICT

    name: str
    """Symbol name in the device source."""
    args: list[KernelArg]
    launch: Optional[LaunchConfig] = None
    """None for CPU entry functions."""
    return_type: Optional[str] = None
    """C return type of a CPU entry, e.g. 'int32'."""
    scalar_struct: Optional[ScalarStruct] = None
    """How the kernel takes its scalar arguments when they are packed into one struct (Metal);
    None: each scalar argument is passed by value in ``args`` order (C, CUDA)."""
    block_launcher: Optional[str] = None
    """CPU entries with parallel block loops: name of the exported variable (a
    ``tl_block_launcher_fn``, initially null) a backend may set to run those loops on its own
    threads (docs/backend-conventions.md); None when every block loop is serial."""
    assert_message: Optional[str] = None
    """CPU entries of kernels with ``T.device_assert``: name of the exported
    ``const char *f(int32_t status)`` that returns the text of the assertion whose status the
    entry returned (-3 - k for its k-th check, ``calling.assertion_status``; NULL for any other
    status). None: the kernel asserts nothing."""


@dataclass(kw_only=True)
class KernelArtifact:
    """A lowered kernel, ready for an execution backend's build hook.

    A standard dataclass: compare with ``==``, copy with :meth:`replace` (which, unlike
    :func:`dataclasses.replace`, keeps the TVM modules), serialise with :meth:`to_json`. The TVM
    module objects (:attr:`tvm_modules`) are not part of it.
    """

    __pydantic_config__ = _STRICT

    format_version: int = ARTIFACT_FORMAT_VERSION
    name: str
    target: str
    """Full TVM target string, e.g. 'cuda -arch=sm_90'."""
    target_kind: str
    arch: Optional[str] = None
    """GPU architecture the device code is lowered for, as data: 'sm_90' (compute capability
    9.0), 'sm_90a'; None for CPU targets. The target string carries it too, as '-arch='."""
    host_target: Optional[str] = None
    params: list[Param]
    symbols: list[SymbolBinding] = field(default_factory=list)
    device_kernels: list[DeviceKernel] = field(default_factory=list)
    device_source: Optional[str] = None
    device_language: Optional[str] = None
    host_source: Optional[str] = None
    runtime_source: Optional[str] = None
    """Source text of the runtime module the pipeline built (``consumes`` has ``runtime_module``),
    for reading, as TVM generated it: the device code of a GPU module (CUDA C, Metal), the module
    itself for CPU targets (C for ``c``, LLVM IR for ``llvm``); None when no module was made or its
    kind keeps no source. No backend consumes it."""
    pass_configs: dict[str, Any] = field(default_factory=dict)
    source_location: Optional[str] = None
    """'file:line' of the kernel definition."""

    _tvm_modules = None  # not a field: attached by the pipeline, never serialised
    _tvm_ir = None  # not a field: lowered IRModules (device_mod/host_mod), never serialised

    @property
    def tvm_modules(self) -> Any:
        """TVM module objects for backends that consume ``runtime_module`` (None after JSON load)."""
        return self._tvm_modules

    def with_tvm_modules(self, modules: Any) -> "KernelArtifact":
        """Attach TVM objects (not serialised) and return self."""
        self._tvm_modules = modules
        return self

    # TileLang's names for what ``tilelang.lower`` returns (its ``CompiledArtifact``); read-only views
    @property
    def kernel_source(self) -> Optional[str]:
        """TileLang's name of the kernel's generated source: :attr:`device_source`, else
        :attr:`runtime_source` (backends that consume the TVM runtime module)."""
        return self.device_source if self.device_source is not None else self.runtime_source

    @property
    def target_host(self) -> Optional[str]:
        """TileLang's name of :attr:`host_target`."""
        return self.host_target

    @property
    def rt_mod(self) -> Any:
        """TileLang's name of :attr:`tvm_modules` (the runtime module; None unless one was made)."""
        return self._tvm_modules

    @property
    def device_mod(self) -> Any:
        """The lowered device functions as a ``tvm.IRModule`` (None when not kept, e.g. after JSON load)."""
        return (self._tvm_ir or {}).get("device")

    @property
    def host_mod(self) -> Any:
        """The lowered host function as a ``tvm.IRModule`` (GPU targets; None when not kept)."""
        return (self._tvm_ir or {}).get("host")

    def with_tvm_ir(self, **modules: Any) -> "KernelArtifact":
        """Attach lowered ``IRModule`` objects (``device=``, ``host=``; not serialised) and return self."""
        self._tvm_ir = dict(modules)
        return self

    def replace(self, **changes: Any) -> "KernelArtifact":
        """A copy with ``changes`` applied that keeps the attached TVM modules."""
        copy = replace(self, **changes).with_tvm_modules(self._tvm_modules)
        copy._tvm_ir = self._tvm_ir
        return copy

    @property
    def compute_capability(self) -> Optional[tuple[int, int]]:
        """``(major, minor)`` of a CUDA :attr:`arch` (``(9, 0)`` for ``sm_90``), else None."""
        import re

        m = re.match(r"sm_(\d+)", self.arch or "")
        if not m:
            return None
        number = int(m.group(1))
        return number // 10, number % 10

    @property
    def tensor_params(self) -> list[tuple[int, TensorParam]]:
        """(index, param) for every tensor parameter."""
        return [(i, p) for i, p in enumerate(self.params) if isinstance(p, TensorParam)]

    def symbol_names(self) -> list[str]:
        """Names of the dynamic symbols, in binding order."""
        return [s.name for s in self.symbols]

    def to_json(self) -> str:
        """Serialise everything but the TVM objects."""
        return schema.to_json(self, indent=1)

    @classmethod
    def from_json(cls, text: str) -> "KernelArtifact":
        """Inverse of :meth:`to_json`; raises :class:`~tilelang_core.errors.ArtifactError`."""
        from pydantic_core import ValidationError

        from .errors import ArtifactError

        try:
            artifact = schema.validate_json(cls, text)
        except ValidationError as exc:
            raise ArtifactError(f"invalid kernel artifact JSON: {schema.error_summary(exc)}") from None
        if artifact.format_version != ARTIFACT_FORMAT_VERSION:
            raise ArtifactError(
                f"kernel artifact format {artifact.format_version} is not supported by this core "
                f"(expects {ARTIFACT_FORMAT_VERSION}); recompile the kernel"
            )
        return artifact


@dataclass(kw_only=True, frozen=True)
class BuildOptions:
    """Options the core passes to a backend's build hook along with the artifact."""

    __pydantic_config__ = _STRICT

    out_idx: list[int] = field(default_factory=list)
    """Normalised (non-negative) output indices."""
    compile_flags: list[str] = field(default_factory=list)
    pass_configs: dict[str, Any] = field(default_factory=dict)
    verbose: bool = False
