"""Results against torch with the executing stand-in for torch's MPS device (Metal source run as C++
on the CPU, see mps_standin.py): every example and tile-operator kernel lowered to Metal, dynamic
shapes, scalars of every dtype (through the union fix), two device kernels in one call.

The kernels are built by the real backend (``tilelang.compile(..., execution_backend="metal")``);
the stand-in receives exactly what ``torch.mps.compile_shader`` and its kernels would, so this
checks the source (it compiles, with every union member it reads), the packing and the launch sizes
end to end. It does not check Metal's compiler or an Apple GPU: the ``mps``-marked tests do, on a Mac.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

import tilelang

import metal_kernels as MK
from mps_standin import StandinRuntime, emulate, have_cxx

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not have_cxx(), reason="g++ is not installed")]

KS = MK.tileops_module()


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    return StandinRuntime(execute=True, build_dir=tmp_path_factory.mktemp("metal_standin"))


@pytest.fixture(scope="module")
def run(runtime):
    """``run(func, out_idx)``: the metal kernel of ``func`` on the executing stand-in."""
    import os

    saved = os.environ.get("TILELANG_DISABLE_CACHE")
    os.environ["TILELANG_DISABLE_CACHE"] = "1"
    funcs = [f for _, f, _, _ in MK.examples() + MK.tileops()] + [MK.every_scalar(), MK.two_kernels()]
    kernels = [tilelang.compile(f, out_idx=None, execution_backend="metal", target="metal") for f in funcs]
    with ThreadPoolExecutor(max_workers=2) as pool:  # the g++ runs are the slow part: warm the stand-in's cache
        list(pool.map(lambda k: emulate(k.get_kernel_source(), runtime.build_dir), kernels))

    def make(func, out_idx=None):
        kernel = tilelang.compile(func, out_idx=out_idx, execution_backend="metal", target="metal")
        return kernel.runner.with_runtime(runtime)

    yield make
    if saved is None:
        os.environ.pop("TILELANG_DISABLE_CACHE", None)
    else:
        os.environ["TILELANG_DISABLE_CACHE"] = saved


@pytest.mark.parametrize("example", MK.examples(), ids=lambda e: e[0])
def test_examples_match_torch_with_executing_standin(run, example):
    name, func, out_idx, ex = example
    kernel = run(func, out_idx)
    inputs = ex.inputs()
    torch.testing.assert_close(kernel(*inputs), ex.reference(*inputs), rtol=ex.rtol, atol=ex.atol)


@pytest.mark.parametrize("n", [0, 1, 127, 128, 129, 4099])
def test_dynamic_length_with_executing_standin(run, n):
    kernel = run(MK.scaled("int32"), out_idx=[1])
    x = torch.randn(n)
    torch.testing.assert_close(kernel(x, -4), x * 2 - 4 + n)


def test_every_scalar_dtype_with_executing_standin(run):
    kernel = run(MK.every_scalar(), out_idx=[1])
    x = torch.randn(77)
    values = [v for v, _ in MK.SCALAR_VALUES.values()]
    total = torch.tensor(0.0)
    for i, (_, as_float) in enumerate(MK.SCALAR_VALUES.values()):  # float32 sums, in the kernel's order
        total = torch.tensor(as_float) if i == 0 else total + torch.tensor(as_float)
    torch.testing.assert_close(kernel(x, *values), x + total)


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "float16", "bfloat16", "uint64"])
def test_one_scalar_through_the_union_fix_with_executing_standin(run, dtype):
    value, as_float = MK.SCALAR_VALUES[dtype]
    kernel = run(MK.scaled(dtype), out_idx=[1])
    x = torch.randn(100)
    torch.testing.assert_close(kernel(x, value), x * 2 + as_float + 100)


def test_two_device_kernels_in_order_with_executing_standin(run):
    kernel = run(MK.two_kernels(), out_idx=[1, 2])
    a = torch.randn(333)
    b, c = kernel(a, 0.5)
    torch.testing.assert_close(b, a * 0.5)
    torch.testing.assert_close(c, a * 0.5 + 1)


def test_tile_operator_matmuls_with_executing_standin(run):
    a, b = torch.randn(96, 72).half(), torch.randn(72, 80).half()
    c = torch.full((96, 80), float("nan"))
    run(KS.matmul(96, 80, 72, 32, 32, 16, "float16", "float32", style="gpu"))(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-3)
    for ta, tb in ((True, False), (False, True), (True, True)):
        A = torch.randn(37, 70) if ta else torch.randn(70, 37)
        B = torch.randn(45, 37) if tb else torch.randn(37, 45)
        C = torch.full((70, 45), float("nan"))
        dtype = "float16" if ta and tb else "float32"
        A, B = (A.half(), B.half()) if dtype == "float16" else (A, B)
        run(KS.matmul(70, 45, 37, 32, 16, 16, dtype, "float32", ta, tb, style="gpu"))(A, B, C)
        want = (A.T if ta else A).float() @ (B.T if tb else B).float()
        torch.testing.assert_close(C, want, rtol=1e-3, atol=1e-3)


def test_tile_operator_copies_fill_and_regions_with_executing_standin(run):
    a = torch.randn(50, 37)
    p, o = torch.full((64, 48), float("nan")), torch.full((50, 37), float("nan"))
    run(KS.copy_edges(50, 37, 16, 16, "gpu"))(a, p, o)
    want = torch.zeros(64, 48)
    want[:50, :37] = a
    torch.testing.assert_close(p, want)
    torch.testing.assert_close(o, 2 * a)
    x = torch.randn(33, 48)
    y = torch.zeros(33, 48, dtype=torch.float16)
    run(KS.copy_dynamic(16, 16, "gpu"))(x, y)  # dynamic rows
    torch.testing.assert_close(y, x.half())
    x3 = torch.randn(3, 40, 8)
    o3, col = torch.zeros(3, 40, 8), torch.zeros(3, 40, 1)
    run(KS.copy_corners(3, 40, 8, "gpu"))(x3, o3, col)
    torch.testing.assert_close(o3, x3)
    torch.testing.assert_close(col, x3[:, :, 3:4])
    f = torch.zeros(6, 5)
    run(KS.fill_kernel(6, 5, "gpu"))(f)
    want = torch.full((6, 5), 3.5)
    want[0:2] = 0
    torch.testing.assert_close(f, want)
    a, b, c = torch.randn(12, 16), torch.randn(16, 10), torch.full((12, 10), 7.0)
    run(KS.gemm_regions(12, 10, 16, "gpu"))(a, b, c)
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op", KS.REDUCERS)
def test_tile_operator_reductions_with_executing_standin(run, op):
    s = torch.randn(12, 20)
    r0, r1, r2 = torch.zeros(20), torch.zeros(12), torch.zeros(12)
    run(KS.reduce_both(12, 20, op, "gpu"))(s, r0, r1, r2)
    ref = {"sum": lambda d: s.sum(d), "max": lambda d: s.amax(d), "min": lambda d: s.amin(d),
           "abssum": lambda d: s.abs().sum(d), "absmax": lambda d: s.abs().amax(d)}[op]
    torch.testing.assert_close(r0, ref(0), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(r1, ref(1), rtol=1e-5, atol=1e-5)


def test_tile_operator_softmax_with_executing_standin(run):
    x = torch.randn(37, 64) * 3
    y = torch.zeros(37, 64)
    run(KS.softmax(37, 64, 8, "gpu"))(x, y)
    torch.testing.assert_close(y, torch.softmax(x, 1), rtol=1e-5, atol=1e-5)


def test_the_union_fix_is_what_makes_the_source_compile_with_executing_standin(runtime):
    """Without the members the pipeline adds, the same source fails to compile (as on a Mac)."""
    from tilelang_core.lowering import lower

    source = lower(MK.scaled("float16"), target="metal").device_source
    assert " half v_half;\n" in source
    with pytest.raises(AssertionError, match="has no member named .v_half."):
        emulate(source.replace(" half v_half;\n", ""), runtime.build_dir)
