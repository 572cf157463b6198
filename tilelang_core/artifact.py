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

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

#: Version of the artifact's JSON layout; bumped on incompatible changes.
ARTIFACT_FORMAT_VERSION = 1

Dim = Union[int, str]

_STRICT = ConfigDict(extra="forbid")


class TensorParam(BaseModel):
    """A tensor parameter of the kernel."""

    model_config = _STRICT

    kind: Literal["tensor"] = "tensor"
    name: str
    dtype: str = Field(description="TVM dtype string, e.g. 'float32', 'float16', 'int32'.")
    shape: list[Dim] = Field(description="Per dimension: an int, or an expression over symbols.")
    strides: Optional[list[Dim]] = Field(
        default=None, description="Required strides in elements; None means compact row-major."
    )
    device: str = Field(description="'cpu', 'cuda', 'metal', ... (DLPack device family).")


class ScalarParam(BaseModel):
    """A scalar parameter of the kernel (passed as a Python int/float/bool)."""

    model_config = _STRICT

    kind: Literal["scalar"] = "scalar"
    name: str
    dtype: str


Param = Annotated[Union[TensorParam, ScalarParam], Field(discriminator="kind")]


class SymbolBinding(BaseModel):
    """Where the value of a dynamic symbol comes from at call time."""

    model_config = _STRICT

    name: str
    param_index: int = Field(ge=0, description="Index into KernelArtifact.params.")
    dim: Optional[int] = Field(
        default=None, description="Dimension of that tensor parameter; None for a scalar parameter."
    )


class KernelArg(BaseModel):
    """One argument of a device kernel (or of the CPU entry function), in call order."""

    model_config = _STRICT

    name: str
    kind: Literal["pointer", "scalar"]
    dtype: str = Field(description="Element dtype for pointers, value dtype for scalars.")
    param_index: Optional[int] = Field(
        default=None, description="Kernel parameter it comes from (data pointer or scalar value)."
    )
    symbol: Optional[str] = Field(default=None, description="Dynamic symbol whose value is passed.")


class LaunchConfig(BaseModel):
    """Launch configuration of a GPU kernel, as expressions over the symbols."""

    model_config = _STRICT

    grid: list[Dim] = Field(min_length=3, max_length=3)
    block: list[Dim] = Field(min_length=3, max_length=3)
    dynamic_shared_memory: Dim = 0


class DeviceKernel(BaseModel):
    """A function of the generated device source that a backend calls or launches."""

    model_config = _STRICT

    name: str = Field(description="Symbol name in the device source.")
    args: list[KernelArg]
    launch: Optional[LaunchConfig] = Field(default=None, description="None for CPU entry functions.")
    return_type: Optional[str] = Field(default=None, description="C return type of a CPU entry, e.g. 'int32'.")


class KernelArtifact(BaseModel):
    """A lowered kernel, ready for an execution backend's build hook."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    format_version: int = ARTIFACT_FORMAT_VERSION
    name: str
    target: str = Field(description="Full TVM target string, e.g. 'cuda -arch=sm_90'.")
    target_kind: str
    host_target: Optional[str] = None
    params: list[Param]
    symbols: list[SymbolBinding] = Field(default_factory=list)
    device_kernels: list[DeviceKernel] = Field(default_factory=list)
    device_source: Optional[str] = None
    device_language: Optional[str] = None
    host_source: Optional[str] = None
    pass_configs: dict[str, Any] = Field(default_factory=dict)
    source_location: Optional[str] = Field(default=None, description="'file:line' of the kernel definition.")

    _tvm_modules: Any = PrivateAttr(default=None)

    @property
    def tvm_modules(self) -> Any:
        """TVM module objects for backends that consume ``runtime_module`` (None after JSON load)."""
        return self._tvm_modules

    def with_tvm_modules(self, modules: Any) -> "KernelArtifact":
        """Attach TVM objects (not serialised) and return self."""
        self._tvm_modules = modules
        return self

    @property
    def tensor_params(self) -> list[tuple[int, TensorParam]]:
        """(index, param) for every tensor parameter."""
        return [(i, p) for i, p in enumerate(self.params) if isinstance(p, TensorParam)]

    def symbol_names(self) -> list[str]:
        return [s.name for s in self.symbols]

    def to_json(self) -> str:
        """Serialise everything but the TVM objects."""
        return self.model_dump_json(indent=1)

    @classmethod
    def from_json(cls, text: str) -> "KernelArtifact":
        """Inverse of :meth:`to_json`; raises :class:`~tilelang_core.errors.ArtifactError`."""
        from pydantic import ValidationError

        from .errors import ArtifactError

        try:
            artifact = cls.model_validate_json(text)
        except ValidationError as exc:
            raise ArtifactError(f"invalid kernel artifact JSON: {exc}") from None
        if artifact.format_version != ARTIFACT_FORMAT_VERSION:
            raise ArtifactError(
                f"kernel artifact format {artifact.format_version} is not supported by this core "
                f"(expects {ARTIFACT_FORMAT_VERSION}); recompile the kernel"
            )
        return artifact


class BuildOptions(BaseModel):
    """Options the core passes to a backend's build hook along with the artifact."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    out_idx: list[int] = Field(default_factory=list, description="Normalised (non-negative) output indices.")
    compile_flags: list[str] = Field(default_factory=list)
    pass_configs: dict[str, Any] = Field(default_factory=dict)
    verbose: bool = False
