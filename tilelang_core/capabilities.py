"""Capability declarations of execution backends, validated with pydantic.

A backend plugin describes everything it can do in one :class:`BackendSpec`, returned by its
``tilelang_backend_spec`` hook. The core never asks a backend "are you X?": it reads this
declaration to decide what the lowering pipeline must produce, which backend ``auto`` picks,
and which kernels a backend may be handed.

``tilelang backends schema`` prints the JSON schema of :class:`BackendSpec`.
"""

from __future__ import annotations

from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: TVM target kinds a backend may declare (``tvm.target.Target(...).kind.name``), kept here so
#: validating a declaration does not import TVM. ``hip`` is accepted as a synonym of ``rocm``.
KNOWN_TARGET_KINDS: tuple[str, ...] = (
    "c",
    "llvm",
    "cuda",
    "nvptx",
    "rocm",
    "hip",
    "metal",
    "opencl",
    "vulkan",
    "webgpu",
)

#: What a backend may consume from the lowering pipeline.
#: ``device_source``: device code as source text (C for CPU targets, CUDA C, Metal) with plain
#: typed entry points; ``host_source``: generated host-side C source; ``runtime_module``: TVM
#: runtime module objects (host with the packed calling convention plus device modules).
Consumable = Literal["device_source", "host_source", "runtime_module"]

Platform = Literal["linux", "darwin", "win32"]

_STRICT = ConfigDict(extra="forbid", frozen=True)


class Requirements(BaseModel):
    """What must exist on the machine for a backend to work for a target.

    The core checks these itself before calling the plugin's probe hook, so a plugin only has
    to probe what cannot be declared (a live driver, a device).
    """

    model_config = _STRICT

    executables: list[str] = Field(default_factory=list, description="Programs looked up on PATH, e.g. 'nvcc'.")
    shared_libraries: list[str] = Field(
        default_factory=list, description="Library names for ctypes.util.find_library, e.g. 'cuda'."
    )
    python_modules: list[str] = Field(
        default_factory=list, description="Importable modules, checked without importing them."
    )


class NativeCompiler(BaseModel):
    """The native compiler a backend runs for a target.

    The kernel cache puts its identity (resolved path and the output of ``program
    *version_args``) into every cache key, so a kernel built by one compiler is never loaded
    after the compiler changed. Declaring it is optional; without it the cache only hashes the
    resolved paths of ``requires.executables``.
    """

    model_config = _STRICT

    program: str = Field(description="Program run by default, looked up on PATH, e.g. 'cc' or 'nvcc'.")
    env: Optional[str] = Field(
        default=None,
        description="Environment variable that overrides the program when set (shell-split: the first word "
        "is the program, the rest are flags), e.g. 'CC'.",
    )
    version_args: list[str] = Field(
        default_factory=lambda: ["--version"], description="Arguments that make the program print its identity."
    )


class TargetCapability(BaseModel):
    """What a backend does for one TVM target kind."""

    model_config = _STRICT

    priority: int = Field(ge=0, description="Higher wins when execution_backend='auto'.")
    consumes: list[Consumable] = Field(min_length=1, description="What the pipeline must produce.")
    device_language: Optional[Literal["c", "cuda", "metal", "hip", "opencl"]] = Field(
        default=None, description="Language of the device source, when 'device_source' is consumed."
    )
    dynamic_shapes: bool = Field(default=True, description="Accepts kernels with symbolic dimensions.")
    cuda_streams: bool = Field(default=False, description="Launches on a caller-chosen CUDA stream.")
    allocates_outputs: bool = Field(default=True, description="Supports out_idx (allocates outputs).")
    dtypes: Union[Literal["all"], list[str]] = Field(default="all", description="Tensor dtypes accepted.")
    platforms: Union[Literal["all"], list[Platform]] = Field(default="all", description="sys.platform values.")
    requires: Requirements = Field(default_factory=Requirements)
    native_compiler: Optional[NativeCompiler] = Field(
        default=None, description="The native compiler the backend builds with (part of the kernel cache key)."
    )


class Deprecation(BaseModel):
    """Marks a backend as deprecated; it keeps working and warns once per selection."""

    model_config = _STRICT

    since: str = Field(description="Version of the backend's distribution that deprecated it.")
    replacement: Optional[str] = Field(default=None, description="Backend name to use instead.")
    message: str = Field(default="", description="Extra advice shown to users.")


class BackendSpec(BaseModel):
    """The whole capability declaration of one execution backend."""

    model_config = _STRICT

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=64, description="Lowercase identifier.")
    distribution: str = Field(description="The pip distribution that ships it.")
    version: str = Field(description="That distribution's version.")
    plugin_api_version: int = Field(ge=1, description="tilelang_core.PLUGIN_API_VERSION it was written for.")
    description: str = Field(max_length=200, description="One line.")
    targets: dict[str, TargetCapability] = Field(min_length=1)
    deprecated: Optional[Deprecation] = None
    supersedes: list[str] = Field(default_factory=list, description="Retired backend names it replaces.")

    @field_validator("description")
    @classmethod
    def _one_line(cls, value: str) -> str:
        if "\n" in value.strip():
            raise ValueError("description must be one line")
        return value.strip()

    @field_validator("targets")
    @classmethod
    def _known_kinds(cls, value: dict[str, TargetCapability]) -> dict[str, TargetCapability]:
        unknown = sorted(set(value) - set(KNOWN_TARGET_KINDS))
        if unknown:
            raise ValueError(
                f"unknown target kind(s) {unknown}; known TVM target kinds: {', '.join(KNOWN_TARGET_KINDS)}"
            )
        return value

    @field_validator("supersedes")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        import re

        bad = [n for n in value if not re.fullmatch(r"[a-z][a-z0-9_]*", n)]
        if bad:
            raise ValueError(f"supersedes entries must be lowercase identifiers, got {bad}")
        return value


class Availability(BaseModel):
    """Answer of a probe: can this backend work here for a target, and if not, why."""

    model_config = _STRICT

    available: bool
    reason: str = ""

    @classmethod
    def yes(cls) -> "Availability":
        return cls(available=True)

    @classmethod
    def no(cls, reason: str) -> "Availability":
        return cls(available=False, reason=reason)


def backend_spec_json_schema() -> dict:
    """The JSON schema of :class:`BackendSpec` (printed by ``tilelang backends schema``)."""
    return BackendSpec.model_json_schema()
