"""Capability declarations of execution backends, validated with pydantic (see :mod:`tilelang_core.schema`).

A backend plugin describes everything it can do in one :class:`BackendSpec`, returned by its
``tilelang_backend_spec`` hook. The core never asks a backend "are you X?": it reads this
declaration to decide what the lowering pipeline must produce, which backend ``auto`` picks,
and which kernels a backend may be handed.

``tilelang backends schema`` prints the JSON schema of :class:`BackendSpec`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Annotated, Literal, Optional, Union

from annotated_types import Ge, MaxLen, MinLen

from .dtype_names import SCALAR_DTYPES, is_canonical_dtype

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

#: pydantic configuration of every declaration class: unknown fields are errors, and each
#: field's docstring is its description in the JSON schema.
_STRICT = {"extra": "forbid", "use_attribute_docstrings": True}

_IDENTIFIER = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(kw_only=True, frozen=True)
class Requirements:
    """What must exist on the machine for a backend to work for a target.

    The core checks these itself before calling the plugin's probe hook, so a plugin only has
    to probe what cannot be declared (a live driver, a device).
    """

    __pydantic_config__ = _STRICT

    executables: list[str] = field(default_factory=list)
    """Programs looked up on PATH, e.g. 'nvcc'."""
    shared_libraries: list[str] = field(default_factory=list)
    """Library names for ctypes.util.find_library, e.g. 'cuda'."""
    python_modules: list[str] = field(default_factory=list)
    """Importable modules, checked without importing them."""


def _version_flag() -> list[str]:
    return ["--version"]


@dataclass(kw_only=True, frozen=True)
class NativeCompiler:
    """The native compiler a backend runs for a target.

    The kernel cache puts its identity (resolved path and the output of ``program
    *version_args``) into every cache key, so a kernel built by one compiler is never loaded
    after the compiler changed. Declaring it is optional; without it the cache only hashes the
    resolved paths of ``requires.executables``.
    """

    __pydantic_config__ = _STRICT

    program: str
    """Program run by default, looked up on PATH, e.g. 'cc' or 'nvcc'."""
    env: Optional[str] = None
    """Environment variable that overrides the program when set (shell-split: program, then flags), e.g. 'CC'."""
    version_args: list[str] = field(default_factory=_version_flag)
    """Arguments that make the program print its identity."""


@dataclass(kw_only=True, frozen=True)
class LibraryToolchain:
    """A compiler the backend runs as a library inside the process (NVRTC, a JIT), not a program.

    The kernel cache puts its identity into every cache key, like a :class:`NativeCompiler`'s:
    the installed versions of ``distributions``, the values of ``env`` and the contents of
    ``files`` (after ``$VAR`` expansion; a missing file counts as missing). Nothing is imported
    or run, so a key costs no library load. The target architecture is already part of the key
    (the target string carries ``-arch``).
    """

    __pydantic_config__ = _STRICT

    name: str
    """Human name, e.g. 'NVRTC'."""
    distributions: list[str] = field(default_factory=list)
    """pip distributions that ship the library or its headers, e.g. 'nvidia-cuda-nvrtc'."""
    env: list[str] = field(default_factory=list)
    """Environment variables that change which library is found, e.g. 'CUDA_HOME'."""
    files: list[str] = field(default_factory=list)
    """Small files that identify a library found outside pip, e.g. '$CUDA_HOME/version.json'."""


@dataclass(kw_only=True, frozen=True)
class TargetCapability:
    """What a backend does for one TVM target kind."""

    __pydantic_config__ = _STRICT

    priority: Annotated[int, Ge(0)]
    """Higher wins when execution_backend='auto'."""
    consumes: Annotated[list[Consumable], MinLen(1)]
    """What the pipeline must produce."""
    device_language: Optional[Literal["c", "cuda", "metal", "hip", "opencl"]] = None
    """Language of the device source, when 'device_source' is consumed."""
    dynamic_shapes: bool = True
    """Accepts kernels with symbolic dimensions."""
    dynamic_strides: bool = False
    """Binds symbols from tensor strides (``SymbolBinding.stride``): accepts kernels with a ``T.StridedTensor`` whose stride is a symbol that no size or scalar parameter gives; tilelang.compile refuses them (BackendCapabilityError) for a backend that does not declare it."""
    cuda_streams: bool = False
    """Launches on a caller-chosen CUDA stream (stream=), else on torch's current stream; all device kernels of a call in list order on that one stream."""
    allocates_outputs: bool = True
    """Supports out_idx (allocates outputs)."""
    dtypes: Union[Literal["all"], list[str]] = "all"
    """Tensor and scalar dtypes accepted, by TVM's names ('float32', 'bfloat16', 'float16x2'; another name makes the declaration invalid); tilelang.compile refuses a parameter of another dtype (BackendCapabilityError), before lowering when the kernel declares it."""
    platforms: Union[Literal["all"], list[Platform]] = "all"
    """sys.platform values."""
    build_platforms: Union[Literal["all"], list[Platform], None] = None
    """sys.platform values where kernels can be built (and exported) although they run only on ``platforms``; None: the same as ``platforms``. There the probe still runs, and the answer is at most *build only*."""
    compiles_at_load: bool = False
    """Saved kernels hold source and a launch plan, not a binary: every process that loads one (a disk cache hit, tilelang.load) compiles it again, e.g. a shader the OS compiles at run time. The cache records this in each entry and ``tilelang cache info`` shows it."""
    requires: Requirements = field(default_factory=Requirements)
    native_compiler: Optional[NativeCompiler] = None
    """The native compiler the backend builds with (part of the kernel cache key)."""
    library_toolchain: Optional[LibraryToolchain] = None
    """The in-process compiler library the backend builds with (part of the kernel cache key)."""
    loads_without_tvm: bool = False
    """Loading a saved kernel (a disk cache hit, tilelang.load) imports no TVM Python package (the conformance suite checks it)."""

    def __post_init__(self) -> None:
        _check_platforms(self)
        _check_requirements(self.requires)
        if self.dtypes != "all":
            unknown = [d for d in self.dtypes if not is_canonical_dtype(d)]
            if unknown:
                raise ValueError(
                    f"field 'dtypes': unknown dtype name(s) {unknown}; use TVM's names "
                    f"({', '.join(SCALAR_DTYPES[:14])}, ..., or a vector form such as 'float16x2'), or 'all'"
                )


def _check_platforms(cap: "TargetCapability") -> None:
    """Refuse an empty list of platforms.

    Before, ``"platforms": []`` was accepted and the target was listed as "unavailable:  only
    (this is linux)" everywhere; now the declaration is refused, naming the field. (An empty
    ``build_platforms`` likewise: None means "the same as platforms".)
    """
    for name in ("platforms", "build_platforms"):
        value = getattr(cap, name)
        if isinstance(value, list) and not value:
            raise ValueError(f"field '{name}': must list at least one platform (linux, darwin, win32), or be 'all'")


def _check_requirements(requires: Requirements) -> None:
    """Refuse an empty name among the requirements (checked from :class:`TargetCapability`,
    whose ``__post_init__`` the snapshotted schema already runs).

    Before, ``"executables": [""]`` was accepted and every probe said "unavailable:  not found on
    PATH" (a requirement that can never be met); now the declaration is refused, naming the field.
    """
    for name in ("executables", "shared_libraries", "python_modules"):
        blank = [entry for entry in getattr(requires, name) if not entry.strip()]
        if blank:
            raise ValueError(f"field 'requires.{name}': entries must be non-empty names, got {blank}")


def check_integer_types(data: object) -> None:
    """Refuse a boolean ``targets.<kind>.priority``, and a ``plugin_api_version`` that is not an
    integer, in a raw declaration, before validation.

    Before, ``"priority": True`` was accepted as priority 1, and ``"plugin_api_version": True``
    or ``"1"`` as version 1 (pydantic takes a bool or a numeric string for an int in lax mode, and
    the value is already 1 when ``__post_init__`` runs); now each is an error naming the field.
    The check looks at the raw data so the snapshotted core schema stays as it is.
    """
    version = data.get("plugin_api_version") if isinstance(data, dict) else None
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise ValueError(f"field 'plugin_api_version': must be an integer >= 1 (tilelang_core.PLUGIN_API_VERSION), "
                         f"got {type(version).__name__} {version!r}")
    targets = data.get("targets") if isinstance(data, dict) else None
    if not isinstance(targets, dict):
        return
    for kind, cap in targets.items():
        priority = cap.get("priority") if isinstance(cap, dict) else None
        if isinstance(priority, bool):
            raise ValueError(f"field 'targets.{kind}.priority': must be an integer >= 0, got the boolean {priority}")


@dataclass(kw_only=True, frozen=True)
class Deprecation:
    """Marks a backend as deprecated; it keeps working and warns once per selection."""

    __pydantic_config__ = _STRICT

    since: str
    """Version of the backend's distribution that deprecated it."""
    replacement: Optional[str] = None
    """Backend name to use instead."""
    message: str = ""
    """Extra advice shown to users."""


@dataclass(kw_only=True, frozen=True)
class BackendSpec:
    """The whole capability declaration of one execution backend."""

    # Checks that annotations cannot express are in __post_init__, which runs on construction
    # and after pydantic validated a declaration.
    __pydantic_config__ = _STRICT

    name: Annotated[str, MaxLen(64)]
    """Lowercase identifier: a letter, then letters, digits or underscores."""
    distribution: str
    """The pip distribution that ships it."""
    version: str
    """That distribution's version."""
    plugin_api_version: Annotated[int, Ge(1)]
    """tilelang_core.PLUGIN_API_VERSION it was written for."""
    description: Annotated[str, MaxLen(200)]
    """One line."""
    targets: Annotated[dict[str, TargetCapability], MinLen(1)]
    deprecated: Optional[Deprecation] = None
    supersedes: list[str] = field(default_factory=list)
    """Retired backend names it replaces."""

    def __post_init__(self) -> None:
        if not _IDENTIFIER.fullmatch(self.name):
            raise ValueError(
                f"field 'name': must be a lowercase identifier (a letter, then letters, digits or underscores), "
                f"got {self.name!r}"
            )
        if "\n" in self.description.strip():
            raise ValueError(f"field 'description': must be one line, got {self.description!r}")
        object.__setattr__(self, "description", self.description.strip())
        unknown = sorted(set(self.targets) - set(KNOWN_TARGET_KINDS))
        if unknown:
            raise ValueError(
                f"field 'targets': unknown target kind(s) {unknown}; known TVM target kinds: "
                f"{', '.join(KNOWN_TARGET_KINDS)}"
            )
        bad = [n for n in self.supersedes if not _IDENTIFIER.fullmatch(n)]
        if bad:
            raise ValueError(f"field 'supersedes': entries must be lowercase identifiers, got {bad}")
        if self.name in self.supersedes:  # before: accepted, a backend "replacing" itself
            raise ValueError(f"field 'supersedes': lists the backend's own name {self.name!r}; list only retired names")


@dataclass(kw_only=True, frozen=True)
class Availability:
    """Answer of a probe: can this backend run kernels here for a target, can it at least build
    them, and if not, why.

    Three answers: *available* (build and run), *build only* (``available`` false, ``can_build``
    true: a compiler is here but no driver or device, as on a CI machine without a GPU) and *not
    available*. ``auto`` picks only available backends; a backend named explicitly that can only
    build still builds, and its kernels can be exported (and cached), but calling one raises an
    error quoting ``reason``.
    """

    __pydantic_config__ = _STRICT

    available: bool
    """Kernels can be built and run here."""
    reason: str = ""
    """Why not (shown to users): what is missing, e.g. 'no CUDA driver on this machine'."""
    can_build: bool = False
    """Kernels can be built (and exported) here although they cannot run; implied by ``available``."""

    def __post_init__(self) -> None:
        if self.available and not self.can_build:
            object.__setattr__(self, "can_build", True)

    @property
    def build_only(self) -> bool:
        """Kernels can be built here but not run."""
        return self.can_build and not self.available

    @classmethod
    def yes(cls) -> "Availability":
        """Available: kernels build and run here."""
        return cls(available=True)

    @classmethod
    def no(cls, reason: str) -> "Availability":
        """Not available, because ``reason`` (shown to users)."""
        return cls(available=False, reason=reason)

    @classmethod
    def build_only_because(cls, reason: str) -> "Availability":
        """Kernels build (and export) here but cannot run, because ``reason`` (what is missing)."""
        return cls(available=False, reason=reason, can_build=True)


def backend_spec_json_schema() -> dict:
    """The JSON schema of :class:`BackendSpec` (printed by ``tilelang backends schema``)."""
    from .schema import json_schema

    return json_schema(BackendSpec)
