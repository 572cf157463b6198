"""TVM's math functions on the CPU targets, against torch (lowering/cpu_math.py).

TVM 0.27 has no C rule for ``fabs`` (``T.abs`` of a float), ``isinf``, ``isfinite``, ``exp2``,
``exp10``, ``fmod``, ``popcount``, ``clz``, no LLVM rule for ``fmod``, and lowers almost no math
of 16-bit floats for ``c`` (some for ``llvm``): such kernels failed in code generation. Each
kernel here applies every function to one tensor, is compiled with each CPU backend and target,
run, and compared with torch. The kernels are written to a file and imported, so that TVMScript
parses them from source like any user's kernel.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import tilelang

sys.path.insert(0, str(Path(__file__).resolve().parent))
from math_kernels import FLOAT_OPS, INT_OPS, N, check_float_ops, kernel_module  # noqa: E402

CPU = [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("backend,target", CPU)
def test_float_math_matches_torch(tmp_path, backend, target, dtype):
    module = kernel_module(tmp_path, f"float_ops_{dtype}", [e for e, _ in FLOAT_OPS])
    kernel = tilelang.compile(module.make(len(FLOAT_OPS), dtype), target=target, execution_backend=backend)
    check_float_ops(kernel, FLOAT_OPS, dtype, f"{backend}/{target}")


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint32"])
@pytest.mark.parametrize("backend,target", CPU)
def test_popcount_and_clz_match_python(tmp_path, backend, target, dtype):
    module = kernel_module(tmp_path, f"int_ops_{dtype}", [e for e, _ in INT_OPS])
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
    exprs = ["T.isinf(x)", "T.isfinite(x)", "T.isnan(x)", "T.abs(x)"]
    module = kernel_module(tmp_path, f"classifiers_{dtype}", exprs)
    kernel = tilelang.compile(module.make(len(exprs), dtype), target=target, execution_backend=backend)
    torch_dtype = getattr(torch, dtype)
    x = torch.tensor([math.inf, -math.inf, math.nan, -0.0, -2.5, 6.0e4, 1e-7, 0.0] * (N // 8), dtype=torch_dtype)
    y_out = torch.zeros((len(exprs), N), dtype=torch_dtype)
    kernel(x, y_out)
    for row, ref in enumerate((torch.isinf, torch.isfinite, torch.isnan)):
        assert y_out[row].tolist() == ref(x).to(torch_dtype).tolist(), (exprs[row], x.tolist())
    torch.testing.assert_close(y_out[3], x.abs(), equal_nan=True)
