"""The lowering pipeline (real TVM lowering for c, llvm, cuda and metal; no device needed)."""

from __future__ import annotations

import os
import sys

import pytest

import tilelang_core.language as T
from tilelang_core.artifact import KernelArtifact, ScalarParam, TensorParam
from tilelang_core.errors import KernelDefinitionError, LoweringError, PassConfigError, TargetError
from tilelang_core.lowering import PASS_CONFIGS, lower, resolve_target

HERE = os.path.abspath(__file__)
sys.path.insert(0, os.path.dirname(HERE))
from source_lines import line_containing  # noqa: E402


def _line_of(marker: str) -> int:
    return line_containing(HERE, marker)


# --- kernels ---------------------------------------------------------------------------------


def vector_add(N, block=128, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):  # va-def
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    C[bx * block + i] = A[bx * block + i] + B[bx * block + i]

    return main


def matmul(M, N, K, bm=16, bn=16):
    @T.prim_func
    def mm(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=(bn, bm)) as (bx, by):
            acc = T.alloc_fragment((bm, bn), "float32")
            for i, j in T.Parallel(bm, bn):
                acc[i, j] = 0.0
            for k in range(K):
                for i, j in T.Parallel(bm, bn):
                    acc[i, j] += A[by * bm + i, k] * B[k, bx * bn + j]
            for i, j in T.Parallel(bm, bn):
                if by * bm + i < M and bx * bn + j < N:
                    C[by * bm + i, bx * bn + j] = acc[i, j]

    return mm


def scaled(N):
    @T.prim_func
    def scale(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), alpha: T.float32):
        with T.Kernel(T.ceildiv(N, 64), threads=64) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < N:
                    Y[bx * 64 + i] = X[bx * 64 + i] * alpha

    return scale


def nested_kernels():
    @T.prim_func
    def bad(A: T.Tensor((64,), "float32")):
        with T.Kernel(2, threads=32) as bx:
            with T.Kernel(2, threads=32) as by:  # nested-kernel-line
                for i in T.Parallel(16):
                    A[bx * 32 + by * 16 + i] = 0.0

    return bad


def too_many_threads():
    @T.prim_func
    def wide(A: T.Tensor((4096,), "float32")):
        with T.Kernel(2, threads=2048) as bx:  # wide-kernel-line
            for i in T.Parallel(2048):
                A[bx * 2048 + i] = 1.0

    return wide


def symbol_only_in_expression():
    n = T.dynamic("n")

    @T.prim_func
    def shifted(A: T.Tensor((n + 1,), "float32")):
        with T.Kernel(1, threads=1) as bx:
            A[bx] = 0.0

    return shifted


def output_shape_expression():
    n = T.dynamic("n")

    @T.prim_func
    def pad(A: T.Tensor((n,), "float32"), B: T.Tensor((n + 1,), "float32")):
        with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:
            for i in T.Parallel(32):
                if bx * 32 + i < n:
                    B[bx * 32 + i] = A[bx * 32 + i]

    return pad


# --- CPU (c, llvm) ---------------------------------------------------------------------------


def test_c_vector_add_dynamic_artifact():
    art = lower(vector_add(T.dynamic("n")), target="c")
    assert art.name == "main" and art.target == "c" and art.target_kind == "c" and art.host_target is None
    assert art.params == [TensorParam(name=x, dtype="float32", shape=["n"], device="cpu", written=x == "C",
                                      index_limit=2**31 - 2**20) for x in "ABC"]
    assert [(s.name, s.param_index, s.dim) for s in art.symbols] == [("n", 0, 0)]
    (kernel,) = art.device_kernels
    assert kernel.name == "main_kernel" and kernel.launch is None and kernel.return_type == "int32"
    assert [(a.kind, a.dtype, a.param_index, a.symbol) for a in kernel.args] == [
        ("pointer", "float32", 0, None),
        ("pointer", "float32", 1, None),
        ("pointer", "float32", 2, None),
        ("scalar", "int32", None, "n"),
    ]
    src = art.device_source
    assert art.device_language == "c"
    assert "int32_t main_kernel(float* A_ptr, float* B_ptr, float* C_ptr, int32_t n)" in src
    assert "#pragma omp parallel for" in src and "#pragma omp simd" in src and "#ifdef _OPENMP" in src
    assert '#include "tvm' not in src and "TVMFFI" not in src
    assert art.host_source is None and art.tvm_modules is None
    assert art.source_location == f"{HERE}:{_line_of('# va-def')}"


def test_c_vector_add_static_has_no_symbols():
    art = lower(vector_add(1000), target="c")
    assert art.symbols == [] and art.params[0].shape == [1000]
    assert [a.kind for a in art.device_kernels[0].args] == ["pointer"] * 3
    assert "i < 128" in art.device_source.replace("(", "").replace(")", "")


def test_scalar_param_is_passed_in_order():
    art = lower(scaled(T.dynamic("n")), target="c")
    assert art.params[2] == ScalarParam(name="alpha", dtype="float32")
    args = art.device_kernels[0].args
    assert [(a.kind, a.param_index, a.symbol) for a in args] == [
        ("pointer", 0, None), ("pointer", 1, None), ("scalar", 2, None), ("scalar", None, "n")]
    assert "float* X_ptr, float* Y_ptr, float alpha, int32_t n)" in art.device_source


def test_matmul_2d_grid_and_fragment_in_c():
    art = lower(matmul(T.dynamic("m"), 24, 8), target="c")
    src = art.device_source
    assert art.params[0].shape == ["m", 8] and art.params[2].shape == ["m", 24]
    assert "float acc_ptr[256] TL_STACK_ALIGN;" in src  # the fragment is a per-block stack array (64-byte aligned)
    # one loop over the blocks of both grid axes, outlined into a block-range function; a dynamic
    # grid's flat block index is int64 (the product of the axes may exceed int32)
    assert "for (int64_t block_idx = tl_block_begin; block_idx < tl_block_end; ++block_idx)" in src
    assert art.device_kernels[0].block_launcher == art.device_kernels[0].name + "_block_launcher"


def strided_rows(M, N):
    @T.prim_func
    def rows(A: T.Tensor((M, N), "float32", strides=(2 * N, 1)), B: T.Tensor((M, N), "float32")):
        with T.Kernel(M, threads=32) as bx:
            for j in T.Parallel(N):
                B[bx, j] = A[bx, j]

    return rows


def test_required_strides_and_scalar_round_trip():
    art = lower(strided_rows(T.dynamic("m"), 16), target="c")
    assert art.params[0].strides == [32, 1] and art.params[1].strides is None
    assert "A_ptr[((bx * 32) + j)]" in art.device_source
    for a in (art, lower(scaled(T.dynamic("n")), target="cuda")):
        assert KernelArtifact.from_json(a.to_json()) == a


def test_output_shape_expression_is_written_with_symbols():
    art = lower(output_shape_expression(), target="c")
    assert art.params[1].shape == ["n + 1"]
    assert [(s.name, s.param_index, s.dim) for s in art.symbols] == [("n", 0, 0)]


def test_llvm_device_source_and_runtime_module():
    art = lower(vector_add(T.dynamic("n")), target="llvm", consumes=["device_source", "runtime_module"])
    assert art.target_kind == "llvm" and art.device_language == "c" and "main_kernel" in art.device_source
    import torch

    A, B, C = torch.randn(300), torch.randn(300), torch.empty(300)
    art.tvm_modules[art.name](A, B, C)
    assert torch.allclose(C, A + B)


def test_consumes_produces_only_what_is_asked():
    only_module = lower(vector_add(64), target="llvm", consumes=["runtime_module"])
    assert only_module.device_source is None and only_module.tvm_modules is not None
    assert only_module.device_kernels == []
    with_host = lower(vector_add(64), target="c", consumes=["host_source"])
    assert with_host.device_source is None and "TVMFFIAny" in with_host.host_source
    with pytest.raises(ValueError, match="consumes"):
        lower(vector_add(64), target="c", consumes=["binary"])


# --- GPU (cuda, metal): source generation needs no device -------------------------------------


def test_cuda_vector_add_dynamic():
    art = lower(vector_add(T.dynamic("n")), target="cuda")
    assert art.target_kind == "cuda" and art.host_target in ("llvm", "c") and art.device_language == "cuda"
    (kernel,) = art.device_kernels
    assert kernel.name == "main_kernel"
    assert kernel.launch.grid == ["((n - 1) // 128) + 1", 1, 1]  # T.ceildiv(n, 128)
    assert kernel.launch.block == [128, 1, 1] and kernel.launch.dynamic_shared_memory == 0
    assert [(a.name, a.kind, a.param_index, a.symbol) for a in kernel.args] == [
        ("A", "pointer", 0, None), ("B", "pointer", 1, None), ("C", "pointer", 2, None), ("n", "scalar", None, "n")]
    assert 'extern "C" __global__' in art.device_source and "main_kernel(" in art.device_source
    assert "blockIdx.x" in art.device_source and "threadIdx.x" in art.device_source
    assert art.params[0].device == "cuda"


def test_cuda_expression_in_the_grid_and_the_body_is_not_a_kernel_argument():
    """``n + 2`` in the grid and in the bound: common-subexpression elimination must not bind it
    to a variable that the host passes to the kernel (no KernelArg can describe it)."""
    n = T.dynamic("n")

    @T.prim_func
    def pad(A: T.Tensor((n,), "float32"), Out: T.Tensor((n + 2,), "float32")):
        with T.Kernel(T.ceildiv(n + 2, 64), threads=64) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < n + 2:
                    Out[bx * 64 + i] = T.if_then_else(bx * 64 + i >= 1 and bx * 64 + i <= n, A[bx * 64 + i - 1], T.float32(0))

    (kernel,) = lower(pad, target="cuda").device_kernels
    assert [(a.kind, a.param_index, a.symbol) for a in kernel.args] == [
        ("pointer", 0, None), ("pointer", 1, None), ("scalar", None, "n")]
    assert kernel.launch.grid == ["((n + 1) // 64) + 1", 1, 1]


def test_cuda_two_kernels_with_the_same_dynamic_grid():
    """Two ``T.Kernel`` with the grid ``ceildiv(n, 64)``: the host binds the shared size to one
    common-subexpression variable; each launch size is still described in terms of ``n``."""
    n = T.dynamic("n")

    @T.prim_func
    def twice(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 64), threads=64) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < n:
                    B[bx * 64 + i] = A[bx * 64 + i] + 1
        with T.Kernel(T.ceildiv(n, 64), threads=64) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < n:
                    B[bx * 64 + i] = B[bx * 64 + i] * 2

    kernels = lower(twice, target="cuda").device_kernels
    assert len(kernels) == 2
    for kernel in kernels:
        assert kernel.launch.grid == ["((n - 1) // 64) + 1", 1, 1] and kernel.launch.block == [64, 1, 1]


def bf16_scale(n=256):
    @T.prim_func
    def scale(A: T.Tensor((n,), "bfloat16"), s: T.bfloat16, B: T.Tensor((n,), "bfloat16")):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i] * s

    return scale


def test_a_bfloat16_scalar_in_a_cuda_runtime_module_is_refused_with_what_to_do():
    """TVM's packed host code stops with 'Check failed: dtype.code() == kDLFloat (4 vs. 2)'; the
    device source (what cython and nvrtc compile) takes the scalar."""
    with pytest.raises(LoweringError, match=r"test_lowering\.py:\d+: kernel 'scale': scalar parameter 's' is "
                       r"bfloat16, which a cuda runtime module .* pass it as float32 and cast it"):
        lower(bf16_scale(), target="cuda -arch=sm_90", consumes=["runtime_module"])
    art = lower(bf16_scale(), target="cuda -arch=sm_90", consumes=["device_source"])
    assert "nv_bfloat16 s)" in art.device_source


def test_cuda_target_string_with_arch_and_2d_launch():
    art = lower(matmul(T.dynamic("m"), 40, 8), target="cuda -arch=sm_90")
    assert art.target == "cuda -arch=sm_90"
    launch = art.device_kernels[0].launch
    assert launch.grid == [3, "((m - 1) // 16) + 1", 1] and launch.block == [16, 16, 1]
    assert "threadIdx.y" in art.device_source


def test_parallel_over_more_iterations_than_threads_is_strided_and_guarded():
    art = lower(vector_add(1000, block=256), target={"kind": "cuda", "arch": "sm_80"})
    assert art.target == "cuda -arch=sm_80"
    art2 = lower(matmul(64, 64, 8, bm=32, bn=32), target="cuda")
    # 32*32 iterations over 32*32 threads: no loop; 1000 % 256: guard against the global size
    assert "for (int i_j_flat_outer" not in art2.device_source
    src = lower(_strided(), target="cuda").device_source
    assert "i_flat_outer" in src and "< 100" in src
    dyn = lower(_strided_dynamic(), target="cuda")
    assert "i_flat_outer < ((n + 31) >> 5)" in dyn.device_source and ") < n)" in dyn.device_source
    assert dyn.device_kernels[0].launch.grid == [1, 1, 1]


def _strided_dynamic():
    n = T.dynamic("n")

    @T.prim_func
    def strided_dyn(A: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(n):
                A[i] = A[i] * 2.0

    return strided_dyn


def _strided():
    @T.prim_func
    def strided(A: T.Tensor((100,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(100):
                A[i] = A[i] + 1.0

    return strided


def shared_reverse(N):
    @T.prim_func
    def reverse(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            s = T.alloc_buffer((128,), "float32", scope="shared.dyn")
            for i in T.Parallel(128):
                s[i] = A[bx * 128 + i]
            for i in T.Parallel(128):
                B[bx * 128 + i] = s[127 - i]

    return reverse


def test_dynamic_shared_memory_and_barrier():
    art = lower(shared_reverse(T.dynamic("n")), target="cuda")
    assert art.device_kernels[0].launch.dynamic_shared_memory == 512
    assert "extern __shared__" in art.device_source and "__syncthreads()" in art.device_source
    cpu = lower(shared_reverse(T.dynamic("n")), target="c")
    assert "float s_ptr[128] TL_STACK_ALIGN;" in cpu.device_source  # CPU: a stack array per block


def test_metal_source():
    art = lower(vector_add(T.dynamic("n")), target="metal")
    assert art.target_kind == "metal" and art.device_language == "metal"
    assert "kernel void main_kernel" in art.device_source
    assert art.device_kernels[0].launch.grid == ["((n - 1) // 128) + 1", 1, 1]
    assert art.params[0].device == "metal"


def test_tvm_target_object_and_context():
    import tvm

    art = lower(vector_add(64), target=tvm.target.Target("llvm"), consumes=["device_source"])
    assert art.target_kind == "llvm"
    with tvm.target.Target("metal"):
        assert lower(vector_add(64)).target_kind == "metal"


# --- JSON round trip --------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["c", "llvm", "cuda", "metal"])
def test_json_round_trip(target):
    art = lower(matmul(T.dynamic("m"), 24, 8), target=target)
    again = KernelArtifact.from_json(art.to_json())
    assert again == art and again.to_json() == art.to_json()


# --- target resolution ------------------------------------------------------------------------


def test_auto_resolves_to_c_here():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible: auto resolves to cuda")
    assert resolve_target("auto").kind.name == "c"
    assert lower(vector_add(64)).target_kind == "c"


def test_bad_target():
    with pytest.raises(TargetError, match="cannot understand target"):
        lower(vector_add(64), target="no_such_kind")
    with pytest.raises(TargetError):
        lower(vector_add(64), target=42)


# --- pass configs -----------------------------------------------------------------------------


def test_pass_configs_visibly_change_the_c_source():
    base = lower(vector_add(T.dynamic("n")), target="c").device_source
    assert "cse_v" in base and "return -1;" in base
    no_vec = lower(vector_add(T.dynamic("n")), target="c", pass_configs={"tl.disable_vectorize": True})
    assert "omp simd" not in no_vec.device_source and "omp parallel for" in no_vec.device_source
    assert no_vec.pass_configs == {"tl.disable_vectorize": True}
    no_par = lower(vector_add(T.dynamic("n")), target="c", pass_configs={"tl.disable_parallel_blocks": True})
    assert "omp parallel for" not in no_par.device_source
    no_cse = lower(vector_add(T.dynamic("n")), target="c", pass_configs={"tl.disable_cse": True})
    assert "cse_v" not in no_cse.device_source
    no_assert = lower(vector_add(T.dynamic("n")), target="c", pass_configs={"tl.disable_bounds_assert": True})
    assert "return -1;" not in no_assert.device_source


def test_pass_configs_change_gpu_and_host_code():
    base = lower(vector_add(T.dynamic("n")), target="cuda").device_source
    no_cse = lower(vector_add(T.dynamic("n")), target="cuda", pass_configs={"tl.disable_cse": True}).device_source
    assert "cse_v" in base and "cse_v" not in no_cse
    host = lower(vector_add(64), target="c", consumes=["host_source"]).host_source
    quiet = lower(vector_add(64), target="c", consumes=["host_source"],
                  pass_configs={"tl.disable_bounds_assert": True}).host_source
    assert "Mismatched" in host and "Mismatched" not in quiet


def test_unknown_pass_config_lists_the_known_ones():
    with pytest.raises(PassConfigError) as info:
        lower(vector_add(64), target="c", pass_configs={"tl.disable_everything": True})
    for key in PASS_CONFIGS:
        assert key in str(info.value)
    assert {"tl.disable_vectorize", "tl.disable_cse", "tl.disable_bounds_assert",
            "tl.disable_parallel_blocks"} <= set(PASS_CONFIGS)
    with pytest.raises(PassConfigError, match="must be a bool"):
        lower(vector_add(64), target="c", pass_configs={"tl.disable_cse": "yes"})


# --- errors point at the kernel's source ------------------------------------------------------


def test_nested_kernel_error_points_at_its_line():
    for target in ("c", "cuda"):
        with pytest.raises(LoweringError) as info:
            lower(nested_kernels(), target=target)
        assert f"{HERE}:{_line_of('# nested-kernel-line')}" in str(info.value)
        assert "nested" in str(info.value)


def test_threads_over_the_target_limit():
    with pytest.raises(LoweringError) as info:
        lower(too_many_threads(), target="cuda")
    assert f"{HERE}:{_line_of('# wide-kernel-line')}" in str(info.value) and "1024" in str(info.value)
    with pytest.raises(LoweringError, match="256"):
        lower(vector_add(1024, block=512), target="metal")
    assert lower(too_many_threads(), target="c").device_kernels  # CPU targets have no thread limit


def test_symbol_that_nothing_binds():
    with pytest.raises(LoweringError, match="'n'.*only used inside expressions"):
        lower(symbol_only_in_expression(), target="c")


def test_not_a_prim_func():
    with pytest.raises(KernelDefinitionError, match="prim_func"):
        lower(lambda x: x, target="c")


def test_importing_lowering_does_not_import_tvm():
    import subprocess
    import sys

    code = ("import sys, tilelang_core.lowering as L; assert 'tvm' not in sys.modules, 'tvm imported'; "
            "L.validate_pass_configs({'tl.disable_cse': True}); assert 'tvm' not in sys.modules")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
