"""Running the system compilers: ``$CC``/``cc`` for ``c`` kernels and ``nvcc`` for ``cuda`` kernels.

Every build gets a private directory (``tempfile.mkdtemp``) that is kept: the generated source
stays there so a failing build can be inspected, and the library is loaded from there until the
save hook copies it into the kernel cache. Identical builds in one process share one library.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Optional, Sequence

from tilelang_core.errors import BuildError

#: Base flags of CPU kernels (``-fopenmp`` is added when OpenMP works and is not disabled).
C_FLAGS = ["-O3", "-march=native", "-fPIC", "-shared"]

_lock = threading.Lock()
_openmp_ok: dict[str, bool] = {}
_built: dict[str, Path] = {}


def c_compiler() -> list[str]:
    """The C compiler command: ``$CC`` (may hold flags, shell-split) or ``cc``."""
    return shlex.split(os.environ.get("CC") or "cc")


def nvcc_compiler() -> list[str]:
    """``$TILELANG_NVCC`` (shell-split) or ``nvcc`` found on PATH (or /usr/local/cuda/bin)."""
    env = os.environ.get("TILELANG_NVCC")
    if env:
        return shlex.split(env)
    found = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    return [found or "nvcc"]


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)[:64] or "kernel"


def _run(cmd: Sequence[str], *, what: str, source: Path, cwd: Path) -> None:
    try:
        proc = subprocess.run(list(cmd), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except OSError as exc:
        raise BuildError(
            f"cannot run the compiler for {what}: {exc}\n"
            f"command: {shlex.join(cmd)}\n"
            f"source kept at: {source}\n"
            f"set $CC (C) or $TILELANG_NVCC (CUDA) to a working compiler",
            command=cmd, output=str(exc), source=source,
        ) from None
    if proc.returncode != 0:
        output = proc.stdout.strip()
        raise BuildError(
            f"compiling {what} failed (exit code {proc.returncode})\n"
            f"command: {shlex.join(cmd)}\n"
            f"source kept at: {source}\n"
            f"compiler output:\n{output}",
            command=cmd, output=output, source=source,
        )


def openmp_works(cc: Sequence[str]) -> bool:
    """Whether ``cc -fopenmp`` builds a shared library here (checked once per compiler and process)."""
    key = shlex.join(cc)
    with _lock:
        if key in _openmp_ok:
            return _openmp_ok[key]
    d = Path(tempfile.mkdtemp(prefix="tilelang-cython-omp-"))
    try:
        src = d / "omp.c"
        src.write_text(
            "void f(float *a, int n) {\n#pragma omp parallel for\n for (int i = 0; i < n; ++i) a[i] += 1.0f;\n}\n"
        )
        proc = subprocess.run([*cc, "-fPIC", "-shared", "-fopenmp", "-o", str(d / "omp.so"), str(src)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ok = proc.returncode == 0
    except OSError:
        ok = False
    finally:
        shutil.rmtree(d, ignore_errors=True)
    with _lock:
        _openmp_ok[key] = ok
    return ok


def _cached(key: str) -> Optional[Path]:
    with _lock:
        lib = _built.get(key)
    return lib if lib is not None and lib.exists() else None


def compile_c(name: str, source: str, *, compile_flags: Sequence[str] = (), openmp: bool = True,
              verbose: bool = False) -> tuple[Path, Path]:
    """Compile C ``source`` into a shared library; returns ``(library, kept_source)``.

    :param openmp: add ``-fopenmp`` (when the compiler supports it).
    :raises BuildError: with the command line, the compiler's output and the kept source path.
    """
    cc = c_compiler()
    flags = list(C_FLAGS)
    if openmp and openmp_works(cc):
        flags.append("-fopenmp")
    flags += list(compile_flags)
    return _compile_shared_library(cc, flags, source, name=name, suffix=".c", target="c", verbose=verbose)


def _compile_shared_library(compiler: list[str], flags: list[str], source: str, *, name: str, suffix: str,
                            target: str, verbose: bool) -> tuple[Path, Path]:
    """Compile ``source`` into a shared library in a kept temporary directory (once per process).

    :returns: (library path, source path). :raises BuildError: via :func:`_run`.
    """
    key = hashlib.sha256("\0".join([shlex.join(compiler), *flags, source]).encode()).hexdigest()
    hit = _cached(key)
    if hit is not None:
        return hit, hit.with_suffix(suffix)
    d = Path(tempfile.mkdtemp(prefix=f"tilelang-cython-{_safe_name(name)}-"))
    src = d / f"{_safe_name(name)}{suffix}"
    lib = d / f"{_safe_name(name)}.so"
    src.write_text(source)
    cmd = [*compiler, *flags, "-o", str(lib), str(src)]
    if verbose:
        print(f"[tilelang cython] {shlex.join(cmd)}")
    _run(cmd, what=f"kernel '{name}' (target {target})", source=src, cwd=d)
    with _lock:
        _built[key] = lib
    return lib, src


def cuda_arch(target: str) -> str:
    """The ``sm_XX`` to compile for: the target's ``-arch=``, else $TILELANG_CUDA_ARCH, else the current GPU, else sm_80."""
    m = re.search(r"-arch=(sm_\w+)", target or "")
    if m:
        return m.group(1)
    env = os.environ.get("TILELANG_CUDA_ARCH")
    if env:
        return env if env.startswith("sm_") else f"sm_{env}"
    try:
        import torch

        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return f"sm_{major}{minor}"
    except Exception:  # pragma: no cover - torch without CUDA
        pass
    return "sm_80"


def compile_cuda(name: str, source: str, *, target: str = "cuda", compile_flags: Sequence[str] = (),
                 verbose: bool = False) -> tuple[Path, Path]:
    """Compile CUDA ``source`` (device code + host launcher) with nvcc into a shared library.

    :raises BuildError: with the command line, nvcc's output and the kept source path.
    """
    nvcc = nvcc_compiler()
    flags = ["-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC", f"-arch={cuda_arch(target)}",
             *compile_flags]
    return _compile_shared_library(nvcc, flags, source, name=name, suffix=".cu", target="cuda", verbose=verbose)
