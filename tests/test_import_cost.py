"""`import tilelang` stays cheap: no TVM, no torch, no plugin; and plugin entry points import cheaply."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tilelang_core.testkit import heavy_imports_of, installed_entry_point_modules


def test_import_tilelang_imports_no_tvm_torch_or_plugin():
    code = "import json, sys\nimport tilelang\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    modules = json.loads(out.stdout)
    offenders = [m for m in modules if m.split(".")[0] in ("tvm", "tvm_ffi", "torch", "numpy") or m.startswith("tilelang_backend_")]
    assert offenders == []
    assert "tilelang" in modules and "tilelang_core" in modules


@pytest.mark.parametrize("name, module", sorted(installed_entry_point_modules().items()) or [("none", None)])
def test_every_installed_plugin_entry_point_imports_cheaply(name, module):
    if module is None:
        pytest.skip("no backend plugin installed")
    assert heavy_imports_of(module) == [], f"backend {name}: entry point {module} imports heavy modules"
