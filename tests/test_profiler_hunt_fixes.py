"""Fixes from a bug hunt on the profiler: verdicts that passed vacuously or wrapped around,
integer inputs that were all zeros, and raw torch errors for a device torch cannot use.

CPU kernels are real (target ``c``, the cython backend); this machine has no GPU.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tilelang_core.lowering")

import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402
from tilelang.profiler import ProfilerError, TensorSupplyType, do_bench, make_tensor  # noqa: E402
from tilelang_core.devices import DeviceError  # noqa: E402
from tilelang_core.profiler.compare import assert_tensors_close  # noqa: E402


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)


@tilelang.jit(target="c", execution_backend="cython")
def add_in_place(n, delta=1):
    """A += B + delta, written in place (no out_idx)."""

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1) as _:
            for i in T.Parallel(n):
                A[i] = A[i] + B[i] + T.float32(delta)

    return main


@tilelang.jit(target="c", execution_backend="cython")
def reads_only(n):
    """Writes nothing at all (no out_idx)."""

    @T.prim_func
    def main(A: T.Tensor((n,), "float32")):
        with T.Kernel(1) as _:
            for i in T.Parallel(n):
                T.evaluate(A[i])

    return main


# -- 1. in-place kernels are checked on what they write ------------------------------------------


def test_an_in_place_kernel_is_compared_on_the_tensors_it_writes():
    def reference(a, b):
        a += b + 1

    kernel = add_in_place(16, delta=100)
    assert [p.written for p in kernel.artifact.params] == [True, False]
    with pytest.raises(AssertionError, match=r"A \(written in place\): 16 of 16 elements .* largest difference 99"):
        kernel.get_profiler().assert_allclose(reference)
    add_in_place(16, delta=1).get_profiler().assert_allclose(reference)  # the right kernel passes
    # a reference that neither returns nor writes anything says nothing: an error, never a pass
    with pytest.raises(ProfilerError, match="writes A in place, but the reference returned nothing and left its "
                                            "copies of A unchanged"):
        add_in_place(16, delta=1).get_profiler().assert_allclose(lambda a, b: None)


def test_in_place_check_gives_the_reference_its_own_copy_and_manual_checks_see_the_written_tensors():
    a, b = torch.zeros(8), torch.ones(8)
    seen = []

    def reference(x, y):
        assert x is not a and torch.equal(x, torch.zeros(8))  # a copy, with the values the kernel starts from
        x += y + 1

    add_in_place(8).get_profiler().manual_assert_close(
        reference, input_tensors=[a, b], manual_check_prog=lambda lib, ref: seen.append((lib, ref))
    )
    (lib,), (ref,) = seen[0]
    assert torch.equal(lib, torch.full((8,), 2.0)) and torch.equal(ref, lib) and lib is a


def test_autotuning_an_in_place_kernel_checks_what_the_reference_writes():
    """The autotuner calls ref_prog once and hands the profiler its return value (None here):
    every candidate, the wrong ones included, used to pass; now each candidate is compared with
    what the reference wrote into its own copy of the inputs."""
    from tilelang.autotuner import autotune

    def reference(a, b):
        a += b + 1

    tuned = autotune(configs=[{"delta": 1}, {"delta": 2}, {"delta": 3}], ref_prog=reference, warmup=1, rep=1)(
        add_in_place)
    kernel = tuned(16)
    assert kernel.config == {"delta": 1}
    result = next(iter(tuned.results.values()))
    assert [t.status for t in result.trials] == ["ok", "wrong_result", "wrong_result"], result.trials


def test_nothing_to_compare_is_a_profiler_error_not_a_pass():
    with pytest.raises(ProfilerError, match="nothing to compare: the kernel has no out_idx and writes no tensor.*"
                                            "compile the kernel with out_idx, or return the expected tensors"):
        reads_only(8).get_profiler().assert_allclose(lambda a: None)


# -- 2. integer comparison never wraps around ----------------------------------------------------


def test_integer_differences_past_int64_are_mismatches_with_their_true_size():
    with pytest.raises(AssertionError, match=r"1 of 2 elements .* largest difference 9223372036854775808 at \(0,\): "
                                             r"kernel 4611686018427387904, reference -4611686018427387904"):
        assert_tensors_close(torch.tensor([2**62, 5]), torch.tensor([-2**62, 5]), atol=0, rtol=0, max_mismatched_ratio=0)
    lo, hi = torch.tensor([-2**63]), torch.tensor([2**63 - 1])
    with pytest.raises(AssertionError, match="largest difference 18446744073709551615"):
        assert_tensors_close(hi, lo, atol=2**62, rtol=0, max_mismatched_ratio=0)
    with pytest.raises(AssertionError, match="largest difference 18446744073709551615"):
        assert_tensors_close(lo, hi, atol=0, rtol=0.4, max_mismatched_ratio=0)
    assert_tensors_close(lo, lo.clone(), atol=0, rtol=0, max_mismatched_ratio=0)


def test_unsigned_integers_report_their_exact_difference():
    a, e = torch.tensor([255, 3], dtype=torch.uint8), torch.tensor([0, 3], dtype=torch.uint8)
    with pytest.raises(AssertionError, match=r"largest difference 255 at \(0,\): kernel 255, reference 0"):
        assert_tensors_close(a, e, atol=0, rtol=0, max_mismatched_ratio=0)
    assert_tensors_close(a, e, atol=255, rtol=0, max_mismatched_ratio=0)


def test_uint64_values_past_2_53_that_differ_by_one_are_mismatches():
    """Before, uint64 was compared as float64, where 2**64 - 1 and 2**64 - 2 are one number."""
    u = torch.tensor([2**64 - 1, 2**53 + 1, 7], dtype=torch.uint64)
    with pytest.raises(AssertionError, match=r"largest difference 1 at \(0,\): kernel 18446744073709551615, "
                                             r"reference 18446744073709551614"):
        assert_tensors_close(u, torch.tensor([2**64 - 2, 2**53 + 1, 7], dtype=torch.uint64), atol=0, rtol=0,
                             max_mismatched_ratio=0)
    with pytest.raises(AssertionError, match=r"largest difference 1 at \(0,\)"):  # against int64 (torch's results)
        assert_tensors_close(u[1:], torch.tensor([2**53, 7]), atol=0, rtol=0, max_mismatched_ratio=0)
    with pytest.raises(AssertionError, match=r"largest difference 8 at \(1,\): kernel 7, reference -1"):
        assert_tensors_close(u[1:], torch.tensor([2**53 + 1, -1]), atol=0, rtol=0, max_mismatched_ratio=0)
    assert_tensors_close(u, u.clone(), atol=0, rtol=0, max_mismatched_ratio=0)
    assert_tensors_close(u[2:], torch.tensor([5]), atol=2, rtol=0, max_mismatched_ratio=0)


# -- 3. integer inputs for Uniform / Normal / Randn ------------------------------------------------


@pytest.mark.parametrize("dtype", ["int16", "int32", "int64", "uint8", "uint16", "uint32"])
@pytest.mark.parametrize("supply", [TensorSupplyType.Uniform, TensorSupplyType.Normal, TensorSupplyType.Randn])
def test_integer_inputs_are_small_varied_values_in_the_dtypes_range(supply, dtype):
    t = make_tensor((64, 64), dtype, supply, "cpu")
    assert str(t.dtype) == f"torch.{dtype}"
    values = set(t.to(torch.int64).unique().tolist())
    assert len(values) >= 3, values  # not all zeros (Uniform truncated [-1, 1) to 0 before)
    assert max(abs(v) for v in values) <= 8, values  # small: no wrap-around to 252..255 for uint8
    if dtype.startswith("uint"):
        assert min(values) >= 0
    else:
        assert min(values) < 0
    if supply is TensorSupplyType.Uniform:
        assert values <= set(range(0, 9) if dtype.startswith("uint") else range(-4, 5))


def test_int8_keeps_upstreams_ones_and_randn_rounds():
    assert bool((make_tensor((32,), "int8", TensorSupplyType.Uniform, "cpu") == 1).all())
    assert bool((make_tensor((32,), "int8", TensorSupplyType.Normal, "cpu") == 1).all())
    t = make_tensor((64, 64), "int8", TensorSupplyType.Randn, "cpu")
    assert float((t == 0).float().mean()) < 0.5  # rounded (about 38% zeros), not truncated (about 68%)


@pytest.mark.parametrize("supply", [TensorSupplyType.Uniform, TensorSupplyType.Normal, TensorSupplyType.Randn])
def test_bool_inputs_are_half_false(supply):
    t = make_tensor((64, 64), "bool", supply, "cpu")
    assert t.dtype == torch.bool
    assert 0.4 < float(t.float().mean()) < 0.6  # a float draw cast to bool was True but for exact zeros


# -- 4. a device torch cannot use is a DeviceError, before anything runs ---------------------------

needs_cpu_only_torch = pytest.mark.skipif(
    torch.cuda.is_available() or torch.backends.mps.is_available(), reason="checks a CPU-only torch"
)


@needs_cpu_only_torch
@pytest.mark.parametrize("device", ["cuda", 0, "cuda:1", "metal", "mps", "rocm", torch.device("cuda")])
def test_do_bench_on_a_device_torch_cannot_use_is_a_device_error(device):
    calls = []
    with pytest.raises(DeviceError, match=r"do_bench was given device=.*which torch cannot use here .*"
                                          r"available: cpu; pass device='cpu'"):
        do_bench(lambda: calls.append(1), device=device, n_repeat=1)
    assert calls == []  # nothing ran


@needs_cpu_only_torch
def test_profiler_do_bench_with_a_device_index_is_a_device_error():
    profiler = add_in_place(8).get_profiler()
    with pytest.raises(DeviceError, match="device=0 .cuda family."):
        profiler.do_bench(device=0, n_repeat=1)


def test_a_negative_device_index_is_a_benchmark_error():
    from tilelang.profiler import BenchmarkError

    with pytest.raises(BenchmarkError, match=r"device index must be >= 0 \(a CUDA device\), got -1"):
        do_bench(lambda: None, device=-1, n_repeat=1)
