"""The exception policy of hooks (docs/hooks.md) through ``tilelang.compile``: refusals, build
failures and ``auto`` falling back, plugin bugs, environment problems, required hooks.

Every backend here is a real throwaway distribution from the test kit, seen alone by the
registry (``isolated``), and every kernel is really lowered by TVM.
"""

from __future__ import annotations

import warnings

import pytest

import tilelang
import tilelang.language as T
from tilelang_core.backends import BackendWarning, get_registry, select_backend
from tilelang_core.errors import (
    BackendBrokenError,
    BackendDependencyError,
    BackendUnavailableError,
    BuildError,
    KernelNotSupportedError,
    MissingDependencyError,
)
from tilelang_core.testkit import isolated, plugin_source, spec_dict, write_distribution

#: A build hook that works: the kernel it returns says which backend built it.
WORKS = """
@hookimpl
def tilelang_backend_build(artifact, options):
    import sys
    name = sys.modules[__name__].__name__.split(".")[0]
    def run(*args, **kwargs):
        return name
    return run
"""


def failing(statement: str) -> str:
    """A build hook whose body is ``statement`` (which raises)."""
    return f"""
@hookimpl
def tilelang_backend_build(artifact, options):
    from tilelang_core.errors import BuildError, KernelNotSupportedError
    {statement}
"""


def c_target(priority: int) -> dict:
    return {"c": {"priority": priority, "consumes": ["device_source"], "device_language": "c"}}


@pytest.fixture
def site(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    root = tmp_path / "site"
    root.mkdir()
    with isolated(root):
        yield root


def install(site, name, body, priority, **kw):
    write_distribution(site, name, plugin_source(spec_dict(name, c_target(priority)), body=body, **kw))
    get_registry().refresh()


def kernel():
    @T.prim_func
    def double(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=16) as bx:
            for i in T.Parallel(16):
                B[i] = A[i] * 2.0

    return double


def compile_recording(**kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        k = tilelang.compile(kernel(), target="c", **kw)
    return k, [w for w in caught if issubclass(w.category, BackendWarning)]


def test_refused_kernel_falls_back_under_auto_and_explains_itself_by_name(site):
    install(site, "picky", failing('raise KernelNotSupportedError("float32 scaling is not in this backend yet")'), 900)
    install(site, "steady", WORKS, 10)
    k, caught = compile_recording()
    assert k() == "tilelang_backend_steady"
    assert len(caught) == 1
    text = str(caught[0].message)
    assert "'picky' could not build kernel 'double'" in text and "float32 scaling is not in this backend yet" in text
    assert "falling back to the next available backend, 'steady'" in text
    assert caught[0].filename == __file__  # points at the user's call of tilelang.compile
    with pytest.raises(KernelNotSupportedError) as info:
        tilelang.compile(kernel(), target="c", execution_backend="picky")
    assert "execution backend 'picky' does not support kernel 'double' for target 'c'" in str(info.value)
    assert "float32 scaling is not in this backend yet" in str(info.value)
    assert get_registry().get("picky").status == "ok"  # a refusal does not break the backend


def test_not_implemented_error_in_build_is_a_refusal_not_a_broken_backend(site):
    install(site, "partial", failing('raise NotImplementedError("2-D grids")'), 900)
    install(site, "steady", WORKS, 10)
    k, caught = compile_recording()
    assert k() == "tilelang_backend_steady" and "2-D grids" in str(caught[0].message)
    with pytest.raises(KernelNotSupportedError, match="'partial' does not support kernel 'double'.*2-D grids"):
        tilelang.compile(kernel(), target="c", execution_backend="partial")
    assert get_registry().get("partial").usable


def test_build_error_falls_back_under_auto_but_never_for_an_explicit_name(site):
    install(site, "fragile", failing(
        'raise BuildError("compiling kernel failed (exit code 1)", command=["cc", "-O3", "k.c"], '
        'output="k.c:1: error: expected ;", source="/tmp/k.c")'), 900)
    install(site, "steady", WORKS, 10)
    k, caught = compile_recording()
    assert k() == "tilelang_backend_steady"
    assert "BuildError: compiling kernel failed (exit code 1)" in str(caught[0].message)
    assert "execution_backend='fragile' to get its full error" in str(caught[0].message)
    with warnings.catch_warnings(record=True) as explicit:
        warnings.simplefilter("always")
        with pytest.raises(BuildError) as info:
            tilelang.compile(kernel(), target="c", execution_backend="fragile")
    assert not [w for w in explicit if issubclass(w.category, BackendWarning)]
    err = info.value
    assert err.command == ["cc", "-O3", "k.c"] and err.output == "k.c:1: error: expected ;" and err.source == "/tmp/k.c"
    assert get_registry().get("fragile").usable


def test_when_every_candidate_fails_auto_raises_the_best_ones_error_noting_the_others(site):
    install(site, "first", failing('raise BuildError("first failed")'), 900)
    install(site, "second", failing('raise KernelNotSupportedError("second refuses")'), 10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BackendWarning)
        with pytest.raises(BuildError, match="first failed") as info:
            tilelang.compile(kernel(), target="c")
    notes = getattr(info.value, "__notes__", [])
    assert any("'second'" in n and "second refuses" in n for n in notes), notes


def test_a_bug_in_the_build_hook_names_the_hook_breaks_the_backend_and_auto_moves_on(site):
    install(site, "buggy", failing("return artifact.no_such_field"), 900)
    install(site, "steady", WORKS, 10)
    with pytest.raises(BackendBrokenError) as info:
        tilelang.compile(kernel(), target="c", execution_backend="buggy")
    msg = str(info.value)
    assert "hook tilelang_backend_build raised AttributeError" in msg and "no_such_field" in msg
    assert "bug in tilelang-backend-buggy 1.0.0" in msg and "report it" in msg
    assert isinstance(info.value.__cause__, AttributeError)
    k, caught = compile_recording()  # now broken: auto skips it, saying so, since it would have won
    assert k() == "tilelang_backend_steady"
    assert any("skipped execution backend 'buggy'" in str(w.message) and "priority 900" in str(w.message) for w in caught)


def test_system_exit_from_a_build_hook_does_not_end_the_process(site):
    install(site, "quitter", failing("raise SystemExit(3)"), 900)
    install(site, "steady", WORKS, 10)
    k, caught = compile_recording()
    assert k() == "tilelang_backend_steady"
    assert "SystemExit" in str(caught[0].message)
    assert get_registry().get("quitter").status == "broken"


def test_environment_errors_from_build_pass_through_and_leave_the_backend_usable(site):
    install(site, "diskfull", failing('raise OSError(28, "No space left on device")'), 900)
    with pytest.raises(OSError, match="No space left on device"):
        tilelang.compile(kernel(), target="c", execution_backend="diskfull")
    assert get_registry().get("diskfull").usable


def test_missing_dependency_in_build_says_what_to_install_and_does_not_break(site):
    install(site, "needy", failing("import no_such_dependency_zz"), 900)
    install(site, "steady", WORKS, 10)
    with pytest.raises(BackendDependencyError) as info:
        tilelang.compile(kernel(), target="c", execution_backend="needy")
    msg = str(info.value)
    assert "needs the Python module 'no_such_dependency_zz', which is not installed" in msg
    assert "pip install no_such_dependency_zz" in msg and "broken" not in msg
    assert isinstance(info.value, ImportError) and isinstance(info.value, BackendUnavailableError)
    assert info.value.name == "no_such_dependency_zz"
    assert get_registry().get("needy").usable
    k, _ = compile_recording()
    assert k() == "tilelang_backend_steady"


def test_plugin_without_build_hook_is_broken_at_registration_naming_the_hook(site):
    install(site, "hollow", "", 900, build_hook=False)
    record = get_registry().get("hollow")
    assert record.status == "broken"
    assert "does not implement the required hook tilelang_backend_build" in record.reason
    with pytest.raises(BackendBrokenError, match="required hook tilelang_backend_build"):
        select_backend("hollow", "c")


def test_save_without_load_is_broken_at_registration(site):
    body = """
@hookimpl
def tilelang_backend_save(kernel, directory):
    pass
"""
    install(site, "halfway", WORKS + body, 5)
    record = get_registry().get("halfway")
    assert record.status == "broken"
    assert "implements tilelang_backend_save but not tilelang_backend_load" in record.reason


def test_dependency_missing_at_import_makes_the_backend_unavailable_not_broken(site):
    write_distribution(site, "heavyweight", plugin_source(spec_dict("heavyweight", c_target(900)),
                                                          body="import no_such_dependency_zz\n" + WORKS))
    install(site, "steady", WORKS, 10)
    record = get_registry().get("heavyweight")
    assert record.status == "unavailable"
    assert "pip install no_such_dependency_zz" in record.reason
    with pytest.raises(BackendDependencyError, match="no_such_dependency_zz"):
        select_backend("heavyweight", "c")
    with warnings.catch_warnings():
        warnings.simplefilter("error", BackendWarning)  # an unavailable backend is not a skipped broken one
        assert select_backend("auto", "c").name == "steady"


def test_auto_warns_when_it_skips_a_broken_backend_that_might_have_won(site):
    install(site, "twin", WORKS, 900)  # two distributions claim 'twin': both broken, priority unknown
    write_distribution(site, "twin", plugin_source(spec_dict("twin", c_target(900)), body=WORKS),
                       distribution="other-twin-backend", package="twin_b")
    install(site, "steady", WORKS, 10)
    k, caught = compile_recording()
    assert k() == "tilelang_backend_steady"
    assert len(caught) == 1
    text = str(caught[0].message)
    assert "skipped execution backend 'twin'" in text and "claimed by several distributions" in text
    assert "using 'steady'" in text


def test_a_broken_backend_below_the_chosen_one_is_skipped_silently(site):
    install(site, "lowly", failing("return artifact.no_such_field"), 1)
    install(site, "steady", WORKS, 10)
    with pytest.raises(BackendBrokenError):
        tilelang.compile(kernel(), target="c", execution_backend="lowly")
    _, caught = compile_recording()
    assert caught == []


def test_missing_dependency_error_is_part_of_the_hierarchy():
    assert issubclass(BackendDependencyError, MissingDependencyError)
    assert issubclass(MissingDependencyError, ImportError)


def test_auto_still_warns_when_the_backend_it_uses_is_deprecated(site):
    write_distribution(site, "oldie", plugin_source(
        spec_dict("oldie", c_target(50), deprecated={"since": "2.0", "replacement": "newbie"}), body=WORKS))
    get_registry().refresh()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert tilelang.compile(kernel(), target="c")() == "tilelang_backend_oldie"
    deps = [w for w in caught if issubclass(w.category, DeprecationWarning) and "oldie" in str(w.message)]
    assert len(deps) == 1 and "newbie" in str(deps[0].message) and deps[0].filename == __file__


def test_auto_reraises_the_best_backends_error_with_its_cause(site):
    install(site, "buggy", failing("return artifact.no_such_field"), 900)
    install(site, "fragile", failing('raise BuildError("fragile failed")'), 10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BackendWarning)
        with pytest.raises(BackendBrokenError) as info:
            tilelang.compile(kernel(), target="c")
    assert isinstance(info.value.__cause__, AttributeError)
    assert not isinstance(info.value.__context__, BuildError)


def test_a_hook_function_without_the_hookimpl_decorator_is_named_in_the_reason(site):
    undecorated = """
def tilelang_backend_build(artifact, options):
    return None
"""
    install(site, "plain", undecorated, 900, build_hook=False)
    reason = get_registry().get("plain").reason
    assert "does not implement the required hook tilelang_backend_build" in reason
    assert "tilelang_backend_build is defined, but without the @hookimpl decorator" in reason


def test_a_misspelled_hook_is_broken_with_the_nearest_hook_name(site):
    misspelled = """
@hookimpl
def tilelang_backend_laod(artifact, directory, options):
    return None
"""
    install(site, "typo", misspelled, 900)
    record = get_registry().get("typo")
    assert record.status == "broken"
    assert "unknown hook 'tilelang_backend_laod' (did you mean 'tilelang_backend_load'?)" in record.reason
    assert "\n" not in record.reason


def test_a_hook_with_an_argument_the_specification_lacks_names_the_specification(site):
    renamed = """
@hookimpl
def tilelang_backend_build(artifact, opts):
    return None
"""
    install(site, "renamed", renamed, 900, build_hook=False)
    record = get_registry().get("renamed")
    assert record.status == "broken"
    assert ("tilelang_backend_build(artifact, opts): argument(s) {'opts'} are not in the specification; "
            "the specification is tilelang_backend_build(artifact, options)") in record.reason
    assert "\n" not in record.reason
