"""Hand-written kernel artifacts following the `c` / `cuda` device_source contract.

They stand in for the lowering pipeline's output where a test needs an exact kernel (a shape
expression, a scalar, several outputs, a compile error); tests using real lowering live in
test_lowering.py.
"""

from __future__ import annotations

from typing import Any, Optional

from tilelang_core import schema
from tilelang_core.artifact import BuildOptions, KernelArtifact


def tensor(name: str, shape: list, dtype: str = "float32", device: str = "cpu", strides=None,
           written: Optional[bool] = None) -> dict[str, Any]:
    """A tensor parameter; ``written`` as the pipeline would set it (omitted: unknown, i.e. written)."""
    out = {"kind": "tensor", "name": name, "dtype": dtype, "shape": shape, "device": device, "strides": strides}
    if written is not None:
        out["written"] = written
    return out


def read_only(name: str, shape: list, dtype: str = "float32", device: str = "cpu", strides=None) -> dict[str, Any]:
    """A tensor parameter the kernel only reads."""
    return tensor(name, shape, dtype, device, strides, written=False)


def scalar(name: str, dtype: str) -> dict[str, Any]:
    return {"kind": "scalar", "name": name, "dtype": dtype}


def ptr(name: str, index: int, dtype: str = "float32") -> dict[str, Any]:
    return {"name": name, "kind": "pointer", "dtype": dtype, "param_index": index}


def val(name: str, index: Optional[int] = None, symbol: Optional[str] = None, dtype: str = "int32") -> dict[str, Any]:
    return {"name": name, "kind": "scalar", "dtype": dtype, "param_index": index, "symbol": symbol}


def artifact(name: str, params: list, args: list, source: str, symbols: list = (), return_type=None,
             pass_configs: Optional[dict] = None) -> KernelArtifact:
    return schema.validate_python(KernelArtifact, dict(
        name=name, target="c", target_kind="c", params=params, symbols=list(symbols),
        device_kernels=[{"name": name, "args": args, "return_type": return_type}],
        device_source=source, device_language="c", pass_configs=pass_configs or {},
    ))


def build(art: KernelArtifact, **options: Any) -> Any:
    from tilelang_backend_cython import plugin

    return plugin.tilelang_backend_build(art, BuildOptions(**options))


def vadd_static(n: int = 16, dtype: str = "float32", ctype: str = "float") -> KernelArtifact:
    """C = A + B on n elements, one T.Kernel block run under `omp parallel for`."""
    src = f"""
#include <stdint.h>
int32_t vadd({ctype} *restrict A, {ctype} *restrict B, {ctype} *restrict C) {{
#ifdef _OPENMP
#pragma omp parallel for
#endif
  for (int32_t bx = 0; bx < 1; ++bx)
    for (int32_t i = 0; i < {n}; ++i) C[i] = A[i] + B[i];
  return 0;
}}
"""
    return artifact("vadd", [read_only("A", [n], dtype), read_only("B", [n], dtype), tensor("C", [n], dtype)],
                    [ptr("A", 0, dtype), ptr("B", 1, dtype), ptr("C", 2, dtype)], src)


def vadd_dynamic() -> KernelArtifact:
    """C = A + B on n elements (n dynamic), blocks of 64 in parallel."""
    src = """
#include <stdint.h>
int32_t vadd_dyn(float *restrict A, float *restrict B, float *restrict C, int32_t n) {
  int32_t nblocks = (n + 63) / 64;
#ifdef _OPENMP
#pragma omp parallel for
#endif
  for (int32_t bx = 0; bx < nblocks; ++bx)
    for (int32_t i = bx * 64; i < n && i < bx * 64 + 64; ++i) C[i] = A[i] + B[i];
  return 0;
}
"""
    return artifact("vadd_dyn", [read_only("A", ["n"]), read_only("B", ["n"]), tensor("C", ["n"])],
                    [ptr("A", 0), ptr("B", 1), ptr("C", 2), val("n", symbol="n")], src,
                    symbols=[{"name": "n", "param_index": 0, "dim": 0}])


def pad2() -> KernelArtifact:
    """Out (n + 2) = [0, A..., 0]: an output whose shape is an expression."""
    src = """
#include <stdint.h>
void pad2(const float *A, float *Out, int64_t n) {
  Out[0] = 0.0f; Out[n + 1] = 0.0f;
  for (int64_t i = 0; i < n; ++i) Out[i + 1] = A[i];
}
"""
    return artifact("pad2", [read_only("A", ["n"]), tensor("Out", ["n + 2"])],
                    [ptr("A", 0), ptr("Out", 1), val("n", symbol="n", dtype="int64")], src,
                    symbols=[{"name": "n", "param_index": 0, "dim": 0}], return_type="void")


def axpy() -> KernelArtifact:
    """Y = alpha * X + Y with a float scalar, an int scalar count and a bool flag."""
    src = """
#include <stdint.h>
#include <stdbool.h>
int32_t axpy(float *X, float *Y, float alpha, int32_t count, bool negate) {
  for (int32_t i = 0; i < count; ++i) Y[i] = (negate ? -alpha : alpha) * X[i] + Y[i];
  return 0;
}
"""
    return artifact("axpy", [read_only("X", [8]), tensor("Y", [8]), scalar("alpha", "float32"), scalar("count", "int32"),
                             scalar("negate", "bool")],
                    [ptr("X", 0), ptr("Y", 1), val("alpha", 2, dtype="float32"), val("count", 3), val("negate", 4, dtype="bool")],
                    src)


def matmul_blocked() -> KernelArtifact:
    """C[M, N] = A[M, K] @ B[K, N], 16x16 output blocks in parallel (M, N, K dynamic)."""
    src = """
#include <stdint.h>
int32_t mm(float *restrict A, float *restrict B, float *restrict C, int32_t M, int32_t N, int32_t K) {
  int32_t bm = (M + 15) / 16, bn = (N + 15) / 16;
#ifdef _OPENMP
#pragma omp parallel for
#endif
  for (int32_t b = 0; b < bm * bn; ++b) {
    int32_t i0 = (b / bn) * 16, j0 = (b % bn) * 16;
    for (int32_t i = i0; i < i0 + 16 && i < M; ++i)
      for (int32_t j = j0; j < j0 + 16 && j < N; ++j) {
        float acc = 0.0f;
        for (int32_t k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
        C[i * N + j] = acc;
      }
  }
  return 0;
}
"""
    return artifact("mm", [read_only("A", ["M", "K"]), read_only("B", ["K", "N"]), tensor("C", ["M", "N"])],
                    [ptr("A", 0), ptr("B", 1), ptr("C", 2), val("M", symbol="M"), val("N", symbol="N"),
                     val("K", symbol="K")], src,
                    symbols=[{"name": "M", "param_index": 0, "dim": 0}, {"name": "K", "param_index": 0, "dim": 1},
                             {"name": "N", "param_index": 1, "dim": 1}])


def two_outputs() -> KernelArtifact:
    """S = A + B and D = A - B: two out_idx outputs."""
    src = """
#include <stdint.h>
int32_t sumdiff(float *A, float *B, float *S, float *D, int32_t n) {
  for (int32_t i = 0; i < n; ++i) { S[i] = A[i] + B[i]; D[i] = A[i] - B[i]; }
  return 0;
}
"""
    return artifact("sumdiff", [read_only("A", ["n"]), read_only("B", ["n"]), tensor("S", ["n"]), tensor("D", ["n"])],
                    [ptr("A", 0), ptr("B", 1), ptr("S", 2), ptr("D", 3), val("n", symbol="n")], src,
                    symbols=[{"name": "n", "param_index": 0, "dim": 0}])


def scaled_by_scalar_symbol() -> KernelArtifact:
    """A has shape [n] with n given by the scalar parameter n (a symbol bound from a scalar)."""
    src = """
#include <stdint.h>
int32_t fill(float *A, int32_t n, float v) { for (int32_t i = 0; i < n; ++i) A[i] = v; return 0; }
"""
    return artifact("fill", [tensor("A", ["n"]), scalar("n", "int32"), scalar("v", "float32")],
                    [ptr("A", 0), val("n", 1), val("v", 2, dtype="float32")], src,
                    symbols=[{"name": "n", "param_index": 1, "dim": None}])


def failing_kernel() -> KernelArtifact:
    """Returns a nonzero status: the call must raise RuntimeError."""
    src = "#include <stdint.h>\nint32_t bad(float *A) { (void)A; return 7; }\n"
    return artifact("bad", [tensor("A", [4])], [ptr("A", 0)], src)


CUDA_VADD = """
extern "C" __global__ void vadd_kernel(float *__restrict__ A, float *__restrict__ B, float *__restrict__ C, int n) {
  extern __shared__ float scratch[];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { scratch[threadIdx.x] = A[i] + B[i]; C[i] = scratch[threadIdx.x]; }
}
"""


def cuda_vadd(arch: str = "sm_80") -> KernelArtifact:
    """CUDA C = A + B (n dynamic), 128 threads per block, dynamic shared memory 128 floats."""
    return schema.validate_python(KernelArtifact, dict(
        name="vadd_cuda", target=f"cuda -arch={arch}", target_kind="cuda",
        params=[read_only("A", ["n"], device="cuda"), read_only("B", ["n"], device="cuda"), tensor("C", ["n"], device="cuda")],
        symbols=[{"name": "n", "param_index": 0, "dim": 0}],
        device_kernels=[{
            "name": "vadd_kernel",
            "args": [ptr("A", 0), ptr("B", 1), ptr("C", 2), val("n", symbol="n")],
            "launch": {"grid": ["(n + 127) // 128", 1, 1], "block": [128, 1, 1], "dynamic_shared_memory": 512},
        }],
        device_source=CUDA_VADD, device_language="cuda",
    ))


def colmajor() -> KernelArtifact:
    """X of shape (n, 4) with required strides (1, n) (column-major)."""
    src = "#include <stdint.h>\nint32_t colmajor(float *X, int32_t n) { (void)X; (void)n; return 0; }\n"
    return artifact("colmajor", [tensor("X", ["n", 4], strides=[1, "n"])], [ptr("X", 0), val("n", symbol="n")],
                    src, symbols=[{"name": "n", "param_index": 0, "dim": 0}])


def complex_copy() -> KernelArtifact:
    """B = A for 4 complex64 values."""
    src = """
#include <stdint.h>
#include <complex.h>
int32_t ccopy(float complex *A, float complex *B) { for (int i = 0; i < 4; ++i) B[i] = A[i]; return 0; }
"""
    return artifact("ccopy", [read_only("A", [4], "complex64"), tensor("B", [4], "complex64")],
                    [ptr("A", 0, "complex64"), ptr("B", 1, "complex64")], src)
