"""Atomics whose destination is a tile of the kernel's own (shared, local, fragment), found by a
differential fuzz pass.

* **bfloat16 tiles on targets without bfloat16 arithmetic** (CPU, CUDA before sm_80). TVM's
  ``BF16ComputeLegalize`` stores such a tile as float32, while the atomic helper updates a 16-bit
  word through ``&S[i]``: the tile kept its values (``T.atomic_add(S[i % 3], V[i])`` left ``S``
  unchanged, on every CPU path). The helper now gets ``tvm_access_ptr`` of the tile, which keeps
  its 16-bit storage.
* **Reads after atomic updates of shared memory** (GPU). TVM's ``ThreadSync`` counts
  ``&S[i]`` as a read, so the atomics of one ``T.Parallel`` loop and a ``T.copy`` of ``S`` after it
  had no ``__syncthreads()`` between them: threads copied the tile out while others were still
  updating it. ``PlanSharedBarriers`` now counts an atomic as a read and a write of its element
  (and no conflict between two atomics).
"""

from __future__ import annotations

import pathlib
import re
import sys

import pytest
import torch

import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda", "atomic_on_chip_emulator")

N, K = 40, 3  # N values into K slots


def _bf16_tiles(scope):
    @T.prim_func
    def bf16_tiles(V: T.Tensor((N,), "bfloat16"), C: T.Tensor((K,), "bfloat16"), P: T.Tensor((N,), "bfloat16")):
        with T.Kernel(1, threads=1) as bx:
            if scope == "shared":
                S = T.alloc_shared((K,), "bfloat16")
            elif scope == "fragment":
                S = T.alloc_fragment((K,), "bfloat16")
            else:
                S = T.alloc_local((K,), "bfloat16")
            for j in T.serial(K):
                S[j] = C[j]
            for i in T.serial(N):
                P[i] = T.atomic_add(S[i % K], V[i], return_prev=True)
            for j in T.serial(K):
                T.atomic_max(S[j], T.bfloat16(7))
                C[j] = S[j]

    return bf16_tiles


@pytest.mark.parametrize("scope", ["shared", "fragment", "local"])
@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_bfloat16_tile_atomics_on_cpu(path, scope):
    v = torch.arange(N).remainder(5).to(torch.bfloat16)  # small integers: every sum is exact
    c = torch.tensor([0.0, -30.0, 3.0], dtype=torch.bfloat16)
    p = torch.zeros(N, dtype=torch.bfloat16)
    want_c, want_p = c.float().clone(), torch.zeros(N)
    for i in range(N):
        want_p[i] = want_c[i % K]
        want_c[i % K] += float(v[i])
    want_c = want_c.clamp(min=7)
    compile_on(_bf16_tiles(scope), path)(v, c, p)
    assert c.float().tolist() == want_c.tolist()
    assert p.float().tolist() == want_p.tolist()


def test_bfloat16_shared_tile_keeps_16_bit_storage_before_sm80():
    from tilelang_core.lowering import lower

    for arch in ("sm_75", "sm_80"):
        src = lower(_bf16_tiles("shared"), target=f"cuda -arch={arch}").device_source
        body = src[src.index('extern "C" __global__'):]
        assert not re.search(r"float S_ptr\[", body), (arch, body)


BLOCKS, THREADS, SLOTS = 6, 32, 5


def _shared_histogram():
    @T.prim_func
    def shared_histogram(I: T.Tensor((BLOCKS * THREADS,), "int32"), C: T.Tensor((SLOTS,), "int32"),
                         P: T.Tensor((BLOCKS, SLOTS), "int32")):
        with T.Kernel(BLOCKS, threads=THREADS) as bx:
            S = T.alloc_shared((SLOTS,), "int32")
            T.copy(C, S)
            for i in T.Parallel(THREADS):
                T.atomic_add(S[I[bx * THREADS + i]], 1)
                T.atomic_add(S[I[bx * THREADS + i]], 100)
            T.copy(S, P[bx, 0:SLOTS])

    return shared_histogram


def _histogram_inputs():
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, SLOTS, (BLOCKS * THREADS,), generator=g, dtype=torch.int32)
    c = torch.tensor([0, 3, 30, 100, -4], dtype=torch.int32)
    want = torch.zeros(BLOCKS, SLOTS, dtype=torch.int32)
    for b in range(BLOCKS):
        for s in range(SLOTS):
            n = int((idx[b * THREADS:(b + 1) * THREADS] == s).sum())
            want[b, s] = int(c[s]) + 101 * n
    return idx, c, want


def test_cuda_source_has_a_barrier_after_shared_atomics():
    from tilelang_core.lowering import lower

    src = lower(_shared_histogram(), target="cuda").device_source
    body = src[src.index('extern "C" __global__'):]
    last_atomic = body.rindex("tl_atomic_add")
    read_back = body.index("P_ptr[", last_atomic)
    assert "__syncthreads()" in body[last_atomic:read_back], body
    # no barrier between the two atomics of one iteration
    first_atomic = body.index("tl_atomic_add")
    assert "__syncthreads()" not in body[first_atomic:last_atomic], body


@pytest.mark.skipif(not CU._gxx_openmp_ok(), reason="g++ is not installed")
def test_emulated_gpu_shared_atomics_then_copy(tmp_path):
    from tilelang_core.lowering import lower

    idx, c, want = _histogram_inputs()
    run = CU._emulated(lower(_shared_histogram(), target="cuda"), tmp_path)
    for _ in range(3):  # the race shows on some runs only
        p = torch.full((BLOCKS, SLOTS), -1, dtype=torch.int32)
        run(idx, c, p)
        assert torch.equal(p, want), (p, want)


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_shared_atomics_then_copy_on_cpu(path):
    idx, c, want = _histogram_inputs()
    p = torch.zeros(BLOCKS, SLOTS, dtype=torch.int32)
    compile_on(_shared_histogram(), path)(idx, c, p)
    assert torch.equal(p, want)
