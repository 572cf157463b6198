"""``T.access_ptr`` (with ``tilelang.transform.LowerAccessPtr``) and ``T.import_source`` on CPU targets.

What ``T.access_ptr`` builds (the ``tl.access_ptr`` call and its arguments), what the pass makes
of it (TVM's ``tvm_access_ptr`` with the element offset), the errors of both operators, and
kernels that pass such pointers to C functions (libc's ``memcpy``/``memset``, functions defined
with ``T.import_source``) on the three CPU paths, compared with torch.
"""

from __future__ import annotations

import importlib
import pathlib
import sys

import pytest
import torch
import tvm
from tvm import tirx

import tilelang
import tilelang.language as T
from tilelang_core.errors import LoweringError

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import CYTHON_C, TVMFFI_C, TVMFFI_LLVM, compile_on, path_id  # noqa: E402
from source_lines import marked_line  # noqa: E402

_THIS = pathlib.Path(__file__).resolve()


def _op(name):
    return tvm.ir.Op.get(name)


def _ints(*values):
    return [tirx.IntImm("int32", v) for v in values]


def _calls(func, name):
    found = []
    tirx.stmt_functor.post_order_visit(
        func.body, lambda e: found.append(e) if isinstance(e, tvm.ir.Call) and e.op.same_as(_op(name)) else None
    )
    return found


def _lowered_ptr(ptr, buf):
    """The ``tvm_access_ptr`` that ``tilelang.transform.LowerAccessPtr`` makes of ``ptr``."""
    func = tirx.PrimFunc([buf], tirx.Evaluate(ptr)).with_attr("global_symbol", "main")
    out = tilelang.transform.LowerAccessPtr()(tvm.IRModule({"main": func}))["main"]
    assert not _calls(out, "tl.access_ptr")
    (acc,) = _calls(out, "tirx.tvm_access_ptr")
    return acc


def _static(expr):
    value = tvm.sym.Analyzer().simplify(expr)
    assert isinstance(value, tirx.IntImm), value
    return int(value.value)


# -- what T.access_ptr builds ------------------------------------------------------------------


def test_an_element_pointer_is_a_tl_access_ptr_call_of_the_element_its_extent_and_mask():
    buf = tirx.decl_buffer((64,), "uint8", name="A")
    ptr = T.access_ptr(tirx.BufferLoad(buf, _ints(16)), "r", 16)
    assert isinstance(ptr, tvm.ir.Call) and ptr.op.same_as(_op("tl.access_ptr"))
    first, extent, mask = ptr.args
    assert first.source.same_as(buf) and [int(i.value) for i in first.indices] == [16]
    assert int(extent.value) == 16 and int(mask.value) == 1
    # without extents: one element; "rw" is the mask 3 ("w" is 2)
    one = T.access_ptr(tirx.BufferLoad(buf, _ints(7)), "rw")
    assert int(one.args[1].value) == 1 and int(one.args[2].value) == 3
    assert int(T.access_ptr(tirx.BufferLoad(buf, _ints(7)), "w").args[2].value) == 2


def test_extents_multiply_and_may_be_a_list_or_fewer_than_the_rank():
    buf = tirx.decl_buffer((8, 8), "float16", name="A")
    load = tirx.BufferLoad(buf, _ints(2, 3))
    ptr = T.access_ptr(load, "w", 4, 5)
    assert int(ptr.args[1].value) == 20 and int(ptr.args[2].value) == 2
    assert int(T.access_ptr(load, "w", [4, 5]).args[1].value) == 20
    assert int(T.access_ptr(load, 2, 5).args[1].value) == 5  # one extent: the last axis; an int mask
    assert int(T.access_ptr(load, "r", 4, 5, extent=7).args[1].value) == 7  # extent= wins


def test_buffer_region_and_vector_bases_point_at_their_first_element():
    buf = tirx.decl_buffer((8, 16), "float32", name="A")
    whole = T.access_ptr(buf, "r")
    assert [int(i.value) for i in whole.args[0].indices] == [0, 0] and int(whole.args[1].value) == 128
    region = tirx.BufferRegion(buf, [tvm.ir.Range.from_min_extent(2, 3), tvm.ir.Range.from_min_extent(4, 8)])
    ptr = T.access_ptr(region, "rw")
    assert [int(i.value) for i in ptr.args[0].indices] == [2, 4] and int(ptr.args[1].value) == 24
    vec = T.access_ptr(tirx.BufferLoad(buf, [tirx.IntImm("int32", 1), tirx.Ramp(tirx.IntImm("int32", 4), 1, 4)]), "r")
    assert [int(i.value) for i in vec.args[0].indices] == [1, 4] and int(vec.args[1].value) == 4
    flat = tirx.decl_buffer((64,), "float32", name="F")
    moved = T.access_ptr(tirx.BufferLoad(flat, _ints(3)), "r", 4, offset=5)
    assert _static(moved.args[0].indices[0]) == 8
    tail = T.access_ptr(tirx.BufferLoad(buf, _ints(5, 9)), "r", 16, ignore_last_ndim=1)
    assert [int(i.value) for i in tail.args[0].indices] == [5, 0]


def test_the_op_is_registered_once_and_again_without_failing():
    from tvm.ir import _ffi_api

    from tilelang_core.language import registered_ops

    op = registered_ops.access_ptr_op()
    assert op.same_as(registered_ops.access_ptr_op()) and op.same_as(_op("tl.access_ptr"))
    model = _op("tirx.tvm_access_ptr")
    assert int(_ffi_api.OpGetAttr(op, "TCallEffectKind")) == int(_ffi_api.OpGetAttr(model, "TCallEffectKind"))
    assert str(_ffi_api.OpGetAttr(op, "TScriptPrinterName")) == "tl.access_ptr"
    reloaded = importlib.reload(registered_ops)  # a fresh module finds the op TVM already has
    assert reloaded.access_ptr_op().same_as(op)
    reloaded._set_missing("tl.access_ptr", {"TCallEffectKind": 4, "TScriptPrinterName": "other"})  # kept as is
    assert str(_ffi_api.OpGetAttr(op, "TScriptPrinterName")) == "tl.access_ptr"
    buf = tirx.decl_buffer((4,), "float32", name="A")
    assert "T.tl.access_ptr(A[1], 1, 1)" in tirx.PrimFunc([buf], tirx.Evaluate(T.access_ptr(buf[1], "r"))).script()


# -- LowerAccessPtr -----------------------------------------------------------------------------


def test_lower_access_ptr_gives_tvm_access_ptr_with_the_linear_offset():
    buf = tirx.decl_buffer((8, 8), "float16", name="A")
    acc = _lowered_ptr(T.access_ptr(tirx.BufferLoad(buf, _ints(2, 3)), "w", 4, 5), buf)
    assert len(acc.args) == 5
    assert _static(acc.args[2]) == 2 * 8 + 3 and _static(acc.args[3]) == 20 and int(acc.args[4].value) == 2
    assert "float16" in str(acc.args[0])  # the element type annotation


def test_lower_access_ptr_adds_elem_offset_and_follows_strides():
    shifted = tirx.decl_buffer((8, 8), "float16", name="A", elem_offset=tirx.IntImm("int32", 5))
    acc = _lowered_ptr(T.access_ptr(tirx.BufferLoad(shifted, _ints(2, 3)), "r", 1), shifted)
    assert _static(acc.args[2]) == 5 + 19
    strided = tirx.decl_buffer((8, 8), "float32", name="S", strides=[16, 1])
    acc = _lowered_ptr(T.access_ptr(tirx.BufferLoad(strided, _ints(2, 3)), "r"), strided)
    assert _static(acc.args[2]) == 2 * 16 + 3
    i = tirx.Var("i", "int32")
    acc = _lowered_ptr(T.access_ptr(tirx.BufferLoad(shifted, [i, tirx.IntImm("int32", 1)]), "r"), shifted)
    assert tvm.sym.Analyzer().can_prove_equal(acc.args[2], i * 8 + 6)


# -- errors -------------------------------------------------------------------------------------


def _line_of(marker: str) -> int:
    return marked_line(_THIS, marker)


def _error(build, marker, *needles, kind=LoweringError):
    with pytest.raises(kind) as info:
        build()
    text = str(info.value)
    assert f"{_THIS}:{_line_of(marker)}" in text, text
    for needle in needles:
        assert needle in text, f"{needle!r} not in {text!r}"
    return info.value


def test_access_ptr_errors_name_the_operator_the_operand_and_what_was_expected():
    def access_type():
        @T.prim_func
        def k(A: T.Tensor((8, 16), "float32")):
            with T.Kernel(1):
                T.call_extern("void", "f", T.access_ptr(A[0, 0], "x"))  # <ap-type>

    _error(access_type, "ap-type", "T.access_ptr(A[0, 0], 'x')", "access_type must be 'r', 'w' or 'rw'", "got 'x'")

    def access_float():
        @T.prim_func
        def k(A: T.Tensor((8, 16), "float32")):
            with T.Kernel(1):
                T.call_extern("void", "f", T.access_ptr(A[0, 0], 1.5))  # <ap-float>

    err = _error(access_float, "ap-float", "access_type must be a str", "got float 1.5")
    assert isinstance(err, TypeError)

    def base():
        @T.prim_func
        def k(A: T.Tensor((8, 16), "float32")):
            with T.Kernel(1):
                T.call_extern("void", "f", T.access_ptr(A[0, 0] + 1.0, "r"))  # <ap-base>

    err = _error(base, "ap-base", "base must be a buffer element (A[i, j]), a region", "got Add")
    assert isinstance(err, TypeError)

    def zero():
        @T.prim_func
        def k(A: T.Tensor((8, 16), "float32")):
            with T.Kernel(1):
                T.call_extern("void", "f", T.access_ptr(A[0, 0], "r", 2, 0))  # <ap-zero>

    _error(zero, "ap-zero", "T.access_ptr(A[0, 0], 'r', 2, 0)", "extents[1] must be at least 1, got 0")

    def negative():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1):
                T.call_extern("void", "f", T.access_ptr(A[0], "r", extent=-4))  # <ap-neg>

    _error(negative, "ap-neg", "extent must be at least 1, got -4")

    def beyond():
        @T.prim_func
        def k(A: T.Tensor((8, 16), "float32")):
            with T.Kernel(1):
                T.call_extern("void", "f", T.access_ptr(A[7, 10], "r", 8))  # <ap-beyond>

    _error(beyond, "ap-beyond", "covers 8 elements from element 122", "'A' of shape (8, 16) has 6 there")

    def beyond_dynamic_start():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32"), i: T.int32):
            with T.Kernel(1):
                T.call_extern("void", "f", T.access_ptr(A[i], "w", 65))  # <ap-dyn>

    _error(beyond_dynamic_start, "ap-dyn", "covers 65 elements", "has 64 there")

    def index():
        @T.prim_func
        def k(A: T.Tensor((8, 16), "float32")):
            with T.Kernel(1):
                T.call_extern("void", "f", T.access_ptr(A[8, 0], "r"))  # <ap-index>

    _error(index, "ap-index", "index 8 of axis 0 is outside buffer 'A' of shape (8, 16)")

    def rank():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1):
                T.call_extern("void", "f", T.access_ptr(A[0], "r", 2, 4))  # <ap-rank>

    _error(rank, "ap-rank", "got 2 extents for buffer 'A' of rank 1")

    def offset_2d():
        @T.prim_func
        def k(A: T.Tensor((8, 8), "float32")):
            with T.Kernel(1):
                T.call_extern("void", "f", T.access_ptr(A[0, 0], "r", offset=3))  # <ap-offset>

    _error(offset_2d, "ap-offset", "offset= moves the pointer of a 1-D buffer only")


def test_import_source_takes_a_str_only():
    def bad():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1):
                T.import_source(b"int x;")  # <is-bytes>

    err = _error(bad, "is-bytes", "T.import_source(", "source must be a str of C/CUDA code, got bytes")
    assert isinstance(err, TypeError)


# -- kernels ------------------------------------------------------------------------------------


def _tile_copy(blk, dtype, dynamic, include):
    """Each block copies its tile of ``A`` (from a run-time offset) through shared, local and
    fragment tiles into ``B`` with ``memcpy``, and fills its tile of ``Z`` with ``memset``."""
    N = T.dynamic("n") if dynamic else 4 * blk
    nbytes = T.uint64(blk * torch.tensor([], dtype=getattr(torch, dtype)).element_size())
    src = "#include <string.h>\n" if include else None

    @T.prim_func
    def tile_copy(A: T.Tensor((N + 8,), dtype), B: T.Tensor((N,), dtype), Z: T.Tensor((N,), "uint8"), off: T.int32):
        with T.Kernel(T.ceildiv(N, blk)) as bx:
            T.import_source(src)
            S = T.alloc_shared((blk,), dtype)
            L = T.alloc_local((blk,), dtype)
            F = T.alloc_fragment((blk,), dtype)
            T.call_extern("handle", "memcpy", T.access_ptr(S, "w"), T.access_ptr(A[bx * blk + off], "r", blk), nbytes)
            T.call_extern("handle", "memcpy", T.access_ptr(L[0], "w", blk), T.access_ptr(S[0], "r", blk), nbytes)
            T.call_extern("handle", "memcpy", T.access_ptr(F, "w"), T.access_ptr(L, "r"), nbytes)
            T.call_extern("handle", "memcpy", T.access_ptr(B[bx * blk], "w", blk), T.access_ptr(F[0], "r", blk), nbytes)
            T.call_extern("handle", "memset", T.access_ptr(Z[bx * blk], "w", blk), bx + 1, T.uint64(blk))

    return tile_copy


_COPY_CASES = [
    ("float32", False, CYTHON_C),
    ("float32", True, TVMFFI_C),
    ("float16", True, TVMFFI_LLVM),
    ("int64", False, TVMFFI_LLVM),
]


@pytest.mark.parametrize("dtype,dynamic,path", _COPY_CASES, ids=path_id)
def test_libc_memcpy_and_memset_on_tiles_at_a_run_time_offset(dtype, dynamic, path):
    blk = 16
    n = 4 * blk
    kernel = compile_on(_tile_copy(blk, dtype, dynamic, include=path[1] == "c"), path)
    tdt = getattr(torch, dtype)
    a = (torch.randn(n + 8) * 100).to(tdt)
    for off in (0, 5):
        b = torch.zeros(n, dtype=tdt)
        z = torch.zeros(n, dtype=torch.uint8)
        kernel(a, b, z, off)
        assert torch.equal(b, a[off : off + n])
        assert torch.equal(z, torch.arange(1, 5, dtype=torch.uint8).repeat_interleave(blk))


def test_write_pointers_mark_their_tensor_written():
    from tilelang_core.lowering import lower

    art = lower(_tile_copy(16, "float32", False, include=True), target="c")
    assert [p.written for p in art.params if hasattr(p, "written")] == [False, True, True]


_HELPERS = r"""
static float tl_user_twice(float v) { return v + v; }
"""
_SCALE = r"""
static void tl_user_scale(float *dst, const float *src, int n, float k) {
  for (int i = 0; i < n; ++i) dst[i] = tl_user_twice(src[i]) * k;
}
"""


def _scaled(k_value, blk=8):
    """``B = 2 * A * k`` through a fragment tile, with functions of T.import_source: the second text
    calls the first (their order is kept) and the first is given twice (placed once: a second
    definition of a static C function would not compile)."""
    scale_src = _SCALE.replace("* k;", f"* k * {k_value}.0f;")

    @T.prim_func
    def scaled(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(32 // blk) as bx:
            T.import_source(_HELPERS)
            T.import_source(scale_src)
            T.import_source(_HELPERS)
            F = T.alloc_fragment((blk,), "float32")
            T.call_extern("handle", "tl_user_scale", T.access_ptr(F, "w"), T.access_ptr(A[bx * blk], "r", blk), blk, T.float32(1.0))
            T.call_extern("void", "tl_user_scale", T.access_ptr(B[bx * blk], "w", blk), T.access_ptr(F[0], "r", blk), blk, T.float32(1.0))

    return scaled


@pytest.mark.parametrize("path", [CYTHON_C, TVMFFI_C], ids=path_id)
def test_import_source_functions_called_on_tiles(path):
    kernel = compile_on(_scaled(3), path)
    src = kernel.get_kernel_source()
    assert src.count("tl_user_twice(float v)") == 1 and src.index("tl_user_twice(float v)") < src.index("tl_user_scale(float")
    a = torch.randn(32)
    b = torch.zeros(32)
    kernel(a, b)
    # src -> F: 2 * 3 * a, F -> B: 2 * 3 * F
    torch.testing.assert_close(b, a * 36)


def test_import_source_is_refused_on_llvm():
    from tilelang_core.lowering import lower

    with pytest.raises(LoweringError, match=r"T\.import_source needs a target whose kernel is generated as C source.*use target 'c'"):
        lower(_scaled(3), target="llvm")


def test_kernels_that_differ_only_in_imported_source_do_not_share_a_cache_entry(tmp_path, monkeypatch):
    import tilelang_core

    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    a = torch.randn(32)
    results, keys = {}, {}
    for k_value in (3, 5, 3):
        kernel = tilelang_core.compile(_scaled(k_value), target="c", execution_backend="cython")
        b = torch.zeros(32)
        kernel(a, b)
        results.setdefault(k_value, []).append(b)
        keys.setdefault(k_value, set()).add(kernel.cache_key)
    assert all(k is not None for ks in keys.values() for k in ks)
    assert len(keys[3]) == 1 and keys[3].isdisjoint(keys[5])  # the same text, the same key; another, another
    torch.testing.assert_close(results[5][0], a * 2 * 5 * 2 * 5)
    for b in results[3]:
        torch.testing.assert_close(b, a * 36)
