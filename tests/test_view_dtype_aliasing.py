"""``T.view`` with another dtype on the CPU paths: the C entry reads and writes one array through
two pointer types (``S_ptr[v] = A_ptr[...]`` then ``((int64_t*)S_ptr)[v]``). Under GCC's strict
aliasing (-O3) the reads through the view were moved before the stores or dropped, so on target
``c`` (cython and tvm_ffi) the view of a per-thread tile returned whatever the stack held. The C
source now turns type-based alias analysis off (``#pragma GCC optimize("no-strict-aliasing")``);
clang ignores that pragma (with ``CC=clang`` every case failed), so every backend also compiles C
with ``-fno-strict-aliasing``.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import sys

import pytest
import torch

import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import PATHS, compile_on, cpu_pairs, path_id  # noqa: E402

CASES = [("float64", "int64", "local"), ("float32", "int32", "local"), ("int32", "float32", "shared"),
         ("float32", "int16", "local"), ("int64", "float32", "shared")]
TORCH = {"float64": torch.float64, "int64": torch.int64, "float32": torch.float32, "int32": torch.int32,
         "int16": torch.int16}


def _view_kernel(src, dst, scope, n=8, blocks=3):
    nv = n * torch.tensor([], dtype=TORCH[src]).element_size() // torch.tensor([], dtype=TORCH[dst]).element_size()
    alloc = T.alloc_local if scope == "local" else T.alloc_shared

    @T.prim_func
    def view_kernel(A: T.Tensor((blocks, n), src), O: T.Tensor((blocks, nv), dst)):
        with T.Kernel(blocks, threads=1) as bx:
            S = alloc((n,), src)
            T.copy(A[bx, 0], S)
            V = T.view(S, (nv,), dst)
            T.copy(V, O[bx, 0])

    return view_kernel, nv


@pytest.mark.parametrize("path", PATHS, ids=path_id)
@pytest.mark.parametrize("src,dst,scope", CASES, ids=lambda v: str(v))
def test_view_of_a_tile_reads_the_bits_just_stored(path, src, dst, scope):
    func, nv = _view_kernel(src, dst, scope)
    kernel = compile_on(func, path)
    g = torch.Generator().manual_seed(3)
    a = (torch.randn(3, 8, generator=g, dtype=torch.float64) * 1000).to(TORCH[src])
    o = torch.zeros(3, nv, dtype=TORCH[dst])
    kernel(a, o)
    assert torch.equal(o.view(torch.uint8), a.view(torch.uint8))  # bit for bit (NaN payloads too)


def test_c_source_turns_off_type_based_aliasing():
    from tilelang_core.lowering import lower

    func, _ = _view_kernel("float64", "int64", "local")
    src = lower(func, target="c").device_source
    assert '#pragma GCC optimize("no-strict-aliasing")' in src
    assert "((int64_t*)S" in src  # the view is a pointer cast of the tile, read after the stores


#: The CPU pairs whose backend runs a C compiler on the kernel's source.
C_PAIRS = [p for p in cpu_pairs() if p.values[1] == "c"]


def _recording_cc(tmp_path):
    """A ``$CC`` that appends its arguments (one line per run) to a log, then runs ``cc``."""
    log = tmp_path / "cc-commands.txt"
    wrapper = tmp_path / "recording-cc"
    real = shutil.which(os.environ.get("CC", "cc")) or "cc"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper, log


@pytest.mark.parametrize("backend,target", C_PAIRS)
def test_the_c_compiler_gets_no_strict_aliasing(backend, target, tmp_path, monkeypatch):
    """clang ignores the source's ``#pragma GCC optimize("no-strict-aliasing")``: with ``CC=clang``
    every view case above read wrong bits, unless the backend passes ``-fno-strict-aliasing``."""
    import tilelang

    wrapper, log = _recording_cc(tmp_path)
    monkeypatch.setenv("CC", str(wrapper))
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))  # compiled here, not taken from the cache
    func, nv = _view_kernel("float64", "int64", "local")
    kernel = tilelang.compile(func, target=target, execution_backend=backend)
    a, o = torch.arange(24, dtype=torch.float64).reshape(3, 8), torch.zeros(3, nv, dtype=torch.int64)
    kernel(a, o)
    assert torch.equal(o.view(torch.uint8), a.view(torch.uint8))
    runs = log.read_text().splitlines() if log.exists() else []
    builds = [r for r in runs if "view_kernel" in r or "kernel.so" in r or "lib.c" in r or "kernel.c" in r]
    assert builds, runs
    assert all("-fno-strict-aliasing" in r.split() for r in builds), builds


@pytest.mark.skipif(shutil.which("clang") is None, reason="clang is not installed")
@pytest.mark.parametrize("backend,target", C_PAIRS)
@pytest.mark.parametrize("src,dst,scope", CASES[:2], ids=lambda v: str(v))
def test_view_under_clang(backend, target, src, dst, scope, tmp_path, monkeypatch):
    import tilelang

    monkeypatch.setenv("CC", "clang")
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    func, nv = _view_kernel(src, dst, scope)
    kernel = tilelang.compile(func, target=target, execution_backend=backend)
    a = (torch.randn(3, 8, generator=torch.Generator().manual_seed(3), dtype=torch.float64) * 1000).to(TORCH[src])
    o = torch.zeros(3, nv, dtype=TORCH[dst])
    kernel(a, o)
    assert torch.equal(o.view(torch.uint8), a.view(torch.uint8))
