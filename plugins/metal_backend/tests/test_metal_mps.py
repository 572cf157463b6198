"""On a Mac with torch's MPS device: results against torch for the examples and tile operators,
dynamic shapes, scalars of every dtype, two device kernels, save/load in a fresh process.

``mps``-marked and skipped elsewhere (this project's machines have no Mac): run them with
``pytest -m mps plugins/metal_backend/tests`` on macOS 14+ (bfloat16 needs it) with torch>=2.6.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import tilelang

import metal_kernels as MK

HAVE_MPS = sys.platform == "darwin" and torch.backends.mps.is_available()
pytestmark = [
    pytest.mark.mps,
    pytest.mark.skipif(not HAVE_MPS, reason="needs macOS with torch's MPS device (torch.backends.mps.is_available())"),
]

KS = MK.tileops_module()


def mps(t):
    return t.to("mps")


def compiled(func, out_idx=None):
    return tilelang.compile(func, out_idx=out_idx, execution_backend="metal", target="metal")


def test_metal_is_available_and_auto_picks_it():
    from tilelang_core.backends import get_registry, select_backend

    assert get_registry().probe(get_registry().get("metal"), "metal").available
    assert select_backend("auto", "metal").name == "metal"


@pytest.mark.parametrize("example", MK.examples(), ids=lambda e: e[0])
def test_examples_on_mps(example):
    _, func, out_idx, ex = example
    kernel = compiled(func, out_idx)
    inputs = [mps(x) for x in ex.inputs()]
    out = kernel(*inputs)
    assert out.device.type == "mps"
    torch.testing.assert_close(out.cpu(), ex.reference(*[x.cpu() for x in inputs]), rtol=ex.rtol, atol=ex.atol)


@pytest.mark.parametrize("n", [0, 1, 129, 4099])
def test_dynamic_shapes_on_mps(n):
    kernel = compiled(MK.scaled("int32"), [1])
    x = torch.randn(n)
    torch.testing.assert_close(kernel(mps(x), -4).cpu(), x * 2 - 4 + n)


@pytest.mark.parametrize("dtype", list(MK.SCALAR_VALUES))
def test_each_scalar_dtype_on_mps(dtype):
    value, as_float = MK.SCALAR_VALUES[dtype]
    x = torch.randn(100)
    torch.testing.assert_close(compiled(MK.scaled(dtype), [1])(mps(x), value).cpu(), x * 2 + as_float + 100)


def test_two_device_kernels_on_mps():
    a = torch.randn(333)
    b, c = compiled(MK.two_kernels(), [1, 2])(mps(a), 0.5)
    torch.testing.assert_close(c.cpu(), a * 0.5 + 1)


def test_tile_operators_on_mps():
    a, b = torch.randn(96, 72).half(), torch.randn(72, 80).half()
    c = mps(torch.zeros(96, 80))
    compiled(KS.matmul(96, 80, 72, 32, 32, 16, "float16", "float32", style="gpu"))(mps(a), mps(b), c)
    torch.testing.assert_close(c.cpu(), a.float() @ b.float(), rtol=1e-3, atol=1e-3)
    x = torch.randn(37, 64) * 3
    y = mps(torch.zeros(37, 64))
    compiled(KS.softmax(37, 64, 8, "gpu"))(mps(x), y)
    torch.testing.assert_close(y.cpu(), torch.softmax(x, 1), rtol=1e-5, atol=1e-5)
    for op in KS.REDUCERS:
        s = torch.randn(12, 20)
        r0, r1, r2 = (mps(torch.zeros(k)) for k in (20, 12, 12))
        compiled(KS.reduce_both(12, 20, op, "gpu"))(mps(s), r0, r1, r2)
        ref = {"sum": s.sum(0), "max": s.amax(0), "min": s.amin(0), "abssum": s.abs().sum(0), "absmax": s.abs().amax(0)}
        torch.testing.assert_close(r0.cpu(), ref[op], rtol=1e-5, atol=1e-5)
    x = torch.randn(33, 48)
    y = mps(torch.zeros(33, 48, dtype=torch.float16))
    compiled(KS.copy_dynamic(16, 16, "gpu"))(mps(x), y)
    torch.testing.assert_close(y.cpu(), x.half())


def test_offset_view_on_mps():
    kernel = compiled(MK.scaled("float32"), [1])
    base = torch.randn(101)
    torch.testing.assert_close(kernel(mps(base)[1:], 0.0).cpu(), base[1:] * 2 + 100)


def test_save_load_in_a_fresh_process_on_mps(tmp_path):
    kernel = compiled(MK.scaled("float16"), [1])
    path = kernel.export(tmp_path / "k")
    code = (
        "import sys, torch, tilelang\n"
        f"k = tilelang.load({str(path)!r})\n"
        "x = torch.randn(50)\n"
        "torch.testing.assert_close(k(x.to('mps'), 1.5).cpu(), x * 2 + 1.5 + 50)\n"
        "print('tvm' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_overlap_of_mps_tensors_is_refused_only_within_one_storage():
    """``data_ptr()`` of an mps tensor is its buffer's handle: separate tensors must never be
    refused as overlapping, views of one tensor must be."""
    kernel = compiled(MK.two_kernels(), None)  # writes B and C
    tensors = [mps(torch.randn(4096)) for _ in range(64)]  # many small buffers, handles close together
    for a, b, c in zip(tensors, tensors[1:], tensors[2:]):
        kernel(a, b, c, 1.0)
    buf = mps(torch.zeros(200))
    with pytest.raises(ValueError, match=r"arguments 'A' \(#0\) and 'B' \(#1\) overlap in memory"):
        kernel(buf[:100], buf[50:150], mps(torch.zeros(100)), 1.0)
    kernel(buf[:100], buf[100:], mps(torch.zeros(100)), 1.0)  # adjacent views do not overlap

