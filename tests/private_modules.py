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
from typing import Any, Optional

#: This folder (tests/).
HERE = pathlib.Path(__file__).resolve().parent


def load_private(name: str, alias: Optional[str] = None) -> ModuleType:
    """A fresh copy of ``tests/<name>.py``, executed as module ``alias`` (default ``name``)."""
    spec = importlib.util.spec_from_file_location(alias or name, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_in_child(name: str, function: str, *args: Any, timeout: float = 900) -> Any:
    """The JSON result of ``tests/<name>.py``'s ``function(*args)``, run in a fresh Python process
    (a kernel call that kills its process ends only that child). The calling test is skipped when
    the child was skipped, and fails naming the exit status when the child died."""
    import json
    import subprocess
    import sys

    import pytest

    code = (
        "import json, sys; sys.path.insert(0, %r)\n"
        "from private_modules import load_private\n"
        "m = load_private(%r, %r)\n"
        "print('RESULT ' + json.dumps(m.%s(*json.loads(sys.argv[1]))))\n" % (str(HERE), name, f"{name}_child", function)
    )
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(list(args))], capture_output=True, text=True,
                          timeout=timeout)
    if "Skipped" in proc.stderr and proc.returncode != 0:
        pytest.skip(proc.stderr.strip().splitlines()[-1])
    assert proc.returncode == 0, f"a kernel call ended the process (status {proc.returncode}):\n{proc.stderr[-2000:]}"
    return json.loads(proc.stdout.split("RESULT ", 1)[1])
