"""``T.vectorized`` loops whose lanes meet in memory keep the meaning they have as written: a
store of several lanes to one element, or a load of what another lane stores, makes the loop
serial before TVM's vectorizer (lowering/vector_lane_collisions.py). On llvm such loops kept one
lane's value (8 for a sum of 1..8), while the C paths summed them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from tvm import tirx

import tilelang_core.language as T
from tilelang_core.lowering.vector_lane_collisions import lanes_collide

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402


def accumulate():
    @T.prim_func
    def main(A: T.Tensor((8,), "int32"), O: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=1) as bx:
            acc = T.alloc_local((1,), "int32")
            acc[0] = 0
            for j in T.vectorized(8):
                acc[0] = acc[0] + A[j]
            O[0] = acc[0]

    return main, lambda a: a.sum().reshape(1).to(torch.int32)


def carry():
    @T.prim_func
    def main(A: T.Tensor((8,), "int32"), O: T.Tensor((8,), "int32")):
        with T.Kernel(1, threads=1) as bx:
            s = T.alloc_local((9,), "int32")
            for j in T.serial(9):
                s[j] = 0
            for j in T.vectorized(8):
                s[j + 1] = s[j] + A[j]
            for j in T.serial(8):
                O[j] = s[j + 1]

    return main, lambda a: a.cumsum(0).to(torch.int32)


def pairs():
    @T.prim_func
    def main(A: T.Tensor((8,), "int32"), O: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=1) as bx:
            s = T.alloc_local((4,), "int32")
            for j in T.serial(4):
                s[j] = 0
            for j in T.vectorized(8):
                s[j // 2] = s[j // 2] + A[j]
            for j in T.serial(4):
                O[j] = s[j]

    return main, lambda a: a.view(4, 2).sum(1).to(torch.int32)


def rows():
    """The shape the fuzzer found: a row sum with a vectorized inner loop, weights by lane."""

    @T.prim_func
    def main(S: T.Tensor((3, 4), "float32"), O: T.Tensor((3,), "float32")):
        with T.Kernel(1, threads=1) as bx:
            acc = T.alloc_fragment((3,), "float32")
            for i in T.Parallel(3):
                acc[i] = 0.0
                for j in T.vectorized(4):
                    acc[i] = acc[i] + S[i, j] * (j + 1)
            for i in T.Parallel(3):
                O[i] = acc[i]

    return main, lambda s: (s * torch.arange(1, 5, dtype=torch.float32)).sum(1)


CASES = [accumulate, carry, pairs, rows]


@pytest.mark.parametrize("path", PATHS, ids=path_id)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_colliding_lanes_give_the_loop_as_written(path, case):
    func, reference = case()
    kernel = compile_on(func, path)
    a = (torch.arange(1, 9, dtype=torch.int32) if case is not rows else torch.arange(12, dtype=torch.float32).view(3, 4))
    want = reference(a)
    out = torch.zeros_like(want)
    kernel(a, out)
    assert torch.equal(out, want), f"{path}: {out.tolist()} != {want.tolist()}"


def _loop(*stmts, lanes=4):
    k = tirx.Var("k", "int32")
    body = [s(k) for s in stmts]
    return tirx.For(k, 0, lanes, tirx.ForKind.VECTORIZED, body[0] if len(body) == 1 else tirx.SeqStmt(body))


X = tirx.decl_buffer([64], "float32", name="X")
Y = tirx.decl_buffer([64], "float32", name="Y")
base = tirx.Var("base", "int32")


def store(buf, index, value):
    return lambda k: tirx.BufferStore(buf, value(k) if callable(value) else value, [index(k)])


def load(buf, index):
    return lambda k: tirx.BufferLoad(buf, [index(k)])


@pytest.mark.parametrize("stmts,collide", [
    ([store(Y, lambda k: k + base, load(X, lambda k: k))], False),  # one element per lane
    ([store(Y, lambda k: k * 2 + 1, load(X, lambda k: k))], False),  # stride 2: still one each
    ([store(Y, lambda k: base, tirx.FloatImm("float32", 1.0))], False),  # all lanes store one value
    ([store(Y, lambda k: base, load(X, lambda k: k))], True),  # lanes' values to one element
    ([store(Y, lambda k: tirx.floordiv(k, 2), load(X, lambda k: k))], True),  # two lanes per element
    ([store(X, lambda k: k + 1, load(X, lambda k: k))], True),  # reads what the lane before writes
    ([store(X, lambda k: k, load(X, lambda k: k))], False),  # each lane its own element
    ([store(X, lambda k: k, load(X, lambda k: k + 4)), store(X, lambda k: k + 4, load(X, lambda k: k))], False),
    ([store(X, lambda k: k, load(X, lambda k: k + 3)), store(X, lambda k: k + 3, load(X, lambda k: k))], True),
    ([store(X, lambda k: k, load(X, lambda k: k * 2))], True),  # another stride: not provably apart
], ids=["own", "stride2", "same_value", "invariant_index", "pairs", "carry", "in_place", "per_lane_copies",
        "overlapping_copies", "other_stride"])
def test_which_loops_collide(stmts, collide):
    assert lanes_collide(_loop(*stmts)) is collide
