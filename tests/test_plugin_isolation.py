"""Plugins that hang, end the process, print or import heavy modules while loading, in fresh
interpreters: ``tilelang backends`` (plain and ``--json``) and ``compile(execution_backend="auto")``
keep working, bounded by a small ``TILELANG_PLUGIN_TIMEOUT``.

Every subprocess has a wall-clock limit, so a regression shows as a failure, not a hung suite.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tilelang_core.testkit import plugin_source, spec_dict, subprocess_env, write_distribution

#: Seconds a loading step may take in these tests: small, yet far above what a real load takes.
TIMEOUT = "3"

#: Hard limit of each subprocess.
LIMIT = 240


def c_target(priority: int) -> dict:
    return {"c": {"priority": priority, "consumes": ["device_source"], "device_language": "c"}}


def spec_then(statement: str, name: str, priority: int) -> str:
    """Spec-hook source that runs ``statement`` (which hangs or raises) before answering."""
    return f"(({statement}) and None) or {spec_dict(name, c_target(priority))!r}"


PROBE = """
@hookimpl
def tilelang_backend_probe(target_kind):
    {statement}
"""


PLUGINS = {
    # hangs while being imported (after saying so on stderr, where plugin output goes)
    "sleepy": plugin_source(
        spec_dict("sleepy", c_target(1000)),
        body="import sys, time\nprint('sleepy is hanging', file=sys.stderr, flush=True)\ntime.sleep(600)\n",
    ),
    # hangs in its spec hook
    "dozy": plugin_source(spec_then("__import__('time').sleep(600)", "dozy", 1000)),
    # hangs in its probe hook
    "stuck": plugin_source(spec_dict("stuck", c_target(1000)), body=PROBE.format(statement="import time; time.sleep(600)")),
    # ends the process from its spec hook, or from its probe hook
    "quitter": plugin_source(spec_then("__import__('sys').exit(3)", "quitter", 1000)),
    "leaver": plugin_source(spec_dict("leaver", c_target(1000)), body=PROBE.format(statement="raise SystemExit(4)")),
    # raises KeyboardInterrupt itself (no Ctrl-C was pressed)
    "faker": plugin_source(spec_dict("faker", c_target(1000)), body=PROBE.format(statement="raise KeyboardInterrupt")),
    # prints while being imported and while declaring itself
    "chatty": plugin_source(spec_then("print('chatty says hello from its spec hook')", "chatty", 1),
                            body="print('chatty says hello at import')\n"),
    # imports a heavy module at import time
    "weighty": plugin_source(spec_dict("weighty", c_target(1)), body="import numpy\n"),
}


def make_site(root, names):
    for name in names:
        write_distribution(root, name, PLUGINS[name])
    return root


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Every misbehaving plugin (each hanging one costs one TIMEOUT per process)."""
    return make_site(tmp_path_factory.mktemp("isolation") / "site", [n for n in PLUGINS if n != "weighty"])


@pytest.fixture(scope="module")
def small_site(tmp_path_factory):
    """No hanging plugin, so the default time limit applies (a numpy import may be slow on a busy machine)."""
    return make_site(tmp_path_factory.mktemp("isolation-small") / "site", ["quitter", "chatty", "weighty"])


def env_for(site, **extra):
    env = subprocess_env(site)
    env["TILELANG_PLUGIN_TIMEOUT"] = TIMEOUT
    env["TILELANG_DISABLE_CACHE"] = "1"
    env.update(extra)
    return env


def run_cli(site, *args):
    return subprocess.run([sys.executable, "-m", "tilelang", *args], capture_output=True, text=True,
                          env=env_for(site), timeout=LIMIT)


@pytest.mark.slow
def test_backends_json_survives_hanging_exiting_and_printing_plugins(site):
    out = run_cli(site, "backends", "--json")
    assert out.returncode == 1, out.stderr  # broken plugins are installed; the command still finishes
    rows = {r["name"]: r for r in json.loads(out.stdout)}  # plugin output did not corrupt the JSON
    assert "chatty says hello" not in out.stdout
    assert "chatty says hello at import" in out.stderr and "chatty says hello from its spec hook" in out.stderr

    def broken(name, *words):
        row = rows[name]
        assert row["status"] == "broken", row
        for word in words:
            assert word in row["reason"], row["reason"]

    broken("sleepy", f"did not finish within {TIMEOUT} s", "importing tilelang_backend_sleepy.plugin", "TILELANG_PLUGIN_TIMEOUT")
    broken("dozy", f"did not finish within {TIMEOUT} s", "tilelang_backend_spec")
    broken("stuck", f"did not finish within {TIMEOUT} s", "tilelang_backend_probe(target_kind='c')")
    broken("quitter", "tilelang_backend_spec raised SystemExit: 3")
    broken("leaver", "tilelang_backend_probe raised SystemExit: 4")
    broken("faker", "tilelang_backend_probe raised KeyboardInterrupt")
    assert rows["chatty"]["status"] == "ok" and rows["chatty"]["targets"]["c"]["available"]
    assert rows["cython"]["status"] == "ok" and rows["cython"]["targets"]["c"]["available"]


@pytest.mark.slow
def test_backends_text_and_json_report_exits_and_heavy_imports(small_site):
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "tilelang", "backends", *args], capture_output=True, text=True,
                              env=subprocess_env(small_site), timeout=LIMIT)

    out = cli()
    assert out.returncode == 1, out.stderr
    lines = out.stdout.splitlines()
    assert any(line.startswith("quitter  (tilelang-backend-quitter 1.0.0)  BROKEN: hook tilelang_backend_spec "
                               "raised SystemExit: 3") for line in lines), lines
    assert any("WARNING: loading tilelang_backend_weighty.plugin imported numpy" in line for line in lines)
    assert any(line.startswith("cython  (") for line in lines)
    assert "chatty says hello" not in out.stdout
    rows = {r["name"]: r for r in json.loads(cli("--json").stdout)}
    assert rows["weighty"]["status"] == "ok"
    assert any("imported numpy" in w for w in rows["weighty"]["warnings"]), rows["weighty"]
    assert rows["chatty"]["warnings"] == [] and rows["cython"]["warnings"] == []


COMPILE_AUTO = """
import json, warnings
import tilelang, tilelang.language as T
import torch
from tilelang_core.errors import BackendBrokenError

@T.prim_func
def double(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
    with T.Kernel(1, threads=16) as bx:
        for i in T.Parallel(16):
            B[i] = A[i] * 2.0

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    k = tilelang.compile(double, target="c")
a = torch.arange(16, dtype=torch.float32)
b = torch.empty(16)
k(a, b)
explicit = {}
for name in ("leaver", "quitter", "stuck"):
    try:
        tilelang.compile(double, target="c", execution_backend=name)
    except BackendBrokenError as exc:
        explicit[name] = str(exc)
print(json.dumps({"backend": k.backend.name, "ok": torch.equal(b, a * 2), "explicit": explicit,
                  "warnings": [str(w.message) for w in caught]}))
"""


@pytest.mark.slow
def test_auto_compile_skips_hanging_and_exiting_plugins_with_warnings(site, tmp_path):
    script = tmp_path / "compile_auto.py"  # TVMScript reads the kernel's source from its file
    script.write_text(COMPILE_AUTO)
    start = time.monotonic()
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=env_for(site), timeout=LIMIT)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["backend"] == "cython" and result["ok"]
    skipped = " ".join(result["warnings"])
    for name in ("sleepy", "dozy", "stuck", "quitter", "leaver", "faker"):
        assert f"skipped execution backend {name!r}" in skipped, (name, result["warnings"])
    assert "SystemExit" in result["explicit"]["leaver"] and "SystemExit" in result["explicit"]["quitter"]
    assert "did not finish within" in result["explicit"]["stuck"]
    # three plugins hang, each costs one timeout once; nothing waits for them again
    assert time.monotonic() - start < LIMIT


HANG_THEN_WAIT = """
import signal, sys
# a program's own Ctrl-C handling: a parent may have started us with SIGINT ignored (a background
# job of a shell without job control), which Python would keep
signal.signal(signal.SIGINT, signal.default_int_handler)
from tilelang_core.backends import get_registry
print("loading", flush=True)
get_registry().get("sleepy")
print("finished", flush=True)
"""


def _wait_for_line(stream, text: str, seconds: float) -> bool:
    """Read ``stream`` up to a line equal to ``text``; False at end of file or after ``seconds``."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        ready, _, _ = select.select([stream], [], [], max(0.0, end - time.monotonic()))
        if not ready:
            return False
        line = stream.readline()
        if not line:
            return False
        if line.strip() == text:
            return True
    return False


@pytest.mark.slow
def test_a_real_ctrl_c_still_stops_the_program_while_a_plugin_hangs(site):
    proc = subprocess.Popen([sys.executable, "-c", HANG_THEN_WAIT], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env_for(site, TILELANG_PLUGIN_TIMEOUT="300"))
    try:
        assert proc.stdout.readline().strip() == "loading"
        # Wait until the plugin hangs: a SIGINT that arrives while the main thread still runs
        # importlib's weakref callbacks is lost by CPython ("Exception ignored in ... cb"), which
        # made this test flaky on a busy machine when it slept a fixed second instead.
        assert _wait_for_line(proc.stderr, "sleepy is hanging", seconds=LIMIT)
        time.sleep(0.2)  # the main thread is now waiting for the loading thread
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "finished" not in stdout
    assert "KeyboardInterrupt" in stderr
    assert proc.returncode != 0


def test_invalid_plugin_timeout_is_a_clear_error(site):
    out = subprocess.run([sys.executable, "-m", "tilelang", "backends"], capture_output=True, text=True,
                         env=env_for(site, TILELANG_PLUGIN_TIMEOUT="soon"), timeout=LIMIT)
    assert out.returncode == 1
    assert "TILELANG_PLUGIN_TIMEOUT must be a number of seconds greater than 0" in out.stderr and "'soon'" in out.stderr


def test_plugin_timeout_setting(monkeypatch):
    from tilelang_core.backends.isolation import DEFAULT_TIMEOUT, plugin_timeout
    from tilelang_core.errors import SettingError

    monkeypatch.delenv("TILELANG_PLUGIN_TIMEOUT", raising=False)
    assert plugin_timeout() == DEFAULT_TIMEOUT
    monkeypatch.setenv("TILELANG_PLUGIN_TIMEOUT", "2.5")
    assert plugin_timeout() == 2.5
    for bad in ("0", "-1", "nan", "inf", "soon", "99999999999999", "1e300"):
        monkeypatch.setenv("TILELANG_PLUGIN_TIMEOUT", bad)
        with pytest.raises(SettingError, match="TILELANG_PLUGIN_TIMEOUT"):
            plugin_timeout()


def test_plugin_code_runs_bounded_and_cannot_end_the_process(capsys):
    from tilelang_core.backends.isolation import run_plugin_code

    exited = run_plugin_code(lambda: sys.exit(5), timeout=30)
    assert exited.finished and isinstance(exited.error, SystemExit)
    start = time.monotonic()
    slow = run_plugin_code(lambda: time.sleep(30), timeout=0.2)
    assert not slow.finished and time.monotonic() - start < 10
    printed = run_plugin_code(lambda: print("from the plugin") or 7, timeout=30)
    assert printed.value == 7
    out, err = capsys.readouterr()
    assert "from the plugin" in err and "from the plugin" not in out


def test_loading_in_several_threads_at_once_leaves_stdout_as_it_was():
    import threading

    from tilelang_core.backends.isolation import run_plugin_code

    before = sys.stdout
    threads = [threading.Thread(target=run_plugin_code, args=(lambda: time.sleep(0.02 * (i % 3)),),
                                kwargs={"timeout": 30}) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sys.stdout is before


def test_a_timed_out_loading_thread_is_listed_as_hung_until_it_ends():
    """The CLI ends with os._exit while such a thread runs (tilelang_core/cli.py:
    _exit_past_hung_plugins): finalizing the interpreter under running plugin code could abort it."""
    import threading

    from tilelang_core.backends.isolation import hung_plugin_threads, run_plugin_code

    release = threading.Event()
    outcome = run_plugin_code(lambda: release.wait(30), timeout=0.05, name="test-hung")
    assert not outcome.finished
    (mine,) = [t for t in hung_plugin_threads() if t.name == "tilelang-load-test-hung"]  # other tests may leave theirs
    release.set()
    mine.join(5)
    assert mine not in hung_plugin_threads()
