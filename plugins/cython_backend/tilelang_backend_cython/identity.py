"""Which kernel a library was built for: a constant compiled into every kernel library.

The generated source of every kernel defines an exported constant::

    const char __tl_cy_kernel_id[] = "tilelang-cython-kernel:<sha256>";

where the hash covers the artifact (canonical JSON) and the call plan. Every library exports the
same entry symbol, so without it a library swapped in from another kernel would be called with
this kernel's plan; on load the backend recomputes the hash from the saved artifact and plan and
refuses a library that carries another one (or none).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Optional

from tilelang_core.artifact import KernelArtifact

ID_SYMBOL = "__tl_cy_kernel_id"
ID_PREFIX = "tilelang-cython-kernel:"


def kernel_id(artifact: KernelArtifact, plan: dict[str, Any]) -> str:
    """SHA-256 (hex) of the artifact and the call plan, both as canonical JSON."""
    text = json.dumps({"artifact": json.loads(artifact.to_json()), "plan": plan}, sort_keys=True,
                      separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def c_definition(kid: str, *, cuda: bool) -> str:
    """Source defining the exported identity constant (C, or CUDA C++ with C linkage)."""
    linkage = 'extern "C" ' if cuda else ""
    return (
        "\n/* ---- appended by tilelang-backend-cython: which kernel this library is ---- */\n"
        f'{linkage}__attribute__((visibility("default"), used)) const char {ID_SYMBOL}[] = "{ID_PREFIX}{kid}";\n'
    )


def library_id(library: Path, *, keep_loaded: bool = False) -> Optional[str]:
    """The kernel hash ``library`` carries, or None when it defines no identity constant.

    The library is loaded to read it, then given back (``dlclose``) unless ``keep_loaded``: before,
    it stayed mapped for the life of the process, also after the kernel loaded from it was freed
    (every unpickle or ``tilelang.load`` maps a new copy). CUDA libraries are kept (their static
    CUDA runtime registers the kernels with the driver; unloading them is not tried here).

    :raises OSError: the library cannot be loaded.
    """
    import _ctypes
    import ctypes
    import os

    lib = ctypes.CDLL(str(library), mode=os.RTLD_NOW | os.RTLD_LOCAL)
    size = len(ID_PREFIX) + 64 + 1
    try:
        raw = (ctypes.c_char * size).in_dll(lib, ID_SYMBOL).raw
    except ValueError:  # no such symbol
        return None
    finally:
        if not keep_loaded:
            _ctypes.dlclose(lib._handle)
    text = raw.split(b"\0", 1)[0].decode("ascii", "replace")
    return text[len(ID_PREFIX):] if text.startswith(ID_PREFIX) else None
