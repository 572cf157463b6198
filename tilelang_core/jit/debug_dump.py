"""``@tilelang.jit(debug_root_path=...)``: every kernel the decorated function builds is written out
for reading, as TileLang does.

Two files per kernel in the directory (created when missing): ``tilelang_jit_kernel_<name>.<ext>``,
the kernel's source (``get_kernel_source()``; ``.c`` for C, ``.cu`` for CUDA, ``.metal`` for Metal,
``.ll`` for LLVM), and ``tilelang_jit_program_<name>.py``, the TIR it was compiled from
(``prim_func.script()``). A later kernel of the same name replaces them. A relative path is taken
from the current directory when the function is decorated (TileLang takes it from its own
installation folder).
"""

from __future__ import annotations

import os
from typing import Any, Optional

__all__ = ["check_debug_root_path", "dump_kernel"]

#: File extension of a kernel's source per target kind.
_SUFFIX = {"c": "c", "cuda": "cu", "metal": "metal", "llvm": "ll"}


def check_debug_root_path(value: Any) -> Optional[str]:
    """``value`` as an absolute path (None stays None).

    :raises TypeError: ``value`` is not a string or ``os.PathLike``.
    """
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)) or isinstance(value, bytes):
        raise TypeError(f"@tilelang.jit(debug_root_path=...): expected a directory path (str or os.PathLike), got "
                        f"{type(value).__name__} {value!r}")
    return os.path.abspath(os.fspath(value))


def dump_kernel(root: str, name: str, kernel: Any, prim_func: Any = None) -> None:
    """Write ``kernel``'s source (and the ``prim_func`` it was built from, when known) into ``root``.

    :raises OSError: the directory or a file cannot be written (the message names the path).
    """
    suffix = _SUFFIX.get(str(kernel.target).split()[0], "txt")  # "cuda -arch=sm_90" -> cuda
    files = {f"tilelang_jit_kernel_{name}.{suffix}": kernel.get_kernel_source()}
    if prim_func is not None:
        files[f"tilelang_jit_program_{name}.py"] = prim_func.script()
    try:
        os.makedirs(root, exist_ok=True)
        for file_name, text in files.items():
            with open(os.path.join(root, file_name), "w", encoding="utf-8") as handle:
                handle.write(text if text.endswith("\n") else text + "\n")
    except OSError as exc:
        raise OSError(exc.errno, f"@tilelang.jit(debug_root_path={root!r}): cannot write the kernel's files there "
                                 f"({exc.strerror or exc}); pick a writable directory or drop debug_root_path") from exc
