"""TVM runtime modules: unwrap, make runnable, export (save) and reload (load) them.

Saving writes ``kernel.so`` (TVM's ``export_library``: the host code plus the imported device
modules serialised into the library) and ``tvmffi_plan.json`` (a small call plan: entry name,
target kind, device module kinds, versions), plus for CUDA kernels the compiled code of their
CUDA sources (:mod:`.cuda_binaries`). The library also carries an identity constant
(:mod:`.identity`) that loading compares with the artifact and plan before anything else runs it.
Loading uses ``tvm_ffi.load_module`` only: no lowering and no TVM compiler pass runs, and TVM's
Python package is not imported (a CUDA source without saved code goes to a compile callback only
where one was registered before, e.g. by an imported ``tvm.support.nvcc``); the TVM runtime
libraries the generated code calls into (``libtvm_runtime``, plus ``libtvm_runtime_cuda`` for CUDA
modules) are loaded with ctypes.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator, Optional

from tilelang_core.cache.native import load_advice
from tilelang_core.env_commands import command_from_env
from tilelang_core.errors import ArtifactError, BackendUnavailableError, BuildError

#: File names inside a saved kernel directory.
LIBRARY_FILE = "kernel.so"
PLAN_FILE = "tvmffi_plan.json"
PLAN_FORMAT = 1

#: Module kinds that must be compiled and linked (``export_library``) before they can run.
_NOT_RUNNABLE_KINDS = ("c", "static_library")

_LOADED_RUNTIMES: dict[str, Any] = {}

#: Device runtimes that could not be loaded in this process, with the message of the error raised
#: then: later loads raise it again without a second ``dlopen``. Besides being pointless (it fails the same way), each
#: failed ``dlopen`` of ``libtvm_runtime_cuda.so`` maps ``libcudart`` (which has thread-local
#: storage) before it fails on the missing driver, and glibc 2.36 does not give the TLS module id
#: back: after a few dozen such loads, the next library with TLS (a cython CUDA kernel) stopped the
#: process with "dl-tls.c: _dl_add_to_slotinfo: Assertion `idx == 0' failed".
_FAILED_RUNTIMES: dict[str, str] = {}

#: The driver library a device runtime needs, loaded (or not) before the runtime itself, so that
#: a machine without the driver never half-loads the runtime (see :data:`_FAILED_RUNTIMES`).
_DRIVER_LIBRARIES = {"cuda": "libcuda.so.1"}

#: Flags given to the system compiler for C sources (target ``c``), before ``compile_flags``.
#: Header force-included when TVM's C host sources are compiled: TVM's C codegen writes ``half``
#: for float16 without declaring it. ``-fno-strict-aliasing``: ``T.view`` with another dtype reads
#: one array through two pointer types; the kernel source's ``#pragma GCC optimize`` covers GCC
#: only, and clang (``CC=clang``) reordered or dropped those accesses (docs/backend-conventions.md).
C_PREAMBLE = Path(__file__).with_name("c_host_preamble.h")
DEFAULT_C_FLAGS = ["-O3", "-fno-strict-aliasing", "-include", str(C_PREAMBLE)]
#: Added for modules of CPU code only (target ``c``, whose source is the kernel's C entry inside
#: a packed function, tilelang_core/lowering/c_runtime.py): code for this CPU, and the entry's
#: ``#pragma omp simd`` loops count (no OpenMP runtime is linked). Such a saved kernel records
#: the CPU's instruction set and loads only where it is the same. These modules are compiled by
#: the C compiler (:func:`c_compiler`): TVM picks ``g++`` first, which compiles ``.c`` files as C++.
CPU_C_FLAGS = ["-march=native", "-fopenmp-simd", "-DTL_OPENMP_SIMD"]


def c_compiler() -> list[str]:
    """The C compiler command of CPU-only modules: ``$CC`` (may hold flags, shell-split) or ``cc``
    (what the declaration's ``native_compiler`` names, so the cache key follows it)."""
    return command_from_env("CC", "cc")


def host_compiler() -> Optional[list[str]]:
    """The system compiler of modules with device code (TVM's choice: ``$CXX``, else ``$CC``,
    shell-split here), or None when neither is set (TVM then finds ``g++``, ``gcc``, ...)."""
    variable = "CXX" if os.environ.get("CXX") else "CC"
    text = os.environ.get(variable)
    return command_from_env(variable, "c++") if text and text.strip() else None


def _fcompile(compiler: list[str]) -> Any:
    """An ``export_library`` compile function running ``compiler`` (a command that may hold
    flags, ``["gcc", "-g0"]``) for both the build and the target-triple probe. TVM's own default
    runs ``$CC``/``$CXX`` as one program name in both, so ``CC="gcc -g0"`` failed with
    "No such file or directory: 'gcc -g0'". On Linux and macOS the compiler runs through
    :func:`tilelang_core.compiler_process.run_compiler`: killed past
    ``$TILELANG_COMPILE_TIMEOUT_SECONDS`` (TVM's own run waits forever on a compiler that hangs)
    and with its output bounded (a compiler printing megabytes made an error of as many)."""
    from tvm.support import cc as tvm_cc

    program, leading = compiler[0], compiler[1:]

    def compile_shared(output: str, objects: list[str], options: Optional[list[str]] = None, **kwargs: Any) -> None:
        kwargs.pop("cc", None)
        if sys.platform == "win32" or kwargs.get("ccache_env") is not None:  # TVM's own way there
            tvm_cc.create_shared(output, objects, options=leading + list(options or []), cc=program, **kwargs)
            return
        _link_shared(compiler, output, objects, list(options or []), cwd=kwargs.get("cwd"))

    def target_triple() -> Optional[str]:
        from tilelang_core.compiler_process import probe_timeout_s, run_compiler

        cmd = [*compiler, "-dumpmachine"]
        try:
            done = run_compiler(cmd, timeout=probe_timeout_s(60.0))
        except OSError as exc:  # TVM would only say "Target triple should not be empty"
            raise BuildError(f"cannot run `{shlex.join(cmd)}` to learn the target triple: {exc}", command=cmd,
                             output=str(exc)) from None
        if not done.ok or not done.output.strip():
            why = done.failure if not done.ok else "it printed nothing"
            raise BuildError(f"`{shlex.join(cmd)}` did not print the target triple ({why})"
                             + (f"; it printed:\n{done.output}" if done.output else ""), command=cmd, output=done.output)
        return done.output.strip()

    compile_shared.output_format = tvm_cc.create_shared.output_format  # type: ignore[attr-defined]
    compile_shared.get_target_triple = target_triple  # type: ignore[attr-defined]
    return compile_shared


def _link_shared(compiler: list[str], output: str, objects: Any, options: list[str], cwd: Optional[str]) -> None:
    """``compiler -shared -fPIC -o output options objects`` (the command TVM's ``create_shared``
    runs on Linux and macOS), bounded by :func:`~tilelang_core.compiler_process.run_compiler`.

    :raises BuildError: the compiler could not be started, failed, was killed or timed out.
    """
    from tilelang_core.compiler_process import probe_timeout_s, run_compiler

    cmd = [*compiler, "-shared", "-fPIC"]
    if sys.platform == "darwin":
        cmd += ["-undefined", "dynamic_lookup"]
    cmd += ["-o", str(output), *options, *([objects] if isinstance(objects, str) else [str(o) for o in objects])]
    try:
        run = run_compiler(cmd, cwd=cwd, writes=Path(output))
    except OSError as exc:
        raise BuildError(f"cannot run the compiler {cmd[0]!r}: {exc}; set $CC (or $CXX) to a working compiler",
                         command=cmd, output=str(exc)) from None
    if not run.ok:
        raise run.build_error(Path(output).name)


def is_cpu_only(kinds: list[str]) -> bool:
    """Whether a module of these kinds is CPU code compiled from C here (target ``c``)."""
    return bool(kinds) and set(kinds) <= {"c"}


def for_this_cpu(kinds: list[str]) -> bool:
    """Whether a module of these kinds is CPU code built for this machine's instruction set: target
    ``c`` (``-march=native``) or ``llvm`` (the host CPU, ``tilelang_core.lowering.codegen.host_cpu_llvm_target``)."""
    return bool(kinds) and set(kinds) <= {"c", "llvm"}


@functools.lru_cache(maxsize=None)
def cpu_c_flags(compiler: tuple[str, ...]) -> list[str]:
    """:data:`CPU_C_FLAGS`, or the part of them ``compiler`` takes (tried once per process)."""
    from tilelang_core.compiler_process import probe_timeout_s, run_compiler

    with tempfile.TemporaryDirectory(prefix="tilelang_tvmffi_flags_") as scratch:
        src = Path(scratch) / "probe.c"
        src.write_text("int tl_probe(void) { return 0; }\n")
        usable: list[str] = []
        for flags in (CPU_C_FLAGS[:1], CPU_C_FLAGS[1:]):
            cmd = [*compiler, *usable, *flags, "-fPIC", "-shared", "-o", str(Path(scratch) / "probe.so"), str(src)]
            try:  # killed whole past the limit: subprocess.run waited on a grandchild holding its pipe
                ok = run_compiler(cmd, timeout=probe_timeout_s(60.0)).ok
            except OSError:
                ok = False
            if ok:
                usable += flags
    return usable


def tvm_lib_dir() -> Optional[Path]:
    """Directory holding TVM's shared libraries, found without importing TVM (None if unknown).

    Where TVM's package is not installed, ``$TILELANG_TVM_LIB_DIR`` may name a folder holding
    only its runtime libraries (``libtvm_runtime.so`` and device sidecars such as
    ``libtvm_runtime_cuda.so``): enough to load saved kernels (the GPU check kit ships them so;
    docs/gpu.md). An installed TVM always wins: two copies of TVM's runtime in one process abort it.
    """
    try:
        spec = importlib.util.find_spec("tvm")
    except (ImportError, ValueError):  # a finder that refuses it: not importable here
        spec = None
    if spec is None or not spec.submodule_search_locations:
        override = os.environ.get("TILELANG_TVM_LIB_DIR")
        return Path(override) if override else None
    for location in spec.submodule_search_locations:
        lib = Path(location) / "lib"
        if lib.is_dir():
            return lib
    return None


def ensure_tvm_runtime(device_kinds: list[str]) -> None:
    """Load the TVM runtime libraries that generated code and device modules need.

    The host code of a TVM module calls ``TVMBackend*`` functions (workspace allocation, parallel
    launch) that live in ``libtvm_runtime``; device modules (``cuda``) are deserialised by loaders
    that the runtime sidecars register. When TVM is already imported this is a no-op for the
    base runtime. Raises :class:`BackendUnavailableError` when a device runtime cannot load.
    """
    import ctypes

    if "tvm" not in sys.modules and "base" not in _LOADED_RUNTIMES:
        lib_dir = tvm_lib_dir()
        path = lib_dir / "libtvm_runtime.so" if lib_dir else None
        if path is not None and path.exists():
            import tvm_ffi  # noqa: F401 - loads libtvm_ffi, which libtvm_runtime links against

            _LOADED_RUNTIMES["base"] = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
        else:  # unusual layout: let TVM find its own libraries
            try:
                import tvm.runtime  # noqa: F401
            except ModuleNotFoundError as exc:
                if exc.name not in ("tvm", "tvm.runtime"):
                    raise
                raise BackendUnavailableError(  # "pip install apache-tvm" alone left out the other way
                    "tvm_ffi: this kernel needs TVM's runtime library (libtvm_runtime.so), and neither TVM's Python "
                    "package nor $TILELANG_TVM_LIB_DIR is here: install apache-tvm, or set TILELANG_TVM_LIB_DIR to a "
                    "folder holding libtvm_runtime.so (the GPU kit ships one: docs/gpu.md)") from None

            _LOADED_RUNTIMES["base"] = True
    for kind in device_kinds:
        if kind in _LOADED_RUNTIMES or kind in ("llvm", "c", "static_library", "library"):
            continue
        import tvm_ffi

        loader = f"ffi.Module.load_from_bytes.{kind}"
        if tvm_ffi.get_global_func(loader, allow_missing=True) is not None:
            _LOADED_RUNTIMES[kind] = True
            continue
        lib_dir = tvm_lib_dir()
        path = lib_dir / f"libtvm_runtime_{kind}.so" if lib_dir else None
        if path is None or not path.exists():
            raise BackendUnavailableError(
                f"tvm_ffi: the kernel contains a {kind!r} device module but TVM was built without "
                f"its runtime (no libtvm_runtime_{kind}.so); install a TVM build with {kind} enabled"
            )
        if kind in _FAILED_RUNTIMES:
            raise BackendUnavailableError(_FAILED_RUNTIMES[kind])
        try:
            if kind in _DRIVER_LIBRARIES:
                ctypes.CDLL(_DRIVER_LIBRARIES[kind], mode=ctypes.RTLD_GLOBAL)
            _LOADED_RUNTIMES[kind] = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
        except OSError as exc:
            _FAILED_RUNTIMES[kind] = (
                f"tvm_ffi: cannot load TVM's {kind} runtime ({path.name}): {exc}; a {kind} driver "
                "and device are needed to run this kernel"
            )
            raise BackendUnavailableError(_FAILED_RUNTIMES[kind]) from None
        if tvm_ffi.get_global_func(loader, allow_missing=True) is None:
            raise BackendUnavailableError(
                f"tvm_ffi: TVM's {kind} runtime loaded but registered no module loader ({loader})"
            )


def unwrap_module(modules: Any) -> Any:
    """The runtime module from what the pipeline attached (``Executable``, ``Module``, 1-list)."""
    if isinstance(modules, (list, tuple)):
        if len(modules) != 1:
            raise BuildError(
                f"tvm_ffi: expected one TVM runtime module in artifact.tvm_modules, got {len(modules)}"
            )
        modules = modules[0]
    if isinstance(modules, dict):
        raise BuildError("tvm_ffi: artifact.tvm_modules must be a TVM runtime module, got a dict")
    mod = getattr(modules, "mod", modules)  # tvm.runtime.Executable wraps the module in .mod
    if not hasattr(mod, "get_function") or not hasattr(mod, "imports"):
        raise BuildError(
            f"tvm_ffi: artifact.tvm_modules must be a TVM runtime module (tvm.compile's result), "
            f"got {type(modules).__name__}; lower with consumes=['runtime_module']"
        )
    return mod


def _modules(mod: Any) -> Iterator[Any]:
    """``mod`` and every module it imports, depth first."""
    stack = [mod]
    while stack:
        m = stack.pop()
        yield m
        stack.extend(m.imports)


def module_kinds(mod: Any) -> list[str]:
    """Kinds of ``mod`` and every module it imports, depth first, without duplicates."""
    return list(dict.fromkeys(m.kind for m in _modules(mod)))


def _build_dir() -> Path:
    """A fresh private directory in the temporary folder for one kernel library."""
    try:
        return Path(tempfile.mkdtemp(prefix="tilelang_tvmffi_"))
    except OSError as exc:
        raise type(exc)(exc.errno, f"tvm_ffi: cannot make a build folder in the temporary folder "
                        f"{tempfile.gettempdir()}: {exc.strerror or exc}; set TMPDIR to a writable folder "
                        "with free space") from None


def _tvm_default_compiler() -> Optional[list[str]]:
    """The compiler TVM's ``export_library`` would pick (``g++``, ``gcc``, ... on PATH), as a
    command, so that it runs bounded too (:func:`_fcompile`); None where TVM finds none."""
    from tvm.support import cc as tvm_cc

    found = tvm_cc.get_cc()
    return [found] if found else None


#: Room (free disk space in the temporary folder, and the file-size limit) above which LLVM's
#: object files are written unmeasured: below it, :func:`check_room_for_objects` measures them.
ROOM_UNMEASURED = 256 << 20


def check_room_for_objects(mod: Any) -> None:
    """Raise :class:`BuildError` when the object files ``export_library`` would have LLVM write
    for ``mod`` (into the temporary folder) may not fit there.

    LLVM's object writer ends the process (``LLVM ERROR: IO failure on output stream: File too
    large`` or "No space left on device", from its fatal-error path inside TVM) when a write
    fails, so it must not start one that can fail: under a file-size limit (``ulimit -f``) or on
    a nearly full disk, a cache save killed the Python process. Where the room is below
    :data:`ROOM_UNMEASURED`, each LLVM module's assembly text is generated in memory and its
    length taken as the object's bound (an object holds the same code and data in binary form; it
    was 2.4x smaller on kernels measured here).
    """
    llvm_modules = [m for m in _modules(mod) if m.kind == "llvm"]
    if not llvm_modules:
        return
    folder = tempfile.gettempdir()
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return  # the folder itself is the problem: _build_dir and TVM say so
    room, limit_text = free, ""
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        if limit != resource.RLIM_INFINITY and limit < room:
            room, limit_text = limit, f" and files are limited to {limit} bytes (`ulimit -f`)"
    except (ImportError, OSError, ValueError):  # no resource module (Windows)
        pass
    if room >= ROOM_UNMEASURED:
        return
    need = sum(len(str(m.inspect_source("asm"))) for m in llvm_modules)
    if need > room:
        raise BuildError(
            f"tvm_ffi: not enough room to write the kernel's object code (up to {need} bytes): the temporary "
            f"folder {folder} has {free} bytes free{limit_text}; free some space, set TMPDIR to a folder with "
            "more, or raise the limit (LLVM would end the process on a failed write)")


def not_utf8(path: os.PathLike) -> Optional[str]:
    """Why TVM cannot take ``path`` (it passes paths as UTF-8 text), or None: a non-ASCII name
    under a locale whose file-system encoding is not UTF-8 (``LC_ALL=C`` with
    ``PYTHONCOERCECLOCALE=0``) reaches Python surrogate-escaped, and TVM failed with "'utf-8' codec
    can't encode characters ... surrogates not allowed"."""
    try:
        os.fspath(path).encode("utf-8")
    except UnicodeEncodeError:
        return (f"TVM takes file paths as UTF-8, and {os.fspath(path)!r} is not UTF-8 in this locale (file-system "
                f"encoding {sys.getfilesystemencoding()}); use a UTF-8 locale (LANG=C.UTF-8) or a folder with an "
                "ASCII name (TMPDIR, TILELANG_CACHE_DIR, the export path)")
    return None


def export(mod: Any, file_name: Path, compile_flags: Optional[list[str]] = None,
           identity: Optional[str] = None, compiler: Optional[list[str]] = None) -> None:
    """``export_library`` with compiler failures turned into :class:`BuildError`.

    ``compile_flags`` are passed to the system compiler (only used when C sources are compiled).
    ``identity`` (a hash from :func:`.identity.kernel_id`) is linked into the library as an
    exported constant, so a load can tell which kernel the library was built for. ``compiler``:
    the system compiler command (program and flags) to use; default :func:`host_compiler`.
    """
    from .identity import write_source

    problem = not_utf8(file_name) or not_utf8(tempfile.gettempdir())
    if problem:
        raise BuildError(f"tvm_ffi: cannot write the kernel library: {problem}")
    kwargs: dict[str, Any] = {}
    if compile_flags:
        kwargs["options"] = list(compile_flags)
    compiler = compiler or host_compiler() or _tvm_default_compiler()
    if not compiler and sys.platform.startswith("linux"):  # TVM went on with cc=None: "expected str, bytes or ..."
        raise BuildError(f"tvm_ffi: no C/C++ compiler found to link the kernel library {file_name.name} (none of "
                         "g++, gcc, clang++, clang, c++, cc is on PATH); install gcc or clang, or set CC/CXX to one")
    if compiler:
        kwargs["fcompile"] = _fcompile(compiler)
    check_room_for_objects(mod)
    with tempfile.TemporaryDirectory(prefix="tilelang_tvmffi_id_") as scratch:
        if identity is not None:
            kwargs["addons"] = [str(write_source(Path(scratch), identity))]
        try:
            mod.export_library(str(file_name), **kwargs)
        except Exception as exc:  # noqa: BLE001 - TVM raises RuntimeError with the compiler output
            raise BuildError(f"tvm_ffi: export_library({file_name.name}) failed: {exc}") from exc


def runnable_module(mod: Any, compile_flags: Optional[list[str]] = None,
                    identity: Optional[str] = None,
                    keep: bool = False) -> tuple[Any, Optional[Path], Optional[bytes]]:
    """``(runnable module, kept library path or None, library bytes or None)``.

    Modules containing C sources (target ``c``) are compiled and linked into a shared library
    with ``export_library`` and loaded back, as ``tvm.runtime.Executable.jit`` does. The system
    compiler (for CPU-only modules :func:`c_compiler`, else TVM's choice) gets
    :data:`DEFAULT_C_FLAGS`, then for CPU-only modules :func:`cpu_c_flags`, then ``compile_flags``
    (TVM itself passes no optimisation level, which would mean ``-O0``). ``identity`` is linked
    in (see :func:`export`).

    The library is built in a private temporary directory, loaded, read into memory (:func:`save`
    writes those bytes) and the directory is removed at once: a loaded library needs no file, so
    a process that is killed later leaves nothing in the temporary folder. ``keep=True`` (a
    ``verbose`` build) keeps the directory and returns the library's path in it.
    """
    kinds = module_kinds(mod)
    if not any(k in _NOT_RUNNABLE_KINDS for k in kinds):
        return mod, None, None
    directory = _build_dir()
    try:
        path = directory / LIBRARY_FILE
        if is_cpu_only(kinds):
            compiler = c_compiler()
            flags = DEFAULT_C_FLAGS + cpu_c_flags(tuple(compiler))
            export(mod, path, flags + list(compile_flags or []), identity=identity, compiler=compiler)
        else:
            export(mod, path, DEFAULT_C_FLAGS + list(compile_flags or []), identity=identity)
        import tvm_ffi

        data = path.read_bytes()
        check_symbols_resolve(path)
        runnable = tvm_ffi.load_module(str(path))
    finally:
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)
    return runnable, (path if keep else None), data


def check_symbols_resolve(library: Path) -> None:
    """Load ``library`` once with every symbol bound now (``RTLD_NOW``).

    ``tvm_ffi.load_module`` binds lazily, so a function the library calls but nothing defines (a
    ``T.call_extern`` of CUDA's ``__float2half_rz`` on target ``c``) ended the process with the
    dynamic linker's "undefined symbol" at the first call (exit status 127), after a build that
    reported success.

    :raises BuildError: a symbol does not resolve, naming it.
    """
    import ctypes
    import os

    try:
        handle = ctypes.CDLL(str(library), mode=os.RTLD_NOW | os.RTLD_LOCAL)
    except OSError as exc:
        raise BuildError(f"tvm_ffi: the kernel library does not load: {exc}; " + load_advice(
            library, "a function it calls is defined nowhere (a T.call_extern of a function this target's C library "
            "lacks, such as a CUDA intrinsic on target 'c'?)")) from None
    del handle


def undefined_jit_symbols(source: str) -> list[str]:
    """The functions an LLVM module declares that this process does not define (what the ORC JIT
    would fail to resolve): ``T.call_extern`` of a function no loaded library has. LLVM
    intrinsics (``llvm.*``) and TVM's runtime functions (``TVM*``), which TVM resolves itself, are
    not looked up."""
    import ctypes
    import re

    process = ctypes.CDLL(None)
    names = re.findall(r"^declare [^@\n]*@([\w.$]+)\(", source, re.M)
    return [n for n in dict.fromkeys(names) if not n.startswith(("llvm.", "TVM", "__tvm")) and not hasattr(process, n)]


def save(kernel: Any, directory: Path) -> None:
    """Write the kernel library and call plan into ``directory`` (see module docstring)."""
    from .identity import kernel_id
    from .kernel import kernel_state

    state = kernel_state(kernel)
    target = directory / LIBRARY_FILE
    if state.library_bytes is not None:  # built here, with its identity linked in
        target.write_bytes(state.library_bytes)
    elif state.library_path is not None and state.library_path.exists():
        shutil.copyfile(state.library_path, target)  # loaded, with its identity linked in
    elif state.module is not None and hasattr(state.module, "export_library"):
        export(state.module, target, identity=kernel_id(state.artifact, state.module_kinds, state.alignment))
    elif state.library_path is not None:  # loaded from a cache entry or export since removed
        raise ArtifactError(f"tvm_ffi: cannot save kernel '{state.artifact.name}': the library it was loaded from, "
                            f"{state.library_path}, is gone (its cache entry or export was removed); compile the "
                            "kernel again to save it")
    else:
        raise BuildError("tvm_ffi: this kernel has neither a TVM module nor a library file to save")
    plan = {
        "plan_format": PLAN_FORMAT,
        "backend": "tvm_ffi",
        "library": LIBRARY_FILE,
        "entry": state.artifact.name,
        "target_kind": state.artifact.target_kind,
        "module_kinds": state.module_kinds,
        "out_idx": list(state.out_idx),
        "alignment": state.alignment,
        "versions": _versions(),
        "cpu": _cpu_id() if for_this_cpu(state.module_kinds) else None,
        "cuda_binaries": _save_cuda_binaries(state, directory),
    }
    (directory / PLAN_FILE).write_text(json.dumps(plan, indent=1))


def _save_cuda_binaries(state: Any, directory: Path) -> list[dict[str, str]]:
    """The compiled code (fat binaries) of the kernel's CUDA sources, written beside the library
    (:mod:`.cuda_binaries`); the plan's entries."""
    if "cuda" not in state.module_kinds:
        return []
    from .cuda_binaries import save_binaries

    loaded_from = state.library_path.parent if state.module is None and state.library_path is not None else None
    arch = state.artifact.arch
    try:
        return save_binaries(state.module, arch, directory, loaded_from)
    except ArtifactError:
        raise
    except Exception as exc:  # noqa: BLE001 - NVRTC/nvcc errors come as RuntimeError and others
        raise BuildError(
            f"tvm_ffi: compiling the CUDA code of kernel {state.artifact.name!r} for {arch} "
            f"while saving it failed: {exc}"
        ) from exc


def _load_error(library: Path, exc: Any) -> ArtifactError:
    """The error of a saved library that does not load (with what to do on a ``noexec`` mount)."""
    from tilelang_core.cache.native import noexec_note

    return ArtifactError(f"tvm_ffi: cannot load {library}: {exc}{noexec_note(library)}")


def _check_identity(library: Path, artifact: Any, kinds: list[str], alignment: int) -> None:
    """Refuse a library built for another kernel (or with a plan edited after saving)."""
    from .identity import kernel_id, library_id

    try:
        found = library_id(library)
    except OSError as exc:
        raise _load_error(library, exc) from None
    expected = kernel_id(artifact, kinds, alignment)
    if found != expected:
        what = "carries no kernel identity" if found is None else f"was built for another kernel ({found[:12]}...)"
        raise ArtifactError(
            f"tvm_ffi: {library} {what}, not for kernel {artifact.name!r} with the saved plan ({expected[:12]}...); "
            "recompile the kernel"
        )


def _cpu_id() -> str:
    from tilelang_core.devices import instruction_set_id

    return instruction_set_id()


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in ("apache-tvm", "apache-tvm-ffi", "tilelang-backend-tvmffi"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            pass
    return out


def load(artifact: Any, directory: Path, options: Any) -> Any:
    """Restore a kernel written by :func:`save` with ``tvm_ffi.load_module``.

    The plan must name this kernel, its target and ``out_idx``, and the library must carry the
    identity of the artifact and plan (:mod:`.identity`) before TVM's loader touches it. The
    shapes and dtypes the call path checks come from the artifact itself, and the compiled code
    checks them once more on every call (TVM's packed-function argument checks).
    """
    plan_path = directory / PLAN_FILE
    try:
        plan = json.loads(plan_path.read_text())
    except FileNotFoundError:
        raise ArtifactError(f"tvm_ffi: {plan_path} is missing; the cached kernel is incomplete") from None
    except (OSError, ValueError) as exc:
        raise ArtifactError(f"tvm_ffi: cannot read {plan_path}: {exc}") from None
    if not isinstance(plan, dict) or plan.get("plan_format") != PLAN_FORMAT:
        raise ArtifactError(
            f"tvm_ffi: {plan_path} has plan format {plan.get('plan_format') if isinstance(plan, dict) else None!r}, "
            f"expected {PLAN_FORMAT}; recompile the kernel"
        )
    if plan.get("entry") != artifact.name:
        raise ArtifactError(
            f"tvm_ffi: {plan_path} is for kernel {plan.get('entry')!r}, not {artifact.name!r}"
        )
    if plan.get("library") != LIBRARY_FILE:
        raise ArtifactError(f"tvm_ffi: {plan_path} names library {plan.get('library')!r}, not {LIBRARY_FILE}; "
                            "the saved kernel was changed; recompile the kernel")
    if plan.get("target_kind") != artifact.target_kind or plan.get("out_idx") != list(options.out_idx):
        raise ArtifactError(
            f"tvm_ffi: {plan_path} was saved for target {plan.get('target_kind')!r} with out_idx "
            f"{plan.get('out_idx')}, but the artifact is for {artifact.target_kind!r} and out_idx "
            f"{list(options.out_idx)} was asked; recompile the kernel"
        )
    if plan.get("cpu") and plan["cpu"] != _cpu_id():
        raise ArtifactError(f"tvm_ffi: the kernel in {directory} was built for another CPU (the instruction "
                            "set of the machine that built it: -march=native for c, its CPU for llvm); "
                            "recompile the kernel")
    library = directory / LIBRARY_FILE
    if not library.is_file():
        raise ArtifactError(f"tvm_ffi: {library} is missing; the cached kernel is incomplete")
    kinds = plan.get("module_kinds", [])
    alignment = plan.get("alignment", 64)
    if not isinstance(kinds, list) or not all(isinstance(k, str) and k.isidentifier() for k in kinds):
        raise ArtifactError(f"tvm_ffi: {plan_path} has invalid module kinds {kinds!r}")
    if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment < 0:
        raise ArtifactError(f"tvm_ffi: {plan_path} has an invalid alignment {alignment!r}")
    from .cuda_binaries import read_binaries, serving

    binaries = read_binaries(plan.get("cuda_binaries", []), directory)  # checked before anything loads
    try:
        ensure_tvm_runtime(kinds)
    except BackendUnavailableError as exc:  # kept whole: it can be saved again, and runs where a GPU is
        from .kernel import KernelState, _check_out_idx, unrunnable_kernel

        state = KernelState(artifact=artifact, options=options, out_idx=_check_out_idx(artifact, options.out_idx),
                            func=None, library_path=library.resolve(), module_kinds=kinds, alignment=alignment)
        return unrunnable_kernel(state, f"{artifact.name}() cannot run on this machine: {exc}")
    from tilelang_core.cache.native import dlopen_path

    try:
        load_as = dlopen_path(library.resolve())  # never a library loaded earlier from this path
    except OSError as exc:
        raise ArtifactError(f"tvm_ffi: cannot load {library}: {exc}") from None
    problem = not_utf8(load_as)
    if problem:
        raise ArtifactError(f"tvm_ffi: cannot load {library}: {problem}")
    _check_identity(Path(load_as), artifact, kinds, alignment)
    import tvm_ffi

    try:
        with serving(binaries):  # TVM's CUDA loader asks for the compiled code of saved source
            module = tvm_ffi.load_module(load_as)
    except Exception as exc:  # noqa: BLE001 - tvm-ffi raises RuntimeError for bad libraries
        raise _load_error(library, exc) from None
    from .kernel import make_kernel

    return make_kernel(
        artifact, options, module, module_for_export=None, library_path=library.resolve(),
        kinds=kinds, alignment=alignment,
    )


__all__ = [
    "LIBRARY_FILE",
    "PLAN_FILE",
    "ensure_tvm_runtime",
    "export",
    "load",
    "module_kinds",
    "runnable_module",
    "save",
    "tvm_lib_dir",
    "unwrap_module",
]

