"""Discovery, validation and failure isolation of backend plugins (real .dist-info on sys.path)."""

from __future__ import annotations

import pytest

from tilelang_core import PLUGIN_API_VERSION
from tilelang_core.backends import get_registry, select_backend
from tilelang_core.backends.selection import BackendWarning
from tilelang_core.errors import BackendBrokenError, BackendIncompatibleError, TileLangError
from tilelang_core.testkit import isolated, plugin_source, spec_dict, write_distribution


@pytest.fixture
def site(tmp_path):
    """A fresh directory of throwaway distributions, on sys.path for the test."""
    root = tmp_path / "site"
    root.mkdir()
    with isolated(root):
        yield root


def _install(site, name, source=None, **kw):
    write_distribution(site, name, source or plugin_source(spec_dict(name)), **kw)
    get_registry().refresh()


def test_discovered_by_entry_point_and_loaded_lazily(site):
    _install(site, "alpha")
    registry = get_registry()
    assert "alpha" in registry.names()
    assert not any(m.startswith("tilelang_backend_alpha") for m in __import__("sys").modules)
    record = registry.get("alpha")
    assert record.status == "ok", record.reason
    assert record.spec.name == "alpha"
    assert record.spec.distribution == "tilelang-backend-alpha"
    assert record.spec.version == "1.0.0"
    assert record.spec.plugin_api_version == PLUGIN_API_VERSION


def test_import_error_marks_only_that_plugin_broken(site):
    _install(site, "good")
    _install(site, "bad", plugin_source(spec_dict("bad"), body="raise RuntimeError('boom at import')"))
    registry = get_registry()
    assert registry.get("good").status == "ok"
    bad = registry.get("bad")
    assert bad.status == "broken"
    assert "boom at import" in bad.reason
    with pytest.raises(BackendBrokenError, match="boom at import"):
        select_backend("bad", "c")
    assert select_backend("good", "c").name == "good"


@pytest.mark.parametrize(
    "fields, field_name",
    [
        ({"targets": {"quantum": {"priority": 1, "consumes": ["device_source"]}}}, "targets"),
        ({"name": "Bad-Name"}, "name"),
        ({"targets": {"c": {"priority": -3, "consumes": ["device_source"]}}}, "targets.c.priority"),
        ({"colour": "blue"}, "colour"),
        ({"targets": {"c": {"priority": "high", "consumes": ["device_source"]}}}, "targets.c.priority"),
        ({"targets": {"c": {"priority": 1, "consumes": ["device_source"], "dynamic_shapes": "maybe"}}}, "targets.c.dynamic_shapes"),
    ],
    ids=["unknown-target-kind", "bad-name", "negative-priority", "unknown-field", "wrong-type", "wrong-bool"],
)
def test_invalid_declaration_names_plugin_distribution_and_field(site, fields, field_name):
    spec = spec_dict("weird")
    spec.update(fields)
    _install(site, "weird", plugin_source(spec))
    record = get_registry().get("weird")
    assert record.status == "broken"
    assert "'weird'" in record.reason
    assert "tilelang-backend-weird" in record.reason
    assert f"field '{field_name}'" in record.reason


def test_declared_name_must_match_entry_point(site):
    _install(site, "one", plugin_source(spec_dict("two")), distribution="tilelang-backend-one")
    record = get_registry().get("one")
    assert record.status == "broken" and "entry point is named 'one'" in record.reason


def test_unknown_hook_is_rejected_with_hook_and_plugin_names(site):
    body = """
    @hookimpl
    def tilelang_backend_teleport(artifact):
        return None
    """
    _install(site, "hooky", plugin_source(spec_dict("hooky"), body=body))
    record = get_registry().get("hooky")
    assert record.status == "broken"
    assert "tilelang_backend_teleport" in record.reason and "hooky" in record.reason


def test_hook_with_wrong_arguments_is_rejected(site):
    body = """
    @hookimpl
    def tilelang_backend_build(artifact, options, surprise):
        return None
    """
    _install(site, "argy", plugin_source(spec_dict("argy"), body=body))
    record = get_registry().get("argy")
    assert record.status == "broken" and "surprise" in record.reason


def test_name_claimed_by_two_distributions_breaks_both(site):
    _install(site, "twin", distribution="tilelang-backend-twin", package="twin_a")
    _install(site, "twin", distribution="other-twin-backend", package="twin_b")
    record = get_registry().get("twin")
    assert record.status == "broken"
    assert "other-twin-backend" in record.reason and "tilelang-backend-twin" in record.reason


def test_plugin_for_other_api_version_is_incompatible_and_never_called(site, tmp_path):
    marker = tmp_path / "called"
    spec_src = f"(open({str(marker)!r}, 'w').write('x') and None) or {spec_dict('future')!r}"
    _install(site, "future", plugin_source(spec_src, api=PLUGIN_API_VERSION + 1))
    record = get_registry().get("future")
    assert record.status == "incompatible"
    assert str(PLUGIN_API_VERSION + 1) in record.reason and str(PLUGIN_API_VERSION) in record.reason
    with pytest.raises(BackendIncompatibleError):
        select_backend("future", "c")
    assert not marker.exists(), "a hook of an incompatible plugin was called"


def test_missing_api_constant_is_broken(site):
    src = plugin_source(spec_dict("noapi")).replace("TILELANG_PLUGIN_API = 1", "")
    _install(site, "noapi", src)
    record = get_registry().get("noapi")
    assert record.status == "broken" and "TILELANG_PLUGIN_API" in record.reason


def test_raising_spec_hook_is_broken(site):
    """A tilelang_backend_spec implementation that raises makes the plugin broken, not the core."""
    _install(site, "raiser", plugin_source("1/0"))
    record = get_registry().get("raiser")
    assert record.status == "broken" and "ZeroDivisionError" in record.reason


def test_raising_probe_hook_marks_broken_and_others_keep_working(site):
    body = """
    @hookimpl
    def tilelang_backend_probe(target_kind):
        raise OSError("driver exploded")
    """
    _install(site, "flaky", plugin_source(spec_dict("flaky", {"c": {"priority": 50, "consumes": ["device_source"]}}), body=body))
    _install(site, "steady", plugin_source(spec_dict("steady")))
    with pytest.raises(BackendBrokenError, match="driver exploded"):
        select_backend("flaky", "c")
    with pytest.warns(BackendWarning, match="skipped execution backend 'flaky'.*driver exploded"):
        assert select_backend("auto", "c").name == "steady"


def test_all_errors_share_one_base_class():
    import inspect

    import tilelang_core.errors as errors

    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__]
    assert len(classes) > 10
    assert all(issubclass(c, TileLangError) for c in classes)
