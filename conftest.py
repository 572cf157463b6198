"""Suite-wide setup: everything the tests write to the temp directory goes to one scratch directory.

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

_SAVED: dict = {}


def pytest_configure(config):
    """Point ``TMPDIR`` and :data:`tempfile.tempdir` at a fresh scratch directory (before collection)."""
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
