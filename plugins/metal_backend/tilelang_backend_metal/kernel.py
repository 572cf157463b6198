"""Build, call, save and load ``metal`` kernels.

A kernel is the artifact's Metal source plus its launch plan (:mod:`.plan`). Building checks the
source against the artifact (:mod:`.source`: every kernel, buffer and scalar struct member where
the plan expects it) and, where torch's MPS device is usable, compiles it with
``torch.mps.compile_shader``. Calling checks the arguments (:mod:`.arguments`: tensors on ``mps``),
binds the dynamic symbols, allocates the ``out_idx`` outputs on the inputs' device, packs each
device kernel's scalars into its struct (:mod:`.packing`) and launches the device kernels in the
artifact's order with ``threads`` = grid x block and ``group_size`` = block, on torch's current
MPS stream.

There is no binary to keep: saving writes ``kernel.metal`` and ``metal_plan.json``, and loading
(with neither TVM nor lowering) checks them against the artifact and compiles the source again
(the target declares ``compiles_at_load``). On a machine without MPS nothing is compiled: the
kernel builds, saves and loads, and calling it raises
:class:`~tilelang_core.errors.BackendUnavailableError` saying that it needs macOS with MPS.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any, Optional

from tilelang_core.artifact import BuildOptions, KernelArtifact
from tilelang_core.errors import (
    ArtifactError,
    BackendUnavailableError,
    BuildError,
    CompileFlagsError,
    KernelNotSupportedError,
)

from . import plan as P
from .arguments import ArgumentChecker, torch_dtype
from .runtime import TORCH_MPS, ShaderRuntime
from .source import SourceMismatch, check_source

SOURCE_FILE = "kernel.metal"
PLAN_FILE = "metal_plan.json"

KERNEL_DOC = """A Metal kernel built by the ``metal`` backend: ``kernel(*inputs, stream=None)``.

Pass the non-output parameters in order, tensors on ``mps``; the ``out_idx`` outputs are
allocated on the same device and returned (one tensor, a list for several, None when there are
none). The device kernels are launched in order on torch's current MPS stream (``stream`` is
accepted as every backend's kernels accept it, and ignored). Attributes:
``artifact``, ``plan`` (the launch plan), ``source`` (the Metal source), ``runtime``.
"""


def build(artifact: KernelArtifact, options: BuildOptions, runtime: Optional[ShaderRuntime] = None) -> "MetalKernel":
    """Check the artifact's Metal source, make the launch plan, compile where MPS is usable.

    :raises BuildError: not a Metal artifact, a source that does not declare what the artifact
        says, or a Metal compile error (with the compiler's output and the kept source).
    :raises KernelNotSupportedError: dynamic shared memory, which ``torch.mps`` kernels cannot get.
    :raises CompileFlagsError: ``compile_flags`` were given (``torch.mps.compile_shader`` takes none).
    """
    if artifact.target_kind != "metal":
        raise BuildError(f"metal: builds target 'metal', got {artifact.target_kind!r}")
    if not artifact.device_source or artifact.device_language != "metal":
        raise BuildError(f"metal: kernel {artifact.name!r} carries no Metal source (the backend consumes 'device_source')")
    if options.compile_flags:
        raise CompileFlagsError(
            f"execution backend 'metal' passes no compiler flags (torch.mps.compile_shader takes none), got "
            f"{options.compile_flags}; remove compile_flags"
        )
    for kernel in artifact.device_kernels:
        if kernel.launch is not None and kernel.launch.dynamic_shared_memory != 0:
            raise KernelNotSupportedError(
                f"device kernel {kernel.name!r} needs {kernel.launch.dynamic_shared_memory} bytes of dynamic "
                "threadgroup memory, which torch.mps.compile_shader kernels cannot be given"
            )
    try:
        check_source(artifact)
    except SourceMismatch as exc:
        raise _refused(f"metal: kernel {artifact.name!r}: {exc}", artifact) from None
    plan = P.make_plan(artifact, list(options.out_idx))
    plan.update(source=SOURCE_FILE, source_sha256=_sha256(artifact.device_source))
    kernel = MetalKernel(artifact, options, plan, runtime or TORCH_MPS)
    if kernel.runtime.problem() is None:
        kernel.prepare(BuildError)
    return kernel


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _refused(message: str, artifact: KernelArtifact, **details: Any) -> BuildError:
    """The ``BuildError`` of a source that cannot be used, which is kept for inspection (the one
    file the backend ever writes outside a kernel directory; its path is in the message and in
    ``.source``, and removing it is the reader's business)."""
    path = _keep(artifact)
    if path is not None:
        message += f"\nsource kept at: {path}"
    return BuildError(message, source=path, **details)


def _keep(artifact: KernelArtifact) -> Optional[str]:
    """Write the source to a temporary file for inspection; its path (None if it cannot be written)."""
    try:
        fd, path = tempfile.mkstemp(prefix=f"tilelang-metal-{artifact.name}-", suffix=".metal")
        with os.fdopen(fd, "w") as f:
            f.write(artifact.device_source or "")
        return path
    except OSError:
        return None


class MetalKernel:
    """The callable kernel (see :data:`KERNEL_DOC`)."""

    __doc__ = KERNEL_DOC

    def __init__(self, artifact: KernelArtifact, options: BuildOptions, plan: dict, runtime: ShaderRuntime) -> None:
        self.artifact = artifact
        self.options = options
        self.plan = plan
        self.runtime = runtime
        self.source = artifact.device_source or ""
        self._checker = ArgumentChecker(artifact, options.out_idx, device_type=runtime.device_type)
        self._launches = P.launches(plan)
        self._outputs = [(i, artifact.params[i], torch_dtype(artifact.params[i].dtype)) for i in self._checker.out_idx]
        self._arg_of_param = self._checker.arg_of_param
        self._functions: Optional[list[Any]] = None
        self._lock = threading.Lock()
        self._torch: Any = None

    def with_runtime(self, runtime: ShaderRuntime) -> "MetalKernel":
        """The same kernel (artifact, options, plan) run through ``runtime``: a stand-in of torch's
        MPS device in tests, for instance. Its source is compiled on its first call."""
        return MetalKernel(self.artifact, self.options, self.plan, runtime)

    # -- compiling ------------------------------------------------------------------------------

    def prepare(self, error: type = BuildError) -> list[Any]:
        """Compile the source (once) and return the device kernels' functions, in launch order.

        :param error: the exception class for a source the runtime does not compile
            (``BuildError`` at build and call, ``ArtifactError`` at load).
        :raises BackendUnavailableError: the runtime cannot run kernels here.
        """
        if self._functions is not None:
            return self._functions
        problem = self.runtime.problem()
        if problem is not None:
            raise BackendUnavailableError(
                f"{self.artifact.name}() cannot run here: {problem}. Metal kernels need macOS with torch's MPS "
                "device; export the kernel (kernel.export(path)) and load it on a Mac (tilelang.load(path))"
            )
        with self._lock:
            if self._functions is None:
                self._functions = self._compile(error)
        return self._functions

    def _compile(self, error: type) -> list[Any]:
        try:
            library = self.runtime.compile_shader(self.source)
        except Exception as exc:  # noqa: BLE001 - torch raises RuntimeError with Metal's log
            message = f"metal: Metal could not compile kernel {self.artifact.name!r}: {exc}"
            if error is BuildError:
                raise _refused(message, self.artifact, command=["torch.mps.compile_shader"], output=str(exc)) from None
            raise error(message + "; recompile the kernel") from None
        functions = []
        for launch in self._launches:
            try:
                function = getattr(library, launch.name)
            except (AttributeError, RuntimeError) as exc:
                raise error(f"metal: the compiled library of {self.artifact.name!r} has no kernel {launch.name!r} "
                            f"({exc})") from None
            limit = getattr(function, "max_threads_per_threadgroup", None)
            if launch.static_group is not None and isinstance(limit, int):
                group = launch.static_group
                if group[0] * group[1] * group[2] > limit:
                    raise error(
                        f"metal: device kernel {launch.name!r} of {self.artifact.name!r} uses threadgroups of "
                        f"{group[0] * group[1] * group[2]} threads; this GPU allows {limit} for it: use fewer "
                        "threads in T.Kernel(..., threads=...)"
                    )
            functions.append(function)
        return functions

    # -- calling --------------------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            _check_keywords(self.artifact.name, kwargs)
        functions = self._functions or self.prepare()
        torch = self._torch
        if torch is None:
            import torch

            self._torch = torch
        values, symbols, device = self._checker.check(args)
        if device is None:
            device = torch.device(self.runtime.device_type)
        by_param: dict[int, Any] = {pi: values[j] for pi, j in self._arg_of_param.items()}
        shapes = [[d if isinstance(d, int) else _eval(d, symbols) for d in p.shape] for _, p, _ in self._outputs]
        for (_, p, _), shape in zip(self._outputs, shapes):
            self._checker.check_output_size(p, shape)  # before anything is allocated
        outputs = []
        for (pi, p, dtype), shape in zip(self._outputs, shapes):
            if p.strides is not None:
                out = torch.empty_strided(shape, [_eval(s, symbols) for s in p.strides], dtype=dtype, device=device)
            else:
                out = torch.empty(shape, dtype=dtype, device=device)
            by_param[pi] = out
            outputs.append(out)
        for launch, function in zip(self._launches, functions):
            call = self.launch_arguments(launch, by_param, symbols)
            if call is not None:
                arguments, threads, group = call
                function(*arguments, threads=threads, group_size=group)
        if not outputs:
            return None
        return outputs[0] if len(outputs) == 1 else outputs

    def launch_arguments(self, launch: P.KernelLaunch, by_param: dict, symbols: dict) -> Optional[tuple[list, list, list]]:
        """``(arguments, threads, group_size)`` of one device kernel, or None when it launches nothing.

        ``arguments`` are the tensors of buffer(0..p-1), then (when it takes scalars) the scalar
        struct as a list of int64 words.
        """
        threads, group = launch.sizes(symbols)
        if min(threads) <= 0:
            return None  # a zero-sized grid: nothing to launch
        if min(group) <= 0:
            raise ValueError(f"{self.artifact.name}(): device kernel {launch.name!r} would have a threadgroup of "
                             f"{list(group)} threads")
        arguments = [by_param[pi] for pi in launch.buffers]
        if launch.packer is not None:
            arguments.append(launch.packer.words([by_param[k] if src == "param" else symbols[k] for src, k in launch.scalars]))
        return arguments, list(threads), list(group)

    def get_source(self) -> str:
        """The Metal source the kernel is compiled from."""
        return self.source

    def __repr__(self) -> str:
        return f"<MetalKernel {self.artifact.name} kernels={[k.name for k in self._launches]} runtime={self.runtime!r}>"


def _check_keywords(name: str, kwargs: dict) -> None:
    """The one keyword every kernel takes, ``stream`` (None, an int or a stream object; ignored:
    Metal kernels run on torch's current MPS stream), with the shared messages for anything else."""
    from tilelang_core.calling import stream_handle

    for key, value in kwargs.items():
        if key != "stream":
            raise TypeError(f"{name}() got an unexpected keyword argument '{key}' (only 'stream' is accepted)")
        stream_handle(name, value)


def _eval(expr: Any, symbols: dict) -> int:
    from tilelang_core import symbolic

    return symbolic.evaluate(expr, symbols)


# -- save and load -------------------------------------------------------------------------------


def save(kernel: Any, directory: Path) -> None:
    """Write ``kernel.metal`` and ``metal_plan.json`` into ``directory``."""
    kernel = getattr(kernel, "runner", kernel)
    if not isinstance(kernel, MetalKernel):
        raise TypeError(f"the metal backend cannot save {type(kernel).__name__}; expected a kernel it built")
    directory = Path(directory)
    (directory / SOURCE_FILE).write_text(kernel.source)
    (directory / PLAN_FILE).write_text(json.dumps(kernel.plan, indent=1))


def load(artifact: KernelArtifact, directory: Path, options: BuildOptions,
         runtime: Optional[ShaderRuntime] = None) -> MetalKernel:
    """Restore a kernel written by :func:`save` (no TVM, no lowering).

    The source and plan must be exactly what this artifact and these options make. Where the
    runtime can run kernels the source is compiled now (one ``torch.mps.compile_shader``), so a
    source this Mac's Metal does not compile is an ``ArtifactError`` here (the cache then rebuilds,
    and the build reports the compiler's message); elsewhere nothing is compiled.
    """
    directory = Path(directory)
    try:
        plan = json.loads((directory / PLAN_FILE).read_text())
        source = (directory / SOURCE_FILE).read_text()
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"metal kernel directory {directory} is incomplete or corrupt ({type(exc).__name__}: {exc}); "
                            "recompile the kernel") from None
    if not isinstance(plan, dict) or plan.get("format") != P.PLAN_FORMAT:
        found = plan.get("format") if isinstance(plan, dict) else None
        raise ArtifactError(f"metal kernel in {directory} has launch plan format {found!r}; this backend reads "
                            f"{P.PLAN_FORMAT}; recompile the kernel")
    if _sha256(source) != plan.get("source_sha256") or source != artifact.device_source:
        raise ArtifactError(f"metal kernel in {directory}: {SOURCE_FILE} does not match its recorded SHA-256 or the "
                            "kernel's artifact; recompile the kernel")
    try:
        expected = P.make_plan(artifact, sorted(options.out_idx))
    except BuildError as exc:
        raise ArtifactError(f"metal kernel in {directory}: {exc}") from None
    expected.update(source=SOURCE_FILE, source_sha256=plan.get("source_sha256"))
    if plan != expected:
        raise ArtifactError(f"metal kernel in {directory}: its launch plan does not match the kernel's artifact and "
                            f"out_idx {sorted(options.out_idx)}; recompile the kernel")
    try:
        check_source(artifact)
    except SourceMismatch as exc:
        raise ArtifactError(f"metal kernel in {directory}: {exc}") from None
    kernel = MetalKernel(artifact, options, plan, runtime or TORCH_MPS)
    if kernel.runtime.problem() is None:
        kernel.prepare(ArtifactError)
    return kernel
