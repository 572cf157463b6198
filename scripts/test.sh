#!/usr/bin/env bash
# Command 2 of the README: set up, then run the whole test suite.
# Two pytest runs, each given this script's arguments (see conftest.py):
#   1. every test that shares the environment safely, on all cores (pytest-xdist; at most
#      $TILELANG_TEST_WORKERS workers, default 4), but for those marked slow unless
#      TILELANG_TEST_SLOW=1 (the suite's budget on two cores; see conftest.py);
#   2. the tests marked `exclusive` (they install or remove packages in the venv, or build wheels in
#      the source tree), one at a time, with nothing else running; slow ones only with
#      TILELANG_TEST_SLOW=1 (the wheel, retirement and scaffold cycles are not marked slow).
# Exit status: 0 when both runs pass (a run that selects no test counts as passed), else the
# first failing run's.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --with-retired
status=0
# Tests marked slow (tests/slow_tests.txt, scripts/slow_tests.py) run only with TILELANG_TEST_SLOW=1,
# in both runs; a -m among this script's arguments comes later and wins.
slow=(-m "not slow")
case "${TILELANG_TEST_SLOW:-}" in ""|0|false|no|off) ;; *) slow=() ;; esac
TILELANG_TEST_PHASE=shared .venv/bin/python -m pytest -n auto --maxprocesses "${TILELANG_TEST_WORKERS:-4}" "${slow[@]}" "$@" || status=$?
if [ "$status" = 5 ]; then status=0; fi
echo "== tests marked exclusive (they change the shared venv or source tree), one at a time =="
second=0
TILELANG_TEST_PHASE=exclusive .venv/bin/python -m pytest "${slow[@]}" "$@" || second=$?
if [ "$second" = 5 ]; then second=0; fi
if [ "$status" = 0 ]; then status=$second; fi
exit "$status"
