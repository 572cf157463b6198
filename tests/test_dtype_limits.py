"""``T.max_value`` / ``T.min_value`` / ``T.infinity`` of the low-precision floats
(language/dtype_limits.py, docs/tile-operators.md "Math").

TVM 0.27 gave bfloat16 float32's largest value, an infinity once stored, so the clamp idiom
``T.min(x, T.max_value(dt))`` let ``inf`` through without an error, and it refused
``T.infinity("bfloat16")``, the usual start of a running maximum.
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang
import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import CYTHON_C, TVMFFI_LLVM, path_id  # noqa: E402
from nvrtc_toolchain import nvrtc_available  # noqa: E402


def limits_kernel(dtype: str):
    @T.prim_func
    def limits(X: T.Tensor((4,), dtype), B: T.Tensor((6,), dtype)):
        with T.Kernel(1) as _:
            B[0] = T.max_value(dtype)
            B[1] = T.min_value(dtype)
            B[2] = T.min(X[0], T.max_value(dtype))  # clamps +inf to the largest finite value
            B[3] = T.max(X[1], T.min_value(dtype))
            B[4] = T.infinity(dtype)
            B[5] = T.max(X[1], -T.infinity(dtype))  # a running maximum's start: -inf stays -inf

    return limits


@pytest.mark.parametrize("path", [CYTHON_C, TVMFFI_LLVM], ids=path_id)
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_limits_are_the_largest_finite_values_and_infinity(path, dtype):
    backend, target = path
    kernel = tilelang.compile(limits_kernel(dtype), out_idx=[1], target=target, execution_backend=backend)
    torch_dtype = getattr(torch, dtype)
    inf = float("inf")
    x = torch.tensor([inf, -inf, 0, 0], dtype=torch_dtype)
    big = torch.finfo(torch_dtype).max
    expected = torch.tensor([big, -big, big, -big, inf, -inf], dtype=torch_dtype)
    assert kernel(x).tolist() == expected.tolist()


def test_float8_limits_are_torchs():
    for dtype in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e8m0fnu"):
        info = torch.finfo(getattr(torch, dtype))
        assert T.max_value(dtype).value == info.max, dtype
    assert T.min_value("float8_e4m3fn").value == -448.0
    # TVM 0.27 takes the fnuz formats for unsigned: their negative lowest value cannot be a constant
    with pytest.raises(ValueError, match=r"T.min_value\('float8_e4m3fnuz'\) is -240.0, which TVM 0.27 cannot hold"):
        T.min_value("float8_e4m3fnuz")


def test_a_dtype_without_infinity_is_refused_at_the_line():
    with pytest.raises(Exception, match=r"float8_e4m3fn has no infinity; its largest finite value is 448.0") as info:
        @T.prim_func
        def start(B: T.Tensor((1,), "float8_e4m3fn")):
            with T.Kernel(1) as _:
                B[0] = -T.infinity("float8_e4m3fn")
    assert "test_dtype_limits.py" in str(info.value)
    with pytest.raises(ValueError, match="int32 has no infinity; its largest finite value is 2147483647"):
        T.infinity("int32")


@pytest.mark.skipif(not nvrtc_available(), reason="needs the nvrtc backend")
@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e5m2"])
def test_the_cuda_source_compiles_with_nvrtc(dtype):
    @T.prim_func
    def limits(X: T.Tensor((4,), dtype), B: T.Tensor((3,), dtype)):
        with T.Kernel(1, threads=32) as _:
            B[0] = T.min(X[0], T.max_value(dtype))
            B[1] = T.max(X[1], -T.infinity(dtype))
            B[2] = T.infinity(dtype)

    source = tilelang.compile(limits, target="cuda", execution_backend="nvrtc").get_kernel_source()
    assert "inff" not in source  # a float8 infinity printed as a float constant names no identifier


def test_every_spelling_of_a_dtype_gets_its_limits():
    """The alias ``"bf16"`` (TVM accepts it) fell through to TVM's float32 limit, inf once stored;
    torch dtypes were refused ("unknown dtype 'torch.float32'") and ``"float"`` had "no infinity"."""
    big = torch.finfo(torch.bfloat16).max
    for spelling in ("bfloat16", "bf16", T.bfloat16, torch.bfloat16):
        assert T.max_value(spelling).value == big and T.min_value(spelling).value == -big, spelling
        assert T.infinity(spelling).value == float("inf"), spelling
    assert T.max_value(torch.float32).value == torch.finfo(torch.float32).max
    assert T.infinity("float").value == float("inf")
    assert T.max_value("bool").value is True or T.max_value("bool").value == 1
    with pytest.raises(ValueError, match="bool has no infinity"):
        T.infinity("bool")


def test_a_vector_dtype_gets_each_lanes_limit():
    limit = T.max_value("float16x2")
    assert limit.lanes == 2 and limit.value.value == 65504.0
    assert T.infinity("bfloat16x4").value.value == float("inf")


@pytest.mark.parametrize("path", [CYTHON_C, TVMFFI_LLVM], ids=path_id)
def test_the_bf16_alias_clamps_to_the_largest_value(path):
    @T.prim_func
    def clamp(X: T.Tensor((2,), "bf16"), Y: T.Tensor((2,), "bf16")):
        with T.Kernel(1) as _:
            for i in T.serial(2):
                Y[i] = T.min(X[i], T.max_value("bf16"))

    backend, target = path
    kernel = tilelang.compile(clamp, out_idx=[1], target=target, execution_backend=backend)
    x = torch.tensor([1.0, float("inf")], dtype=torch.bfloat16)
    assert kernel(x).tolist() == [1.0, torch.finfo(torch.bfloat16).max]


@pytest.mark.parametrize("dtype,largest,infinity_bits", [
    ("float8_e4m3", 240.0, 0x78),  # IEEE-like: an infinity, largest 240 (TVM's limit: 448, e4m3fn's)
    ("float8_e3m4", 15.5, 0x70),  # TVM's: 31.0
    ("float6_e2m3fn", 7.5, None),
    ("float4_e2m1fn", 6.0, None),
])
def test_formats_torch_lacks_get_ml_dtypes_limits(dtype, largest, infinity_bits):
    """TVM 0.27's limits of the float formats torch has no dtype for were wrong (found by a hunt);
    these are ml_dtypes' (a dependency of apache-tvm), which defines them."""
    assert T.max_value(dtype).value == largest and T.min_value(dtype).value == -largest
    if infinity_bits is None:
        with pytest.raises(ValueError, match=f"{dtype} has no infinity"):
            T.infinity(dtype)
    else:
        assert int(T.infinity(dtype).args[0].value) == infinity_bits  # a reinterpret of the bits
