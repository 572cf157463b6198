"""TileLang's hints accepted without effect (``T.annotate_layout``, ``T.use_swizzle``, ``tilelang.layout``)
and ``T.cast``'s rounding arguments."""

from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T
import tilelang.layout
from tilelang.language.tir.ir import _VALID_CAST_ROUNDING_MODES
from tilelang_core.errors import KernelDefinitionError, LoweringError


def _copy_kernel(annotate: bool):
    @T.prim_func
    def copy(A: T.Tensor((16, 16), T.float32), B: T.Tensor((16, 16), T.float32)):
        with T.Kernel(1, threads=16):
            S = T.alloc_shared((16, 16), T.float32)
            if annotate:
                T.annotate_layout({S: tilelang.layout.make_swizzled_layout(S)})
                T.use_swizzle(panel_size=4)
            T.copy(A, S)
            T.copy(S, B)

    return copy


def test_layout_hints_change_nothing():
    plain = tilelang.lower(_copy_kernel(False), target="c").kernel_source
    hinted = tilelang.lower(_copy_kernel(True), target="c").kernel_source
    assert plain.replace("copy", "") == hinted.replace("copy", "")
    kernel = tilelang.compile(_copy_kernel(True), target="c", execution_backend="cython")
    a = torch.randn(16, 16)
    b = torch.empty(16, 16)
    kernel(a, b)
    assert torch.equal(a, b)


def test_hint_arguments_are_checked_and_layouts_cannot_be_used_otherwise():
    with pytest.raises(TypeError, match="keys must be buffers"):
        T.annotate_layout({"A": None})
    with pytest.raises(ValueError, match="order must be 'row' or 'col'"):
        T.use_swizzle(8, order="diagonal")
    hint = tilelang.layout.Layout((4,), lambda i: i)
    with pytest.raises(KernelDefinitionError, match="layouts are not provided"):
        hint.repeat([2, 1])


def test_cast_rounding_arguments_are_validated():
    assert _VALID_CAST_ROUNDING_MODES == {"", "rn", "rz", "rp", "rm", "rs"}
    x = T.float32(1.0)
    with pytest.raises(ValueError, match="Invalid round"):
        T.cast(x, "float8_e4m3fn", round="up")
    with pytest.raises(ValueError, match="Invalid sat"):
        T.cast(x, "float8_e4m3fn", sat="yes")
    with pytest.raises(ValueError, match="rbits is required"):
        T.cast(x, "float8_e4m3fn", round="rs")
    with pytest.raises(ValueError, match="rbits is only valid"):
        T.cast(x, "float8_e4m3fn", round="rn", rbits=T.int32(1))
    assert T.cast(x, T.float16).ty.dtype == "float16"


def test_default_cast_runs_on_cpu_and_a_directed_rounding_is_refused_when_lowered_for_cpu():
    @T.prim_func
    def to_half(A: T.Tensor((8,), T.float32), B: T.Tensor((8,), T.float16)):
        with T.Kernel(1, threads=1):
            for i in T.serial(8):
                B[i] = T.cast(A[i], T.float16, round="rn")

    a = torch.randn(8)
    b = torch.empty(8, dtype=torch.float16)
    tilelang.compile(to_half, target="c", execution_backend="cython")(a, b)
    assert torch.equal(b, a.half())

    @T.prim_func
    def truncating(A: T.Tensor((8,), T.float32), B: T.Tensor((8,), T.float16)):
        with T.Kernel(1, threads=1):
            for i in T.serial(8):
                B[i] = T.cast(A[i], T.float16, round="rz")

    with pytest.raises(LoweringError, match="round='rz'"):  # CUDA lowers it (tests/test_compat_casts.py)
        tilelang.lower(truncating, target="c")


def _viewed_tile_kernel(layout):
    """A shared tile, its int8 view annotated with ``layout(view)``, read back through the view."""

    @T.prim_func
    def through_view(A: T.Tensor((8, 8), T.float16), B: T.Tensor((8, 16), T.int8)):
        with T.Kernel(1, threads=8):
            S = T.alloc_shared((8, 8), T.float16)
            V = T.view(S, (8, 16), dtype=T.int8)
            F = T.alloc_fragment((8,), T.float32)
            T.annotate_layout({V: layout(V), F: T.Fragment((8,), forward_fn=lambda i: (i % 8, 0), replicate=1)})
            for i, j in T.Parallel(8, 8):
                S[i, j] = A[i, j]
            for i, j in T.Parallel(8, 16):
                B[i, j] = V[i, j]

    return through_view


def test_T_layout_and_fragment_are_the_layout_hints():
    """``T.Layout(shape, fn)`` and ``T.Fragment(...)`` are upstream's spelling of the
    ``tilelang.layout`` constructors (TVM's own ``tirx.layout.Layout`` used to sit at ``T.Layout``
    and refused ``(shape, fn)``): the kernel runs as without them, and a many-to-one map on a
    shared tile is still refused."""
    assert T.Layout is tilelang.layout.Layout and T.Fragment is tilelang.layout.Fragment
    kernel = tilelang.compile(_viewed_tile_kernel(lambda v: T.Layout((8, 16), lambda i, j: [i, j])), target="c")
    a = torch.randn(8, 8).half()
    b = torch.empty(8, 16, dtype=torch.int8)
    kernel(a, b)
    assert torch.equal(b, a.view(torch.int8))
    with pytest.raises(LoweringError, match="must be injective"):
        tilelang.compile(_viewed_tile_kernel(lambda v: T.Layout((8, 16), lambda i, j: [i, 0])), target="c")


@T.macro
def _scaled_sum(S: T.SharedBuffer([16], T.float32), F: T.FragmentBuffer([16], T.float32),
                L: T.LocalBuffer([1], T.float32), out: T.Tensor([16], T.float32)):
    for i in T.Parallel(16):
        out[i] = S[i] * L[0] + F[i]


def test_macro_buffer_annotations_take_tiles_and_are_refused_on_kernel_parameters():
    """``T.SharedBuffer`` / ``T.FragmentBuffer`` / ``T.LocalBuffer`` annotate macro parameters that
    are tiles; a kernel parameter declared with one is refused, naming it."""

    @T.prim_func
    def uses_macro(A: T.Tensor((16,), T.float32), B: T.Tensor((16,), T.float32)):
        with T.Kernel(1, threads=16):
            S = T.alloc_shared((16,), T.float32)
            F = T.alloc_fragment((16,), T.float32)
            L = T.alloc_local((1,), T.float32)
            T.copy(A, S)
            T.fill(F, 0.5)
            L[0] = 3.0
            _scaled_sum(S, F, L, B)

    for target in ("c", "llvm"):
        a = torch.randn(16)
        b = torch.empty(16)
        tilelang.compile(uses_macro, target=target)(a, b)
        torch.testing.assert_close(b, a * 3.0 + 0.5)

    @T.prim_func
    def shared_param(A: T.SharedBuffer((16,), T.float32)):
        with T.Kernel(1, threads=16):
            A[0] = 1.0

    with pytest.raises(LoweringError, match=r"parameter 'A' is declared in 'shared.dyn' memory.*declare it with T.Tensor"):
        tilelang.compile(shared_param, target="c")


def _register_hint_kernel(hinted: bool, producer: int = 24, consumer: int = 240):
    @T.prim_func
    def scale(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(2, threads=32) as bx:
            if hinted:
                T.disable_warp_group_reg_alloc()
                T.no_set_max_nreg()
                T.annotate_producer_reg_dealloc(producer)
                T.annotate_consumer_reg_alloc(consumer)
            for i in T.Parallel(32):
                B[bx * 32 + i] = A[bx * 32 + i] * 2.0

    return scale


@pytest.mark.parametrize("target", ["c", "cuda"])
def test_register_reallocation_hints_change_nothing(target):
    """The warp-specialization register hints (gdn's and flash attention's examples) leave the source as it was."""
    plain = tilelang.lower(_register_hint_kernel(False), target=target).kernel_source
    assert tilelang.lower(_register_hint_kernel(True), target=target).kernel_source == plain
    if target == "c":
        kernel = tilelang.compile(_register_hint_kernel(True), target="c", execution_backend="cython")
        a, b = torch.randn(64), torch.empty(64)
        kernel(a, b)
        assert torch.equal(b, a * 2)


@pytest.mark.parametrize("producer, consumer, bad", [(20, 240, 20), (24, 241, 241), (24, 264, 264), (True, 240, True)])
def test_register_counts_are_checked(producer, consumer, bad):
    with pytest.raises(LoweringError, match=rf"reg_count must be an int from 24 to 256 in steps of 8 .*got {bad}") as info:
        _register_hint_kernel(True, producer, consumer)
    assert "test_compat_hints.py:" in str(info.value)


def test_a_layout_hint_bound_to_a_name_in_the_kernel_is_a_hint():
    """``lay = T.Fragment(...)`` in a kernel body, then ``loop_layout=lay`` (DeepSeek TileKernels'
    engram kernels): binding the name asked ``hasattr(hint, "dtype")``, and the hint's refusal
    escaped it ("layouts are not provided"); passing the hint inline already worked."""

    def forward(i, j):
        return j, i

    @T.prim_func
    def staged(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 8), "float32")):
        with T.Kernel(1, threads=8) as _:
            layout = T.Fragment((4, 8), forward_fn=forward)
            S = T.alloc_shared((4, 8), "float32")
            T.async_copy(A[0:4, 0:8], S, loop_layout=layout)
            for i, j in T.Parallel(4, 8):
                B[i, j] = S[i, j] * 2

    kernel = tilelang.compile(staged, target="c", execution_backend="cython", out_idx=[1])
    a = torch.arange(32, dtype=torch.float32).reshape(4, 8)
    torch.testing.assert_close(kernel(a), a * 2)
    assert not hasattr(tilelang.layout.Layout((4,), lambda i: i), "dtype")
