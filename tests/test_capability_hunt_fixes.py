"""Capability declarations refuse values a bug hunt found accepted: an empty platform list, empty
required names, a boolean priority, a backend superseding itself; a deprecation's replacement
that is not installed is said to be so."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest

from tilelang_core.backends import get_registry, select_backend
from tilelang_core.testkit import isolated, plugin_source, spec_dict, subprocess_env, write_distribution


def cap(priority=5, **kw):
    return {"priority": priority, "consumes": ["device_source"], **kw}


@pytest.fixture
def site(tmp_path):
    root = tmp_path / "site"
    root.mkdir()
    with isolated(root):
        yield root


def install(site, name, targets=None, **fields):
    write_distribution(site, name, plugin_source(spec_dict(name, targets or {"c": cap()}, **fields)))
    get_registry().refresh()
    return get_registry().get(name)


@pytest.mark.parametrize(
    "targets, fields, expected",
    [
        ({"c": cap(platforms=[])}, {}, "field 'platforms': must list at least one platform"),
        ({"c": cap(build_platforms=[])}, {}, "field 'build_platforms': must list at least one platform"),
        ({"c": cap(requires={"executables": [""]})}, {}, "field 'requires.executables': entries must be non-empty"),
        ({"c": cap(requires={"python_modules": [" "]})}, {}, "field 'requires.python_modules': entries must be non-empty"),
        ({"c": cap(priority=True)}, {}, "field 'targets.c.priority': must be an integer >= 0, got the boolean True"),
        ({"c": cap()}, {"supersedes": ["selfish", "older"]}, "field 'supersedes': lists the backend's own name 'selfish'"),
        ({"c": cap()}, {"plugin_api_version": True}, "field 'plugin_api_version': must be an integer >= 1 "
                                                     "(tilelang_core.PLUGIN_API_VERSION), got bool True"),
        ({"c": cap()}, {"plugin_api_version": "1"}, "field 'plugin_api_version': must be an integer >= 1 "
                                                    "(tilelang_core.PLUGIN_API_VERSION), got str '1'"),
    ],
    ids=["empty-platforms", "empty-build-platforms", "empty-executable", "blank-module", "bool-priority", "supersedes-self",
         "bool-api-version", "str-api-version"],
)
def test_bad_declarations_are_refused_naming_the_field(site, targets, fields, expected):
    record = install(site, "selfish", targets, **fields)
    assert record.status == "broken"
    assert "invalid capability declaration" in record.reason and expected in record.reason


def test_good_declarations_still_accepted(site):
    record = install(site, "fine", {"c": cap(0, platforms=["linux", "darwin"], requires={"executables": ["cc"]})},
                     supersedes=["older"])
    assert record.status == "ok" and record.spec.targets["c"].priority == 0


def test_replacement_not_installed_is_said_in_the_warning(site):
    install(site, "oldie", deprecated={"since": "2.0", "replacement": "nosuchbackend"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        select_backend("oldie", "c")
    (message,) = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert "use execution_backend='nosuchbackend' instead (not installed)" in message


def test_installed_replacement_is_not_marked(site):
    install(site, "newbie")
    install(site, "oldie2", deprecated={"since": "2.0", "replacement": "newbie"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        select_backend("oldie2", "c")
    (message,) = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert "execution_backend='newbie' instead" in message and "not installed" not in message


def test_backends_listing_marks_replacement_not_installed(tmp_path):
    root = tmp_path / "site"
    root.mkdir()
    write_distribution(root, "oldie", plugin_source(spec_dict("oldie", deprecated={"since": "2.0", "replacement": "gone"})))
    out = subprocess.run([sys.executable, "-m", "tilelang", "backends"], capture_output=True, text=True,
                         env=subprocess_env(root))
    assert "DEPRECATED since 2.0, use gone (not installed)" in out.stdout
