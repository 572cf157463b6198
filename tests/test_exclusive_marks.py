"""Every test module that changes what other tests share is marked ``exclusive`` (see conftest.py).

scripts/test.sh runs the unmarked tests in parallel; a module that pip-installs into the venv, or
builds the project's wheels in the source tree, would break the tests running beside it.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: What makes a test module exclusive: pip install/uninstall into this venv (not ``--target``),
#: or the scripts that build wheels of the source tree.
SHARED_CHANGES = (
    re.compile(r"""pip\(\s*["'](?:install|uninstall)["'](?![^)]*--target)"""),
    re.compile(r"build-wheels\.sh|gpu-kit-build\.sh"),
)
MARK = "pytestmark = pytest.mark.exclusive"


def _changing_shared_state() -> list[Path]:
    """The test modules whose source does one of :data:`SHARED_CHANGES`."""
    modules = sorted([*ROOT.glob("tests/test_*.py"), *ROOT.glob("plugins/*/tests/test_*.py")])
    return [p for p in modules if any(rx.search(p.read_text()) for rx in SHARED_CHANGES)]


def test_modules_that_change_the_shared_environment_are_marked_exclusive():
    unmarked = [str(p.relative_to(ROOT)) for p in _changing_shared_state() if MARK not in p.read_text()]
    assert not unmarked, f"mark these `{MARK}` (they change the venv or build in the source tree): {unmarked}"


def test_the_check_finds_the_known_exclusive_modules():
    found = {p.name for p in _changing_shared_state()}
    assert {"test_ctypes_retirement.py", "test_scaffold_cycle.py", "test_wheels.py", "test_gpu_kit.py"} <= found
    assert "test_plugin_files_key.py" not in found  # pip install --target a temporary folder: safe
