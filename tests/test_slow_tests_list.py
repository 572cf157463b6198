"""tests/slow_tests.txt: measured by scripts/slow_tests.py, applied by conftest.py, never stale."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("slow_tests_script", ROOT / "scripts" / "slow_tests.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LOG = """\
============================= slowest durations ==============================
5.10s call     tests/test_a.py::test_alone
0.40s setup    tests/test_a.py::test_alone
3.00s call     tests/test_a.py::test_grid[sm_80]
1.50s call     tests/test_a.py::test_grid[sm_90]
0.90s call     tests/test_a.py::test_grid[sm_100]
0.60s call     tests/test_a.py::test_grid[sm_75]
0.50s teardown tests/test_a.py::test_grid[sm_75]
3.90s call     tests/test_b.py::test_just_under
6.59s call     tests/test_c.py::test_cli[args2---target 'junk' is not a TVM target]
(12 durations < 0.005s hidden.)
"""


def test_the_fastest_variant_stays_and_the_others_over_their_limit_are_slow():
    script = _script()
    seconds = script.durations(LOG.splitlines())
    assert seconds["tests/test_a.py::test_alone"] == pytest.approx(5.5)  # setup + call
    assert seconds["tests/test_a.py::test_grid[sm_75]"] == pytest.approx(1.1)  # call + teardown
    del seconds["tests/test_c.py::test_cli[args2---target 'junk' is not a TVM target]"]  # an id with spaces
    # sm_100 (0.9 s) is the fastest variant and stays; sm_75 (1.1 s), sm_90 and sm_80 are slow
    assert script.slow_ids(seconds, single=4.0, variant=1.0) == [
        "tests/test_a.py::test_alone", "tests/test_a.py::test_grid[sm_75]",
        "tests/test_a.py::test_grid[sm_80]", "tests/test_a.py::test_grid[sm_90]"]
    assert script.slow_ids(seconds, single=6.0, variant=2.0) == ["tests/test_a.py::test_grid[sm_80]"]


def test_a_log_without_durations_is_refused(tmp_path, capsys):
    log = tmp_path / "durations.log"
    log.write_text("4 passed in 1.00s\n")
    with pytest.raises(SystemExit):
        _script().main([str(log)])
    assert "--durations=0" in capsys.readouterr().err


def test_every_listed_test_exists_and_is_marked_slow(request):
    """Each line of tests/slow_tests.txt whose file this run collected names a collected test, and
    conftest.py marked it ``slow`` (before ``-m`` selected by marks, so ``-m "not slow"`` drops it)."""
    collected = request.config._tilelang_collected
    from_list = _listed_ids()
    assert from_list, "tests/slow_tests.txt lists no test"
    files = {node.split("::", 1)[0] for node in collected}
    stale = sorted(node for node in from_list if node.split("::", 1)[0] in files and node not in collected)
    assert not stale, f"tests/slow_tests.txt names tests that do not exist (rerun scripts/slow_tests.py): {stale[:5]}"
    unmarked = sorted(node for node in from_list if collected.get(node) is False)
    assert not unmarked, f"listed but not marked slow: {unmarked[:5]}"
    missing_files = sorted(name for name in {node.split("::", 1)[0] for node in from_list}
                           if not (ROOT / name).is_file())
    assert not missing_files, f"tests/slow_tests.txt names files that do not exist: {missing_files[:5]}"


def _listed_ids() -> set:
    lines = (ROOT / "tests" / "slow_tests.txt").read_text(encoding="utf-8").splitlines()
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


def test_a_new_log_adds_to_the_current_list(tmp_path, capsys):
    script = _script()
    current = tmp_path / "slow_tests.txt"
    current.write_text(script.HEADER + "tests/test_z.py::test_kept_from_before\n")
    log = tmp_path / "durations.log"
    log.write_text(LOG)
    assert script.main([str(log), str(current)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "tests/test_z.py::test_kept_from_before" in lines and "tests/test_a.py::test_alone" in lines
    assert "tests/test_a.py::test_grid[sm_100]" not in lines  # the fastest variant stays in the fast run
