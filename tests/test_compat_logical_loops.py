"""TileLang's logical reductions, loop control, launch sizes and index helper.

``T.any_of`` / ``T.all_of`` (buffers, last-dimension regions, strided tensors, static and run-time
extents, in ``if``, in expressions, guarded by ``and`` and ``T.if_then_else``, as a ``while``
condition), ``T.loop_break()`` and ``break`` (serial, ``while``, ``T.Pipelined``, inside
``T.Parallel``), ``T.Serial``/``T.Unroll``/``T.Vectorized``, ``T.get_thread_extent(s)`` /
``T.get_block_extent(s)`` and ``T.index_to_coordinates``: run on the three CPU paths (cython on
``c``, tvm_ffi on ``c`` and ``llvm``) against torch; their CUDA sources compiled with ``nvcc -c``
and run on the emulated GPU of tests/test_tileops_cuda.py; the refused forms, with their lines.
"""

from __future__ import annotations

import pathlib
import re
import sys

import pytest
import torch

import tilelang.language as T
from tilelang_core.errors import LoweringError

_HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
from private_modules import load_private  # noqa: E402
from backend_pairs import CYTHON_C, TVMFFI_C, TVMFFI_LLVM, compile_on as _compile, path_id  # noqa: E402

CU = load_private("test_tileops_cuda")  # nvcc lookup, nvcc -c of sources, the emulated GPU


def _lower(func, target="c"):
    from tilelang_core.lowering import lower

    return lower(func, target=target)


def _line(func, text):
    """``file:line`` of the first line after ``func``'s ``def`` that contains ``text``."""
    path, line = str(func.attrs["tl.source_location"]).rsplit(":", 1)
    lines = pathlib.Path(path).read_text().splitlines()
    for k in range(int(line), len(lines)):
        if text in lines[k]:
            return f"{path}:{k + 1}"
    raise AssertionError(f"{text!r} not after {path}:{line}")


# -- T.any_of / T.all_of -----------------------------------------------------------------------

N_STATIC = 40  # over the tree limit (32): the row tests become loops before their statements


def logical_kernel(M, N, dtype, dynamic):
    """Per row ``bx`` of ``X`` (and of its strided view ``S``) into ``O[bx, :]``; whole buffers into ``W``."""
    n = T.dynamic("n") if dynamic else N
    s0 = T.dynamic("s0") if dynamic else 2 * N + 2

    @T.prim_func
    def logical(X: T.Tensor((M, n), dtype), S: T.StridedTensor((M, n), (s0, 2), dtype),
                O: T.Tensor((M, 10), "int32"), W: T.Tensor((4,), "int32")):
        with T.Kernel(M, threads=1) as bx:
            for i in T.Parallel(2):  # a loop inside each iteration
                O[bx, 8 + i] = T.Cast("int32", T.any_of(X[bx, i * 3:n]))
            if T.any_of(X[bx, :]):
                O[bx, 0] = 1
            else:
                O[bx, 0] = 0
            O[bx, 1] = T.Cast("int32", T.all_of(X[bx, 0:n]))
            O[bx, 2] = T.Cast("int32", bx % 2 == 0 and T.any_of(X[bx, 1:n]))  # read only when bx is even
            O[bx, 3] = T.Cast("int32", T.any_of(X[bx, 0:4]))  # 4 elements: an expression tree
            O[bx, 4] = T.Cast("int32", T.all_of(S[bx, :]))
            O[bx, 5] = T.Cast("int32", T.if_then_else(bx < 2, T.all_of(X[bx, 2:n]), T.any_of(S[bx, 2:n])))
            L = T.alloc_local((4,), dtype)
            for i in T.serial(4):
                L[i] = X[bx, i]
            cnt = T.alloc_var("int32", init=0)
            while T.any_of(L):  # a while condition: the tree, evaluated on every iteration
                L[cnt] = T.cast(0, dtype)
                cnt = cnt + 1
            O[bx, 6] = cnt
            O[bx, 7] = T.Cast("int32", T.any_of(S[bx, 0:n]) and not T.all_of(S[bx, 0:n]))
            if bx == 0:
                W[0] = T.Cast("int32", T.any_of(X))
                W[1] = T.Cast("int32", T.all_of(X))
                W[2] = T.Cast("int32", T.any_of(S))
                W[3] = T.Cast("int32", T.all_of(S))

    return logical


def _values(dtype, M, N, seed):
    """Rows 0 all zero, 1 all nonzero, 2 one nonzero at the end, the rest random (NaN and -0.0 for floats)."""
    g = torch.Generator().manual_seed(seed)
    if dtype == "bool":
        x = torch.rand(M, N, generator=g) < 0.3
        x[0], x[1] = False, True
        x[2] = False
        x[2, -1] = True
        return x
    if dtype.startswith("float"):
        pick = torch.tensor([0.0, -0.0, 1.5, float("nan")])
        x = pick[torch.randint(0, 4, (M, N), generator=g)]
        x[0] = -0.0
        x[1] = float("nan")
        x[2] = 0.0
        x[2, -1] = -2.0
        return x.to(getattr(torch, dtype))
    x = torch.randint(-2, 2, (M, N), generator=g)
    x[0], x[1] = 0, -1
    x[2] = 0
    x[2, -1] = 1
    return x.to(getattr(torch, dtype))  # uint8: -1, -2 wrap to 255, 254 (nonzero)


def _check_logical(kernel, dtype, M, N, seed):
    x = _values(dtype, M, N, seed)
    big = torch.zeros(M, 2 * N + 2, dtype=x.dtype)
    big[:, : 2 * N : 2] = _values(dtype, M, N, seed + 1)
    s = big[:, : 2 * N : 2]
    assert s.stride() == (2 * N + 2, 2)
    o = torch.full((M, 10), -1, dtype=torch.int32)
    w = torch.full((4,), -1, dtype=torch.int32)
    kernel(x, s, o, w)
    xb, sb = x != 0, s != 0  # NaN != 0; -0.0 == 0
    expect = torch.zeros(M, 10, dtype=torch.int32)
    for r in range(M):
        last = max([i + 1 for i in range(4) if xb[r, i]], default=0)
        row = [xb[r].any(), xb[r].all(), r % 2 == 0 and bool(xb[r, 1:].any()), xb[r, :4].any(), sb[r].all(),
               xb[r, 2:].all() if r < 2 else sb[r, 2:].any(), last, sb[r].any() and not sb[r].all(),
               xb[r].any(), xb[r, 3:].any()]
        expect[r] = torch.tensor([int(v) for v in row], dtype=torch.int32)
    assert o.tolist() == expect.tolist()
    assert w.tolist() == [int(xb.any()), int(xb.all()), int(sb.any()), int(sb.all())]
    assert big[:, 1::2].eq(0).all()  # the gaps of the strided view are never written


_LOGICAL_CASES = [
    (CYTHON_C, "bool", True),
    (CYTHON_C, "float32", False),
    (TVMFFI_C, "int32", False),
    (TVMFFI_C, "bool", True),
    (TVMFFI_LLVM, "float32", True),
    (TVMFFI_LLVM, "uint8", False),
    (CYTHON_C, "float16", True),
    (TVMFFI_LLVM, "bfloat16", True),
]


@pytest.mark.parametrize("path,dtype,dynamic", _LOGICAL_CASES, ids=path_id)
def test_any_of_all_of_against_torch(path, dtype, dynamic):
    """Every form of the operand and of the use, bool / integer / float elements (NaN is true, -0.0
    false), static (tree and loop) and run-time extents, a strided tensor."""
    M = 6
    kernel = _compile(logical_kernel(M, N_STATIC, dtype, dynamic), path)
    for N, seed in ((N_STATIC, 0),) if not dynamic else ((N_STATIC, 0), (5, 1), (37, 2)):
        _check_logical(kernel, dtype, M, N, seed)


def test_any_of_tree_is_balanced_and_small_counts_are_expressions():
    """At most 32 static elements: an expression (no loop, no flag); more, or a run-time count: a
    loop before the statement. A static count in a while condition is a balanced tree."""
    from tvm import tirx

    from tilelang_core.language.tileops.logical import combine

    tree = combine("any", [tirx.Var(f"v{k}", "int32") > 0 for k in range(1000)])
    depth, node = 0, tree
    while isinstance(node, tirx.Or):
        node, depth = node.a, depth + 1
    assert depth == 10  # ceil(log2(1000)), not a chain of 999

    @T.prim_func
    def small(X: T.Tensor((4, 8), "int32"), Y: T.Tensor((4,), "int32")):
        with T.Kernel(4, threads=1) as bx:
            Y[bx] = T.Cast("int32", T.any_of(X[bx, 0:8]))

    src = _lower(small).device_source
    assert "any_of_flag" not in src and src.count(" != 0)") == 8
    src = _lower(logical_kernel(3, N_STATIC, "int32", False)).device_source
    assert "any_of_flag" in src and "all_of_flag" in src
    from tilelang_core.lowering.logical import lower_logical_reductions

    text = lower_logical_reductions(logical_kernel(3, N_STATIC, "int32", True)).script()
    # the second operand of `and` is computed only where the first holds
    assert re.search(r"if bx % 2 == 0:\n\s+for any_of_k1 in range\(n - 1\):", text), text


# -- T.loop_break / break and the capitalised loops -----------------------------------------------


def loops_kernel(M, N, dynamic, vectorized=True, threads=1):
    """Per row ``bx`` of ``X`` into ``O[bx, :]``. On GPU targets every thread runs the serial code
    (the same values), and ``T.Parallel(2)`` is spread over the threads."""
    n = T.dynamic("n") if dynamic else N

    @T.prim_func
    def loops(X: T.Tensor((M, n), "int32"), O: T.Tensor((M, 8), "int32")):
        with T.Kernel(M, threads=threads) as bx:
            c = T.alloc_var("int32", init=0)
            for j in T.serial(n):  # Python's break
                if X[bx, j] < 0:
                    break
                c = c + 1
            O[bx, 0] = c
            w = T.alloc_var("int32", init=0)
            s = T.alloc_var("int32", init=0)
            while w < n:
                if X[bx, w] < 0:
                    T.loop_break()
                s = s + X[bx, w]
                w = w + 1
            O[bx, 1] = s
            p = T.alloc_var("int32", init=0)
            for r in T.Serial(2):  # the break leaves the inner loop only
                for k in T.Pipelined(n, num_stages=2):
                    if X[bx, k] > 5 + r:
                        T.loop_break()
                    p = p + 1
            O[bx, 2] = p
            e = T.alloc_var("int32", init=0)
            for j in T.Serial(0, n, 2):
                e = e + X[bx, j]
            O[bx, 3] = e
            u = T.alloc_var("int32", init=0)
            for j in T.Unroll(4, explicit=True):
                u = u + X[bx, j] * (j + 1)
            O[bx, 4] = u
            V = T.alloc_local((4,), "int32")
            if vectorized:
                for j in T.Vectorized(4):
                    V[j] = X[bx, j] * 2
            else:
                for j in T.serial(4):
                    V[j] = X[bx, j] * 2
            O[bx, 5] = V[0] + V[1] + V[2] + V[3]
            for i in T.Parallel(2):  # a serial loop inside T.Parallel may break
                q = T.alloc_var("int32", init=0)
                for j in T.serial(n):
                    if X[bx, j] == i:
                        break
                    q = q + 1
                O[bx, 6 + i] = q

    return loops


def _first(row, pred):
    return next((i for i, v in enumerate(row) if pred(v)), len(row))


def _check_loops(kernel, M, N, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-1, 9, (M, N), generator=g, dtype=torch.int32)
    x[0] = 3  # no negative value, no value over 5: every loop runs to its end
    o = torch.full((M, 8), -7, dtype=torch.int32)
    kernel(x, o)
    for r, row in enumerate(x.tolist()):
        stop = _first(row, lambda v: v < 0)
        want = [stop, sum(row[:stop]), _first(row, lambda v: v > 5) + _first(row, lambda v: v > 6),
                sum(row[0::2]), sum(row[j] * (j + 1) for j in range(4)), 2 * sum(row[:4]),
                _first(row, lambda v: v == 0), _first(row, lambda v: v == 1)]
        assert o[r].tolist() == want, (r, row)


@pytest.mark.parametrize("path,dynamic", [(CYTHON_C, True), (TVMFFI_C, False), (TVMFFI_LLVM, True),
                                          (TVMFFI_LLVM, False)], ids=path_id)
def test_loop_break_and_capitalised_loops_against_torch(path, dynamic):
    M, N = 5, 12
    kernel = _compile(loops_kernel(M, N, dynamic), path)
    for n, seed in ((N, 0),) if not dynamic else ((N, 0), (7, 1)):
        _check_loops(kernel, M, n, seed)


def test_capitalised_loops_are_tvmscript_loops_with_tilelang_arguments():
    @T.prim_func
    def k(X: T.Tensor((8,), "float32")):
        for i in T.Serial(0, 8, 2, annotations={"tag": 1}):
            X[i] = 1.0
        for i in T.Unroll(2, explicit=True):
            X[i] = 2.0
        for i in T.Vectorized(4, annotations={"tag": 2}):
            X[i] = 3.0

    text = k.script()
    assert 'T.serial(0, 8, annotations={"tag": 1}, step=2)' in text
    assert 'T.unroll(2, annotations={"pragma_unroll_explicit": True})' in text
    assert 'T.vectorized(4, annotations={"tag": 2})' in text
    with pytest.raises(LoweringError, match="pragma_unroll_factor") as info:
        @T.prim_func
        def bad(X: T.Tensor((8,), "float32")):
            for i in T.Unroll(4, explicit=True, annotations={"pragma_unroll_factor": 2}):
                X[i] = 1.0
    assert isinstance(info.value, ValueError)


# -- launch sizes, index_to_coordinates ----------------------------------------------------------


def launch_kernel():
    n = T.dynamic("n")

    @T.prim_func
    def launch(X: T.Tensor((n,), "int32"), E: T.Tensor((8,), "int32")):
        with T.Kernel(T.ceildiv(n, 3), 3, threads=(8, 2)) as (bx, by):
            E[0] = T.get_thread_extent()
            E[1] = T.get_thread_extent(1)
            E[2] = T.get_thread_extent(dim=2)
            ext = T.get_thread_extents()
            E[3] = ext[0] * ext[1] * ext[2]
            E[4] = T.get_block_extent(0)
            E[5] = T.get_block_extent(1)
            E[6] = T.get_block_extent(2)
            blocks = T.get_block_extents()
            E[7] = blocks[0] * blocks[1] * blocks[2]
            flat = by * T.get_block_extent(0) + bx
            c = T.index_to_coordinates(flat, [3, T.get_block_extent(0)])
            if flat < n:
                X[flat] = c[0] * 100 + c[1]

    return launch


@pytest.mark.parametrize("path", [CYTHON_C, TVMFFI_C, TVMFFI_LLVM], ids=path_id)
def test_launch_sizes_and_index_to_coordinates(path):
    kernel = _compile(launch_kernel(), path)
    for n in (10, 17):
        gx = -(-n // 3)
        x = torch.full((n,), -1, dtype=torch.int32)
        e = torch.zeros(8, dtype=torch.int32)
        kernel(x, e)
        assert e.tolist() == [8, 2, 1, 16, gx, 3, 1, 3 * gx]
        assert x.tolist() == [(f // gx) * 100 + f % gx for f in range(n)]


def test_launch_sizes_are_python_values_where_static():
    seen = []

    @T.prim_func
    def k(X: T.Tensor((4,), "int32")):
        with T.Kernel(4, 2, threads=64) as (bx, by):
            seen.append(T.get_thread_extents())
            seen.append(T.get_block_extents())
            X[bx] = by

    assert seen == [[64, 1, 1], [4, 2, 1]]
    assert all(type(v) is int for v in seen[0] + seen[1])
    assert T.index_to_coordinates(17, [3, 4, 5]) == [0, 3, 2]
    assert T.index_to_coordinates(59, (3, 4, 5)) == [2, 3, 4]


# -- CUDA --------------------------------------------------------------------------------------


def gpu_logical_kernel(M, C, dynamic):
    """GPU style: a mask row staged in shared memory by some threads and tested by all, a fragment
    tested whole, a global row with a run-time length."""
    c = T.dynamic("c") if dynamic else C

    @T.prim_func
    def gpu_logical(Mask: T.Tensor((M, c), "bool"), X: T.Tensor((M, 64), "float32"),
                    Y: T.Tensor((M, 64), "float32"), F: T.Tensor((M, 4), "int32")):
        with T.Kernel(M, threads=32) as bx:
            S = T.alloc_shared((4,), "bool")
            for i in T.Parallel(4):
                S[i] = Mask[bx, i]
            A = T.alloc_fragment((64,), "float32")
            T.copy(X[bx, :], A)
            if T.any_of(Mask[bx, :]):
                for i in T.Parallel(64):
                    Y[bx, i] = A[i] * 2.0
            else:
                for i in T.Parallel(64):
                    Y[bx, i] = 0.0
            F[bx, 0] = T.Cast("int32", T.any_of(S))
            F[bx, 1] = T.Cast("int32", T.all_of(S))
            F[bx, 2] = T.Cast("int32", T.all_of(A))
            F[bx, 3] = T.Cast("int32", T.all_of(Mask[bx, 0:c]))

    return gpu_logical


def block_sparse_kernel(M, N, K, C, mask_in, bm=32, bn=32, bk=16, threads=64):
    """TileLang's block-sparse matmul: ``C += A @ B`` over the K tiles whose mask row has a true
    element, the mask read from global memory, or staged in shared or per-thread memory first."""

    @T.prim_func
    def block_sparse(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
                     Mask: T.Tensor((M // bm, N // bn, K // bk, C), "bool"), Out: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            mask_s = T.alloc_shared((C,), "bool")
            mask_l = T.alloc_local((C,), "bool")
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=2):
                if mask_in == "global":
                    if T.any_of(Mask[by, bx, k, :]):
                        T.copy(A[by * bm, k * bk], A_s)
                        T.copy(B[k * bk, bx * bn], B_s)
                        T.gemm(A_s, B_s, acc)
                if mask_in == "shared":
                    for i in T.serial(C):
                        mask_s[i] = Mask[by, bx, k, i]
                    if T.any_of(mask_s):
                        T.copy(A[by * bm, k * bk], A_s)
                        T.copy(B[k * bk, bx * bn], B_s)
                        T.gemm(A_s, B_s, acc)
                if mask_in == "local":
                    for i in T.serial(C):
                        mask_l[i] = Mask[by, bx, k, i]
                    if T.all_of(mask_l[0:C]) or T.any_of(mask_l[1:C]):
                        T.copy(A[by * bm, k * bk], A_s)
                        T.copy(B[k * bk, bx * bn], B_s)
                        T.gemm(A_s, B_s, acc)
            T.copy(acc, Out[by * bm, bx * bn])

    return block_sparse


def _block_sparse_reference(a, b, mask, bm, bn, bk, used):
    out = torch.zeros(a.shape[0], b.shape[1])
    for i in range(mask.shape[0]):
        for j in range(mask.shape[1]):
            for k in range(mask.shape[2]):
                if used(mask[i, j, k]):
                    out[i * bm:(i + 1) * bm, j * bn:(j + 1) * bn] += (
                        a[i * bm:(i + 1) * bm, k * bk:(k + 1) * bk].float() @ b[k * bk:(k + 1) * bk, j * bn:(j + 1) * bn].float())
    return out.half()


_BLOCK_SPARSE = {"bs_global": ("global", 2), "bs_shared": ("shared", 40), "bs_local": ("local", 3)}


@pytest.fixture(scope="module")
def cuda_artifacts():
    from tilelang_core.lowering import lower

    kernels = {
        "logical_dyn": gpu_logical_kernel(6, 9, True),
        "logical_static": gpu_logical_kernel(6, 40, False),
        "cpu_logical": logical_kernel(6, N_STATIC, "float32", True),
        "loops": loops_kernel(5, 12, True),
        "loops_scalar": loops_kernel(5, 12, False, vectorized=False, threads=32),
        "launch": launch_kernel(),
        **{name: block_sparse_kernel(64, 64, 64, C, where) for name, (where, C) in _BLOCK_SPARSE.items()},
    }
    return {name: lower(func, target="cuda") for name, func in kernels.items()}


def test_cuda_sources(cuda_artifacts):
    src = {name: art.device_source for name, art in cuda_artifacts.items()}
    assert "break;" in src["loops"] and "continue" not in src["loops"]
    assert "any_of_flag" in src["logical_dyn"] and "all_of_flag" in src["logical_dyn"]
    assert "__syncthreads()" in src["logical_dyn"]  # the shared mask is written, then read by every thread
    for name in _BLOCK_SPARSE:  # the tile copies inside the if need barriers: the condition is block-uniform
        body = src[name][src[name].index("uniform_cond"):]
        assert "__syncthreads();\n    if (uniform_cond) {" in body.replace("\r", ""), name


def test_only_block_uniform_conditions_are_marked_thread_invariant():
    """A condition may hold barriers only when every thread of the block computes the same value:
    not inside T.Parallel, not from per-thread data (a local buffer written in T.Parallel)."""
    from tilelang_core.lowering.logical import lower_logical_reductions

    @T.prim_func
    def conditions(X: T.Tensor((4, 40), "int32"), Y: T.Tensor((4, 32), "int32")):
        with T.Kernel(4, threads=32) as bx:
            S = T.alloc_shared((32,), "int32")
            for i in T.Parallel(32):
                S[i] = 0
                if T.any_of(X[i % 4, 0:40]):  # per iteration, spread over threads
                    S[i] = 1
            L = T.alloc_local((4,), "int32")
            for i in T.Parallel(4):
                L[i] = X[bx, i]  # per-thread values
            if T.any_of(L):
                S[0] = 2
            U = T.alloc_local((4,), "int32")
            for i in T.serial(4):
                U[i] = X[bx, i + 1]  # the same values in every thread
            if T.any_of(U) and T.all_of(X[bx, 0:40]):
                S[1] = 3
            if T.any_of(X[bx, 0:40]):
                Y[bx, 0] = 4  # no shared memory inside: nothing to mark
            for i in T.Parallel(32):
                Y[bx, i] = S[i]

    text = lower_logical_reductions(conditions, gpu=True).script()
    assert text.count("tvm_thread_invariant") == 1 and text.count("T.tvm_storage_sync") == 1
    marked = text[text.index("T.tvm_storage_sync"):].splitlines()
    assert "T.tvm_thread_invariant(uniform_cond)" in marked[1] and "S[1] = 3" in marked[2], marked[:3]
    assert "tvm_thread_invariant" not in lower_logical_reductions(conditions, gpu=False).script()


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_cuda_sources_compile_with_nvcc(cuda_artifacts, tmp_path):
    CU.compile_translation_units(cuda_artifacts, tmp_path, suppress="177,550")


@CU.emulator
def test_emulated_gpu_runs_any_of_and_loop_break(cuda_artifacts, tmp_path):
    g = torch.Generator().manual_seed(3)
    run = CU._emulated(cuda_artifacts["logical_dyn"], tmp_path)
    for C in (9, 4):
        mask = torch.rand(6, C, generator=g) < 0.2
        mask[0], mask[1] = False, True
        mask[2, :4] = True
        x = torch.randn(6, 64, generator=g)
        x[3, 5] = 0.0
        y = torch.full((6, 64), 7.0)
        f = torch.full((6, 4), -1, dtype=torch.int32)
        run(mask, x, y, f)
        rows = mask.any(1)
        torch.testing.assert_close(y, torch.where(rows[:, None], 2 * x, torch.zeros_like(x)))
        want = [[int(m[:4].any()), int(m[:4].all()), int((xr != 0).all()), int(m.all())] for m, xr in zip(mask, x)]
        assert f.tolist() == want
    _check_loops(CU._emulated(cuda_artifacts["loops_scalar"], tmp_path), 5, 12, 4)


@CU.emulator
@pytest.mark.parametrize("name", sorted(_BLOCK_SPARSE))
def test_emulated_gpu_block_sparse_matmul(cuda_artifacts, tmp_path, name):
    """``if T.any_of(mask):`` around tile copies and a gemm (barriers inside the if), the mask in
    global, shared or per-thread memory, against torch."""
    where, C = _BLOCK_SPARSE[name]
    g = torch.Generator().manual_seed(5)
    a, b = torch.randn(64, 64, generator=g).half(), torch.randn(64, 64, generator=g).half()
    mask = torch.rand(2, 2, 4, C, generator=g) < (0.3 if C > 3 else 0.5)
    mask[0, 0, 1] = False  # a skipped tile in every variant
    out = torch.zeros(64, 64).half()
    CU._emulated(cuda_artifacts[name], tmp_path)(a, b, mask, out)
    used = (lambda m: bool(m.all() or m[1:].any())) if where == "local" else (lambda m: bool(m.any()))
    torch.testing.assert_close(out.float(), _block_sparse_reference(a, b, mask, 32, 32, 16, used).float(),
                               rtol=1e-2, atol=1e-2)


# -- refused forms -------------------------------------------------------------------------------


def test_any_of_operand_errors_name_the_operator_and_operand():
    with pytest.raises(LoweringError, match=r"T\.any_of\(M\[0:2, 0:4\]\): only the last dimension may be a slice") as info:
        @T.prim_func
        def two_slices(M: T.Tensor((4, 4), "int32"), Y: T.Tensor((1,), "int32")):
            Y[0] = T.Cast("int32", T.any_of(M[0:2, 0:4]))
    assert str(info.value).startswith(__file__ + ":")

    with pytest.raises(LoweringError, match=r"T\.all_of\(M\[1, 2\]\): expects a buffer or a region .*single element") as info:
        @T.prim_func
        def element(M: T.Tensor((4, 4), "int32"), Y: T.Tensor((1,), "int32")):
            Y[0] = T.Cast("int32", T.all_of(M[1, 2]))
    assert isinstance(info.value, TypeError)

    with pytest.raises(LoweringError, match=r"T\.any_of\(M\): needs bool, integer or float16/bfloat16/float32/float64 elements, got float8_e4m3fn"):
        @T.prim_func
        def fp8(M: T.Tensor((4,), "float8_e4m3fn"), Y: T.Tensor((1,), "int32")):
            Y[0] = T.Cast("int32", T.any_of(M))


def test_any_of_with_run_time_extent_in_a_while_condition_is_refused():
    n = T.dynamic("n")

    @T.prim_func
    def spin(M: T.Tensor((n,), "int32")):
        with T.Kernel(1, threads=1) as bx:
            while T.any_of(M[0:n]):
                M[0] = 0

    for target in ("c", "cuda"):
        with pytest.raises(LoweringError, match=r"T\.any_of\(M\[0:n\]\): an extent known only at run time .* the "
                           r"condition of a while loop .* T\.alloc_var") as info:
            _lower(spin, target)
        assert str(info.value).startswith(_line(spin, "while T.any_of"))


def _break_kernel(where):
    n = T.dynamic("n")

    @T.prim_func
    def brk(X: T.Tensor((4, n), "int32")):
        with T.Kernel(4, threads=32) as bx:
            if where == "kernel":
                T.loop_break()
            if where == "parallel":
                for j in T.Parallel(n):
                    if X[bx, j] < 0:
                        T.loop_break()
            if where == "grid":
                for i, j in T.grid(2, n):
                    if X[bx, j] < 0:
                        break
            if where == "vectorized":
                for j in T.vectorized(4):
                    if X[bx, j] < 0:
                        break
            if where == "unroll":
                for j in T.Unroll(4):
                    if X[bx, j] < 0:
                        T.loop_break()
            if where == "persistent":
                for j in T.Persistent([n], 4, bx):
                    if X[bx, j] < 0:
                        break
            if where == "cpu_parallel":
                for j in T.parallel(n):
                    if X[bx, j] < 0:
                        break
            if where == "threads":
                for t in T.thread_binding(32, thread="threadIdx.x"):
                    if X[bx, t] < 0:
                        break

    return brk


_BREAK_REASONS = {
    "kernel": "the block loop of T.Kernel",
    "parallel": "a T.Parallel loop",
    "grid": "several loop variables",
    "vectorized": "a T.vectorized loop",
    "unroll": "a T.unroll loop",
    "persistent": "a T.Persistent loop",
    "cpu_parallel": "a T.parallel loop",
    "threads": "a loop bound to GPU threads",
}


@pytest.mark.parametrize("where", sorted(_BREAK_REASONS))
def test_break_where_it_cannot_leave_a_serial_loop_is_refused(where):
    target = "cuda" if where == "threads" else "c"
    try:
        func = _break_kernel(where)
    except LoweringError as exc:  # several loop variables: refused while the kernel is parsed
        error = exc
    else:
        with pytest.raises(LoweringError) as info:
            _lower(func, target)
        error = info.value
    assert _BREAK_REASONS[where] in str(error)
    assert ": T.loop_break()" in str(error) or ": break " in str(error)
    assert str(error).startswith(__file__ + ":")


def test_break_outside_any_loop_is_refused():
    @T.prim_func
    def top(X: T.Tensor((4,), "int32")):
        X[0] = 1
        T.loop_break()

    for target in ("c", "llvm", "cuda"):
        with pytest.raises(LoweringError, match="is not inside any loop") as info:
            _lower(top, target)
        assert str(info.value).startswith(_line(top, "T.loop_break()"))


def test_launch_size_errors():
    with pytest.raises(LoweringError, match=r"T\.get_thread_extent\(0\): must be used inside the body of a 'with T\.Kernel"):
        @T.prim_func
        def outside(E: T.Tensor((8,), "int32")):
            E[0] = T.get_thread_extent(0)

    with pytest.raises(LoweringError, match=r"T\.get_block_extent\(3\): dim must be 0, 1 or 2"):
        @T.prim_func
        def bad_dim(E: T.Tensor((8,), "int32")):
            with T.Kernel(2) as bx:
                E[bx] = T.get_block_extent(3)

    with pytest.raises(TypeError, match="dim must be the int 0, 1 or 2"):
        @T.prim_func
        def bad_type(E: T.Tensor((8,), "int32")):
            with T.Kernel(2) as bx:
                E[bx] = T.get_thread_extent("x")

    with pytest.raises(TypeError, match="shape must be a non-empty list or tuple"):
        T.index_to_coordinates(3, 4)


def test_names_are_in_every_dialect():
    import tilelang.cpu.language as cpu_language
    import tilelang.language.kernel as kernel_module

    names = ("any_of", "all_of", "loop_break", "Serial", "Unroll", "Vectorized", "get_thread_extent",
             "get_thread_extents", "get_block_extent", "get_block_extents", "index_to_coordinates")
    for name in names:
        assert getattr(cpu_language, name) is getattr(T, name)
        assert name in T.__all__
    assert kernel_module.get_thread_extent is T.get_thread_extent


# -- on a device ----------------------------------------------------------------------------------


@pytest.mark.gpu
@CU.requires_gpu
def test_gpu_any_of_and_loop_break():
    import tilelang_core

    for C, dynamic in ((9, True), (40, False)):
        kernel = tilelang_core.compile(gpu_logical_kernel(6, C, dynamic), target="cuda")
        mask = torch.rand(6, C, device="cuda") < 0.2
        mask[0], mask[1] = False, True
        x = torch.randn(6, 64, device="cuda")
        y = torch.full((6, 64), 7.0, device="cuda")
        f = torch.full((6, 4), -1, dtype=torch.int32, device="cuda")
        kernel(mask, x, y, f)
        torch.testing.assert_close(y, torch.where(mask.any(1)[:, None], 2 * x, torch.zeros_like(x)))
        m = mask.cpu()
        assert f[:, 0].cpu().tolist() == m[:, :4].any(1).int().tolist()
    kernel = tilelang_core.compile(loops_kernel(5, 12, True, threads=32), target="cuda")

    def on_device(x, o):
        out = o.cuda()
        kernel(x.cuda(), out)
        o.copy_(out.cpu())

    _check_loops(on_device, 5, 12, 0)
