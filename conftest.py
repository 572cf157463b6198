"""Suite-wide setup: one scratch temp directory, and the two phases of scripts/test.sh.

**Phases.** Tests marked ``exclusive`` change what the others share (they pip-install or
uninstall packages in the venv, or build wheels in the source tree). scripts/test.sh runs the
suite in two pytest runs: ``TILELANG_TEST_PHASE=shared`` (every other test, on all cores with
pytest-xdist), then ``TILELANG_TEST_PHASE=exclusive`` (those, one at a time). Without the
variable every selected test runs, as in a plain ``pytest``.

**Slow tests.** Tests listed in tests/slow_tests.txt (measured by scripts/slow_tests.py) are
marked ``slow`` here, like those decorated with ``@pytest.mark.slow``; scripts/test.sh leaves them
out of both phases unless ``TILELANG_TEST_SLOW=1``.

**Temp files.** Everything the tests write to the temp directory goes to one scratch directory.

Kernel builds keep their sources when a compiler fails (so that the user can read them), crash
tests kill processes before they clean up, and ``verbose=True`` builds are kept on purpose. In
the suite all of these land in ``$TMPDIR/tilelang-tests-*`` (subprocesses inherit ``TMPDIR``),
and pytest's own ``tmp_path`` directories too. The scratch directory is removed when every test
passed; after a failure it stays for inspection and its path is printed.
Set ``TILELANG_TESTS_KEEP_TMP=1`` to keep it in any case.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

_SAVED: dict = {}
PHASE_ENV = "TILELANG_TEST_PHASE"
_PHASES = ("shared", "exclusive")
SLOW_LIST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tests", "slow_tests.txt")


def measured_slow_ids() -> set:
    """The node ids tests/slow_tests.txt lists (measured by scripts/slow_tests.py)."""
    try:
        with open(SLOW_LIST, encoding="utf-8") as listing:
            return {line.strip() for line in listing if line.strip() and not line.startswith("#")}
    except FileNotFoundError:
        return set()


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects by marks
def pytest_collection_modifyitems(config, items):
    """Mark ``slow`` the tests tests/slow_tests.txt lists; keep the tests of ``$TILELANG_TEST_PHASE``
    (``shared``: not ``exclusive``-marked; ``exclusive``: marked)."""
    slow = measured_slow_ids()
    for item in items:
        if item.nodeid in slow:
            item.add_marker(pytest.mark.slow)
    config._tilelang_collected = {item.nodeid: item.get_closest_marker("slow") is not None for item in items}
    phase = os.environ.get(PHASE_ENV, "").strip()
    if not phase:
        return
    want = phase == "exclusive"
    keep, dropped = [], []
    for item in items:
        (keep if (item.get_closest_marker("exclusive") is not None) == want else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def pytest_configure(config):
    """Check ``$TILELANG_TEST_PHASE``; point ``TMPDIR`` and :data:`tempfile.tempdir` at a fresh scratch directory."""
    phase = os.environ.get(PHASE_ENV, "").strip()
    if phase and phase not in _PHASES:
        raise pytest.UsageError(
            f"${PHASE_ENV} must be one of {', '.join(_PHASES)} (or unset for every test), got {phase!r}")
    if hasattr(config, "workerinput") or _SAVED:
        return
    scratch = tempfile.mkdtemp(prefix="tilelang-tests-")
    _SAVED.update(scratch=scratch, environ=os.environ.get("TMPDIR"), tempdir=tempfile.tempdir)
    os.environ["TMPDIR"] = scratch
    tempfile.tempdir = scratch


def pytest_unconfigure(config):
    """Restore the temp directory; remove the scratch directory unless a test failed or it is kept."""
    if not _SAVED:
        return
    scratch = _SAVED.pop("scratch")
    environ, tempfile.tempdir = _SAVED.pop("environ"), _SAVED.pop("tempdir")
    if environ is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = environ
    failed = getattr(config, "_tilelang_failed", False)
    keep = os.environ.get("TILELANG_TESTS_KEEP_TMP", "").strip().lower() not in ("", "0", "false", "no", "off")
    if failed or keep:
        print(f"\ntest scratch directory kept: {scratch}")
    else:
        shutil.rmtree(scratch, ignore_errors=True)


def pytest_sessionfinish(session, exitstatus):
    """Remember whether the run failed (its scratch directory is then kept)."""
    session.config._tilelang_failed = exitstatus not in (0, 5)
