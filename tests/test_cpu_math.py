"""TVM's math functions on the CPU targets, against torch (lowering/cpu_math.py).

TVM 0.27 has no C rule for ``fabs`` (``T.abs`` of a float), ``isinf``, ``isfinite``, ``exp2``,
``exp10``, ``fmod``, ``popcount``, ``clz``, no LLVM rule for ``fmod``, and lowers almost no math
of 16-bit floats for ``c`` (some for ``llvm``): such kernels failed in code generation. Each
kernel here applies every function to one tensor, is compiled with each CPU backend and target,
run, and compared with torch. The kernels are written to a file and imported, so that TVMScript
parses them from source like any user's kernel.
"""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
import torch

import tilelang

N = 32
CPU = [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")]

#: (kernel expression of x = X[i] and y = X[(i + 1) % N], torch reference); x, y in [0.1, 0.9)
FLOAT_OPS = [
    ("T.pow(x, y)", lambda x, y: torch.pow(x, y)),  # bfloat16: TVM 0.27 refuses it (language/bfloat16_math.py)
    ("T.exp(x)", lambda x, y: torch.exp(x)),
    ("T.exp2(x)", lambda x, y: torch.exp2(x)),
    ("T.exp10(x)", lambda x, y: torch.pow(10.0, x)),
    ("T.log(x)", lambda x, y: torch.log(x)),
    ("T.log2(x)", lambda x, y: torch.log2(x)),
    ("T.log10(x)", lambda x, y: torch.log10(x)),
    ("T.log1p(x)", lambda x, y: torch.log1p(x)),
    ("T.sqrt(x)", lambda x, y: torch.sqrt(x)),
    ("T.rsqrt(x)", lambda x, y: torch.rsqrt(x)),
    ("T.sin(x)", lambda x, y: torch.sin(x)),
    ("T.cos(x)", lambda x, y: torch.cos(x)),
    ("T.tan(x)", lambda x, y: torch.tan(x)),
    ("T.sinh(x)", lambda x, y: torch.sinh(x)),
    ("T.cosh(x)", lambda x, y: torch.cosh(x)),
    ("T.tanh(x)", lambda x, y: torch.tanh(x)),
    ("T.asin(x)", lambda x, y: torch.asin(x)),
    ("T.acos(x)", lambda x, y: torch.acos(x)),
    ("T.atan(x)", lambda x, y: torch.atan(x)),
    ("T.asinh(x)", lambda x, y: torch.asinh(x)),
    ("T.acosh(x + T.Cast(x.dtype, 1))", lambda x, y: torch.acosh(x + 1)),
    ("T.atanh(x)", lambda x, y: torch.atanh(x)),
    ("T.erf(x)", lambda x, y: torch.erf(x)),
    ("T.sigmoid(x)", lambda x, y: torch.sigmoid(x)),
    ("T.floor(x * T.Cast(x.dtype, 8))", lambda x, y: torch.floor(x * 8)),
    ("T.ceil(x * T.Cast(x.dtype, 8))", lambda x, y: torch.ceil(x * 8)),
    ("T.trunc(x * T.Cast(x.dtype, -8))", lambda x, y: torch.trunc(x * -8)),
    ("T.nearbyint(x * T.Cast(x.dtype, 8))", lambda x, y: torch.round(x * 8)),
    ("T.abs(x - y)", lambda x, y: torch.abs(x - y)),
    ("T.fabs(y - x)", lambda x, y: torch.abs(y - x)),
    ("T.fmod(x * T.Cast(x.dtype, 8), y)", lambda x, y: torch.fmod(x * 8, y)),
    ("T.atan2(x, y - T.Cast(x.dtype, 0.5))", lambda x, y: torch.atan2(x, y - 0.5)),
    ("T.copysign(x, y - T.Cast(x.dtype, 0.5))", lambda x, y: torch.copysign(x, y - 0.5)),
    ("T.hypot(x, y)", lambda x, y: torch.hypot(x, y)),
    ("T.ldexp(x, T.Cast('int32', y * T.Cast(x.dtype, 4)))", lambda x, y: torch.ldexp(x, (y * 4).to(torch.int32))),
]

INT_OPS = [
    ("T.popcount(x)", lambda v, bits: bin(v & ((1 << bits) - 1)).count("1")),
    ("T.clz(x)", lambda v, bits: bits - (v & ((1 << bits) - 1)).bit_length()),
]

KERNEL = '''
import tilelang.language as T

def make(n_ops, dtype):
    @T.prim_func
    def ops(X: T.Tensor(({n},), dtype), Y: T.Tensor((n_ops, {n}), dtype)):
        with T.Kernel(1, threads={n}):
            for i in T.Parallel({n}):
                x = X[i]
                y = X[(i + 1) % {n}]
{stores}
    return ops
'''


def _module(tmp_path, name: str, exprs: list[str]):
    stores = "\n".join(f"                Y[{j}, i] = T.Cast(dtype, {e})" for j, e in enumerate(exprs))
    path = tmp_path / f"{name}.py"
    path.write_text(KERNEL.format(n=N, stores=stores))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("backend,target", CPU)
def test_float_math_matches_torch(tmp_path, backend, target, dtype):
    if dtype == "bfloat16" and backend == "tvm_ffi" and target == "c":
        pytest.skip("tvm_ffi's c modules take no bfloat16 tensors (docs/compatibility.md)")
    ops = FLOAT_OPS
    module = _module(tmp_path, f"float_ops_{dtype}", [e for e, _ in ops])
    kernel = tilelang.compile(module.make(len(ops), dtype), target=target, execution_backend=backend)
    torch_dtype = getattr(torch, dtype)
    x = (torch.rand(N, generator=torch.Generator().manual_seed(3)) * 0.8 + 0.1).to(torch_dtype)
    y_out = torch.zeros((len(ops), N), dtype=torch_dtype)
    kernel(x, y_out)
    xr = x.to(torch.float64)
    yr = torch.roll(xr, -1)
    tolerance = {"float32": 2e-6, "float64": 1e-12, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]
    for row, (expr, ref) in enumerate(ops):
        want = ref(xr, yr).to(torch_dtype).to(torch.float64)
        got = y_out[row].to(torch.float64)
        torch.testing.assert_close(got, want, rtol=tolerance, atol=tolerance, equal_nan=True,
                                   msg=lambda m, expr=expr: f"{expr} ({dtype}, {backend}/{target}): {m}")


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint32"])
@pytest.mark.parametrize("backend,target", CPU)
def test_popcount_and_clz_match_python(tmp_path, backend, target, dtype):
    module = _module(tmp_path, f"int_ops_{dtype}", [e for e, _ in INT_OPS])
    kernel = tilelang.compile(module.make(len(INT_OPS), dtype), target=target, execution_backend=backend)
    info = np.iinfo(dtype)
    bits = info.bits
    values = np.random.default_rng(5).integers(info.min, info.max, size=N, dtype=dtype, endpoint=True)
    values[:4] = [0, 1, info.max, info.min]
    y_out = torch.zeros((len(INT_OPS), N), dtype=getattr(torch, dtype))
    kernel(torch.from_numpy(values), y_out)
    for row, (expr, ref) in enumerate(INT_OPS):
        want = [ref(int(v), bits) for v in values]
        assert y_out[row].tolist() == want, (expr, dtype, backend, target)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("backend,target", CPU)
def test_the_classifiers_and_abs_on_special_values(tmp_path, backend, target, dtype):
    if dtype == "bfloat16" and backend == "tvm_ffi" and target == "c":
        pytest.skip("tvm_ffi's c modules take no bfloat16 tensors (docs/compatibility.md)")
    exprs = ["T.isinf(x)", "T.isfinite(x)", "T.isnan(x)", "T.abs(x)"]
    module = _module(tmp_path, f"classifiers_{dtype}", exprs)
    kernel = tilelang.compile(module.make(len(exprs), dtype), target=target, execution_backend=backend)
    torch_dtype = getattr(torch, dtype)
    x = torch.tensor([math.inf, -math.inf, math.nan, -0.0, -2.5, 6.0e4, 1e-7, 0.0] * (N // 8), dtype=torch_dtype)
    y_out = torch.zeros((len(exprs), N), dtype=torch_dtype)
    kernel(x, y_out)
    for row, ref in enumerate((torch.isinf, torch.isfinite, torch.isnan)):
        assert y_out[row].tolist() == ref(x).to(torch_dtype).tolist(), (exprs[row], x.tolist())
    torch.testing.assert_close(y_out[3], x.abs(), equal_nan=True)
