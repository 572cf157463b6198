"""Findings of a hunt over the profiler and ``JITKernel`` API (each test failed before its fix)."""

from __future__ import annotations

import io

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.profiler.profiler import ProfilerError


def _double(n=64):
    @T.prim_func
    def double(A: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(n):
                C[i] = A[i] * 2

    return double


@pytest.fixture(scope="module")
def kernel():
    return tilelang.compile(_double(), out_idx=-1, target="c", execution_backend="cython")


@pytest.mark.parametrize("reference", [lambda a: (None,), lambda a: [None]], ids=["tuple", "list"])
def test_a_reference_returning_none_for_every_output_is_not_a_pass(kernel, reference):
    """Every output skipped compared nothing, and the check (and the autotuner's) passed."""
    with pytest.raises(ProfilerError, match="nothing to compare: reference_program returned None for every output"):
        kernel.get_profiler().assert_allclose(reference)
    kernel.get_profiler().assert_allclose(lambda a: a * 2)  # a real reference still passes


def test_tilelangs_kernel_attributes(kernel):
    assert kernel.kernel_source == kernel.get_kernel_source() and "double" in kernel.kernel_source
    assert kernel.host_source == kernel.get_host_source()
    assert kernel.config is None and kernel.latency is None and kernel.ref_latency is None  # not tuned
    out = kernel.run_once()
    assert isinstance(out, torch.Tensor) and out.shape == (64,)
    text = io.StringIO()
    kernel.print_source_code(file=text)
    assert text.getvalue().strip() == kernel.get_kernel_source().strip()
    with pytest.raises(AttributeError, match="'adapter'.*execution backends are plugins here"):
        kernel.adapter  # noqa: B018
    with pytest.raises(AttributeError, match="'export_library'.*kernel.export\\(path\\)"):
        kernel.export_library("x.so")
    assert not hasattr(kernel, "prim_func") and not hasattr(kernel, "no_such_attribute")


def test_upstreams_keywords_of_lower_and_par_compile():
    """lower(func_or_mod=..., runtime_only=...) and par_compile(ignore_error=True) were TypeErrors."""
    func = _double()
    artifact = tilelang.lower(func_or_mod=func, target="c", runtime_only=False)
    assert artifact.name == tilelang.lower(func, target="c").name
    with pytest.raises(TypeError, match="give func or func_or_mod"):
        tilelang.lower(func, func_or_mod=func, target="c")

    @T.prim_func
    def broken(A: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            s = T.alloc_fragment([1], "float32")
            for i in T.Parallel(4):
                s[i] = A[i]  # past the tile: a LoweringError

    kernels = tilelang.par_compile([func, broken], out_idx=None, target="c", progress=False, ignore_error=True)
    assert kernels[0] is not None and kernels[1] is None


def _tuned_double(**options):
    """A fresh ``@tilelang.autotune``/``@tilelang.jit`` function over ``block`` (C = A * 2)."""

    @tilelang.autotune(configs=[{"block": 16}, {"block": 32}], warmup=1, rep=2, **options)
    @tilelang.jit(out_idx=-1, target="c")
    def tuned(N, block=16):
        @T.prim_func
        def k(A: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
            with T.Kernel(T.ceildiv(N, block)) as bx:
                for i in T.Parallel(block):
                    C[bx * block + i] = A[bx * block + i] * 2

        return k

    return tuned


def test_set_autotune_inputs_of_the_wrong_count_names_itself():
    from tilelang.autotuner import set_autotune_inputs

    tuned = _tuned_double(ref_prog=lambda a: a * 2)

    with set_autotune_inputs(torch.randn(64), torch.randn(64)):
        with pytest.raises(Exception, match=r"set_autotune_inputs gave 2 input\(s\), but kernel 'k' takes 1 \(A\)"):
            tuned(64)


def test_a_call_giving_a_tuned_parameter_says_it_is_not_tuned(caplog):
    tuned = _tuned_double()

    with caplog.at_level("WARNING", logger="tilelang.autotuner"):
        kernel = tuned(64, block=32)
        tuned(64, block=32)  # said once
    said = [r.getMessage() for r in caplog.records if "not tuned" in r.getMessage()]
    assert len(said) == 1 and "gives tuned parameter(s) block" in said[0]
    assert kernel.config is None


def test_profiler_arguments_that_compared_nothing_or_disagreed(kernel):
    profiler = kernel.get_profiler()
    for repeat in (0, -1):
        with pytest.raises(ProfilerError, match="repeat must be an int >= 1"):
            profiler.assert_consistent(repeat=repeat)
    from tilelang_core.profiler.bench import BenchmarkError

    with pytest.raises(BenchmarkError, match="dynamic_sizes=.* and dynamic_symbolic_constraints=.* disagree"):
        profiler.do_bench(warmup=1, rep=1, dynamic_sizes={"m": 8}, dynamic_symbolic_constraints={"m": 16})
