"""Meta-tests: every hook is documented (where declared and in docs/) and exercised by a test."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GEN = runpy.run_path(str(ROOT / "scripts" / "gen_docs.py"))
HOOKS = GEN["hook_names"]()


def test_there_are_hooks():
    assert {"tilelang_backend_spec", "tilelang_backend_probe", "tilelang_backend_build",
            "tilelang_backend_save", "tilelang_backend_load"} <= set(HOOKS)


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_has_docstring_with_params_and_when_called(hook):
    from tilelang_core import hookspecs

    doc = getattr(hookspecs, hook).__doc__ or ""
    assert len(doc.split()) >= 25, f"{hook} is not documented where it is declared"
    assert "Called" in doc or "Used by" in doc, f"{hook}'s docstring does not say when the core calls it"


def test_generated_docs_are_current():
    assert (ROOT / "docs" / "hooks.md").read_text() == GEN["hooks_markdown"](), "run scripts/gen_docs.py"
    assert (ROOT / "docs" / "capabilities.md").read_text() == GEN["capabilities_markdown"](), "run scripts/gen_docs.py"
    assert (ROOT / "docs" / "backend-conventions.md").read_text() == GEN["conventions_markdown"](), "run scripts/gen_docs.py"


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_is_exercised_by_some_test(hook):
    test_files = list((ROOT / "tests").glob("test_*.py")) + list((ROOT / "plugins").glob("*/tests/test_*.py"))
    users = [f for f in test_files if f.name != Path(__file__).name and hook in f.read_text()]
    assert users, f"no test mentions {hook}"
