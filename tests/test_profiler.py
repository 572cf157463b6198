"""The profiler: ``kernel.get_profiler()``, input supply, timers, checks against a reference.

CPU kernels are real (lowered by TVM, compiled by the C compiler, run by the installed backend);
the GPU timers are checked for their selection only (this machine has no GPU).
"""

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tilelang_core.lowering")

import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402
from tilelang.profiler import (  # noqa: E402
    BenchmarkError,
    BenchmarkTimeout,
    Profiler,
    ProfilerError,
    TensorSupplyError,
    TensorSupplyType,
    do_bench,
    make_tensor,
    resolve_timer,
)
from tilelang_core.devices import TORCH_DEVICE_TYPES, DeviceError, family_of_torch_device, torch_device_type  # noqa: E402
from tilelang_core.errors import TileLangError  # noqa: E402
from tilelang_core.testkit import on_path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import autotune_kernels as K  # noqa: E402


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)


@pytest.fixture(scope="module")
def mm():
    """A real 64x64x64 blocked matmul kernel (out_idx=-1) on the default CPU backend."""
    return tilelang.compile(K.blocked_matmul(64, 64, 64, 16, 16, 16), out_idx=-1, target="c", pass_configs=K.SERIAL)


def test_profiler_benchmarks_a_cpu_kernel(mm):
    profiler = mm.get_profiler()
    assert isinstance(profiler, Profiler) and profiler.family == "cpu" and profiler.result_idx == [2]
    ms = profiler.do_bench(warmup=1, rep=5)
    assert isinstance(ms, float) and ms > 0
    lo, mid, hi = profiler.do_bench(n_warmup=1, n_repeat=9, quantiles=[0.0, 0.5, 1.0])
    assert 0 < lo <= mid <= hi
    assert profiler.do_bench(n_repeat=5, return_mode="min") <= profiler.do_bench(n_repeat=5, return_mode="max") * 10
    timed = profiler.do_bench(functools.partial(torch.matmul), n_repeat=3)  # a reference, on the same inputs
    assert timed > 0


def test_assert_allclose_passes_for_the_right_reference_and_catches_a_wrong_one(mm):
    profiler = mm.get_profiler()
    profiler.assert_allclose(K.matmul_reference, atol=1e-3, rtol=1e-3)
    with pytest.raises(AssertionError, match=r"C: \d+ of 4096 elements .* differ between kernel and reference"):
        profiler.assert_allclose(lambda a, b: a @ b + 0.5)
    # a reference wrong on a few elements only: tolerated by max_mismatched_ratio, caught without it
    def few_wrong(a, b):
        out = a @ b
        out[0, :3] += 1
        return out

    profiler.assert_allclose(few_wrong, max_mismatched_ratio=0.01)
    with pytest.raises(AssertionError, match="3 of 4096"):
        profiler.assert_allclose(few_wrong, max_mismatched_ratio=0.0)
    with pytest.raises(AssertionError, match="returned 1 output.*reference returned 2"):
        profiler.assert_allclose(lambda a, b: (a @ b, a))
    with pytest.raises(AssertionError, match=r"C: kernel gave a tensor of shape \(64, 64\), reference gave 3 \(int, "
                                             r"not a tensor\); the reference must return what the kernel returns"):
        profiler.assert_allclose(lambda a, b: 3)
    with pytest.raises(ValueError, match=r"max_mismatched_ratio must be a number in \[0, 1\].*got -1"):
        profiler.assert_allclose(K.matmul_reference, max_mismatched_ratio=-1)


def test_given_inputs_manual_check_consistency_and_run_once(mm):
    profiler = mm.get_profiler(TensorSupplyType.Integer)
    a, b = torch.ones(64, 64), torch.full((64, 64), 2.0)
    seen = []
    profiler.manual_assert_close(K.matmul_reference, input_tensors=[a, b], manual_check_prog=lambda lib, ref: seen.append((lib, ref)))
    (lib,), (ref,) = seen[0]
    assert torch.equal(lib, torch.full((64, 64), 128.0)) and torch.equal(ref, lib)
    profiler.assert_consistent(repeat=3)
    out = profiler.run_once()
    assert out.shape == (64, 64) and torch.equal(out, out.round())  # Integer inputs: exact integer sums
    with pytest.raises(ProfilerError, match="manual_check_prog"):
        profiler.manual_assert_close(K.matmul_reference)


def test_cpu_kernels_never_touch_cuda(mm, monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("CUDA was touched for a CPU kernel")

    monkeypatch.setattr(torch.cuda, "synchronize", forbidden)
    monkeypatch.setattr(torch.cuda, "Event", forbidden)
    monkeypatch.setattr(torch.cuda, "current_device", forbidden)
    profiler = mm.get_profiler()
    profiler.do_bench(n_repeat=3)
    profiler.do_bench(n_repeat=3, timer="wall", backend="wall")
    profiler.assert_allclose(K.matmul_reference, atol=1e-3)
    profiler.assert_consistent(repeat=1)
    do_bench(lambda: None, device="cpu", n_repeat=3)


def test_inputs_follow_the_declared_shapes_dtypes_and_device_family():
    kernel = tilelang.compile(K.blocked_matmul(8, 16, 4, 8, 8, 4, dtype="float16"), out_idx=None, target="c")
    profiler = kernel.get_profiler()
    ins = profiler._get_inputs()
    assert [tuple(t.shape) for t in ins] == [(8, 4), (4, 16), (8, 16)]  # no out_idx: the output is an input too
    assert {t.dtype for t in ins} == {torch.float16}
    assert {t.device.type for t in ins} == {torch_device_type(kernel.params[0].device)} == {"cpu"}
    assert [p.name for p in profiler._get_params()] == ["A", "B", "C"]


def test_device_family_mapping_is_the_cores_one():
    assert TORCH_DEVICE_TYPES == {"cpu": "cpu", "cuda": "cuda", "metal": "mps", "rocm": "cuda"}
    assert torch_device_type("metal") == "mps" and torch_device_type("rocm") == "cuda"
    assert family_of_torch_device(torch.device("cpu")) == "cpu" and family_of_torch_device("mps") == "metal"
    with pytest.raises(DeviceError, match="'vulkan' has no torch device"):
        torch_device_type("vulkan")
    assert issubclass(DeviceError, TileLangError)


@pytest.mark.parametrize(
    "supply, dtype, check",
    [
        (TensorSupplyType.Auto, "float32", lambda t: bool(((t >= -1) & (t < 1)).all()) and not torch.equal(t, t.round())),
        (TensorSupplyType.Auto, "int32", lambda t: set(t.unique().tolist()) <= {-2, -1, 0, 1, 2}),
        (TensorSupplyType.Integer, "float32", lambda t: torch.equal(t, t.round()) and t.abs().max() <= 2),
        (TensorSupplyType.Integer, "uint8", lambda t: set(t.unique().tolist()) <= {0, 1, 2}),
        (TensorSupplyType.Integer, "bool", lambda t: t.dtype == torch.bool),
        (TensorSupplyType.Uniform, "float16", lambda t: bool(((t >= -1) & (t <= 1)).all())),
        (TensorSupplyType.Uniform, "int8", lambda t: bool((t == 1).all())),
        (TensorSupplyType.Normal, "float32", lambda t: -1.5 < float(t.mean()) < -0.5),
        (TensorSupplyType.Randn, "float32", lambda t: -0.5 < float(t.mean()) < 0.5 and float(t.std()) > 0.5),
        (TensorSupplyType.Zero, "float32", lambda t: not t.any()),
        (TensorSupplyType.One, "int32", lambda t: bool((t == 1).all())),
    ],
)
def test_tensor_supply_types(supply, dtype, check):
    t = make_tensor((64, 64), dtype, supply, "cpu")
    assert t.shape == (64, 64) and str(t.dtype) == f"torch.{dtype}"
    assert check(t)


def test_supply_type_errors():
    with pytest.raises(TensorSupplyError, match="tensor_supply_type must be a TensorSupplyType"):
        make_tensor((2,), "float32", "Gaussian", "cpu")
    with pytest.raises(TensorSupplyError, match="dtype 'float13' has no torch equivalent"):
        make_tensor((2,), "float13", TensorSupplyType.Zero, "cpu")
    assert make_tensor((2,), "float32", "One", "cpu").tolist() == [1.0, 1.0]  # names are accepted


def test_dynamic_dimensions_need_their_sizes():
    kernel = tilelang.compile(K.blocked_matmul(T.dynamic("m"), 16, 16, 8, 8, 8), out_idx=-1, target="c")
    with pytest.raises(TensorSupplyError, match=r"dynamic dimension\(s\) m with no size: pass dynamic_sizes=\{'m': \.\.\.\}"):
        kernel.get_profiler().do_bench()
    profiler = kernel.get_profiler(dynamic_sizes={"m": 24})
    assert profiler._get_inputs()[0].shape == (24, 16)
    assert kernel.get_profiler().do_bench(n_repeat=2, dynamic_symbolic_constraints={"m": 8}) > 0
    profiler.assert_allclose(K.matmul_reference, atol=1e-3)
    with pytest.raises(TensorSupplyError, match=r"dynamic_sizes\['m'\] must be a number"):
        kernel.get_profiler(dynamic_sizes={"m": "24"})
    # a size no tensor can have: named, before torch is asked for it
    for bad in (-5, 5.5):
        with pytest.raises(TensorSupplyError, match=rf"tensor parameter 'A': dimension m has m = {bad} from the sizes "
                                                    rf"given; sizes of tensor dimensions must be ints >= 0"):
            kernel.get_profiler(dynamic_sizes={"m": bad}).do_bench(n_repeat=1)
    assert kernel.get_profiler(dynamic_sizes={"m": 8.0})._get_inputs()[0].shape == (8, 16)


def test_timer_selection_by_device_family():
    assert resolve_timer("auto", "cpu") == "wall"
    assert resolve_timer("auto", "cuda") == resolve_timer("auto", "metal") == resolve_timer("auto", "rocm") == "event"
    assert resolve_timer("cudagraph", "cuda") == "cudagraph" and resolve_timer("cupti", "cuda") == "cupti"
    with pytest.raises(BenchmarkError, match="timer 'event' cannot time cpu work.*use timer='auto' or one of: wall"):
        resolve_timer("event", "cpu")
    with pytest.raises(BenchmarkError, match="timer 'cudagraph' cannot time metal work"):
        resolve_timer("cudagraph", "metal")
    with pytest.raises(BenchmarkError, match="timer must be one of auto, wall, event, cudagraph, cupti, got 'cuda'"):
        resolve_timer("cuda", "cpu")


def test_do_bench_times_any_callable_with_the_counts_asked_for():
    calls = []
    ms = do_bench(lambda: calls.append(1), device="cpu", n_warmup=3, n_repeat=7)
    assert len(calls) == 1 + 5 + 3 + 7  # one untimed call, five for the estimate, warm-up, measurement
    assert ms >= 0
    calls.clear()
    do_bench(lambda: calls.append(1), 0, 0, 2, 4, device="cpu")  # upstream's positional _n_warmup, _n_repeat
    assert len(calls) == 1 + 5 + 2 + 4
    lo, hi = do_bench(lambda: time.sleep(0.001), device="cpu", n_repeat=5, quantiles=[0.1, 0.9])
    assert 0 < lo <= hi
    assert do_bench(lambda: None, device=torch.device("cpu"), n_repeat=2, backend="wall") >= 0


def test_do_bench_argument_errors():
    with pytest.raises(BenchmarkError, match="return_mode must be one of mean, median, min, max, got 'avg'"):
        do_bench(lambda: None, device="cpu", return_mode="avg")
    with pytest.raises(BenchmarkError, match=r"quantiles must be numbers in \[0, 1\]"):
        do_bench(lambda: None, device="cpu", quantiles=[1.5])
    with pytest.raises(BenchmarkError, match="timer='wall' and backend='event' disagree"):
        do_bench(lambda: None, device="cpu", timer="wall", backend="event")
    with pytest.raises(BenchmarkError, match="timer 'event' cannot time cpu work"):
        do_bench(lambda: None, device="cpu", backend="event")
    with pytest.raises(BenchmarkError, match="device must be"):
        do_bench(lambda: None, device="quantum")
    for name, value in (("warmup", float("nan")), ("rep", -1), ("warmup", float("inf")), ("rep", "100")):
        with pytest.raises(BenchmarkError, match=rf"{name} must be a number of milliseconds >= 0, got"):
            do_bench(lambda: None, device="cpu", **{name: value})
    for name, value in (("n_repeat", -3), ("n_warmup", 2.5), ("_n_repeat", True)):
        with pytest.raises(BenchmarkError, match=rf"{name} must be an int >= 0 \(0: from the milliseconds\), got"):
            do_bench(lambda: None, device="cpu", **{name: value})


def test_deadline_stops_benchmarking_between_calls():
    start = time.monotonic()
    with pytest.raises(BenchmarkTimeout, match="deadline"):
        do_bench(lambda: time.sleep(0.02), device="cpu", n_repeat=1000, deadline=time.monotonic() + 0.2)
    assert time.monotonic() - start < 5


def test_scalar_parameters_need_a_value():
    @T.prim_func
    def scale(A: T.Tensor((16,), "float32"), s: T.float32, B: T.Tensor((16,), "float32")):
        with T.Kernel(1) as _:
            for i in T.Parallel(16):
                B[i] = A[i] * s

    kernel = tilelang.compile(scale, out_idx=-1, target="c")
    with pytest.raises(TensorSupplyError, match=r"scalar parameter\(s\) s of kernel 'scale' need a value"):
        kernel.get_profiler().run_once()
    profiler = kernel.get_profiler(dynamic_sizes={"s": 3.0})
    profiler.assert_allclose(lambda a, s: a * s)
    assert profiler.do_bench(n_repeat=2) > 0


def test_upstream_style_construction_and_errors(mm):
    profiler = Profiler(mm.params, -1, TensorSupplyType.One).with_default_adapter(mm)
    assert profiler.result_idx == [2] and profiler.func is mm
    assert torch.equal(profiler.run_once(), torch.full((64, 64), 64.0))
    with pytest.raises(ProfilerError, match="no kernel"):
        Profiler(mm.params, [2]).run_once()
    with pytest.raises(ProfilerError, match="result_idx 5 is out of range for 3 parameters"):
        Profiler(mm.params, [5])
    no_out = tilelang.compile(K.blocked_matmul(8, 8, 8, 8, 8, 8), target="c")
    with pytest.raises(ProfilerError, match="returns none"):
        no_out.get_profiler().assert_consistent()
    with pytest.raises(AssertionError, match="has no out_idx, so it returns nothing"):
        no_out.get_profiler().assert_allclose(lambda a, b, c: a @ b)


def test_profiler_on_a_throwaway_test_kit_backend(tmp_path, monkeypatch):
    """The profiler needs nothing of a backend but its declaration and its build hook."""
    site = tmp_path / "site"
    K.install_tunekit(site)
    monkeypatch.setenv("TL_TEST_BUILD_LOG", str(tmp_path / "builds.log"))
    with on_path(site):
        fast = K.kit_vadd(64, speed=1)
        assert fast.backend.name == K.TUNEKIT
        profiler = fast.get_profiler()
        assert profiler.capability is not None and profiler.capability.priority == 0
        assert profiler.do_bench(n_repeat=3) > 0
        profiler.assert_allclose(K.kit_reference)
        with pytest.raises(AssertionError, match="differ between kernel and reference"):
            K.kit_vadd(64, speed=0, variant="_wrong").get_profiler().assert_allclose(K.kit_reference)
        with pytest.raises(AssertionError):
            profiler.assert_allclose(lambda a, b: a - b)


def test_event_timer_with_standin_cuda_driver(monkeypatch):
    """The CUDA event timer's bookkeeping (events per call, one synchronisation, the L2 flush
    before each call), with torch.cuda's events replaced: this machine has no GPU."""
    from tilelang_core.profiler import bench

    log = []

    class StandinEvent:
        def __init__(self, enable_timing=False):
            assert enable_timing
            self.at = None

        def record(self):
            log.append("record")
            self.at = time.perf_counter()

        def synchronize(self):
            pass

        def elapsed_time(self, end):
            return (end.at - self.at) * 1e3

    monkeypatch.setattr(torch.cuda, "Event", StandinEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: log.append("sync"))
    monkeypatch.setattr(bench._Bench, "flush", lambda self: log.append("flush"))
    calls = []
    lo, hi = do_bench(lambda: calls.append(time.sleep(0.002)), device="cuda", n_warmup=1, n_repeat=4, quantiles=[0, 1])
    assert len(calls) == 1 + 5 + 1 + 4
    assert 1.5 <= lo <= hi
    # the measurement: per repeat a flush, then events around the call; one synchronisation at the end
    assert log.count("record") == 8 and log[-13:] == ["flush", "record", "record"] * 4 + ["sync"]


def test_integer_outputs_are_compared_exactly_and_messages_point_at_a_differing_element():
    import torch

    from tilelang_core.profiler.compare import assert_tensors_close

    big = torch.full((4,), 2**60, dtype=torch.int64)
    with pytest.raises(AssertionError, match=r"4 of 4 elements .* kernel 1152921504606846977, reference 1152921504606846976"):
        assert_tensors_close(big + 1, big, atol=0, rtol=0, max_mismatched_ratio=0)
    assert_tensors_close(big + 1, big, atol=1, rtol=0, max_mismatched_ratio=0)
    assert_tensors_close(torch.tensor([3, 5], dtype=torch.int8), torch.tensor([3, 5]), atol=0, rtol=0)
    actual, expected = torch.arange(8.0), torch.arange(8.0)
    expected[5] = float("nan")
    with pytest.raises(AssertionError, match=r"largest difference inf at \(5,\): kernel 5, reference nan"):
        assert_tensors_close(actual, expected, max_mismatched_ratio=0)
