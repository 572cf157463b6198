"""The conformance suite itself: it lists checks from the declaration, passes a conforming backend
and fails (with the reason) backends that truncate scalars, skip the overlap or index-range
checks, crash on a bad call or import torch at load. The backends are the scaffold's plugin (tilelang backends new), really installed as a
distribution on a temporary path, with one bug planted each."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tilelang_core.conformance import Suite
from tilelang_core.conformance.error_table import ROWS
from tilelang_core.scaffold import plugin_source
from tilelang_core.testkit import on_path, write_distribution

#: Planted bugs: text replaced in the scaffold's plugin.py.
CALL = "        call = self.checker.bind(args, kwargs)\n"
OFFSET = "        if any(getattr(a, 'storage_offset', lambda: 0)() for a in args):\n"
BUGS = {
    "kitok": {},
    # a first ctypes attempt: no range checks, so ctypes silently truncates 2**64
    "kittrunc": {CALL: CALL.replace("call = self.checker.bind(args, kwargs)",
                                    "self.checker._scalar = lambda index, x, *_: x; call = self.checker.bind(args, kwargs)")},
    # an unknown keyword dereferences NULL
    "kitcrash": {CALL: '        if "out" in kwargs:\n            import ctypes; ctypes.string_at(0)\n' + CALL},
    # a backend that never compares the tensors' memory: vadd(A, B, A) computes garbage
    "kitoverlap": {CALL: "        self.checker._overlap_pairs = []\n" + CALL},
    # a backend that trusts 32-bit indices: it would read 2**31 elements and allocate 8 GiB
    "kitindex": {CALL: "        self.checker._limit = {}\n" + CALL},
    "kitheavy": {"from tilelang_core.hookspecs import hookimpl\n": "import torch\nfrom tilelang_core.hookspecs import hookimpl\n"},
    # value-changing flags: NaN no longer compares unequal to itself
    "kitfastmath": {'"-O2", "-fno-strict-aliasing", "-fPIC"': '"-O2", "-fno-strict-aliasing", "-ffast-math", "-fPIC"'},
    # a failed T.device_assert's text is dropped: the status -3 alone is reported
    "kitnoassert": {"call.check_status(self.function(*values), self.assert_message)":
                    "call.check_status(self.function(*values))"},
    # a call with a view at a storage offset dereferences NULL (in the kernel checks, not a subprocess)
    "kitsegv": {CALL: OFFSET + "            import ctypes; ctypes.string_at(0)\n" + CALL},
    # a call with a view at a storage offset never returns
    "kithang": {CALL: OFFSET + "            import time; time.sleep(10**6)\n" + CALL},
    # every call raises: every random wrong call misbehaves
    "kitraise": {CALL: "        raise RuntimeError('always')\n" + CALL},
    # a block launcher (backend-conventions.md) that splits the blocks in two halves and drops the
    # odd one: only loops of 65536 elements or more reach it
    "kitlauncher": {"        self.assert_message = ctypes_assert_message(library, entry)":
                    "        self.assert_message = ctypes_assert_message(library, entry)\n"
                    "        if entry.block_launcher:\n"
                    "            ctypes.c_void_p.in_dll(library, entry.block_launcher).value = "
                    "ctypes.cast(_HALVES, ctypes.c_void_p).value",
                    "from tilelang_core.hookspecs import hookimpl\n": "from tilelang_core.hookspecs import hookimpl\n"
                    "import ctypes as _ct\n"
                    "_BLOCKS = _ct.CFUNCTYPE(_ct.c_int32, _ct.c_void_p, _ct.c_int64, _ct.c_int64)\n"
                    "def _halves(blocks, work, fn, args):\n"
                    "    half = blocks // 2\n"
                    "    return fn(args, 0, half) or fn(args, half, 2 * half)\n"
                    "_HALVES = _ct.CFUNCTYPE(_ct.c_int32, _ct.c_int64, _ct.c_int64, _BLOCKS, _ct.c_void_p)(_halves)\n"},
}


#: A CUDA backend on a machine without a driver: builds (keeps the source), never runs. LOAD is
#: what its load hook does first: nothing, or (the planted bug) initialising the driver.
BUILD_ONLY = """
from pathlib import Path
from tilelang_core.capabilities import Availability
from tilelang_core.hookspecs import hookimpl
TILELANG_PLUGIN_API = 1

@hookimpl
def tilelang_backend_spec():
    return {"name": "NAME", "description": "a build-only test backend", "targets": {
        "cuda": {"priority": 1, "consumes": ["device_source"], "device_language": "cuda"DECL}}}

@hookimpl
def tilelang_backend_probe(target_kind):
    return Availability.build_only_because("no CUDA driver (a test backend)")

class Kernel:
    def __init__(self, source):
        self.source = source
    def __call__(self, *args, **kwargs):
        raise AssertionError("never called: the core refuses calls of a build-only target")

@hookimpl
def tilelang_backend_build(artifact, options):
    return Kernel(artifact.device_source)

@hookimpl
def tilelang_backend_save(kernel, directory):
    (Path(directory) / "kernel.cu").write_text(kernel.source)

@hookimpl
def tilelang_backend_load(artifact, directory, options):
    LOAD
    return Kernel((Path(directory) / "kernel.cu").read_text())
"""
DRIVER_AT_LOAD = 'from tilelang_core.errors import BackendUnavailableError; raise BackendUnavailableError("cuInit failed")'
#: Variants of the build-only backend: name -> (extra declaration, what its load hook does first).
#: The last two declare no float64 (the suite leaves its float64 reference kernel out) and that
#: loading imports no TVM, which the last one breaks.
NO_TVM = ', "loads_without_tvm": True, "dtypes": ["float32", "int32"]'
BUILD_ONLY_VARIANTS = {
    "kitbuildonly": ("", "pass"),
    "kitdriverload": ("", DRIVER_AT_LOAD),
    "kitnotvm": (NO_TVM, "pass"),
    "kittvmatload": (NO_TVM, "import tvm"),
}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    for name, changes in BUGS.items():
        source = plugin_source(name)
        for old, new in changes.items():
            assert old in source
            source = source.replace(old, new)
        write_distribution(root, name, source, package=f"tilelang_backend_{name}")
    for name, (decl, load) in BUILD_ONLY_VARIANTS.items():
        write_distribution(root, name, BUILD_ONLY.replace("NAME", name).replace("DECL", decl).replace("LOAD", load),
                           package=f"tilelang_backend_{name}")
    probe = """
@hookimpl
def tilelang_backend_probe(target_kind):
    return Availability.build_only_because("no CUDA driver (a test backend)")
"""
    assert probe in BUILD_ONLY
    no_probe = BUILD_ONLY.replace(probe, "").replace("NAME", "kitnoprobe").replace("DECL", "").replace("LOAD", "pass")
    write_distribution(root, "kitnoprobe", no_probe, package="tilelang_backend_kitnoprobe")
    return root


@pytest.fixture
def installed(site, monkeypatch):
    """The throwaway backends visible here and in the suite's subprocesses."""
    monkeypatch.setenv("PYTHONPATH", str(site))
    with on_path(site):
        yield site


def run(name, *only):
    with Suite(name, only=list(only)) as suite:
        return {r.check: r for r in suite.run()}


def test_checks_come_from_the_declaration(installed):
    with Suite("kitok") as suite:
        names = [c.name for c in suite.checks()]
    assert names[:2] == ["declaration", "c:probe"]
    assert {f"c:error:{r.id}" for r in ROWS if r.when != "gpu"} <= set(names)
    assert "c:error:device" not in names  # a GPU-only row
    assert "c:dtype:float32" in names and "c:dtype:float16" not in names  # only declared dtypes
    assert {"c:scalar:uint64", "c:kernel:zero_size", "c:save_load", "c:cache", "c:threads", "c:wrong_calls"} <= set(names)
    with Suite("kitok", only=["error:int"]) as suite:
        assert all("error:int" in c.name for c in suite.checks()) and len(suite.checks()) == 5


@pytest.mark.slow
def test_truncating_scalars_fail_the_error_table(installed):
    ok = run("kitok", "error:int32_range", "error:uint64_range")
    assert {k: r.status for k, r in ok.items()} == {"c:error:int32_range": "pass", "c:error:uint64_range": "pass"}
    bad = run("kittrunc", "error:int32_range", "error:uint64_range")
    for check in ("c:error:int32_range", "c:error:uint64_range"):
        assert bad[check].status == "fail"
        assert "does not fit in" in bad[check].reason and bad[check].reason.endswith("got no error")


def test_the_tables_index_limit_is_the_pipelines():
    from tilelang_core.conformance.error_table import INDEX_LIMIT_32 as table
    from tilelang_core.lowering.signature import INDEX_LIMIT_32 as pipeline

    assert table == pipeline


@pytest.mark.slow
def test_skipping_the_overlap_check_fails_the_error_table(installed):
    ok = run("kitok", "error:overlap", "kernel:aliasing_inputs")
    assert {k: r.status for k, r in ok.items()} == {
        "c:error:overlap_same": "pass", "c:error:overlap_shifted": "pass", "c:kernel:aliasing_inputs": "pass"}, ok
    bad = run("kitoverlap", "error:overlap", "kernel:aliasing_inputs")
    assert bad["c:kernel:aliasing_inputs"].status == "pass"  # what stays allowed still runs
    for check in ("c:error:overlap_same", "c:error:overlap_shifted"):
        assert bad[check].status == "fail"
        assert "overlap in memory" in bad[check].reason and bad[check].reason.endswith("got no error"), bad[check].reason


@pytest.mark.slow
def test_skipping_the_index_range_check_fails_the_error_table_without_allocating(installed):
    ok = run("kitok", "error:index")
    assert {k: r.status for k, r in ok.items()} == {"c:error:index_input": "pass", "c:error:index_output": "pass"}, ok
    bad = run("kitindex", "error:index")
    assert {k: r.status for k, r in bad.items()} == {"c:error:index_input": "fail", "c:error:index_output": "fail"}
    # the input is refused by the core's symbol range check instead (2**31 elements do not fit the
    # int32 symbol 'n'), not with the row's message; the 8 GiB output cannot be allocated under the
    # suite's address-space cap, so the row fails instead of exhausting the machine
    assert "got ValueError(\"vadd_dyn() argument 'A' (#0): shape[0] = 2147483648 binds symbol 'n', which is int32" in (
        bad["c:error:index_input"].reason), bad["c:error:index_input"].reason
    assert "got RuntimeError(" in bad["c:error:index_output"].reason, bad["c:error:index_output"].reason


@pytest.mark.slow
def test_a_crash_is_reported_with_the_call_that_crashed(installed):
    results = run("kitcrash", "error:count", "error:unknown_keyword")
    assert results["c:error:count"].status == "pass"
    crashed = results["c:error:unknown_keyword"]
    assert crashed.status == "fail"
    assert "the subprocess died by signal" in crashed.reason and "during 'unknown_keyword'" in crashed.reason


def test_the_rows_after_a_crashing_row_run_in_a_fresh_subprocess(installed):
    """One crashing row failed every later row (and wrong_calls) with its own crash, unrun."""
    results = run("kitcrash", "error:bool_value", "error:unknown_keyword", "error:stream_type", "error:kernel_status")
    crashed = results["c:error:unknown_keyword"]
    assert crashed.status == "fail" and "died by signal 11 (SIGSEGV) during 'unknown_keyword'" in crashed.reason, crashed
    assert "Segfault encountered; File" in crashed.reason and "in string_at" in crashed.reason, crashed
    assert {results[f"c:error:{row}"].status for row in ("bool_value", "stream_type", "kernel_status")} == {"pass"}


def test_heavy_import_at_plugin_load_fails_the_declaration(installed):
    result = run("kitheavy", "declaration")["declaration"]
    assert result.status == "fail" and result.reason.startswith("importing tilelang_backend_kitheavy.plugin imports ")
    assert "torch" in result.reason and result.reason.endswith(": import them inside the hooks")


def test_command_line(installed):
    env_cmd = [sys.executable, "-m", "tilelang", "backends", "check"]
    proc = subprocess.run([*env_cmd, "kitok", "--check", "declaration", "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["counts"] == {"pass": 1, "fail": 0, "skip": 0}
    proc = subprocess.run([*env_cmd, "kitheavy", "--check", "declaration"], capture_output=True, text=True)
    assert proc.returncode == 1 and "FAIL  declaration" in proc.stdout and "0 passed, 1 failed" in proc.stdout
    proc = subprocess.run([*env_cmd, "nosuch"], capture_output=True, text=True)
    assert proc.returncode == 2 and "execution backend 'nosuch' is not installed" in proc.stderr  # a usage error


def test_usage_errors_of_check_and_new_exit_2(installed, tmp_path):
    """Before, a target the backend does not declare and an invalid name exited 1, as a failed check."""
    cli = [sys.executable, "-m", "tilelang", "backends"]
    proc = subprocess.run([*cli, "check", "kitok", "--target", "cuda"], capture_output=True, text=True)
    assert proc.returncode == 2 and "does not declare target(s) cuda (it declares: c)" in proc.stderr, proc.stderr
    proc = subprocess.run([*cli, "new", "MyBackend", "--path", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 2 and "must be a lowercase identifier" in proc.stderr and "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []
    proc = subprocess.run([*cli, "new", "kitok", "--path", str(tmp_path / "afile")], capture_output=True, text=True)
    # the name of an installed backend: its distribution, which installing would replace (not a usage error)
    assert proc.returncode == 1 and "backend 'kitok' is installed already" in proc.stderr, proc.stderr
    assert not (tmp_path / "afile").exists()
    (tmp_path / "file").write_text("")
    proc = subprocess.run([*cli, "new", "mine", "--path", str(tmp_path / "file")], capture_output=True, text=True)
    assert proc.returncode == 1 and "is a file" in proc.stderr  # the command failed: not a usage error


def test_repeated_targets_and_checks_run_each_check_once(installed):
    proc = subprocess.run([sys.executable, "-m", "tilelang", "backends", "check", "kitok", "--target", "c", "--target",
                           "c", "--check", "probe", "--check", "probe", "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert [r["check"] for r in json.loads(proc.stdout)["results"]] == ["c:probe"]


@pytest.mark.slow
def test_pytest_plugin(installed, tmp_path):
    cmd = [sys.executable, "-m", "pytest", "-p", "tilelang_core.conformance", "-q", "-p", "no:cacheprovider",
           "--tilelang-check", "declaration"]
    (tmp_path / "test_unrelated.py").write_text("raise SystemExit('collected a test file of the folder')\n")
    good = subprocess.run([*cmd, "--tilelang-check", "error:count", "--tilelang-backend", "kitok"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert good.returncode == 0 and "3 passed" in good.stdout, good.stdout[-2000:]  # + count_outputs
    assert "error" not in good.stdout, good.stdout[-2000:]  # the folder's test files are not collected
    bad = subprocess.run([*cmd, "--tilelang-backend", "kitheavy"], capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 1 and "1 failed" in bad.stdout and "torch: import them inside the hooks" in bad.stdout, (
        bad.stdout[-2000:])


def test_a_gpu_target_that_can_only_build_here_is_built_exported_and_loaded_without_a_device(installed):
    good = run("kitbuildonly", "build_only", "kernel:static")
    assert good["cuda:build_only"].status == "pass", good["cuda:build_only"].reason
    assert good["cuda:kernel:static"].status == "skip" and "no CUDA driver" in good["cuda:kernel:static"].reason
    bad = run("kitdriverload", "build_only")["cuda:build_only"]
    assert bad.status == "fail" and "(a disk cache hit: the load hook) raised BackendUnavailableError: cuInit failed" in bad.reason, (
        bad.reason)


def test_build_only_leaves_out_undeclared_dtypes_and_checks_loads_without_tvm(installed):
    good = run("kitnotvm", "build_only")["cuda:build_only"]
    assert good.status == "pass", good.reason
    assert "built and exported 2 kernels" in good.reason and "(tilelang.load without importing TVM)" in good.reason
    assert "not built, as declared: scalars (parameter 'Y' of kernel 'scalars' is a float64 tensor" in good.reason
    bad = run("kittvmatload", "build_only")["cuda:build_only"]
    assert bad.status == "fail" and bad.reason.startswith(
        "the declaration claims loads_without_tvm, but tilelang.load imported tvm"), bad.reason


def test_expected_device_messages_name_the_torch_device_type():
    """Metal tensors live on torch's ``mps`` device, so the table's ``{device}`` is ``mps`` there."""
    from tilelang_core.conformance import error_table
    from tilelang_core.conformance.suite import _param_device

    row = next(r for r in error_table.ROWS if r.id == "device")
    assert [_param_device(k) for k in ("c", "llvm", "cuda", "metal")] == ["cpu", "cpu", "cuda", "mps"]
    assert row.expected(_param_device("metal")).endswith("expected a tensor on mps, got cpu")


@pytest.mark.slow
def test_value_changing_flags_fail_the_ieee_check(installed):
    assert run("kitok", "kernel:ieee")["c:kernel:ieee"].status == "pass"
    # in a process of its own: loading a library linked with -ffast-math turns on flush-to-zero
    # for the whole process (gcc's crtfastmath.o), which would change later tests' results
    proc = subprocess.run([sys.executable, "-m", "tilelang", "backends", "check", "kitfastmath", "--check",
                           "kernel:ieee", "--json"], capture_output=True, text=True)
    (bad,) = [c for c in json.loads(proc.stdout)["results"] if c["check"] == "c:kernel:ieee"]
    assert bad["status"] == "fail" and "NaN compares unequal to itself" in bad["reason"], bad
    assert "-ffast-math" in bad["reason"], bad


@pytest.mark.slow
def test_a_dropped_assertion_message_fails_the_device_assert_check(installed):
    assert run("kitok", "kernel:device_assert")["c:kernel:device_assert"].status == "pass"
    bad = run("kitnoassert", "kernel:device_assert")["c:kernel:device_assert"]
    assert bad.status == "fail", bad
    assert "a failed T.device_assert raised RuntimeError('positive() failed: the kernel returned error code -3')" in bad.reason


@pytest.mark.slow
def test_a_dropped_division_message_fails_the_division_by_zero_check(installed):
    assert run("kitok", "kernel:division_by_zero")["c:kernel:division_by_zero"].status == "pass"
    bad = run("kitnoassert", "kernel:division_by_zero")["c:kernel:division_by_zero"]
    assert bad.status == "fail", bad
    assert "a division by zero raised RuntimeError('quotient() failed: the kernel returned error code -3')" in bad.reason


def test_fresh_processes_load_the_installed_backend_not_a_source_folder_in_the_working_directory(
        installed, tmp_path, monkeypatch):
    shadow = tmp_path / "tilelang_backend_kitok"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise ImportError('the source folder was imported')\n")
    (shadow / "plugin.py").write_text("")
    monkeypatch.chdir(tmp_path)
    result = run("kitok", "declaration")["declaration"]
    assert result.status == "pass", result.reason


def test_a_gpu_target_without_a_probe_fails_the_probe_check(installed):
    assert run("kitbuildonly", "probe")["cuda:probe"].status == "skip"  # it says why it cannot run here
    result = run("kitnoprobe", "probe")["cuda:probe"]
    assert result.status == "fail" and "implements no tilelang_backend_probe" in result.reason, result


@pytest.mark.slow
def test_a_kernel_call_that_segfaults_fails_its_check_and_the_suite_goes_on(installed):
    """Before, the kernel checks called kernels in the suite's process: SIGSEGV killed it."""
    results = run("kitsegv", "kernel:scalar_symbol", "kernel:offset_views", "kernel:explicit_strides")
    assert results["c:kernel:scalar_symbol"].status == "pass", results["c:kernel:scalar_symbol"]
    crashed = results["c:kernel:offset_views"]
    assert crashed.status == "fail" and "the check's subprocess died by signal 11 (SIGSEGV)" in crashed.reason, crashed
    assert results["c:kernel:explicit_strides"].status == "pass", results["c:kernel:explicit_strides"]  # a fresh worker


@pytest.mark.slow
def test_the_command_line_reports_a_segfaulting_backend_and_removes_its_temporary_folders(installed, tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "tilelang", "backends", "check", "kitsegv", "--check",
                           "kernel:offset_views", "--check", "kernel:static", "--json"], capture_output=True, text=True,
                          env=env)
    assert proc.returncode == 1, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["counts"] == {"pass": 1, "fail": 1, "skip": 0}, out
    assert [r["check"] for r in out["results"] if r["status"] == "fail"] == ["c:kernel:offset_views"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_kernel_call_that_hangs_fails_its_check_naming_the_timeout(installed, monkeypatch):
    from tilelang_core.conformance import suite as suite_module

    monkeypatch.setattr(suite_module, "CHECK_TIMEOUT", 30)
    results = run("kithang", "kernel:offset_views", "kernel:explicit_strides")
    hung = results["c:kernel:offset_views"]
    assert hung.status == "fail" and hung.reason.startswith("the check did not finish in 30 s"), hung
    assert results["c:kernel:explicit_strides"].status == "pass", results["c:kernel:explicit_strides"]


def test_a_backend_a_fresh_interpreter_does_not_see_fails_once_saying_to_install_it(installed, monkeypatch):
    """Before, every check run in a subprocess failed with "'NoneType' object has no attribute 'call'"."""
    monkeypatch.delenv("PYTHONPATH")  # this process sees the backends, fresh interpreters do not
    with Suite("kitok") as suite:
        results = list(suite.run())
    assert len(results) == 1 and results[0].status == "fail", results
    assert "execution backend 'kitok' is not visible in a fresh interpreter (this process found it only through the " \
           "sys.path entry" in results[0].reason and "pip install it" in results[0].reason, results[0].reason
    with Suite("kitok", only=["c:cache"]) as suite:
        (check,) = suite.checks()
        assert "is not visible in a fresh interpreter" in suite.run_check(check).reason
    from tilelang_core.conformance import conformance_tests

    test = conformance_tests("kitok", ["c"])  # the scaffold's tests: one failing test, not one per check
    assert not hasattr(test, "pytestmark")
    with pytest.raises(pytest.fail.Exception, match="is not visible in a fresh interpreter"):
        test()


@pytest.mark.slow
def test_wrong_calls_counts_every_misbehaving_call(installed):
    """Before, the count was of the 5 examples the subprocess sends."""
    result = run("kitraise", "wrong_calls")["c:wrong_calls"]
    assert result.status == "fail" and result.reason.startswith("2000 of 2000 random calls misbehaved"), result.reason


def test_a_block_launcher_that_drops_a_block_fails_the_large_size_check(installed):
    """Every reference kernel had under 65536 elements, so the kit passed (91 of 91) a backend whose
    launcher dropped the odd block of a parallel block loop."""
    assert run("kitok", "kernel:large_size")["c:kernel:large_size"].status == "pass"
    bad = run("kitlauncher", "kernel:large_size")["c:kernel:large_size"]
    assert bad.status == "fail" and "pad with n=65536: Tensor-likes are not close" in bad.reason, bad
