"""bench/vs_upstream.py keeps working on TileLang-Core's side: its kernels (upstream's syntax) compile,
match torch and are timed, and the report prints a ratio per figure. Upstream itself is not installed
here; the script runs it from another Python given on the command line."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "vs_upstream.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_vs_upstream", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_kernel_compiles_matches_torch_and_is_timed_on_our_side(capsys):
    bench = _bench()
    ours = bench.run_side(sys.executable, number=5, repeat=1)
    assert set(ours["cases"]) == {case[0] for case in bench.CASES}
    for name, row in ours["cases"].items():
        assert "error" not in row, (name, row)
        assert row["compile_s"] > 0 and row["kernel_s"] > 0 and row["torch_s"] > 0, (name, row)
    bench.report(ours, ours)  # the table's shape, with our figures on both sides
    out = capsys.readouterr().out
    assert sum(line.rstrip().endswith(" 1.00x") for line in out.splitlines()) == 3 * len(bench.CASES), out
    assert "matmul 256^3" in out and "call" in out and "run" in out, out


def test_the_upstream_python_is_required_and_named_in_the_error():
    proc = subprocess.run([sys.executable, str(BENCH)], capture_output=True, text=True)
    assert proc.returncode == 2 and "--upstream-python is required" in proc.stderr, proc.stderr
    proc = subprocess.run([sys.executable, str(BENCH), "--upstream-python", "/nonexistent/python"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "'/nonexistent/python' is not an executable file" in proc.stderr, proc.stderr
