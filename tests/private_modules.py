"""Private copies of the helper modules next to the tests (an importable module).

Several test files use ``tests/test_tileops_cuda.py`` (nvcc lookup, translation units, the GPU
emulator) or a kernels module. Loading each as a private copy, under a name of the caller's
choosing and outside ``sys.modules``, keeps pytest's own import of that test file, and the other
test files' copies, independent of each other.
"""

from __future__ import annotations

import importlib.util
import pathlib
from types import ModuleType
from typing import Optional

#: This folder (tests/).
HERE = pathlib.Path(__file__).resolve().parent


def load_private(name: str, alias: Optional[str] = None) -> ModuleType:
    """A fresh copy of ``tests/<name>.py``, executed as module ``alias`` (default ``name``)."""
    spec = importlib.util.spec_from_file_location(alias or name, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
