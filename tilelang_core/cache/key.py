"""The cache key of a kernel: a hash of what determines the compiled result, and nothing else.

The key covers the kernel's canonical TIR text, target and host target, backend name,
version and a content hash of the backend plugin's installed files, the core's version and a
content hash of its files, TVM's version, ``pass_configs``, ``compile_flags``, ``out_idx``, the
identity of the native compiler, the CPU's instruction set for CPU targets (their code is built for
the CPU that builds it), and the include/library search paths of the environment with the content
of the header files the kernel's source includes (:mod:`tilelang_core.cache.includes`). It never
depends on what else the process compiled: the TIR text is printed from the kernel as written
(before the pipeline renames anything), and numeric suffixes that name generators add to
variables (``i_1``, ``bx_17``) are renumbered by order of first appearance.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import sys
import threading
from typing import Any, Optional, Sequence

from ..fork_locks import renew_after_fork
from ..capabilities import TargetCapability
from ..compiler_process import probe_timeout_s, run_compiler
from ..env_commands import command_from_env

#: Bumped when what goes into a key, or how entries are laid out, changes.
CACHE_KEY_VERSION = 5

#: Target kinds whose code is built for the CPU that builds it (``-march=native``, the host CPU for
#: LLVM): their key holds :func:`tilelang_core.devices.instruction_set_id`.
CPU_TARGET_KINDS = ("c", "llvm")

#: Source locations the language records for error messages ("tl.source_location", "tl.kernel_loc"):
#: moving a kernel to another line or file must not make it a different kernel.
_LOCATION = re.compile(r'("tl\.[a-z_]*loc(?:ation)?"): "[^"]*"')

_SUFFIXED = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*?)_(\d+)\b")


#: A string literal of the printed TIR (an external function's name, a message, imported source).
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def _normalize_counters(text: str, protected: set[str]) -> str:
    """Renumber ``name_<n>`` identifiers per base name by first appearance (a bijection), outside
    string literals: a string names something outside the kernel (``T.call_extern("f32", "scale_2")``)
    or is text the kernel prints, so ``scale_2`` and ``scale_3`` there are different kernels."""
    numbering: dict[str, dict[str, int]] = {}

    def replace(match: "re.Match[str]") -> str:
        whole = match.group(0)
        if whole in protected:
            return whole
        base = match.group(1)
        seen = numbering.setdefault(base, {})
        index = seen.setdefault(whole, len(seen))
        return f"{base}_#{index}"

    parts, last = [], 0
    for literal in _STRING.finditer(text):
        parts.append(_SUFFIXED.sub(replace, text[last:literal.start()]))
        parts.append(literal.group(0))
        last = literal.end()
    parts.append(_SUFFIXED.sub(replace, text[last:]))
    return "".join(parts)


def _shape_variable_names(buffer: Any) -> set[str]:
    """Names of the variables in ``buffer``'s shape and strides (``T.dynamic("rows_2")``): error
    messages of the compiled kernel name them."""
    import tvm_ffi
    from tvm import tirx

    found: list = []
    for dim in list(getattr(buffer, "shape", ())) + list(getattr(buffer, "strides", None) or ()):
        tvm_ffi.structural_walk(dim, ((tirx.Var,), found.append), order="pre")
    return {str(v.name) for v in found}


def kernel_name(prim_func: Any) -> str:
    """The kernel's name: its ``global_symbol``, else ``main``."""
    attrs = prim_func.attrs
    if attrs is not None and "global_symbol" in attrs:
        return str(attrs["global_symbol"])
    return "main"


def canonical_tir(prim_func: Any) -> str:
    """TVMScript text of ``prim_func`` that is the same for the same kernel in any process.

    Printed with metadata (constants) and the kernel's own name; variable-name counters are
    renumbered, except in parameter, buffer and shape-variable names, which users see in error
    messages, and in string literals (external names, messages); the
    source locations the language records (``tl.source_location``, ``tl.kernel_loc``) are
    blanked, so a kernel that moved to another line is the same kernel.
    """
    name = kernel_name(prim_func)
    func = prim_func
    if func.attrs is not None and "global_symbol" in func.attrs:
        func = func.without_attr("global_symbol")
    text = func.script(name=name, show_meta=True)
    protected = {name}
    for param in prim_func.params:
        protected.add(str(param.name))
    buffer_map = getattr(prim_func, "buffer_map", None)
    for buf in buffer_map.values() if buffer_map is not None else ():
        protected.add(str(buf.name))
        protected |= _shape_variable_names(buf)
    lines = [line for line in text.splitlines() if not line.startswith("# from ")]
    text = _LOCATION.sub(r'\1: "<location>"', "\n".join(lines))
    return _normalize_counters(text, protected)


def canonical_out_idx(out_idx: Any, n_params: int) -> Any:
    """``out_idx`` as a list of non-negative ints when it is valid, else its repr."""
    if out_idx is None:
        return []
    raw = [out_idx] if isinstance(out_idx, int) else out_idx
    if isinstance(raw, (list, tuple)) and all(isinstance(i, int) and not isinstance(i, bool) for i in raw) and n_params:
        return [i % n_params if -n_params <= i < n_params else repr(i) for i in raw]
    return repr(out_idx)


_compiler_ids: dict[tuple, str] = {}
_compiler_lock = threading.Lock()
renew_after_fork(sys.modules[__name__], "_compiler_lock")


def executable_identity(path: Optional[str]) -> str:
    """``path`` resolved (links followed) with its size and modification time: a program replaced
    or edited in place is another one ("missing" for None)."""
    if path is None:
        return "missing"
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError:
        return f"{real} (unreadable)"
    return f"{real} size={st.st_size} mtime={st.st_mtime_ns}"


#: Seconds a compiler may take to print its version for the key (then its identity records the timeout).
VERSION_TIMEOUT_S = 30.0


def _version_output(words: Sequence[str], version_args: Sequence[str]) -> str:
    path = shutil.which(words[0])
    ident = executable_identity(path)
    memo = (tuple(words), tuple(version_args), ident)
    with _compiler_lock:
        if memo in _compiler_ids:
            return _compiler_ids[memo]
    if path is None:
        result = f"{words[0]}: not found"
    else:
        try:  # in a process group of its own, killed whole past the limit (no orphan keeps running)
            out = run_compiler([path, *words[1:], *version_args], timeout=probe_timeout_s(VERSION_TIMEOUT_S))
            result = f"{ident}\n{' '.join(words[1:])}\n{out.output}" + ("" if out.ok else f"\n({out.failure})")
        except OSError as exc:
            result = f"{ident}: {type(exc).__name__}: {exc}"
    with _compiler_lock:
        _compiler_ids[memo] = result
    return result


def native_compiler_identity(capability: TargetCapability) -> str:
    """Identity of the native tools a backend uses for a target, from its declaration alone.

    Resolved paths (with size and modification time) of ``requires.executables``, plus, when
    the backend declares ``native_compiler``, the compiler the environment selects and what it
    prints for ``version_args``. Memoised per process (and per binary).
    """
    parts = [f"{exe}={executable_identity(shutil.which(exe))}" for exe in capability.requires.executables]
    nc = capability.native_compiler
    if nc is not None:
        override = os.environ.get(nc.env, "") if nc.env else ""
        words = command_from_env(nc.env, nc.program) if override.strip() else [nc.program]
        parts.append(_version_output(words, nc.version_args))
    lib = getattr(capability, "library_toolchain", None)
    if lib is not None:
        parts.append(library_toolchain_identity(lib))
    return "\n".join(parts)


def library_toolchain_identity(lib: Any) -> str:
    """Identity of an in-process compiler library (a :class:`~tilelang_core.capabilities.LibraryToolchain`).

    The installed versions of its distributions, the values of its environment variables and
    the SHA-256 of its identifying files, from metadata and the file system alone: nothing is
    imported, loaded or run.
    """
    from importlib.metadata import PackageNotFoundError, version

    parts = [f"library {lib.name}"]
    for dist in lib.distributions:
        try:
            parts.append(f"{dist}=={version(dist)}")
        except PackageNotFoundError:
            parts.append(f"{dist}: not installed")
    for var in lib.env:
        parts.append(f"${var}={os.environ.get(var, '')}")
    for pattern in lib.files:
        path = os.path.expandvars(pattern)
        try:
            with open(path, "rb") as f:
                parts.append(f"{pattern}: sha256={hashlib.sha256(f.read()).hexdigest()}")
        except OSError:
            parts.append(f"{pattern}: missing")
    return "\n".join(parts)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return f"{type(value).__name__}:{value}"


def compute_key(
    prim_func: Any,
    *,
    target: str,
    target_kind: str,
    target_host: Optional[str],
    backend_name: str,
    backend_version: str,
    native_compiler: str,
    backend_files: str = "",
    pass_configs: Optional[dict[str, Any]],
    compile_flags: Sequence[str],
    out_idx: Any,
) -> str:
    """The cache key (64 hex digits) of compiling ``prim_func`` with these settings.

    ``target_kind`` is the kind of ``target`` (``"c"``, ``"llvm"``, ``"cuda"``: the caller has the
    target object). ``backend_files`` is :func:`tilelang_core.backends.files.plugin_files_hash` of the backend's
    distribution, so that a plugin reinstalled with other code under the same version never gets
    kernels its old code built. For a CPU target (:data:`CPU_TARGET_KINDS`) the key holds this CPU's
    instruction set, so machines with other CPUs sharing one cache directory each keep their own
    entry (instead of each refusing, removing and rebuilding the other's). The values of the
    compilers' include/library path variables and the SHA-256 of each header the kernel's source
    includes (:func:`~tilelang_core.cache.includes.included_files`) are in the key too.
    """
    import tvm

    from .. import __version__, devices
    from ..artifact import ARTIFACT_FORMAT_VERSION
    from .includes import include_environment, included_files

    tir = canonical_tir(prim_func)
    flags = list(compile_flags)
    doc = {
        "key_version": CACHE_KEY_VERSION,
        "core": [__version__, core_files_hash()],
        "tvm": getattr(tvm, "__version__", "?"),
        "artifact_format": ARTIFACT_FORMAT_VERSION,
        "tir": tir,
        "target": target,
        "target_host": target_host,
        "backend": [backend_name, backend_version, backend_files],
        "native_compiler": native_compiler,
        "pass_configs": _jsonable(dict(pass_configs or {})),
        "compile_flags": flags,
        "out_idx": canonical_out_idx(out_idx, len(prim_func.params)),
        "cpu": devices.instruction_set_id() if target_kind in CPU_TARGET_KINDS else None,
        "include_env": include_environment(),
        "included_files": included_files(prim_func, tir, flags),
    }
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


# -- the backend plugin's own files, and the core's ----------------------------------------------

_SKIPPED_SUFFIXES = (".pyc", ".pyo")


def _file_digest(path: str) -> str:
    """sha256 of a regular file's content (opened without following a final symlink), or a marker."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        return f"unreadable ({type(exc).__name__})"
    try:
        import stat

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "not a regular file"
        digest = hashlib.sha256()
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            digest.update(chunk)
        return digest.hexdigest()
    finally:
        os.close(fd)


def tree_files(root: str, skipped: tuple[str, ...] = _SKIPPED_SUFFIXES) -> list[tuple[str, str]]:
    """(path relative to ``root`` with ``/`` separators, full path) of every file under ``root``, in a
    stable order, leaving out byte-code caches and names ending in ``skipped``."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(skipped):
                continue
            full = os.path.join(folder, name)
            found.append((os.path.relpath(full, root).replace(os.sep, "/"), full))
    return found


@functools.cache
def core_files_hash() -> str:
    """Content hash (hex) of the core's own files (the imported ``tilelang_core`` package), once per process.

    The lowering pipeline lives in the core, so a kernel built by other core code must never be
    loaded under the same key, even at the same version: an editable install or a checkout on
    ``PYTHONPATH`` keeps its version from commit to commit. Every file of the package directory
    that Python imports from is read (about 1 MB; a few milliseconds), whatever installed it.
    """
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    entries = [f"{rel} sha256={_file_digest(full)}" for rel, full in tree_files(package_dir)]
    return hashlib.sha256("\n".join(entries).encode()).hexdigest()
