"""A plugin pinned to other tilelang-core versions is listed as incompatible, with the pin in the reason."""

from __future__ import annotations

import pytest

import tilelang_core
from tilelang_core.backends import get_registry, select_backend
from tilelang_core.errors import BackendIncompatibleError
from tilelang_core.testkit import isolated, plugin_source, spec_dict, write_distribution


@pytest.fixture
def site(tmp_path):
    write_distribution(tmp_path, "pinned_old", plugin_source(spec_dict("pinned_old")), requires=("tilelang-core>=0.0.1,<0.1",))
    write_distribution(tmp_path, "pinned_ok", plugin_source(spec_dict("pinned_ok")),
                       requires=(f"tilelang-core>={tilelang_core.__version__}", "tilelang-core<0.0.1; extra == 'old'"))
    with isolated(tmp_path):
        yield tmp_path


def test_mismatched_pin_is_incompatible_with_a_clear_reason(site):
    record = get_registry().get("pinned_old")
    assert record.status == "incompatible"
    assert record.reason == (f"tilelang-backend-pinnedold 1.0.0 requires tilelang-core<0.1,>=0.0.1, but tilelang-core "
                             f"{tilelang_core.__version__} is installed")
    with pytest.raises(BackendIncompatibleError, match="Install a version of tilelang-backend-pinnedold made for this"):
        select_backend("pinned_old", "c")


def test_matching_pin_and_extras_are_fine(site):
    assert get_registry().get("pinned_ok").status == "ok"


def test_in_tree_plugins_pin_the_core_minor_version():
    import tomllib
    from pathlib import Path

    from tilelang_core.scaffold import core_requirement

    root = Path(__file__).resolve().parent.parent
    for pyproject in sorted(root.glob("plugins/*/pyproject.toml")):
        deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
        assert core_requirement() in deps, f"{pyproject}: pin {core_requirement()!r}"
