"""No ``#pragma omp simd`` on a loop that updates a tile along a column (lowering/frontend.py).

``for j in T.serial(1, N): for i in T.Parallel(R): s[i, j] = s[i, j - 1] + s[i, j]`` (the shape of
``T.cumsum(dim=1)``) with the pragma on the loop over ``i`` made GCC 12 unroll and version the
loop over ``j``: 15.7 s to build R=4, N=4096 and 9.0 ms a call (0.16 s and 0.02 ms without it; a
helper's hunt measured 35.7 s and 36.6 ms at R=8). Loops over rows of a tile keep the pragma.
"""

from __future__ import annotations

import re

import pytest
import torch

import tilelang
import tilelang.language as T

R, N = 4, 64


def _inner_loop_pragma(source: str, outer: str) -> bool:
    """Whether the loop right inside the C loop whose header matches ``outer`` has ``#pragma omp simd``."""
    lines = [line.strip() for line in source.splitlines() if line.strip() and not line.strip().startswith(("#if", "#endif"))]
    start = next(n for n, line in enumerate(lines) if re.match(outer, line))
    return lines[start + 1] == "#pragma omp simd"


def _scan(builtin=False):
    """An (R, N) row scan in a shared tile: written out, or ``T.cumsum(dim=1)``."""

    @T.prim_func
    def scan(A: T.Tensor((R, N), "float32"), B: T.Tensor((R, N), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((R, N), "float32")
            T.copy(A, s)
            if builtin:
                T.cumsum(s, dim=1)
            else:
                for j in T.serial(1, N):
                    for i in T.Parallel(R):
                        s[i, j] = s[i, j - 1] + s[i, j]
            T.copy(s, B)

    return scan


def _cumsum_rows():
    return _scan(builtin=True)


@pytest.mark.parametrize("make", [_scan, _cumsum_rows], ids=["hand-written", "T.cumsum"])
@pytest.mark.parametrize("backend", ["cython", "tvm_ffi"])
def test_a_column_update_loop_has_no_simd_pragma_and_scans_right(make, backend):
    kernel = tilelang.compile(make(), target="c", execution_backend=backend)
    source = kernel.get_kernel_source()
    assert not _inner_loop_pragma(source, rf"for \(int32_t (\w+) = 1; \1 < {N}; \+\+\1\)"), "the scan's loop over rows"
    assert source.count("#pragma omp simd") == 2, "the two copies, along rows, keep theirs"
    a = torch.randn(R, N)
    b = torch.empty(R, N)
    kernel(a, b)
    torch.testing.assert_close(b, a.cumsum(1), rtol=1e-4, atol=1e-4)


def test_loops_reading_columns_without_updating_them_keep_the_pragma():
    """A transpose moves across rows of A and B, but updates nothing it reads."""

    @T.prim_func
    def transpose(A: T.Tensor((N, R), "float32"), B: T.Tensor((R, N), "float32")):
        with T.Kernel(1):
            for j in T.serial(N):
                for i in T.Parallel(R):
                    B[i, j] = A[j, i] + 1.0

    kernel = tilelang.compile(transpose, target="c", execution_backend="cython")
    assert _inner_loop_pragma(kernel.get_kernel_source(), rf"for \(int32_t j = 0; j < {N}; \+\+j\)")
    a = torch.randn(N, R)
    b = torch.empty(R, N)
    kernel(a, b)
    torch.testing.assert_close(b, a.T + 1.0)


def test_a_row_update_loop_keeps_the_pragma():
    """``s[j, i] = s[j - 1, i] + s[j, i]`` over ``i`` moves along a row: it keeps its pragma."""

    @T.prim_func
    def scan_down(A: T.Tensor((N, R), "float32"), B: T.Tensor((N, R), "float32")):
        with T.Kernel(1):
            s = T.alloc_shared((N, R), "float32")
            T.copy(A, s)
            for j in T.serial(1, N):
                for i in T.Parallel(R):
                    s[j, i] = s[j - 1, i] + s[j, i]
            T.copy(s, B)

    kernel = tilelang.compile(scan_down, target="c", execution_backend="cython")
    assert _inner_loop_pragma(kernel.get_kernel_source(), rf"for \(int32_t j = 1; j < {N}; \+\+j\)")
    a = torch.randn(N, R)
    b = torch.empty(N, R)
    kernel(a, b)
    torch.testing.assert_close(b, a.cumsum(0), rtol=1e-4, atol=1e-4)
