"""Test setup of the metal backend: markers, a scratch directory for what the tests reuse, and a
guard that no test (nor the backend under test) leaves files in the temporary directory."""

import os
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))

#: Test modules that the guard leaves alone: the conformance suite keeps one temporary directory
#: for all its checks and removes it when the process exits.
UNGUARDED = {"test_conformance.py"}


def pytest_configure(config):
    config.addinivalue_line("markers", "mps: needs macOS with torch's MPS device (skipped elsewhere)")
    config.addinivalue_line("markers", "slow: takes more than a few seconds")


@pytest.fixture(scope="session", autouse=True)
def _scratch(tmp_path_factory):
    """The stand-in's compiled libraries and generated kernel modules go to a pytest directory
    (reused by every test of the session, pruned by pytest), never to the system's /tmp."""
    scratch = tmp_path_factory.mktemp("metal-scratch")
    old = os.environ.get("TILELANG_METAL_STANDIN_DIR")
    os.environ["TILELANG_METAL_STANDIN_DIR"] = str(scratch)
    yield scratch
    if old is None:
        os.environ.pop("TILELANG_METAL_STANDIN_DIR", None)
    else:
        os.environ["TILELANG_METAL_STANDIN_DIR"] = old


@pytest.fixture(autouse=True)
def _no_temp_files_left(request, tmp_path_factory, monkeypatch):
    """Each test gets its own empty temporary directory (``tempfile`` and ``$TMPDIR``, so
    subprocesses too); whatever is left in it when the test ends fails the test. A test that
    provokes a build error removes the source the backend kept (the path is in the error)."""
    if Path(str(request.node.fspath)).name in UNGUARDED:
        yield
        return
    private = Path(tempfile.mkdtemp(prefix="tmp-", dir=tmp_path_factory.getbasetemp()))
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    monkeypatch.setenv("TMPDIR", str(private))
    yield
    left = sorted(p.name for p in private.iterdir())
    assert not left, f"{request.node.name} left files in the temporary directory: {left}"
    private.rmdir()
