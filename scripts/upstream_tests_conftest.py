"""pytest plugin that scripts/upstream_tests.py copies to the root of each tree it runs, as conftest.py.

It is the harness's own code (no upstream test code). Driven by environment variables the driver sets:

- ``UPSTREAM_TESTS_RESULTS``: a JSON-lines file; the controller process appends one line per test
  phase report (nodeid, phase, outcome, short message) and per collection error.
- ``UPSTREAM_TESTS_SELECT``: optional file of nodeids, one a line; other collected tests are deselected.
- ``UPSTREAM_TESTS_TARGET``: optional target string (``c``); each test runs inside
  ``with tvm.target.Target(<it>)`` (the adapted tree's last rewrite rule).
- ``UPSTREAM_TESTS_TIMEOUT``: seconds a test (setup, call and teardown together) may take. At the
  limit the running phase fails (SIGALRM); if it does not return within a grace period (a kernel stuck
  in C code), the worker process exits and pytest-xdist reports the test as crashed, after this file
  has recorded it as a timeout.

It also puts the tree root on ``sys.path`` (a few upstream tests import upstream's ``examples``
package, which the driver links there), seeds ``random``/``numpy``/``torch`` with 0 before each test,
and skips tests marked ``perf`` as upstream's own test setup does by default.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import sys
import threading
import time

import pytest

#: The clock the timeouts read, taken before any test can monkeypatch ``time.monotonic`` (upstream's
#: pass-timing tests replace it with a short iterator, which ended the whole run).
_clock = time.monotonic

ROOT = os.path.dirname(os.path.abspath(__file__))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

_RESULTS = os.environ.get("UPSTREAM_TESTS_RESULTS")
_SELECT = os.environ.get("UPSTREAM_TESTS_SELECT")
_TARGET = os.environ.get("UPSTREAM_TESTS_TARGET")
_TIMEOUT = float(os.environ.get("UPSTREAM_TESTS_TIMEOUT", "0") or 0)
#: Seconds after the timeout before a test that ignores SIGALRM ends its worker.
_GRACE = 30.0

if _TARGET and os.environ.get("PYTEST_XDIST_WORKER"):
    # Imported now, before any timeout is armed: an import cut short by the alarm would leave a
    # half-initialised module behind for every later test of this worker.
    from tilelang import tvm as _tvm  # noqa: F401


def _append(record: dict) -> None:
    if _RESULTS:
        with open(_RESULTS, "a") as out:
            out.write(json.dumps(record) + "\n")


def pytest_configure(config):
    for marker in ("perf: benchmark test (skipped by the harness)", "slow: long-running test"):
        config.addinivalue_line("markers", marker)


def pytest_collection_modifyitems(config, items):
    if _SELECT:
        with open(_SELECT) as f:
            wanted = {line.strip() for line in f if line.strip()}
        keep = [item for item in items if item.nodeid in wanted]
        dropped = [item for item in items if item.nodeid not in wanted]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = keep
    skip_perf = pytest.mark.skip(reason="perf test (skipped by default upstream too)")
    for item in items:
        if item.get_closest_marker("perf") is not None:
            item.add_marker(skip_perf)


@pytest.fixture(autouse=True)
def _upstream_tests_target():
    """Run the test inside ``with tvm.target.Target(UPSTREAM_TESTS_TARGET)`` when that is set."""
    if not _TARGET:
        yield
        return
    from tilelang import tvm

    with tvm.target.Target(_TARGET):
        yield


def _seed() -> None:
    random.seed(0)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(0)
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(0)


# --- per-test timeout ---------------------------------------------------------------------------------

_deadline: dict = {}


def _on_alarm(signum, frame):
    pytest.fail(f"upstream_tests: timed out after {_TIMEOUT:g} s", pytrace=False)


def _hard_exit(nodeid: str) -> None:
    _append({"nodeid": nodeid, "when": "timeout", "outcome": "timeout",
             "message": f"timed out after {_TIMEOUT:g} s and did not return within {_GRACE:g} s more"})
    sys.stderr.write(f"upstream_tests: {nodeid} is stuck past its timeout; ending this worker\n")
    sys.stderr.flush()
    os._exit(3)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if _TIMEOUT <= 0:
        _seed()
        return (yield)
    _deadline["at"] = _clock() + _TIMEOUT
    watchdog = threading.Timer(_TIMEOUT + _GRACE, _hard_exit, args=(item.nodeid,))
    watchdog.daemon = True
    watchdog.start()
    _seed()
    try:
        return (yield)
    finally:
        watchdog.cancel()
        _deadline.pop("at", None)


@contextlib.contextmanager
def _timed_phase():
    """Around a setup/call/teardown phase: SIGALRM armed for the test's time left, then disarmed."""
    at = _deadline.get("at")
    if at is None:
        yield
        return
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, max(at - _clock(), 0.01))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    with _timed_phase():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    with _timed_phase():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    with _timed_phase():
        return (yield)


# --- recording (in the controller: pytest-xdist replays the workers' reports there) -----------------

def _is_controller(config) -> bool:
    return not hasattr(config, "workerinput")


def _message(report) -> str:
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2])
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None and getattr(crash, "message", None):
        return crash.message[:2000]
    return str(report.longrepr or "")[-2000:]


def pytest_runtest_logreport(report):
    if _RESULTS and _is_controller(_CONFIG["c"]):
        _append({"nodeid": report.nodeid, "when": report.when, "outcome": report.outcome,
                 "message": _message(report) if not report.passed else ""})


def pytest_collectreport(report):
    if _RESULTS and report.failed and _is_controller(_CONFIG["c"]):
        _append({"nodeid": report.nodeid, "when": "collect", "outcome": "error", "message": _message(report)})


_CONFIG: dict = {}


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    _CONFIG["c"] = session.config
