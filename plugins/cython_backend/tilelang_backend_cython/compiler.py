"""Running the system compilers: ``$CC``/``cc`` for ``c`` kernels and ``nvcc`` for ``cuda`` kernels.

Every build gets a private directory (``tempfile.mkdtemp``). When the compiler fails, the
directory stays, with the source, and the :class:`BuildError` names it; a build stopped otherwise
(Ctrl-C) removes it, and the folders of builds whose process was killed are removed by the next
process that builds (:mod:`tilelang_backend_cython.build_dirs`). When it succeeds, the
library's bytes are read into memory (:class:`BuiltLibrary`), the backend loads the library, and
:meth:`BuiltLibrary.release` removes the directory: nothing is left in the temp dir, and the save
hook writes the bytes into the kernel cache. Set ``TILELANG_CYTHON_KEEP_BUILD=1`` (or build with
``verbose=True``) to keep every build directory (source and library) for inspection.
Identical builds in one process compile once (the bytes of the last 64 are kept in memory): the
same source, flags and compiler (resolved on ``PATH``, with its size and modification time) under
the same ``CPATH``, ``C_INCLUDE_PATH``, ``CPLUS_INCLUDE_PATH`` and ``LIBRARY_PATH``, with the same
content of the files it includes by path or through ``-I``/``CPATH`` (as the kernel cache's key).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shlex
import shutil
import sys
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from tilelang_core.compiler_process import nvcc_arch_flags, probe_timeout_s, run_compiler, writing_build_file
from tilelang_core.env_commands import command_from_env
from tilelang_core.env_switches import switch_from_env
from tilelang_core.errors import BuildError
from tilelang_core.fork_locks import renew_after_fork

from . import build_dirs

#: Base flags of CPU kernels. No OpenMP runtime is linked: parallel block loops run on the
#: dispatcher's own threads (the kernel's block launcher, see _pool.h); ``SIMD_FLAGS`` are added
#: when the compiler takes them, so the ``#pragma omp simd`` loops of the source count.
#: ``-fno-strict-aliasing``: ``T.view`` with another dtype reads one array through two pointer
#: types; the source's ``#pragma GCC optimize("no-strict-aliasing")`` covers GCC only, and clang
#: (``CC=clang``) reordered or dropped those accesses (docs/backend-conventions.md).
C_FLAGS = ["-O3", "-march=native", "-fno-strict-aliasing", "-fPIC", "-shared"]
SIMD_FLAGS = ["-fopenmp-simd", "-DTL_OPENMP_SIMD"]

#: Seconds the check whether the compiler takes ``SIMD_FLAGS`` may take (less if
#: ``$TILELANG_COMPILE_TIMEOUT_SECONDS`` says so); past it the flags are left out.
PROBE_TIMEOUT_S = 60.0

#: Environment variable: keep every build directory (source and library) in the temp dir.
KEEP_BUILD_ENV = "TILELANG_CYTHON_KEEP_BUILD"

_lock = threading.Lock()
renew_after_fork(sys.modules[__name__], "_lock")  # a fork child gets a fresh one
_simd_ok: dict[str, bool] = {}
#: Libraries built in this process, by :func:`_memo_key` (the newest :data:`MEMO_SIZE`).
_built: "OrderedDict[str, bytes]" = OrderedDict()
MEMO_SIZE = 64

#: Environment variables the C compilers read for include and library search paths: a source
#: built under other values may include other files.
SEARCH_PATH_ENV = ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "LIBRARY_PATH")


def _compiler_identity(compiler: Sequence[str]) -> str:
    """The command with its program resolved on PATH, with its size and modification time: a
    wrapper put first on PATH, or edited in place, is another compiler (the memo of built
    libraries and of the SIMD check handed back what the previous one built)."""
    from tilelang_core.cache.key import executable_identity

    path = shutil.which(compiler[0]) if compiler else None
    if path is None:
        return shlex.join(compiler)
    return f"{executable_identity(path)} {shlex.join(compiler[1:])}"


def _memo_key(compiler: Sequence[str], flags: Sequence[str], source: str) -> Optional[str]:
    """The key of a build in the memo of this process: the compiler's identity, the search-path
    variables, the flags, the source, and the content of each file the source includes that the
    kernel cache's key follows (``T.import_source`` headers, given by path or found through
    ``-I`` or ``CPATH``: :func:`tilelang_core.cache.includes.files_included_by`), whose content may
    change between two builds of the same text. None for a source including more files than are
    followed (it is built each time)."""
    from tilelang_core.cache.includes import MAX_FILES, files_included_by

    included = files_included_by([source], flags)
    if len(included) >= MAX_FILES:
        return None
    environment = [f"{name}={os.environ.get(name, '')}" for name in SEARCH_PATH_ENV]
    return hashlib.sha256("\0".join([_compiler_identity(compiler), *environment, *flags, source, *included]).encode()).hexdigest()


def keep_builds(verbose: bool = False) -> bool:
    """Whether build directories are kept: ``$TILELANG_CYTHON_KEEP_BUILD`` is a yes (another value
    than a yes or a no is a ``SettingError``) or ``verbose``."""
    return verbose or switch_from_env(KEEP_BUILD_ENV, "keep every build folder", "remove them")


@dataclass
class BuiltLibrary:
    """A compiled kernel library: its bytes and source text, and a file to load it from.

    ``path`` can be loaded until :meth:`release`, which removes the build directory unless it is
    kept (:func:`keep_builds`); a loaded library stays usable after that.
    """

    data: bytes
    source: str
    path: Path
    directory: Path
    kept: bool

    @property
    def source_path(self) -> Optional[Path]:
        """The source file, when the build directory is kept."""
        if not self.kept:
            return None
        found = [p for p in self.directory.iterdir() if p.suffix in (".c", ".cu")]
        return found[0] if found else None

    def release(self) -> None:
        """Remove the build directory (unless kept)."""
        if not self.kept:
            shutil.rmtree(self.directory, ignore_errors=True)


def c_compiler() -> list[str]:
    """The C compiler command: ``$CC`` (may hold flags, shell-split) or ``cc``."""
    return command_from_env("CC", "cc")


def nvcc_compiler() -> list[str]:
    """``$TILELANG_NVCC`` (shell-split) or ``nvcc`` found on PATH (or /usr/local/cuda/bin)."""
    env = os.environ.get("TILELANG_NVCC")
    if env and env.strip():
        return command_from_env("TILELANG_NVCC", "nvcc")
    found = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    return [found or "nvcc"]


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)[:64] or "kernel"


#: File of a build directory holding everything the compiler printed (kept with the source when it fails).
OUTPUT_FILE = "compiler-output.txt"


def _run(cmd: Sequence[str], *, what: str, source: Path, cwd: Path, writes: Optional[Path] = None) -> None:
    """Run the compiler (bounded in time and output: :func:`tilelang_core.compiler_process.run_compiler`).

    :raises BuildError: it could not be started, failed, was killed or ran past the time limit.
    """
    try:
        run = run_compiler(cmd, cwd=cwd, output_file=cwd / OUTPUT_FILE, writes=writes)
    except OSError as exc:
        raise BuildError(
            f"cannot run the compiler for {what}: {exc}\n"
            f"command: {shlex.join(cmd)}\n"
            f"source kept at: {source}\n"
            f"set $CC (C) or $TILELANG_NVCC (CUDA) to a working compiler",
            command=cmd, output=str(exc), source=source,
        ) from None
    if not run.ok:
        raise run.build_error(what, source)
    with contextlib.suppress(OSError):
        (cwd / OUTPUT_FILE).unlink()


def simd_flags_work(cc: Sequence[str]) -> bool:
    """Whether ``cc -fopenmp-simd`` builds a shared library here (checked once per compiler and process)."""
    key = _compiler_identity(cc)
    with _lock:
        if key in _simd_ok:
            return _simd_ok[key]
    d = _build_dir("simd", what="the check of the compiler's SIMD flags")  # an OSError says where, and what to do
    try:
        src = d / "simd.c"
        src.write_text("void f(float *a, int n) {\n#pragma omp simd\n for (int i = 0; i < n; ++i) a[i] += 1.0f;\n}\n")
        ok = run_compiler([*cc, "-fPIC", "-shared", "-Werror", *SIMD_FLAGS, "-o", str(d / "simd.so"), str(src)],
                          timeout=probe_timeout_s(PROBE_TIMEOUT_S)).ok
    except OSError:
        ok = False
    finally:
        shutil.rmtree(d, ignore_errors=True)
    with _lock:
        _simd_ok[key] = ok
    return ok


def compile_c(name: str, source: str, *, compile_flags: Sequence[str] = (), verbose: bool = False) -> BuiltLibrary:
    """Compile C ``source`` into a shared library (see :class:`BuiltLibrary`).

    :raises BuildError: with the command line, the compiler's output and the kept source path.
    """
    cc = c_compiler()
    flags = list(C_FLAGS)
    if simd_flags_work(cc):
        flags += SIMD_FLAGS
    flags += list(compile_flags)
    return _compile_shared_library(cc, flags, source, name=name, suffix=".c", target="c", verbose=verbose)


def _compile_shared_library(compiler: list[str], flags: list[str], source: str, *, name: str, suffix: str,
                            target: str, verbose: bool) -> BuiltLibrary:
    """Compile ``source`` into a shared library in a fresh temporary directory (once per process).

    :raises BuildError: via :func:`_run`; the directory and the source stay for inspection.
    """
    key = _memo_key(compiler, flags, source)
    keep = keep_builds(verbose)
    d = _build_dir(name)
    try:
        return _compile_in(d, key, keep, compiler, flags, source, name=name, suffix=suffix, target=target,
                           verbose=verbose)
    except BuildError:
        build_dirs.keep(d)  # the folder stays: the error names the source kept there
        raise
    except BaseException:  # Ctrl-C while compiling (a build folder was left in the temp dir each time)
        if keep:
            build_dirs.keep(d)
        else:
            shutil.rmtree(d, ignore_errors=True)
        raise


def _compile_in(d: Path, key: Optional[str], keep: bool, compiler: list[str], flags: list[str], source: str, *, name: str,
                suffix: str, target: str, verbose: bool) -> BuiltLibrary:
    """:func:`_compile_shared_library` in the build folder ``d``."""
    src = d / f"{_safe_name(name)}{suffix}"
    lib = d / f"{_safe_name(name)}.so"
    with _lock:
        data = _built.get(key) if key is not None else None
        if data is not None:
            _built.move_to_end(key)
    if data is not None:  # compiled before in this process: a fresh file to load the bytes from
        with writing_build_file(d, lib, name):
            lib.write_bytes(data)
            if keep:
                src.write_text(source)
        if keep:
            build_dirs.keep(d)
        return BuiltLibrary(data=data, source=source, path=lib, directory=d, kept=keep)
    with writing_build_file(d, src, name):
        src.write_text(source)
    cmd = [*compiler, *flags, "-o", str(lib), str(src)]
    if verbose:
        print(f"[tilelang cython] {shlex.join(cmd)}")
    _run(cmd, what=f"kernel '{name}' (target {target})", source=src, cwd=d, writes=lib)
    data = lib.read_bytes()
    if key is not None:
        with _lock:
            _built[key] = data
            while len(_built) > MEMO_SIZE:
                _built.popitem(last=False)
    if keep:
        build_dirs.keep(d)
        if verbose:
            print(f"[tilelang cython] build kept in {d}")
    else:
        src.unlink()
    return BuiltLibrary(data=data, source=source, path=lib, directory=d, kept=keep)


def _build_dir(name: str, what: Optional[str] = None) -> Path:
    """A fresh private build directory in the temporary folder, for kernel ``name`` (or ``what``).

    :raises OSError: none can be made (no writable temporary folder), saying so and what to do.
    """
    try:
        return build_dirs.make(_safe_name(name))
    except OSError as exc:
        for_what = what or f"kernel {name!r}"
        raise type(exc)(exc.errno, f"cannot make a build folder for {for_what} in the temporary folder "
                        f"{tempfile.gettempdir()}: {exc.strerror or exc}; set TMPDIR to a writable folder with "
                        f"free space" + (" and a shorter path" if exc.errno == errno.ENAMETOOLONG else "")) from None


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
                 verbose: bool = False) -> BuiltLibrary:
    """Compile CUDA ``source`` (device code + host launcher) with nvcc into a shared library.

    :raises BuildError: with the command line, nvcc's output and the kept source path.
    """
    nvcc = nvcc_compiler()
    flags = ["-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC", *nvcc_arch_flags(cuda_arch(target)),
             *compile_flags]
    return _compile_shared_library(nvcc, flags, source, name=name, suffix=".cu", target="cuda", verbose=verbose)
