"""The conformance suite for execution backends, as a library, a command and a pytest plugin.

- ``tilelang backends check NAME [--target KIND] [--json]``: run it from the command line
  (exit status 0 when the backend conforms);
- ``pytest -p tilelang_core.conformance --tilelang-backend NAME [--tilelang-target KIND]``: run
  only the suite's checks, one pytest item per check;
- in a plugin's own tests, one pytest test per check::

      from tilelang_core.conformance import conformance_tests
      test_conformance = conformance_tests("mybackend")

- from Python: :func:`run_suite` / :class:`Suite` (:mod:`.suite`).

The checks (see docs/writing-a-backend.md): the declaration and the cheap import of the entry
point (in a fresh interpreter); the probe; reference kernels compared with torch (static and
dynamic shapes, shape expressions, scalars of every width, several outputs, every declared
dtype, offset views, explicit strides, 0- and 1-sized inputs); every row of the error table
(docs/backend-conventions.md) in a subprocess, plus random wrong calls; save/load in a fresh
process; the kernel cache across processes; threads calling one kernel; for a GPU target that can
only build here, building, exporting and loading without the device. Importing this module
imports neither pytest, torch nor TVM.
"""

from __future__ import annotations

import atexit
from typing import Any, Optional

from .suite import Check, Result, Suite, run_suite

__all__ = ["Check", "Result", "Suite", "conformance_tests", "run_suite"]

_suites: dict[tuple, Suite] = {}


def shared_suite(name: str, targets: Optional[list[str]] = None, only: Optional[list[str]] = None) -> Suite:
    """One :class:`Suite` per (backend, targets, only) and process, closed at exit (pytest items share it)."""
    key = (name, tuple(targets or ()), tuple(only or ()))
    if key not in _suites:
        _suites[key] = Suite(name, targets, only)
        atexit.register(_suites[key].close)
    return _suites[key]


def _outcome(result: Result) -> None:
    import pytest

    if result.status == "skip":
        pytest.skip(result.reason)
    if result.status == "fail":
        pytest.fail(f"{result.check}: {result.reason}", pytrace=False)


def conformance_tests(name: str, targets: Optional[list[str]] = None) -> Any:
    """A pytest test function parametrised with every check of backend ``name`` (assign it to ``test_*``).

    When ``name`` is not installed, the function is one test that *fails*, saying to install the
    backend first: a plugin's tests that pass without checking anything would hide the mistake.
    So it is when a fresh interpreter does not see the backend this process sees (the ``.egg-info``
    that ``pip install .`` leaves in the project folder, after ``pip uninstall``): before, every
    check run in a subprocess failed with an ``AttributeError`` on ``None``.
    """
    import pytest

    from ..errors import BackendNotInstalledError

    try:
        checks = shared_suite(name, targets).checks()
    except BackendNotInstalledError as exc:
        reason = (f"{exc}. The conformance tests check the installed backend: run `pip install .` in the "
                  f"backend's project folder first (`pip install -e .` while you edit it), then run the tests again")

        def test_conformance() -> None:
            pytest.fail(reason, pytrace=False)

        return test_conformance
    problem = shared_suite(name, targets).visibility_problem()
    if problem:

        def test_conformance() -> None:
            pytest.fail(problem, pytrace=False)

        return test_conformance

    @pytest.mark.parametrize("check", checks, ids=[c.name for c in checks])
    def test_conformance(check: Check) -> None:
        _outcome(shared_suite(name, targets).run_check(check))

    test_conformance.__doc__ = f"Conformance check of execution backend {name!r} (tilelang_core.conformance)."
    return test_conformance


# -- the pytest plugin (pytest -p tilelang_core.conformance) -------------------------------------


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("tilelang", "TileLang backend conformance")
    group.addoption("--tilelang-backend", action="append", default=[], metavar="NAME",
                    help="run the conformance suite against this installed execution backend (repeatable)")
    group.addoption("--tilelang-target", action="append", default=[], metavar="KIND",
                    help="only these declared target kinds (default: every one the backend declares)")
    group.addoption("--tilelang-check", action="append", default=[], metavar="TEXT",
                    help="only the checks whose name contains TEXT (repeatable)")


def pytest_ignore_collect(collection_path: Any, config: Any) -> Optional[bool]:
    """With ``--tilelang-backend``, collect no test files: the run is the conformance checks only
    (whatever folder it starts in, its test files are neither imported nor reported)."""
    return True if config.getoption("--tilelang-backend", default=[]) else None


def pytest_collection_modifyitems(session: Any, config: Any, items: list) -> None:
    names = config.getoption("--tilelang-backend", default=[])
    if not names:
        return
    import pytest

    class ConformanceItem(pytest.Item):
        def __init__(self, *, suite: Suite, check: Check, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.suite, self.check = suite, check

        def runtest(self) -> None:
            _outcome(self.suite.run_check(self.check))

        def reportinfo(self) -> tuple:
            return "tilelang-conformance", None, self.name

        def repr_failure(self, excinfo: Any, style: Any = None) -> Any:
            return str(excinfo.value)

    from ..errors import BackendNotInstalledError, BackendTargetUnsupportedError

    targets = config.getoption("--tilelang-target", default=[]) or None
    only = config.getoption("--tilelang-check", default=[]) or None
    new = []
    for name in names:
        try:
            suite = shared_suite(name, targets, only)
        except (BackendNotInstalledError, BackendTargetUnsupportedError) as exc:  # a usage error, not pytest's
            raise pytest.UsageError(f"--tilelang-backend {name}: {exc}") from None
        for check in suite.checks():
            new.append(ConformanceItem.from_parent(session, name=f"{name}::{check.name}", suite=suite, check=check))
    if items:
        config.hook.pytest_deselected(items=list(items))
    items[:] = new
