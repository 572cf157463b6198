"""Selecting a backend by name or ``auto``: errors, priorities, deprecation, supersedes, explain."""

from __future__ import annotations

import warnings

import pytest

from tilelang_core.backends import explain_selection, get_registry, select_backend
from tilelang_core.errors import (
    BackendBrokenError,
    BackendNotInstalledError,
    BackendTargetUnsupportedError,
    BackendUnavailableError,
    NoBackendForTargetError,
)
from tilelang_core.testkit import isolated, plugin_source, spec_dict, write_distribution


def cap(priority, **kw):
    return {"priority": priority, "consumes": ["device_source"], **kw}


@pytest.fixture
def site(tmp_path):
    root = tmp_path / "site"
    root.mkdir()
    with isolated(root):
        yield root


def install(site, name, targets, *, probe=None, **fields):
    write_distribution(site, name, plugin_source(spec_dict(name, targets, **fields), probe=probe))
    get_registry().refresh()


def test_auto_picks_highest_available_priority_then_name(site):
    install(site, "zeta", {"cuda": cap(10), "c": cap(5)})
    install(site, "alpha", {"cuda": cap(10)})
    install(site, "mid", {"cuda": cap(3)})
    assert select_backend("auto", "cuda").name == "alpha"  # tie at 10 broken by name
    assert select_backend("auto", "c").name == "zeta"
    explained = explain_selection("cuda")
    assert [c.name for c in explained][0] == "alpha"
    assert explained[0].verdict == "chosen" and "tie with zeta" in explained[0].reason
    verdicts = {c.name: c.verdict for c in explained}
    assert verdicts == {"alpha": "chosen", "zeta": "available", "mid": "available"}


def test_auto_skips_unavailable_and_reports_reason(site):
    install(site, "fast", {"cuda": cap(100)}, probe={"available": False, "reason": "no CUDA driver"})
    install(site, "slow", {"cuda": cap(1)})
    assert select_backend("auto", "cuda").name == "slow"
    by_name = {c.name: c for c in explain_selection("cuda")}
    assert by_name["fast"].verdict == "unavailable" and by_name["fast"].reason == "no CUDA driver"


def test_probe_answer_that_is_not_an_availability_marks_the_plugin_broken(site):
    install(site, "vague", {"c": cap(9)}, probe={"available": "perhaps"})
    with pytest.raises(BackendBrokenError, match=r"invalid Availability: field 'available'.*\(got 'perhaps'\)"):
        select_backend("vague", "c")


def test_declared_requirements_are_checked_before_probe(site):
    install(site, "needy", {"c": cap(9, requires={"executables": ["definitely-not-a-real-compiler-xyz"]})})
    with pytest.raises(BackendUnavailableError, match="definitely-not-a-real-compiler-xyz not found on PATH"):
        select_backend("needy", "c")
    install(site, "needy2", {"c": cap(9, requires={"python_modules": ["no_such_module_abc"]})})
    with pytest.raises(BackendUnavailableError, match="no_such_module_abc"):
        select_backend("needy2", "c")
    install(site, "mac", {"c": cap(9, platforms=["darwin"])})
    with pytest.raises(BackendUnavailableError, match="darwin only"):
        select_backend("mac", "c")


def test_not_installed_error_lists_installed_and_pip_hint(site):
    install(site, "ffi_like", {"cuda": cap(10)})
    install(site, "cy_like", {"cuda": cap(5), "c": cap(5)})
    with pytest.raises(BackendNotInstalledError) as info:
        select_backend("nvrtc", "cuda")
    msg = str(info.value)
    assert "execution backend 'nvrtc' is not installed" in msg
    assert "installed backends for target 'cuda': cy_like, ffi_like" in msg
    assert "pip install tilelang-backend-nvrtc" in msg
    assert isinstance(info.value, LookupError)


def test_not_installed_error_names_successor(site):
    install(site, "heir", {"c": cap(5)}, supersedes=["ctypes"])
    with pytest.raises(BackendNotInstalledError, match="is retired: the installed backend 'heir' supersedes it; use execution_backend='heir'"):
        select_backend("ctypes", "c")


def test_target_not_declared_lists_targets_and_alternatives(site):
    install(site, "cpuonly", {"c": cap(5), "llvm": cap(5)})
    install(site, "gpu", {"cuda": cap(5)})
    with pytest.raises(BackendTargetUnsupportedError) as info:
        select_backend("cpuonly", "cuda")
    msg = str(info.value)
    assert "(it supports: c, llvm)" in msg and "installed backends for 'cuda': gpu" in msg


def test_no_backend_for_target(site):
    install(site, "cpuonly", {"c": cap(5)})
    with pytest.raises(NoBackendForTargetError, match="cpuonly: unsupported"):
        select_backend("auto", "metal")


def test_deprecated_backend_works_and_warns_once_naming_replacement(site):
    install(site, "oldie", {"c": cap(5)}, deprecated={"since": "2.0", "replacement": "newbie", "message": "bye"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        record = select_backend("oldie", "c")
    assert record.name == "oldie"
    deps = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert len(deps) == 1
    assert "newbie" in str(deps[0].message) and "2.0" in str(deps[0].message)


def test_hip_and_rocm_are_the_same_kind(site):
    install(site, "amd", {"hip": cap(5)})
    assert select_backend("amd", "rocm").name == "amd"
    assert select_backend("auto", "hip").name == "amd"
