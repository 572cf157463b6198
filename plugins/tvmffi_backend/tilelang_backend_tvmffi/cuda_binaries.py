"""Compiled CUDA code for saved kernels, so that they load where neither TVM nor a compiler is.

TVM 0.27 compiles the CUDA source of a device module only when a CUDA runtime is loaded (at once,
on a GPU machine) and otherwise keeps the *source* in the module: loading such a library later
calls ``tvm_callback_cuda_compile`` (TVM's Python package registers it) to compile it there.
A kernel built here and run elsewhere must not need TVM's Python package, NVRTC or nvcc where it
runs, so saving such a kernel compiles each CUDA source once with nvcc, for the kernel's
architecture (``cuda -arch=sm_90``), into a fat binary written beside the library
(``cuda-<sha256>.fatbin``, named in the plan): machine code for that architecture plus its PTX,
which the driver compiles for a newer GPU (sm_80 code runs on an sm_90 GPU), as nvcc's
``-arch=sm_XX`` gives the cython backend's libraries. Loading registers, while TVM's loader reads
the library, a ``tvm_callback_cuda_compile`` that hands it the saved code of the source it is
given (matched by SHA-256).
"""

from __future__ import annotations

import contextlib
import hashlib
import sys
import threading
from pathlib import Path
from typing import Any, Iterator, Optional

from tilelang_core.compiler_process import nvcc_arch_flags
from tilelang_core.errors import ArtifactError
from tilelang_core.fork_locks import renew_after_fork

CALLBACK = "tvm_callback_cuda_compile"

#: (sha256 of a CUDA source, arch) -> the code this process compiled (saving twice compiles once).
_BINARIES: dict[tuple[str, str], bytes] = {}
_LOCK = threading.Lock()
_SERVING_LOCK = threading.Lock()
renew_after_fork(sys.modules[__name__], "_LOCK", "_SERVING_LOCK")  # a fork child gets fresh ones


def source_key(source: str | bytes) -> str:
    """The SHA-256 of a CUDA source as TVM's loader passes it to the compile callback."""
    data = source.encode() if isinstance(source, str) else bytes(source)
    return hashlib.sha256(data).hexdigest()


def file_name(key: str) -> str:
    """The file a saved kernel keeps the compiled code of the source with SHA-256 ``key`` in."""
    return f"cuda-{key}.fatbin"


def cuda_sources(mod: Any) -> list[str]:
    """The CUDA sources of the ``cuda`` device modules imported by ``mod`` (a TVM runtime module)."""
    out = []
    stack = list(getattr(mod, "imports", []) or [])
    while stack:
        imported = stack.pop(0)
        if getattr(imported, "kind", None) == "cuda":
            text = str(imported.inspect_source("cuda"))
            if text:
                out.append(text)
        stack.extend(getattr(imported, "imports", []) or [])
    return out


#: nvcc's options: those TVM's own CUDA compile gives generated code (16-bit operators, relaxed
#: constexpr), without its nvcc-only ``--use_fast_math``, so results match what TVM's NVRTC
#: compile (its default) and the other CUDA backends produce.
NVCC_OPTIONS = (
    "-O3", "-std=c++17", "--expt-relaxed-constexpr", "-diag-suppress=177",
    "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT16_OPERATORS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT162_OPERATORS__", "-U__CUDA_NO_BFLOAT162_CONVERSIONS__",
)
#: Seconds one nvcc run may take.
NVCC_TIMEOUT_S = 600


def compiler_available() -> bool:
    """Whether :func:`compile_source` finds nvcc (on ``PATH``)."""
    import shutil

    return shutil.which("nvcc") is not None


def needs_saved_code() -> bool:
    """Whether TVM kept CUDA *source* in the kernels it built in this process.

    TVM compiles CUDA code when it creates the module only where its CUDA runtime is loaded
    (``ffi.Module.create.cuda`` registered); then the library already holds compiled code.
    """
    import tvm_ffi

    return tvm_ffi.get_global_func("ffi.Module.create.cuda", allow_missing=True) is None


def compile_source(source: str, arch: str) -> bytes:
    """Compile ``source`` with nvcc into a fat binary for ``arch`` (``sm_90``): its machine code
    and PTX (once per process)."""
    import shutil
    import subprocess
    import tempfile

    key = (source_key(source), arch)  # the same source is compiled for every architecture asked
    with _LOCK:
        if key in _BINARIES:
            return _BINARIES[key]
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise RuntimeError("nvcc is not on PATH")
    with tempfile.TemporaryDirectory(prefix="tilelang_tvmffi_cuda_") as scratch:
        src, out = Path(scratch) / "kernel.cu", Path(scratch) / "kernel.fatbin"
        src.write_text(source)
        cmd = [nvcc, "--fatbin", *nvcc_arch_flags(arch), *NVCC_OPTIONS, "-o", str(out), str(src)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=NVCC_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"nvcc ran longer than {NVCC_TIMEOUT_S} s") from None
        if done.returncode != 0:
            raise RuntimeError(f"nvcc failed ({done.returncode}):\n{(done.stderr or done.stdout)[-4000:]}")
        code = out.read_bytes()
    with _LOCK:
        _BINARIES[key] = code
    return code


@contextlib.contextmanager
def serving(binaries: dict[str, bytes]) -> Iterator[None]:
    """Serve ``binaries`` (source SHA-256 -> compiled code) to TVM's loader while the block runs.

    TVM's CUDA loader calls ``tvm_callback_cuda_compile`` while ``tvm_ffi.load_module`` reads a
    library whose device module holds source. For the duration of the block that callback
    returns the saved code of a known source (TVM hands it to ``cuModuleLoadData``); any other
    source goes to the callback that was registered before (TVM's, where its Python package was
    imported), else fails with advice.
    The previous callback is restored afterwards, so importing ``tvm.support.nvcc`` later
    (which registers TVM's own) still works, and loading imports no TVM.
    """
    import tvm_ffi

    with _SERVING_LOCK:
        previous = tvm_ffi.get_global_func(CALLBACK, allow_missing=True)

        def serve(source, *args):
            code = binaries.get(source_key(str(source)))
            if code is not None:
                return code
            if previous is None:
                raise RuntimeError(
                    "tvm_ffi: this saved CUDA kernel holds CUDA source without compiled code for it "
                    "(saved by an older tilelang-backend-tvmffi, or where nvcc was not found) and no "
                    "CUDA compiler is registered here; save the kernel again where nvcc is installed, "
                    "or import tvm.support.nvcc (apache-tvm) before loading it"
                )
            return previous(source, *args)

        tvm_ffi.register_global_func(CALLBACK, serve, override=True)
        try:
            yield
        finally:
            if previous is not None:
                tvm_ffi.register_global_func(CALLBACK, previous, override=True)
            else:
                tvm_ffi.remove_global_func(CALLBACK)


def save_binaries(mod: Any, arch: Optional[str], directory: Path, loaded_from: Optional[Path]) -> list[dict[str, str]]:
    """Write the compiled code of every CUDA source of ``mod`` into ``directory``; the plan's entries.

    A kernel loaded from a saved directory (``loaded_from``) carries that directory's files
    over. Without an architecture or a compiler nothing is written (the kernel then compiles
    where it is loaded, which needs TVM there).
    """
    entries: list[dict[str, str]] = []
    if loaded_from is not None and mod is None:
        for path in sorted(loaded_from.glob("cuda-*.fatbin")):
            key = path.stem[len("cuda-"):]
            (directory / path.name).write_bytes(path.read_bytes())
            entries.append({"source_sha256": key, "file": path.name, "arch": arch or ""})
        return entries
    if mod is None or not arch or not needs_saved_code() or not compiler_available():
        return entries
    for source in cuda_sources(mod):
        key = source_key(source)
        code = compile_source(source, arch)
        (directory / file_name(key)).write_bytes(code)
        entries.append({"source_sha256": key, "file": file_name(key), "arch": arch})
    return entries


def read_binaries(entries: Any, directory: Path) -> dict[str, bytes]:
    """The compiled code a saved kernel's plan lists (source SHA-256 -> code), checked and read."""
    if entries is None:
        return {}
    if not isinstance(entries, list):
        raise ArtifactError(f"tvm_ffi: the plan in {directory} has invalid cuda_binaries {entries!r}")
    out = {}
    for entry in entries:
        key = entry.get("source_sha256") if isinstance(entry, dict) else None
        name = entry.get("file") if isinstance(entry, dict) else None
        if not (isinstance(key, str) and len(key) == 64 and name == file_name(key)):
            raise ArtifactError(f"tvm_ffi: the plan in {directory} has an invalid cuda_binaries entry {entry!r}")
        path = directory / name
        try:
            out[key] = path.read_bytes()
        except OSError as exc:
            raise ArtifactError(f"tvm_ffi: cannot read {path}: {exc}; the saved kernel is incomplete") from None
    return out
