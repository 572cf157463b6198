#!/usr/bin/env python3
"""Write tests/slow_tests.txt, the tests conftest.py marks ``slow``, from a measured run.

scripts/test.sh (the README's test command, run by CI) leaves ``slow`` tests out of its first,
parallel run so that the suite fits its budget on two cores; ``TILELANG_TEST_SLOW=1 bash
scripts/test.sh`` runs them too. Which tests are slow is measured, not guessed: run the shared
phase with every duration printed, then this script on its output::

    TILELANG_TEST_PHASE=shared .venv/bin/python -m pytest -n auto -q --durations=0 > durations.log
    python scripts/slow_tests.py durations.log > tests/slow_tests.txt

A test is slow when its setup, call and teardown together took more than ``--single`` seconds,
or more than ``--variant`` seconds where it is not the fastest variant of its parametrized test
function: each test function keeps its fastest variant in the fast run unless that one alone is
slow. Tests decorated with ``@pytest.mark.slow`` need no line here.
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
    parser.add_argument("log", help="output of a pytest run with --durations=0")
    parser.add_argument("--single", type=float, default=4.0,
                        help="seconds above which a test function's fastest variant is slow (default 4)")
    parser.add_argument("--variant", type=float, default=1.0,
                        help="seconds above which any other variant is slow (default 1)")
    args = parser.parse_args(argv)
    with open(args.log, encoding="utf-8") as log:
        seconds = durations(log)
    if not seconds:
        parser.error(f"{args.log} has no duration lines: run pytest with --durations=0")
    sys.stdout.write(HEADER)
    sys.stdout.writelines(f"{node}\n" for node in slow_ids(seconds, args.single, args.variant))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
