"""Which kernel a saved library was built for: a constant linked into every exported library.

``export_library`` links one more tiny C source into the library, defining::

    const char __tl_tvmffi_kernel_id[] = "tilelang-tvmffi-kernel:<sha256>";

where the hash covers the artifact (canonical JSON) and the facts of the saved plan that the
kernel object trusts (entry name, target kind, module kinds, assumed data alignment). On load the
backend recomputes it from the saved artifact and plan and refuses a library that carries another
one (a library swapped in from another kernel) or none.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Optional

ID_SYMBOL = "__tl_tvmffi_kernel_id"
ID_PREFIX = "tilelang-tvmffi-kernel:"
ID_SOURCE = "tilelang_kernel_id.c"


def kernel_id(artifact: Any, kinds: list[str], alignment: int) -> str:
    """SHA-256 (hex) of the artifact and the plan facts, as canonical JSON."""
    facts = {"entry": artifact.name, "target_kind": artifact.target_kind, "module_kinds": list(kinds),
             "alignment": int(alignment)}
    text = json.dumps({"artifact": json.loads(artifact.to_json()), "plan": facts}, sort_keys=True,
                      separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def write_source(directory: Path, kid: str) -> Path:
    """Write the C source defining the identity constant into ``directory``; returns its path."""
    path = Path(directory) / ID_SOURCE
    path.write_text(
        "/* written by tilelang-backend-tvmffi: which kernel this library is */\n"
        "#ifdef __cplusplus\nextern \"C\"\n#endif\n"
        f'__attribute__((visibility("default"), used)) const char {ID_SYMBOL}[] = "{ID_PREFIX}{kid}";\n'
    )
    return path


def library_id(library: Path) -> Optional[str]:
    """The kernel hash ``library`` carries, or None when it defines no identity constant.

    The TVM runtime libraries must be loaded already (the library links against them).

    :raises OSError: the library cannot be loaded.
    """
    import ctypes
    import os

    lib = ctypes.CDLL(str(library), mode=os.RTLD_NOW | os.RTLD_LOCAL)
    try:
        raw = (ctypes.c_char * (len(ID_PREFIX) + 65)).in_dll(lib, ID_SYMBOL).raw
    except ValueError:  # no such symbol
        return None
    text = raw.split(b"\0", 1)[0].decode("ascii", "replace")
    return text[len(ID_PREFIX):] if text.startswith(ID_PREFIX) else None
