"""Owners of view storage (lowering/views.py) and the spread order of T.Parallel (lowering/parallel_order.py).

The GPU passes that compare storages (shared_hazards, fragments, thread_uniform) share these
helpers; a view of a view must lead to the allocated buffer, every owner on the way counted.
"""

from __future__ import annotations

import tvm
from tvm import tirx

from tilelang_core.language.tileops._common import substitute
from tilelang_core.lowering.parallel_order import loop_values, static_count
from tilelang_core.lowering.views import data_buffers, owner_of, view_roots, with_owners


def _chain():
    """``S`` (allocated), ``V`` a view of ``S``, ``W`` a view of ``V``, and ``P`` on a plain pointer."""
    S = tirx.decl_buffer((32,), "int64", name="S", scope="shared")
    V = tirx.decl_buffer((64,), "float32", name="V", data=S.data, scope="shared")
    W = tirx.decl_buffer((8, 8), "float32", name="W", data=V.data, scope="shared")
    ptr = tirx.Var("ptr", tvm.ir.PointerType(tvm.ir.PrimType("float32"), "shared"))
    P = tirx.decl_buffer((4,), "float32", name="P", data=ptr, scope="shared")
    return S, V, W, P, ptr


def test_owner_of_names_the_buffer_behind_buffer_data():
    S, V, W, P, ptr = _chain()
    assert owner_of(S.data).same_as(S)
    assert owner_of(ptr) is None
    assert owner_of(ptr, ptr).same_as(ptr)
    found = data_buffers(tirx.call_extern("int32", "f", S.data, ptr, W.data))
    assert [str(b.name) for b in found] == ["S", "W"]


def test_view_of_a_view_reaches_the_allocation():
    S, V, W, P, ptr = _chain()
    owners = [(V, S), (W, V), (P, None)]
    roots = view_roots(owners, [S])
    got = {str(b.name): str(r.name) for b, r in roots}
    assert got == {"S": "S", "V": "S", "W": "S"}  # P's storage is no allocation of the list: left out
    # in any order of the declarations
    assert {str(b.name) for b, _ in view_roots(list(reversed(owners)), [S])} == {"S", "V", "W"}


def test_with_owners_adds_every_owner_up_the_chain_once():
    S, V, W, P, ptr = _chain()
    owners = [(V, S), (W, V), (P, ptr)]
    out = with_owners([W, P], owners)
    assert [str(getattr(x, "name", x)) for x in out] == ["W", "P", "V", "ptr", "S"]
    assert len(with_owners([W, V, S], owners)) == 3


def test_spread_order_is_row_major_with_minimums():
    i, j = tirx.Var("i", "int32"), tirx.Var("j", "int32")
    inner = tirx.For(j, tirx.IntImm("int32", 2), tirx.IntImm("int32", 6), tirx.ForKind.SERIAL, tirx.Evaluate(0))
    outer = tirx.For(i, tirx.IntImm("int32", 0), tirx.IntImm("int32", 4), tirx.ForKind.SERIAL, inner)
    flat = tirx.Var("f", "int32")
    values = dict((str(v), e) for v, e in loop_values([outer, inner], flat))
    analyzer = tvm.sym.Analyzer()
    for f in range(24):
        at = {k: int(analyzer.simplify(substitute(e, [(flat, tirx.IntImm("int32", f))])).value) for k, e in values.items()}
        assert at == {"i": f // 6, "j": f % 6 + 2}
    assert static_count([outer, inner]) == 24
    n = tirx.Var("n", "int32")
    dyn = tirx.For(i, tirx.IntImm("int32", 0), n, tirx.ForKind.SERIAL, tirx.Evaluate(0))
    assert static_count([dyn]) is None
