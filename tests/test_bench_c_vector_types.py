"""bench/c_vector_types.py keeps working, and compares what docs/compatibility.md says it compares."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "c_vector_types.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_c_vector_types", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_our_c_source_is_scalar_under_omp_simd_and_the_reference_is_vector_typed():
    import tilelang

    bench = _bench()
    ours = tilelang.lower(bench._kernel(64), target="c").kernel_source
    assert "float4" not in ours and ours.count("#pragma omp simd") == 4, ours
    reference = bench.float4_source(64)
    assert reference.count("*(float4*)(A + (i * 4))") == 4 and "vector_size(16)" in reference


def test_a_tiny_run_checks_both_variants_against_torch_and_prints_the_ratio(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [str(BENCH), "--sizes", "64", "--rounds", "1", "--round-ms", "1"])
    _bench().main()
    out = capsys.readouterr().out
    assert "n = 64" in out and "float4/ours" in out, out


def test_a_size_that_is_not_whole_vectors_is_refused(monkeypatch):
    monkeypatch.setattr(sys, "argv", [str(BENCH), "--sizes", "66"])
    with pytest.raises(SystemExit, match="66 is not a multiple of 4"):
        _bench().main()
