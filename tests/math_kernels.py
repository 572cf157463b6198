"""Math kernels shared by tests/test_cpu_math.py and tests/test_gpu_math.py (an importable module).

``FLOAT_OPS`` / ``INT_OPS``: kernel expressions of ``x = X[i]`` and ``y = X[(i + 1) % N]`` with their
references; :func:`kernel_module` writes a kernel applying a list of them to a file and imports it,
so that TVMScript parses it from source like any user's kernel.
"""

from __future__ import annotations

import importlib.util

import torch

N = 32

#: (kernel expression of x = X[i] and y = X[(i + 1) % N], torch reference); x, y in [0.1, 0.9)
FLOAT_OPS = [
    ("T.pow(x, y)", lambda x, y: torch.pow(x, y)),  # TVM 0.27 refused it for bfloat16 (language/bfloat16_math.py)
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
    ("T.fma(x, y, T.Cast(x.dtype, -0.25))", lambda x, y: x * y - 0.25),  # no rule on c and CUDA before (cpu_math.py, gpu_math.py)
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


def kernel_module(tmp_path, name: str, exprs: list[str]):
    """A module file under ``tmp_path`` whose ``make(n_ops, dtype)`` stores each of ``exprs`` in a row of Y."""
    stores = "\n".join(f"                Y[{j}, i] = T.Cast(dtype, {e})" for j, e in enumerate(exprs))
    path = tmp_path / f"{name}.py"
    path.write_text(KERNEL.format(n=N, stores=stores))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_float_ops(kernel, ops, dtype: str, label: str, device: str = "cpu") -> None:
    """Run ``kernel`` (made by :func:`kernel_module` from ``ops``) on ``dtype`` inputs in [0.1, 0.9)
    and compare each row with its torch reference (computed in float64, rounded to ``dtype``)."""
    torch_dtype = getattr(torch, dtype)
    x = (torch.rand(N, generator=torch.Generator().manual_seed(3)) * 0.8 + 0.1).to(torch_dtype)
    y_out = torch.zeros((len(ops), N), dtype=torch_dtype, device=device)
    kernel(x.to(device), y_out)
    xr = x.to(torch.float64)
    yr = torch.roll(xr, -1)
    tolerance = {"float32": 2e-6, "float64": 1e-12, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]
    for row, (expr, ref) in enumerate(ops):
        want = ref(xr, yr).to(torch_dtype).to(torch.float64)
        got = y_out[row].cpu().to(torch.float64)
        torch.testing.assert_close(got, want, rtol=tolerance, atol=tolerance, equal_nan=True,
                                   msg=lambda m, expr=expr: f"{expr} ({dtype}, {label}): {m}")
