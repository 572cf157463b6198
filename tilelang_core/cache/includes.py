"""The files a kernel's C source includes, and the search paths the C compilers read, for the cache key.

A kernel can bring in a header through ``T.import_source('#include "/abs/myhdr.h"')`` (or a name
found in an ``-I`` directory of ``compile_flags`` or in ``CPATH``): the kernel's TIR text names the
header, not its content, so a header edited after the kernel was built would get the old kernel
back from the disk cache. :func:`included_files` resolves such ``#include`` lines as the compiler
would, outside the compiler's built-in system directories, and records the SHA-256 of each file
found, following the quoted includes inside those files too. :func:`include_environment` gives the
values of the environment variables the C compilers read for include and library directories.

A kernel whose TIR text has no ``include`` and whose flags force none costs one substring search:
no file system access.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from typing import Any, Iterable, Optional, Sequence

#: Environment variables the C/C++ compilers read for include and library search directories.
INCLUDE_ENVIRONMENT = ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "LIBRARY_PATH")

#: Variables among :data:`INCLUDE_ENVIRONMENT` that list include directories (in this order).
_INCLUDE_DIRS_ENV = ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH")

#: How deep quoted includes inside included files are followed, and how many files are read at most.
MAX_DEPTH = 16
MAX_FILES = 256

#: Bytes of an included file scanned for nested includes (the whole file is hashed).
_SCAN_LIMIT = 1 << 20

#: ``#include "name"`` or ``#include <name>`` (spaces allowed around ``#``); group 1 is ``"`` or ``<``.
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^">\r\n]+)[">]', re.MULTILINE)

#: Flags that add an include directory, as ``-Idir`` or ``-I dir``; ``-iquote`` serves quoted includes only.
_DIR_FLAGS = ("-iquote", "-isystem", "-idirafter", "-I")


def include_environment() -> dict[str, Optional[str]]:
    """The values of :data:`INCLUDE_ENVIRONMENT` (None when unset): they change what the compiler includes
    and links, whatever the kernel's text."""
    return {name: os.environ.get(name) for name in INCLUDE_ENVIRONMENT}


def _flag_values(flags: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
    """(quote-only dirs, dirs for every include, forced ``-include`` files) named by ``flags``."""
    quote: list[str] = []
    dirs: list[str] = []
    forced: list[str] = []
    i = 0
    while i < len(flags):
        flag = flags[i]
        i += 1
        if flag == "-include":
            if i < len(flags):
                forced.append(flags[i])
                i += 1
            continue
        for prefix in _DIR_FLAGS:
            if flag.startswith(prefix):
                value = flag[len(prefix):]
                if not value and i < len(flags):
                    value = flags[i]
                    i += 1
                if value:
                    (quote if prefix == "-iquote" else dirs).append(value)
                break
    return quote, dirs, forced


def _env_dirs() -> list[str]:
    """Directories of ``CPATH``, ``C_INCLUDE_PATH`` and ``CPLUS_INCLUDE_PATH`` (an empty element is the
    working directory, as for the compiler)."""
    found: list[str] = []
    for name in _INCLUDE_DIRS_ENV:
        value = os.environ.get(name)
        if value is not None:
            found.extend(part or "." for part in value.split(os.pathsep))
    return found


def _read(path: str) -> tuple[str, bytes]:
    """(SHA-256 or a marker, the first bytes) of the regular file at ``path``; never blocks on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        return f"unreadable ({type(exc).__name__})", b""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "not a regular file", b""
        digest = hashlib.sha256()
        head = b""
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            digest.update(chunk)
            if len(head) < _SCAN_LIMIT:
                head += chunk[: _SCAN_LIMIT - len(head)]
        return digest.hexdigest(), head
    except OSError as exc:
        return f"unreadable ({type(exc).__name__})", b""
    finally:
        os.close(fd)


def _candidates(name: str, dirs: Iterable[str]) -> list[str]:
    """Every existing file ``name`` names: itself when absolute, else each directory's ``name``."""
    if os.path.isabs(name):
        return [name] if os.path.isfile(name) else []
    found = []
    for folder in dirs:
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            found.append(os.path.abspath(path))
    return found


def _source_texts(prim_func: Any) -> list[str]:
    """The string constants of ``prim_func`` that hold an ``#include`` line (``T.import_source`` text)."""
    import tvm
    import tvm_ffi

    texts: list[str] = []

    def visit(value: Any) -> None:
        text = str(value.value)
        if "include" in text:
            texts.append(text)

    tvm_ffi.structural_walk(prim_func, ((tvm.ir.StringImm,), visit), order="pre")
    return texts


def included_files(prim_func: Any, tir_text: str, compile_flags: Sequence[str]) -> list[str]:
    """``"<path> sha256=<hex>"`` for each file the kernel's C source may include, in a stable order.

    An ``#include "..."`` or ``#include <...>`` line of the kernel's string constants (the text of
    ``T.import_source``), and each ``-include`` file of ``compile_flags``, names a file when the path
    is absolute or is found in an ``-I``/``-iquote``/``-isystem``/``-idirafter`` directory of
    ``compile_flags`` or a ``CPATH``/``C_INCLUDE_PATH``/``CPLUS_INCLUDE_PATH`` directory (not the
    compiler's built-in system directories). Every match in every such directory is recorded (the
    compiler takes the first in its own order; recording all keeps the key right whichever it is),
    and the quoted includes inside each file are followed too (also from the file's own directory),
    :data:`MAX_DEPTH` deep and :data:`MAX_FILES` files at most. Files that no longer exist are left
    out; the environment values themselves are in :func:`include_environment`.

    Without ``include`` in ``tir_text`` and without ``-include`` in the flags, nothing is read.
    """
    flags = list(compile_flags)
    if "include" not in tir_text and "-include" not in flags:
        return []
    return files_included_by(_source_texts(prim_func) if "include" in tir_text else [], flags)


def files_included_by(texts: Iterable[str], compile_flags: Sequence[str]) -> list[str]:
    """:func:`included_files` of C source ``texts`` (a backend's own source, for a memo of its
    builds): ``"<path> sha256=<hex>"`` of each file they include that the search finds."""
    flags = list(compile_flags)
    quote_dirs, dirs, forced = _flag_values(flags)
    search = dirs + _env_dirs()
    pending: list[tuple[str, int]] = []  # (file, depth)
    for name in forced:
        pending.extend((path, 0) for path in _candidates(name, [".", *quote_dirs, *search]))
    for text in texts:
        for kind, name in _INCLUDE.findall(text):
            places = (quote_dirs + search) if kind == '"' else search
            pending.extend((path, 0) for path in _candidates(name.strip(), places))
    seen: dict[str, str] = {}
    while pending and len(seen) < MAX_FILES:
        path, depth = pending.pop(0)
        if path in seen:
            continue
        digest, head = _read(path)
        seen[path] = digest
        if depth >= MAX_DEPTH or not head:
            continue
        here = os.path.dirname(path)
        for kind, name in _INCLUDE.findall(head.decode("utf-8", errors="replace")):
            if kind == '"':
                pending.extend((found, depth + 1) for found in _candidates(name.strip(), [here, *quote_dirs, *search]))
    return [f"{path} sha256={digest}" for path, digest in sorted(seen.items())]


__all__ = ["INCLUDE_ENVIRONMENT", "MAX_DEPTH", "MAX_FILES", "files_included_by", "include_environment", "included_files"]
