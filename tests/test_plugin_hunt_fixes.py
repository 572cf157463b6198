"""Fixes from a bug hunt on plugins: one broken plugin must not take the core down, the plugin hash
must not depend on which identical copy was imported, ``backends new`` must not reuse another
backend's distribution, a build hook's wrong return value is the plugin's bug (``auto`` falls
back), conformance checks that check nothing never pass, and the CLI's ``--json`` and one-line
outputs stay what they claim. The plugins are throwaway distributions on temporary paths."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from tilelang_core.backends import get_registry, select_backend
from tilelang_core.backends.selection import BackendWarning, explain_selection
from tilelang_core.errors import BackendBrokenError
from tilelang_core.scaffold import ScaffoldError, write_backend
from tilelang_core.scaffold import plugin_source as scaffold_source
from tilelang_core.testkit import on_path, plugin_source, spec_dict, subprocess_env, write_distribution

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stub_backends import site  # noqa: E402,F401  (site: a fixture, the only plugins the registry sees)

#: A module-level ``__getattr__`` with a bug: it raises RuntimeError instead of AttributeError.
LAZY_GETATTR = '''
def __getattr__(name):
    raise RuntimeError(f"lazy attribute {name} unavailable")
'''

C_TARGET = {"c": {"priority": 1, "consumes": ["device_source"], "device_language": "c"}}


def _run(args, *, roots=(), cwd=None, timeout=600):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=subprocess_env(*roots),
                          cwd=cwd, timeout=timeout)


# -- 1. one broken plugin does not crash the core -----------------------------------------------


def test_module_getattr_raising_marks_only_that_plugin_broken(site):
    without_api = plugin_source(spec_dict("lazyapi"), body=LAZY_GETATTR).replace("TILELANG_PLUGIN_API = 1\n", "")
    write_distribution(site, "lazyapi", without_api)
    # the API constant is there but the build hook is missing: the hint for undecorated hooks looks it up
    write_distribution(site, "lazyhook", plugin_source(spec_dict("lazyhook"), body=LAZY_GETATTR, build_hook=False))
    write_distribution(site, "good", plugin_source(spec_dict("good")))
    get_registry().refresh()

    records = {r.name: r for r in get_registry().records()}  # raised RuntimeError before
    lazy = records["lazyapi"]
    assert lazy.status == "broken"
    assert "TILELANG_PLUGIN_API" in lazy.reason and "RuntimeError: lazy attribute" in lazy.reason
    assert "must raise AttributeError" in lazy.reason
    hook = records["lazyhook"]
    assert hook.status == "broken" and "does not implement the required hook tilelang_backend_build" in hook.reason
    assert records["good"].status == "ok"
    assert select_backend("good", "c").name == "good"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BackendWarning)
        assert select_backend("auto", "c").name == "good"
    with pytest.raises(BackendBrokenError, match="lazyapi"):
        select_backend("lazyapi", "c")


def _damaged(site: Path, name: str, metadata: str | None) -> Path:
    write_distribution(site, name, plugin_source(spec_dict(name)))
    info = next(site.glob(f"tilelang_backend_{name.replace('_', '')}-*.dist-info"))
    if metadata is None:
        (info / "METADATA").unlink()
    else:
        (info / "METADATA").write_text(metadata)
    return info


def test_damaged_dist_info_is_listed_broken_and_other_backends_work(site):
    no_name = _damaged(site, "noname", "Metadata-Version: 2.1\nVersion: 1.0.0\n")
    no_metadata = _damaged(site, "nometa", None)
    write_distribution(site, "good", plugin_source(spec_dict("good")))
    get_registry().refresh()

    registry = get_registry()
    assert {"noname", "nometa", "good"} <= set(registry.names())  # KeyError / MetadataNotFound before
    noname, nometa = registry.get("noname"), registry.get("nometa")
    assert noname.status == "broken" and str(no_name) in noname.reason and "no 'Name:' field" in noname.reason
    assert nometa.status == "broken" and str(no_metadata) in nometa.reason and "no METADATA file" in nometa.reason
    assert "--force-reinstall" in noname.advice
    verdicts = {c.name: c.verdict for c in explain_selection("c", registry)}
    assert verdicts == {"good": "chosen", "noname": "broken", "nometa": "broken"}
    assert select_backend("good", "c").name == "good"


@pytest.mark.slow
def test_compiles_by_name_and_auto_with_broken_plugins_on_the_path(tmp_path):
    site = tmp_path / "site"
    _damaged(site, "noname", "Metadata-Version: 2.1\nVersion: 1.0.0\n")
    write_distribution(site, "lazyapi", plugin_source(spec_dict("lazyapi"), body=LAZY_GETATTR).replace(
        "TILELANG_PLUGIN_API = 1\n", ""))
    installed = [n for n in get_registry().names() if n in ("cython", "tvm_ffi")]
    if not installed:
        pytest.skip("no bundled CPU backend is installed")
    code = f"""
import warnings, torch, tilelang
import tilelang.language as T
warnings.simplefilter("ignore")
@T.prim_func
def f(A: T.Tensor((4,), "float32")):
    with T.Kernel(1, threads=4) as bx:
        for i in T.Parallel(4):
            A[i] = 1.0
for backend in ("auto", {installed[0]!r}):
    a = torch.zeros(4)
    tilelang.compile(f, target="c", execution_backend=backend)(a)
    print(backend, a.tolist())
"""
    out = _run(["-c", code], roots=[site])
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines() == ["auto [1.0, 1.0, 1.0, 1.0]", f"{installed[0]} [1.0, 1.0, 1.0, 1.0]"]
    listed = _run(["-m", "tilelang", "backends"], roots=[site])
    lines = {line.split()[0]: line for line in listed.stdout.splitlines() if line and not line.startswith(" ")}
    assert "BROKEN" in lines["noname"] and "(unknown distribution)" in lines["noname"]
    assert "BROKEN" in lines["lazyapi"] and listed.returncode == 1


# -- 2. the plugin hash does not depend on which identical copy was imported ----------------------


def _write_record(site: Path) -> None:
    """A RECORD with sha256 digests and sizes, as pip writes it, for the one distribution under ``site``."""
    info = next(site.glob("*.dist-info"))
    lines = []
    for path in sorted(p for p in site.rglob("*") if p.is_file() and p.name != "RECORD"):
        digest = base64.urlsafe_b64encode(hashlib.sha256(path.read_bytes()).digest()).rstrip(b"=").decode()
        lines.append(f"{path.relative_to(site).as_posix()},sha256={digest},{path.stat().st_size}")
    (info / "RECORD").write_text("\n".join(lines + [f"{info.name}/RECORD,,"]) + "\n")


def _project_shadowing(tmp_path: Path, site: Path, name: str) -> Path:
    """The backend's project folder: the same package source, and the .egg-info setuptools leaves there."""
    package = f"tilelang_backend_{name}"
    project = tmp_path / "project"
    shutil.copytree(site / package, project / package)
    (project / "tests").mkdir()
    (project / "tests" / "test_conformance.py").write_text(f"# conformance tests of {name}\n")
    (project / "README.md").write_text("readme\n")
    (project / "pyproject.toml").write_text("[project]\n")
    egg = project / f"{package}.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text(f"Metadata-Version: 2.1\nName: tilelang-backend-{name}\nVersion: 1.0.0\n")
    (egg / "entry_points.txt").write_text(f"[tilelang.backends]\n{name} = {package}.plugin\n")
    (egg / "top_level.txt").write_text(package + "\n")
    (egg / "SOURCES.txt").write_text("README.md\npyproject.toml\ntests/test_conformance.py\n"
                                     f"{package}/__init__.py\n{package}/plugin.py\n{package}.egg-info/PKG-INFO\n")
    return project


HASH_CODE = """
import sys
from tilelang_core.backends import get_registry
record = get_registry().get(sys.argv[1])
print(record.status, sys.modules["tilelang_backend_" + sys.argv[1]].__file__, record.files_hash())
"""


def test_plugin_hash_is_the_same_whichever_identical_copy_is_imported(tmp_path):
    name = "hashcopy"
    site = tmp_path / "site"
    write_distribution(site, name, plugin_source(spec_dict(name)), package=f"tilelang_backend_{name}")
    _write_record(site)
    project = _project_shadowing(tmp_path, site, name)

    def files_hash(cwd: Path) -> tuple[str, str]:
        out = _run(["-c", HASH_CODE, name], roots=[site], cwd=cwd)  # `python -c`: the cwd is first on sys.path
        assert out.returncode == 0, out.stderr[-2000:]
        status, imported, digest = out.stdout.split()
        assert status == "ok"
        return imported, digest

    imported_elsewhere, elsewhere = files_hash(tmp_path)
    imported_in_project, in_project = files_hash(project)
    assert imported_elsewhere.startswith(str(site)) and imported_in_project.startswith(str(project))
    assert in_project == elsewhere, "identical code, imported from the source tree or the installed copy"
    plugin = project / f"tilelang_backend_{name}" / "plugin.py"
    plugin.write_text(plugin.read_text() + "\n# an edited build hook (an editable install, a source tree)\n")
    assert files_hash(project)[1] != elsewhere, "the code imported changed: another hash"


@pytest.mark.slow
def test_scaffold_cache_check_passes_in_its_project_folder(tmp_path):
    name = "hashscaffold"
    site = tmp_path / "site"
    write_distribution(site, name, scaffold_source(name), package=f"tilelang_backend_{name}")
    _write_record(site)
    project = _project_shadowing(tmp_path, site, name)
    out = _run(["-m", "tilelang", "backends", "check", name, "--check", "c:cache"], roots=[site], cwd=project)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "PASS  c:cache" in out.stdout


# -- 3. `backends new` refuses another backend's distribution ----------------------------------


def test_new_refuses_the_distribution_of_another_installed_backend(site, tmp_path):
    write_distribution(site, "mybk", plugin_source(spec_dict("mybk")))  # distribution tilelang-backend-mybk
    get_registry().refresh()
    with pytest.raises(ScaffoldError) as info:
        write_backend("my_bk", tmp_path / "out")
    message = str(info.value)
    assert "tilelang-backend-mybk" in message and "'mybk'" in message and "pip uninstall tilelang-backend-mybk" in message
    assert not (tmp_path / "out" / "tilelang-backend-mybk").exists()



def test_new_refuses_the_name_of_an_installed_backend_of_the_same_distribution(site, tmp_path):
    """`new cython` wrote tilelang-backend-cython with a note and "next: pip install ...", and that
    install silently uninstalled the installed backend."""
    write_distribution(site, "mybk", plugin_source(spec_dict("mybk")))
    get_registry().refresh()
    with pytest.raises(ScaffoldError, match=r"backend 'mybk' is installed already, from tilelang-backend-mybk.*installing "
                                             r"it would uninstall that backend.*pip uninstall tilelang-backend-mybk"):
        write_backend("mybk", tmp_path / "same")
    assert not (tmp_path / "same").exists()


def test_new_command_refuses_the_distribution_of_another_installed_backend(tmp_path):
    site = tmp_path / "site"
    write_distribution(site, "mybk", plugin_source(spec_dict("mybk")))
    out = _run(["-m", "tilelang", "backends", "new", "my_bk", "--path", str(tmp_path / "out")], roots=[site])
    assert out.returncode == 1 and "installed backend 'mybk'" in out.stderr
    assert not (tmp_path / "out" / "tilelang-backend-mybk").exists()


# -- 4. a build hook that returns the wrong type ----------------------------------------------


def test_build_hook_returning_none_marks_it_broken_and_auto_falls_back(site, monkeypatch):
    import torch

    import tilelang
    import tilelang.language as T

    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    none_body = "\n@hookimpl\ndef tilelang_backend_build(artifact, options):\n    return None\n"
    ok_body = "\n@hookimpl\ndef tilelang_backend_build(artifact, options):\n    return lambda *args: 'ran'\n"
    write_distribution(site, "bpnone", plugin_source(spec_dict("bpnone", targets={"c": {**C_TARGET["c"], "priority": 1000}}),
                                                     body=none_body))
    write_distribution(site, "bpok", plugin_source(spec_dict("bpok"), body=ok_body))
    get_registry().refresh()

    @T.prim_func
    def fill(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=4) as bx:
            for i in T.Parallel(4):
                A[i] = 1.0

    with pytest.warns(BackendWarning) as caught:
        kernel = tilelang.compile(fill, target="c")  # raised TypeError before
    assert kernel.backend.name == "bpok" and kernel(torch.zeros(4)) == "ran"
    text = " ".join(str(w.message) for w in caught)
    assert "tilelang_backend_build returned NoneType (None), expected a callable kernel" in text
    record = get_registry().get("bpnone")
    assert record.status == "broken" and "tilelang_backend_build returned NoneType" in record.reason
    with pytest.raises(BackendBrokenError, match="tilelang_backend_build returned NoneType"):
        tilelang.compile(fill, target="c", execution_backend="bpnone")


# -- 5. conformance checks that check nothing never pass -------------------------------------


def test_conformance_tests_fail_when_the_backend_is_not_installed():
    from tilelang_core.conformance import conformance_tests

    test = conformance_tests("nosuchbackendxyz")
    try:
        test()
    except pytest.fail.Exception as exc:
        assert "run `pip install .` in the backend's project folder first" in str(exc)
    except BaseException as exc:  # noqa: BLE001 - pytest.skip's exception before the fix
        pytest.fail(f"expected a failing test, got {type(exc).__name__}: {exc}")
    else:
        pytest.fail("expected a failing test, it passed")


@pytest.mark.slow
def test_wrong_calls_without_any_reference_kernel_is_not_a_pass(tmp_path, monkeypatch):
    from tilelang_core.conformance import Suite

    site = tmp_path / "site"
    body = "\n@hookimpl\ndef tilelang_backend_build(artifact, options):\n    return lambda *a, **k: None\n"
    write_distribution(site, "nodtypes", plugin_source(spec_dict("nodtypes", targets={"c": {**C_TARGET["c"], "dtypes": []}}),
                                                       body=body))
    monkeypatch.setenv("PYTHONPATH", str(site))
    with on_path(site), Suite("nodtypes", only=["wrong_calls"]) as suite:
        (result,) = list(suite.run())
    assert result.status == "skip", result  # "pass" with 0 calls before
    assert "no random call was made" in result.reason and "does not support" in result.reason


# -- 6. `backends check --json` keeps stdout for the JSON --------------------------------------


def test_check_json_stdout_is_json_when_hooks_print(tmp_path):
    site = tmp_path / "site"
    source = scaffold_source("hookprint").replace(
        "    if options.verbose:\n",
        "    print('note: compiling', artifact.name)\n    import os; os.write(1, b'raw note on fd 1\\n')\n"
        "    if options.verbose:\n", 1)
    assert "note: compiling" in source
    write_distribution(site, "hookprint", source, package="tilelang_backend_hookprint")
    out = _run(["-m", "tilelang", "backends", "check", "hookprint", "--json", "--check", "kernel:static"], roots=[site])
    document = json.loads(out.stdout)  # not JSON before
    assert document["counts"] == {"pass": 1, "fail": 0, "skip": 0}, document
    assert "note: compiling" in out.stderr and "raw note on fd 1" in out.stderr
    parent = _run(["-m", "tilelang", "backends", "--json", "check", "hookprint", "--check", "kernel:static"], roots=[site])
    assert json.loads(parent.stdout)["backend"] == "hookprint"


# -- 7. usage errors, --json before the subcommand, one-line listings ---------------------------


def test_pytest_plugin_with_an_unknown_backend_is_a_usage_error(tmp_path):
    out = _run(["-m", "pytest", "-p", "tilelang_core.conformance", "--tilelang-backend", "nosuchbackendxyz", "-q",
                "-p", "no:cacheprovider"], cwd=tmp_path)
    text = out.stdout + out.stderr
    assert out.returncode == 4, text  # pytest.ExitCode.USAGE_ERROR; an INTERNALERROR (3) before
    assert "INTERNALERROR" not in text
    assert "'nosuchbackendxyz' is not installed; installed backends:" in text


def test_json_before_explain_is_honoured():
    out = _run(["-m", "tilelang", "backends", "--json", "explain", "--target", "c"])
    assert json.loads(out.stdout)["target"] == "c"


def test_listings_keep_one_line_per_row(tmp_path):
    site = tmp_path / "site"
    write_distribution(site, "ansidesc", plugin_source(
        spec_dict("ansidesc", description="ok\x1b[2J\x1b[31mRED\rOVER"),
        probe={"available": False, "reason": "first line\nsecond line\r\nthird"}))
    listed = _run(["-m", "tilelang", "backends"], roots=[site])
    rows = [line for line in listed.stdout.splitlines() if "ansidesc" in line or "first line" in line]
    assert rows == ["ansidesc  (tilelang-backend-ansidesc 1.0.0)  ok\\x1b[2J\\x1b[31mRED\\rOVER",
                    "    c        priority 1    unavailable: first line second line third"], listed.stdout
    assert "\x1b" not in listed.stdout and "\r" not in listed.stdout
    explained = _run(["-m", "tilelang", "backends", "explain", "--target", "c"], roots=[site])
    assert any(line.strip().startswith("ansidesc") and line.endswith("first line second line third")
               for line in explained.stdout.splitlines()), explained.stdout


# -- the scaffold's build hook runs the compiler bounded ----------------------------------------


def test_the_scaffolds_build_hook_stops_a_compiler_that_hangs(tmp_path, monkeypatch):
    """The scaffold ran $CC with subprocess.run: a compiler that hung hung tilelang.compile, against
    docs/backend-conventions.md (run compilers with run_compiler)."""
    import time
    import types

    import tilelang
    import tilelang.language as T
    from tilelang_core.artifact import BuildOptions
    from tilelang_core.errors import BuildError

    module = types.ModuleType("tilelang_backend_sleepy_plugin")
    exec(compile(scaffold_source("sleepy"), "plugin.py", "exec"), module.__dict__)

    @T.prim_func
    def double(A: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=8):
            for i in T.Parallel(8):
                A[i] = A[i] * 2.0

    artifact = tilelang.lower(double, target="c")
    hanging = tmp_path / "cc"
    hanging.write_text("#!/bin/sh\nexec sleep 30\n")
    hanging.chmod(0o755)
    monkeypatch.setenv("CC", str(hanging))
    monkeypatch.setenv("TILELANG_COMPILE_TIMEOUT_SECONDS", "1")
    start = time.monotonic()
    with pytest.raises(BuildError, match=r"compiling kernel 'double' failed \(stopped after 1 s"):
        module.tilelang_backend_build(artifact=artifact, options=BuildOptions())
    assert time.monotonic() - start < 15
