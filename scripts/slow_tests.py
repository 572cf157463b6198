#!/usr/bin/env python3
"""Write tests/slow_tests.txt, the tests conftest.py marks ``slow``, from a measured run.

scripts/test.sh (the README's test command, run by CI) leaves ``slow`` tests out of its first,
parallel run so that the suite fits its budget on two cores; ``TILELANG_TEST_SLOW=1 bash
scripts/test.sh`` runs them too. Which tests are slow is measured, not guessed: run the shared
phase with every duration printed, then this script on its output::

    rm -rf /tmp/cold && TILELANG_CACHE_DIR=/tmp/cold TILELANG_TEST_PHASE=shared \
        .venv/bin/python -m pytest -n auto -q --durations=0 -m "not slow" > durations.log
    python scripts/slow_tests.py durations.log tests/slow_tests.txt > new.txt && mv new.txt tests/slow_tests.txt

Measure with an empty kernel cache, as CI has: with a warm one, a test that compiles kernels
looks fast. A test is slow when its setup, call and teardown together took more than
``--single`` seconds, or more than ``--variant`` seconds where it is not the fastest variant of
its parametrized test function: each test function keeps its fastest variant in the fast run
unless that one alone is slow. Several files are merged: a durations log adds the tests it finds
slow, and a slow_tests.txt (the current list, when the run left its tests out) adds its lines.
Tests decorated with ``@pytest.mark.slow`` need no line here.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict

_LINE = re.compile(r"^\s*([\d.]+)s (?:call|setup|teardown)\s+(\S.*?)\s*$")  # ids may hold spaces

HEADER = """\
# Tests conftest.py marks `slow` (scripts/test.sh leaves them out unless TILELANG_TEST_SLOW=1).
# Measured, not edited by hand: regenerate with scripts/slow_tests.py (its docstring says how).
# One pytest node id per line.
"""


def durations(lines) -> dict[str, float]:
    """Seconds per node id (setup, call and teardown summed) from pytest's ``--durations`` lines."""
    seconds: dict[str, float] = defaultdict(float)
    for line in lines:
        match = _LINE.match(line)
        if match:
            seconds[match.group(2)] += float(match.group(1))
    return dict(seconds)


def slow_ids(seconds: dict[str, float], single: float, variant: float) -> list[str]:
    """The node ids over the limits (see the module docstring), sorted."""
    functions: dict[str, list] = defaultdict(list)
    for node, took in seconds.items():
        functions[node.split("[", 1)[0]].append((took, node))
    slow = []
    for variants in functions.values():
        variants.sort()
        fastest, *others = variants
        slow += [node for took, node in [fastest] if took > single]
        slow += [node for took, node in others if took > variant]
    return sorted(slow)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+", metavar="FILE",
                        help="output of a pytest run with --durations=0, or a slow_tests.txt to keep")
    parser.add_argument("--single", type=float, default=2.0,
                        help="seconds above which a test function's fastest variant is slow (default 2)")
    parser.add_argument("--variant", type=float, default=0.5,
                        help="seconds above which any other variant is slow (default 0.5)")
    args = parser.parse_args(argv)
    slow: set = set()
    for name in args.files:
        with open(name, encoding="utf-8") as file:
            lines = file.read().splitlines()
        if lines and lines[0] == HEADER.splitlines()[0]:
            slow.update(line.strip() for line in lines if line.strip() and not line.startswith("#"))
            continue
        seconds = durations(lines)
        if not seconds:
            parser.error(f"{name} has no duration lines: run pytest with --durations=0")
        slow.update(slow_ids(seconds, args.single, args.variant))
    sys.stdout.write(HEADER)
    sys.stdout.writelines(f"{node}\n" for node in sorted(slow))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
