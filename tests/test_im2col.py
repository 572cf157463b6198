"""``T.im2col`` (and its old name ``T.c2d_im2col``): TileLang's convolution-as-GEMM operator.

A convolution kernel written for TileLang fills a shared tile with part of the im2col matrix of
an NHWC image and multiplies it with a tile of the filter viewed as ``(K * K * C, F)``. These
tests run such kernels against ``torch.conv2d`` on the three CPU paths (static and dynamic batch,
stride, dilation and padding, ragged tiles at every edge), compile the CUDA source with nvcc and
run it on the emulated GPU, and check the operand errors.
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang.language as T
from tilelang_core.errors import LoweringError
from tilelang_core.lowering import lower

_HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
from private_modules import load_private  # noqa: E402
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402

CU = load_private("test_tileops_cuda")  # nvcc lookup, one-translation-unit merge, the GPU emulator
SIGNATURES = load_private("test_compat_signatures")  # refused(): define a kernel from source, expect the error


def conv2d(N, C, H, W, F, K, S, D, P, bm, bn, bk, dtype="float32", accum="float32", old_name=False):
    """TileLang's convolution example: im2col tiles of the image times tiles of the filter."""
    batch = T.dynamic("batch") if N is None else N
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1
    to_columns = T.c2d_im2col if old_name else T.im2col

    @T.prim_func
    def kernel(data: T.Tensor((batch, H, W, C), dtype), weight: T.Tensor((K, K, C, F), dtype),
               out: T.Tensor((batch, OH, OW, F), dtype)):
        with T.Kernel(T.ceildiv(F, bn), T.ceildiv(batch * OH * OW, bm), threads=64) as (bx, by):
            data_s = T.alloc_shared((bm, bk), dtype)
            weight_s = T.alloc_shared((bk, bn), dtype)
            acc = T.alloc_fragment((bm, bn), accum)
            weight_flat = T.Tensor((K * K * C, F), dtype, weight.data)
            out_flat = T.Tensor((batch * OH * OW, F), dtype, out.data)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K * K * C, bk), num_stages=2):
                to_columns(data, data_s, by, k, K, S, D, P)
                T.copy(weight_flat[k * bk, bx * bn], weight_s)
                T.gemm(data_s, weight_s, acc)
            T.copy(acc, out_flat[by * bm, bx * bn])

    return kernel


def reference(image, weight, S, D, P):
    out = torch.conv2d(image.permute(0, 3, 1, 2).float(), weight.permute(3, 2, 0, 1).float(),
                       stride=S, padding=P, dilation=D)
    return out.permute(0, 2, 3, 1)


#: (N, C, H, W, F, K, S, D, P, bm, bn, bk): ragged tiles at every edge, stride, dilation, padding.
SHAPES = {
    "3x3-pad1": (2, 8, 9, 7, 12, 3, 1, 1, 1, 16, 8, 16),
    "stride2-dilation2": (1, 5, 10, 11, 6, 3, 2, 2, 2, 8, 8, 8),
    "1x1": (3, 4, 6, 6, 4, 1, 1, 1, 0, 32, 4, 4),
    "5x5-no-pad": (1, 3, 8, 9, 5, 5, 1, 1, 0, 8, 8, 16),
}


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_convolution_matches_torch(path, shape, dynamic):
    N, C, H, W, F, K, S, D, P, bm, bn, bk = SHAPES[shape]
    kernel = compile_on(conv2d(None if dynamic else N, C, H, W, F, K, S, D, P, bm, bn, bk), path)
    image, weight = torch.randn(N, H, W, C), torch.randn(K, K, C, F)
    want = reference(image, weight, S, D, P)
    out = torch.full(tuple(want.shape), float("nan"))
    kernel(image, weight, out)
    torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_half_precision_image_and_the_old_name(path):
    """TileLang's example: float16 tiles, a float32 accumulator; ``T.c2d_im2col`` is the same operator."""
    N, C, H, W, F, K, S, D, P = 2, 16, 8, 8, 16, 3, 1, 1, 1
    for old_name in (False, True):
        kernel = compile_on(conv2d(N, C, H, W, F, K, S, D, P, 32, 16, 32, dtype="float16", old_name=old_name), path)
        image, weight = torch.randn(N, H, W, C).half(), torch.randn(K, K, C, F).half()
        out = torch.empty(N, H, W, F, dtype=torch.float16)
        kernel(image, weight, out)
        torch.testing.assert_close(out.float(), reference(image, weight, S, D, P), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize(
    "line, message",
    [
        ("T.im2col(A, cols, 0, 0, 0, 1, 1, 0)", r"kernel must be an int >= 1 known when the kernel is defined, got 0"),
        ("T.im2col(A, cols, 0, 0, 3, n, 1, 0)", r"stride must be an int >= 1 .*got n"),
        ("T.im2col(A, cols, 0, 0, 3, 1, 1, -1)", r"pad must be an int >= 0 .*got -1"),
        ("T.im2col(A, cols, 0, 0, 3, 1, True, 1)", r"dilation must be an int >= 1 .*got True"),
        ("T.im2col(cols, cols, 0, 0, 3, 1, 1, 1)", r"image must be a whole 4-D NHWC buffer \(N, H, W, C\), got cols \(8, 16\)"),
        ("T.im2col(A, A, 0, 0, 3, 1, 1, 1)", r"column tile must be 2-D .*got A \(2, 4, 4, 8\)"),
        ("T.im2col(A, cols, 0, 0, 3, 1, 1, 1, eviction_policy='keep')", r"eviction_policy must be one of"),
    ],
)
def test_operand_errors_name_the_operator_and_the_line(line, message, tmp_path):
    text = SIGNATURES.refused(tmp_path, "cols = T.alloc_shared((8, 16), 'float32')\n" + line, message,
                              params='A: T.Tensor((2, 4, 4, 8), "float32"), n: T.int32', error=LoweringError)
    assert "T.im2col" in text


@pytest.fixture(scope="module")
def cuda_artifact():
    return lower(conv2d(None, 8, 9, 7, 12, 3, 1, 1, 1, 16, 8, 16), target="cuda")


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_cuda_source_compiles_with_nvcc(cuda_artifact, tmp_path):
    CU.compile_translation_units({"conv": cuda_artifact}, tmp_path)


@CU.emulator
def test_emulated_gpu_convolution(cuda_artifact, tmp_path):
    """Many threads of a block fill the im2col tile, then multiply it (emulated GPU)."""
    run = CU._emulated(cuda_artifact, tmp_path)
    image, weight = torch.randn(2, 9, 7, 8), torch.randn(3, 3, 8, 12)
    out = torch.full((2, 9, 7, 12), float("nan"))
    run(image, weight, out)
    torch.testing.assert_close(out, reference(image, weight, 1, 1, 1), rtol=1e-4, atol=1e-4)
