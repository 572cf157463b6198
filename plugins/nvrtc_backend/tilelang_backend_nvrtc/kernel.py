"""Build, call, save and load ``nvrtc`` kernels.

A kernel is a cubin plus its launch plan (:mod:`.plan`). Calling it checks the arguments with the
core's :class:`~tilelang_core.calling.CallChecker` (the shared rules and messages), allocates the ``out_idx`` outputs on the inputs' device, computes every
device kernel's grid, block and dynamic shared memory from the bound symbols, and launches the
device kernels in the artifact's order on torch's current stream of that device, or on the
``stream=`` given (a ``torch.cuda.Stream`` or a raw ``cudaStream_t`` int). Nothing else happens on
the host, so calls can be captured in CUDA graphs.

Saving writes ``kernel.cubin`` and ``nvrtc_plan.json``; loading reads them back with neither NVRTC
nor TVM, refusing a cubin whose architecture does not fit the current GPU (or, when NVRTC and the
kernel's source are there, compiling it again for that GPU).
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any, Optional

from tilelang_core.artifact import BuildOptions, KernelArtifact
from tilelang_core.calling import CallChecker
from tilelang_core.errors import ArtifactError, BuildError

from . import plan as P
from .arch import ARCH_FORMS, Arch, artifact_arch, artifact_arch_name, device_arch
from .cubin import CubinError, read_cubin
from .parameters import ThreadBlocks

CUBIN_FILE = "kernel.cubin"
PLAN_FILE = "nvrtc_plan.json"

KERNEL_DOC = """A CUDA kernel built by the ``nvrtc`` backend: ``kernel(*inputs, stream=None)``.

Pass the non-output parameters in order; the ``out_idx`` outputs are allocated on the inputs'
device and returned (one tensor, a list for several, None when there are none). The device
kernels are launched in order on torch's current stream, or on ``stream`` (a ``torch.cuda.Stream``
or a raw ``cudaStream_t`` int). Attributes: ``artifact``, ``plan`` (the launch plan), ``cubin``
(bytes), ``arch``.
"""


def choose_arch(artifact: KernelArtifact) -> Arch:
    """The architecture to build for: the artifact's (target ``-arch``), else the current GPU's.

    :raises BuildError: the target's ``-arch`` is not a CUDA architecture (``sm_90x``), or
        neither says one (no ``-arch`` and no GPU to ask).
    """
    try:
        arch = artifact_arch(artifact) or device_arch()
    except ValueError:
        raise BuildError(
            f"nvrtc: kernel {artifact.name!r}: target {artifact.target!r} names the architecture "
            f"{artifact_arch_name(artifact)!r}, which is not a CUDA architecture; -arch= takes {ARCH_FORMS}: "
            f"compile with target='cuda -arch=sm_XX'"
        ) from None
    if arch is None:
        raise BuildError(
            f"nvrtc: kernel {artifact.name!r} has no target architecture (target {artifact.target!r} has no -arch) "
            "and there is no GPU to ask; compile with target='cuda -arch=sm_XX' (e.g. sm_90)"
        )
    return arch


def build(artifact: KernelArtifact, options: BuildOptions) -> "NvrtcKernel":
    """Compile the artifact's device source with NVRTC and return the callable kernel."""
    from .compiler import compile_cubin

    if artifact.target_kind != "cuda":
        raise BuildError(f"nvrtc: builds target 'cuda', got {artifact.target_kind!r}")
    if not artifact.device_source:
        raise BuildError(f"nvrtc: kernel {artifact.name!r} carries no device source (the backend consumes 'device_source')")
    arch = choose_arch(artifact)
    plan = P.make_plan(artifact, list(options.out_idx), arch.name)
    result = compile_cubin(artifact.name, artifact.device_source, arch, options.compile_flags, verbose=options.verbose)
    from .toolchain import toolchain

    plan.update(
        cubin=CUBIN_FILE,
        cubin_sha256=hashlib.sha256(result.image).hexdigest(),
        nvrtc=toolchain().version_text,
        headers=result.headers,
        options=list(result.options),
    )
    try:
        info = read_cubin(result.image)
    except CubinError as exc:
        raise BuildError(f"nvrtc: NVRTC returned an unreadable cubin for {artifact.name!r}: {exc}") from None
    problem = cubin_arch_problem(info, arch) or P.check_plan_against_cubin(plan, info)
    if problem is not None:
        raise BuildError(f"nvrtc: kernel {artifact.name!r}: {problem}")
    return NvrtcKernel(artifact, options, plan, result.image)


def cubin_arch_problem(info: Any, arch: Arch) -> Optional[str]:
    """Why a cubin (its :class:`~.cubin.CubinInfo`) is not for ``arch`` (the launch plan's), or None:
    what :func:`load` refuses, found when the cubin is built."""
    if info.sm != arch.number:
        return f"the cubin is for sm_{info.sm}, the plan says {arch.name}"
    return None


class NvrtcKernel:
    """The callable kernel (see :data:`KERNEL_DOC`)."""

    __doc__ = KERNEL_DOC

    def __init__(self, artifact: KernelArtifact, options: BuildOptions, plan: dict, cubin: bytes) -> None:
        self.artifact = artifact
        self.options = options
        self.plan = plan
        self.cubin = cubin
        self.arch = Arch.parse(plan["arch"])
        self.digest = plan["cubin_sha256"]
        self._checker = CallChecker(artifact, options.out_idx)
        self._launches = P.launches(plan)
        self._parameters = ThreadBlocks([k.types for k in self._launches])  # parameters.py
        self._names = [k.name for k in self._launches]
        self._devices: dict[int, tuple[str, bytes]] = {}  # device index -> (digest, cubin) to run there
        self._lock = threading.Lock()
        self._driver = None
        self._torch = None
        self._raw_stream = None

    # -- calling -------------------------------------------------------------------------------

    def _bind(self) -> Any:
        from tilelang_core.errors import BackendUnavailableError

        from .driver import get_driver

        try:
            driver = get_driver()
        except BackendUnavailableError as exc:  # the words of the core's refusal (jit/kernel.py)
            raise BackendUnavailableError(f"{self.artifact.name}() cannot run on this machine: {exc}") from None
        import torch

        self._torch = torch
        self._raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        self._driver = driver
        return driver

    def _image_for(self, device_index: int) -> tuple[str, bytes]:
        """The cubin to run on a device: this one when its architecture fits, else a rebuild."""
        found = self._devices.get(device_index)
        if found is not None:
            return found
        with self._lock:
            major, minor = self._torch.cuda.get_device_capability(device_index)
            device = Arch(major * 10 + minor)
            if self.arch.runs_on(device):
                found = (self.digest, self.cubin)
            else:
                found = self._rebuilt_for(device, f"cuda:{device_index}")
            self._devices[device_index] = found
            return found

    def _rebuilt_for(self, device: Arch, where: str) -> tuple[str, bytes]:
        image = rebuild_for(self.artifact, self.options, self.plan, device, where)
        return hashlib.sha256(image).hexdigest(), image

    def _current_stream(self, device_index: int) -> int:
        if self._raw_stream is not None:
            return self._raw_stream(device_index)
        return self._torch.cuda.current_stream(device_index).cuda_stream

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        driver = self._driver or self._bind()
        torch = self._torch
        call = self._checker.bind(args, kwargs, allocate=False)  # the stream keyword is checked there too
        device = call.device
        if device is None:
            device = call.device = torch.device("cuda", torch.cuda.current_device())
        index = device.index if device.index is not None else torch.cuda.current_device()
        digest, image = self._image_for(index)
        module = driver.module(digest, image, index, self._names)
        stream = kwargs.get("stream")
        handle = call.stream if call.stream is not None else self._current_stream(index)
        if stream is not None and call.output_shapes:
            # outputs belong to the stream they are written on (torch's caching allocator)
            with torch.cuda.stream(_torch_stream(torch, stream, handle, device)):
                self._checker.allocate(call)
        else:
            self._checker.allocate(call)
        batch = self.launch_batch(call.values, call.symbols)
        if batch:
            driver.launch(module, index, batch, handle)
        return call.result()

    def output_shapes(self, symbols: dict) -> list[list[int]]:
        """The shape of every ``out_idx`` output for the bound ``symbols``; :raises ValueError: one
        is too large for the kernel's 32-bit indices (before anything is allocated)."""
        return self._checker.output_shapes(symbols)

    def launch_batch(self, by_param: dict, symbols: dict) -> list[tuple]:
        """``(kernel name, (gx, gy, gz, bx, by, bz, smem), arguments)`` per device kernel, in order;
        ``arguments`` is the address of this thread's filled argument array (:mod:`.parameters`),
        valid until the thread's next call.

        :param by_param: the tensor (or checked scalar value) of every kernel parameter index (a list
            or a dict).
        :param symbols: the bound symbol values. Kernels with an empty grid or block are left out.
        """
        batch = []
        for launch, block in zip(self._launches, self._parameters.blocks()):
            dims = launch.static_dims
            if dims is None:
                dims = tuple(int(f(symbols)) for f in (*launch.grid, *launch.block, launch.shared))
            if min(dims[:6]) <= 0:
                continue  # a zero-sized dimension: nothing to launch
            vals = []
            for source, key, packer in launch.args:
                if source == "pointer":
                    vals.append(by_param[key].data_ptr())
                    continue
                v = by_param[key] if source == "param" else symbols[key]
                vals.append(packer(v) if packer is not None else v)
            batch.append((launch.name, dims, block.fill(vals)))
        return batch

    def get_source(self) -> Optional[str]:
        """The CUDA source the cubin was compiled from."""
        return self.artifact.device_source


def _torch_stream(torch: Any, stream: Any, handle: int, device: Any) -> Any:
    if isinstance(stream, torch.cuda.Stream):
        return stream
    return torch.cuda.ExternalStream(handle, device=device)


def rebuild_for(artifact: KernelArtifact, options: BuildOptions, plan: dict, device: Arch, where: str) -> bytes:
    """Compile the kernel's source again for ``device`` (NVRTC needed); :raises ArtifactError:."""
    from .compiler import compile_cubin
    from .toolchain import ToolchainMissing, toolchain

    built_for = plan["arch"]
    advice = f"compile it again with target='cuda -arch={device.name}'"
    if not artifact.device_source:
        raise ArtifactError(f"nvrtc kernel {artifact.name!r} was built for {built_for}, which cannot run on {where} "
                            f"({device.name}), and carries no source to rebuild it from; {advice}")
    try:
        toolchain()
    except ToolchainMissing as exc:
        raise ArtifactError(f"nvrtc kernel {artifact.name!r} was built for {built_for}, which cannot run on {where} "
                            f"({device.name}), and NVRTC is not here to rebuild it ({exc}); {advice}") from None
    result = compile_cubin(artifact.name, artifact.device_source, device, options.compile_flags, verbose=options.verbose)
    info = read_cubin(result.image)
    problem = cubin_arch_problem(info, device) or P.check_plan_against_cubin(plan, info)
    if problem is not None:
        raise ArtifactError(f"nvrtc kernel {artifact.name!r} rebuilt for {device.name}: {problem}")
    return result.image


# -- save and load -------------------------------------------------------------------------------


def save(kernel: Any, directory: Path) -> None:
    """Write ``kernel.cubin`` and ``nvrtc_plan.json`` into ``directory``."""
    kernel = getattr(kernel, "runner", kernel)
    if not isinstance(kernel, NvrtcKernel):
        raise TypeError(f"the nvrtc backend cannot save {type(kernel).__name__}; expected a kernel it built")
    directory = Path(directory)
    (directory / CUBIN_FILE).write_bytes(kernel.cubin)
    (directory / PLAN_FILE).write_text(json.dumps(kernel.plan, indent=1))


def load(artifact: KernelArtifact, directory: Path, options: BuildOptions) -> NvrtcKernel:
    """Restore a kernel written by :func:`save` (no NVRTC, no TVM; see the module docstring)."""
    directory = Path(directory)
    plan_path = directory / PLAN_FILE
    try:
        plan = json.loads(plan_path.read_text())
        image = (directory / str(plan["cubin"])).read_bytes()
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ArtifactError(f"nvrtc kernel directory {directory} is incomplete or corrupt ({type(exc).__name__}: {exc}); "
                            "recompile the kernel") from None
    if not isinstance(plan, dict) or plan.get("format") != P.PLAN_FORMAT:
        raise ArtifactError(f"nvrtc kernel in {directory} has launch plan format "
                            f"{plan.get('format') if isinstance(plan, dict) else None!r}; this backend reads "
                            f"{P.PLAN_FORMAT}; recompile the kernel")
    if hashlib.sha256(image).hexdigest() != plan.get("cubin_sha256"):
        raise ArtifactError(f"nvrtc kernel in {directory}: {plan['cubin']} does not match its recorded SHA-256; "
                            "recompile the kernel")
    if plan.get("name") != artifact.name or plan.get("outputs") != sorted(options.out_idx):
        raise ArtifactError(f"nvrtc kernel in {directory} is {plan.get('name')!r} with outputs {plan.get('outputs')}, "
                            f"but {artifact.name!r} with out_idx {sorted(options.out_idx)} was asked; recompile the kernel")
    try:
        arch = Arch.parse(plan.get("arch", ""))
        info = read_cubin(image)
    except (ValueError, CubinError) as exc:
        raise ArtifactError(f"nvrtc kernel in {directory} has an unreadable cubin or architecture: {exc}") from None
    problem = cubin_arch_problem(info, arch)
    if problem is not None:
        raise ArtifactError(f"nvrtc kernel in {directory}: {problem}")
    expected = P.make_plan(artifact, sorted(options.out_idx), arch.name)
    if [k for k in plan.get("kernels", [])] != expected["kernels"]:
        raise ArtifactError(f"nvrtc kernel in {directory}: its launch plan does not match the kernel's artifact; "
                            "recompile the kernel")
    problem = P.check_plan_against_cubin(plan, info)
    if problem is not None:
        raise ArtifactError(f"nvrtc kernel in {directory}: {problem}")
    kernel = NvrtcKernel(artifact, options, plan, image)
    device = device_arch()
    if device is not None and not arch.runs_on(device):
        digest, rebuilt = kernel._rebuilt_for(device, "the current GPU")
        plan = dict(plan, arch=device.name, cubin_sha256=digest)
        kernel = NvrtcKernel(artifact, options, plan, rebuilt)
    return kernel
