"""``tilelang.profiler.do_bench``: time any callable, with the timer its device family needs.

Timers (``timer=``; ``backend=`` is upstream TileLang's name for the same argument):

============  ==========================  ======================================================
timer         device families             what is measured
============  ==========================  ======================================================
``auto``      all                         ``wall`` for cpu, ``event`` for GPU families
``wall``      all                         ``time.perf_counter_ns`` around each call; on a GPU the
                                          device is synchronised after each call
``event``     cuda, rocm, metal           device events around each call (``torch.cuda.Event``,
                                          ``torch.mps.Event``); CUDA flushes the L2 cache first
``cudagraph`` cuda, rocm                  ``n_repeat`` calls captured in one CUDA graph, replayed
                                          10 times (L2 flushed before each replay)
``cupti``     cuda                        kernel time on the device from ``torch.profiler``
                                          (CUPTI), without the L2 flushes
============  ==========================  ======================================================

Nothing here touches CUDA for a CPU callable: the device family decides every synchronisation.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Literal, Optional, Sequence, Union

from ..devices import synchronize, torch_device_type
from ..errors import TileLangError

TIMERS = ("auto", "wall", "event", "cudagraph", "cupti")
RETURN_MODES = ("mean", "median", "min", "max")

#: Device families each timer can measure.
TIMER_FAMILIES = {
    "wall": ("cpu", "cuda", "rocm", "metal"),
    "event": ("cuda", "rocm", "metal"),
    "cudagraph": ("cuda", "rocm"),
    "cupti": ("cuda",),
}

#: Marker of the L2 flush in the cupti timer's profile.
_FLUSH_RANGE = "tilelang.profiler.l2_flush"


class BenchmarkError(TileLangError, ValueError):
    """``do_bench`` was given an unknown timer or return mode, or a timer the device cannot use."""


class BenchmarkTimeout(TileLangError, TimeoutError):
    """Benchmarking went past its deadline (the autotuner's per-config ``timeout``)."""


def resolve_timer(timer: str, family: str) -> str:
    """The concrete timer for ``timer`` on a device ``family`` (``auto`` resolved).

    :raises BenchmarkError: unknown timer, or one that cannot time this family's work (say
        ``event`` for a CPU kernel), with what would work instead.
    """
    if timer not in TIMERS:
        raise BenchmarkError(f"timer must be one of {', '.join(TIMERS)}, got {timer!r}")
    torch_device_type(family)  # DeviceError for a family torch cannot address
    if timer == "auto":
        return "wall" if family == "cpu" else "event"
    if family not in TIMER_FAMILIES[timer]:
        usable = [t for t, fams in TIMER_FAMILIES.items() if family in fams]
        raise BenchmarkError(
            f"timer {timer!r} cannot time {family} work (it measures {', '.join(TIMER_FAMILIES[timer])} devices); "
            f"use timer='auto' or one of: {', '.join(usable)}"
        )
    return timer


def default_family() -> str:
    """The device family ``do_bench`` assumes for a bare callable: cuda, else metal, else cpu."""
    import torch

    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "metal"
    return "cpu"


def do_bench(
    fn: Callable[[], Any],
    warmup: float = 25,
    rep: float = 100,
    _n_warmup: int = 0,
    _n_repeat: int = 0,
    quantiles: Optional[Sequence[float]] = None,
    fast_flush: bool = True,
    backend: Optional[str] = None,
    return_mode: Literal["mean", "median", "min", "max"] = "mean",
    device: Any = None,
    cache_size: int = 256,
    early_stop_baseline: Optional[float] = None,
    *,
    timer: str = "auto",
    n_warmup: int = 0,
    n_repeat: int = 0,
    deadline: Optional[float] = None,
) -> Union[float, list[float]]:
    """Time ``fn()`` and return milliseconds per call (or the requested quantiles).

    :param fn: a callable taking no arguments (``functools.partial(kernel, a, b)``).
    :param warmup: milliseconds of warm-up calls (their count is estimated from 5 timed calls).
    :param rep: milliseconds of measured calls.
    :param n_warmup: number of warm-up calls instead (``_n_warmup`` is upstream's spelling).
    :param n_repeat: number of measured calls instead (``_n_repeat`` is upstream's spelling).
    :param quantiles: e.g. ``[0.5, 0.2, 0.8]``: return these quantiles of the per-call times
        (one float for one quantile).
    :param return_mode: ``mean``, ``median``, ``min`` or ``max`` of the per-call times.
    :param timer: see the module docstring; ``backend`` is accepted as its upstream name.
    :param device: the device family the work runs on (``"cpu"``, ``"cuda"``, ``"metal"``,
        ``"rocm"``), a ``torch.device``, or a CUDA device index; default: cuda when torch sees a
        GPU, else metal when MPS is available, else cpu. Pass ``device="cpu"`` to time CPU work
        on a machine with a GPU.
    :param fast_flush: flush the L2 cache with int32 writes (else int8), GPU timers only.
    :param cache_size: size of the L2 flush buffer in MB.
    :param early_stop_baseline: milliseconds; when the 5-call estimate is already slower, return
        the estimate without the full measurement (the autotuner's ``early_stop``).
    :param deadline: a ``time.monotonic()`` value; past it :class:`BenchmarkTimeout` is raised
        between calls (a call that never returns cannot be interrupted).
    :raises BenchmarkError: bad ``timer``, ``return_mode`` or ``quantiles``; ``warmup``/``rep`` not
        finite numbers >= 0, call counts not ints >= 0, or a negative device index.
    :raises DeviceError: ``device`` names a family torch cannot use in this process (``"cuda"``
        on a torch without CUDA, ``"metal"`` without MPS) or an index past its devices; nothing
        is called.
    """
    if backend is not None:
        if timer != "auto" and timer != backend:
            raise BenchmarkError(f"timer={timer!r} and backend={backend!r} disagree; backend is another name for timer")
        timer = backend
    if return_mode not in RETURN_MODES:
        raise BenchmarkError(f"return_mode must be one of {', '.join(RETURN_MODES)}, got {return_mode!r}")
    if quantiles is not None:
        quantiles = list(quantiles)
        if not quantiles or not all(isinstance(q, (int, float)) and 0 <= q <= 1 for q in quantiles):
            raise BenchmarkError(f"quantiles must be numbers in [0, 1], got {quantiles!r}")
    for name, value in (("warmup", warmup), ("rep", rep)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise BenchmarkError(f"{name} must be a number of milliseconds >= 0, got {value!r}")
    for name, value in (("n_warmup", n_warmup), ("n_repeat", n_repeat), ("_n_warmup", _n_warmup),
                        ("_n_repeat", _n_repeat)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise BenchmarkError(f"{name} must be an int >= 0 (0: from the milliseconds), got {value!r}")
    family, index = _family_and_index(device)
    kind = resolve_timer(timer, family)
    check_device(family, index, device)
    n_warmup = n_warmup or _n_warmup
    n_repeat = n_repeat or _n_repeat
    bench = _Bench(fn, family, index, deadline, cache_size, fast_flush)
    with bench.on_device():
        times = bench.run(kind, warmup, rep, n_warmup, n_repeat, early_stop_baseline)
    return summarize(times, quantiles, return_mode)


def summarize(times: Sequence[float], quantiles: Optional[Sequence[float]], return_mode: str) -> Union[float, list[float]]:
    """Aggregate per-call times (ms) as ``do_bench`` does."""
    ordered = sorted(float(t) for t in times)
    if quantiles is not None:
        values = [_quantile(ordered, q) for q in quantiles]
        return values[0] if len(values) == 1 else values
    if return_mode == "min":
        return ordered[0]
    if return_mode == "max":
        return ordered[-1]
    if return_mode == "median":
        return _quantile(ordered, 0.5)
    return math.fsum(ordered) / len(ordered)


def _quantile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between the closest ranks (what ``torch.quantile`` does)."""
    if len(ordered) == 1:
        return ordered[0]
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _family_and_index(device: Any) -> tuple[str, Optional[int]]:
    from ..devices import TORCH_DEVICE_TYPES, family_of_torch_device

    if device is None:
        return default_family(), None
    if isinstance(device, bool):
        raise BenchmarkError(f"device must be a device family, a torch.device or a CUDA index, got {device!r}")
    if isinstance(device, int):
        if device < 0:
            raise BenchmarkError(f"device index must be >= 0 (a CUDA device), got {device}; pass device=None for "
                                 f"the current device, or device='cpu' for CPU work")
        return "cuda", device
    if isinstance(device, str) and device in TORCH_DEVICE_TYPES:
        return device, None
    try:
        import torch

        dev = torch.device(device)
    except (TypeError, RuntimeError):
        raise BenchmarkError(
            f"device must be a device family ({', '.join(TORCH_DEVICE_TYPES)}), a torch.device or a CUDA index, "
            f"got {device!r}"
        ) from None
    return family_of_torch_device(dev), dev.index


def check_device(family: str, index: Optional[int], device: Any) -> None:
    """Raise :class:`~tilelang_core.devices.DeviceError` unless torch can run on ``family``
    (device ``index``) in this process.

    Before, ``do_bench(fn, device="cuda")`` on a torch without CUDA (or ``"metal"`` without MPS)
    called ``fn`` and then failed inside torch with its own error (``Torch not compiled with CUDA
    enabled``). Now the device is checked before anything runs, and the error names the device
    asked for and the families available here.
    """
    from ..devices import DeviceError, is_available

    if is_available(family):
        count = _device_count(family)
        if index is None or count is None or index < count:
            return
        raise DeviceError(f"do_bench was given device={device!r}, but torch sees {count} {family} device(s) here "
                          f"(indices 0..{count - 1})")
    try:  # torch says no device; a synchronisation that works anyway is a stand-in driver (tests): let it be
        synchronize(family)
        return
    except (AssertionError, RuntimeError, AttributeError) as exc:
        reason = f"{type(exc).__name__}: {exc}"
    usable = [f for f in ("cpu", "cuda", "rocm", "metal") if is_available(f)]
    raise DeviceError(
        f"do_bench was given device={device!r} ({family} family), which torch cannot use here ({reason}); "
        f"available: {', '.join(usable)}; pass device='cpu' (or leave device out) to time CPU work"
    )


def _device_count(family: str) -> Optional[int]:
    """Number of devices torch sees for a GPU family with indices (None: not counted)."""
    import torch

    if torch_device_type(family) == "cuda":
        return int(torch.cuda.device_count())
    return None


class _Bench:
    """One ``do_bench`` call: the estimate, the warm-up and the chosen timer's measurement."""

    def __init__(self, fn, family, index, deadline, cache_size, fast_flush) -> None:
        self.fn = fn
        self.family = family
        self.index = index
        self.deadline = deadline
        self.cache_size = cache_size
        self.fast_flush = fast_flush
        self.cuda = torch_device_type(family) == "cuda"
        self._flush_buffer = None

    # -- device scope and helpers --------------------------------------------------------------

    def on_device(self) -> Any:
        import contextlib

        if self.cuda and self.index is not None:
            import torch

            return torch.cuda.device(self.index)
        return contextlib.nullcontext()

    def sync(self) -> None:
        synchronize(self.family)

    def check_deadline(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise BenchmarkTimeout("benchmark went past its deadline")

    def flush(self) -> None:
        """Evict the L2 cache (CUDA only) by writing a buffer larger than it."""
        if not self.cuda:
            return
        if self._flush_buffer is None:
            import torch

            nbytes = self.cache_size * 1024 * 1024
            dtype = torch.int32 if self.fast_flush else torch.int8
            count = nbytes // (4 if self.fast_flush else 1)
            self._flush_buffer = torch.empty(count, dtype=dtype, device="cuda")
        self._flush_buffer.zero_()

    def wall_call(self) -> float:
        start = time.perf_counter_ns()
        self.fn()
        self.sync()
        return (time.perf_counter_ns() - start) / 1e6

    # -- the measurement -------------------------------------------------------------------------

    def estimate(self) -> float:
        """Milliseconds per call from 5 calls (after one untimed call)."""
        self.fn()
        self.sync()
        self.check_deadline()
        if self.family == "cpu":
            samples = []
            for _ in range(5):
                samples.append(self.wall_call())
                self.check_deadline()
            return max(sum(samples) / len(samples), 1e-6)
        self.sync()
        start = time.perf_counter_ns()
        for _ in range(5):
            self.flush()
            self.fn()
        self.sync()
        self.check_deadline()
        return max((time.perf_counter_ns() - start) / 5e6, 1e-6)

    def run(self, kind: str, warmup: float, rep: float, n_warmup: int, n_repeat: int, baseline=None) -> list[float]:
        per_call = self.estimate()
        if baseline is not None and per_call > baseline:
            return [per_call]
        n_warmup = n_warmup if n_warmup > 0 else max(1, int(warmup / per_call))
        n_repeat = n_repeat if n_repeat > 0 else max(1, int(rep / per_call))
        for _ in range(n_warmup):
            self.fn()
            self.check_deadline()
        self.sync()
        if kind == "wall":
            return self.time_wall(n_repeat)
        if kind == "event":
            return self.time_events(n_repeat)
        if kind == "cudagraph":
            return self.time_graph(n_repeat)
        return self.time_cupti(n_repeat)

    def time_wall(self, n_repeat: int) -> list[float]:
        times = []
        for _ in range(n_repeat):
            self.flush()
            self.sync()
            times.append(self.wall_call())
            self.check_deadline()
        return times

    def _event_type(self) -> Any:
        import torch

        return torch.cuda.Event if self.cuda else torch.mps.Event

    def time_events(self, n_repeat: int) -> list[float]:
        event = self._event_type()
        starts = [event(enable_timing=True) for _ in range(n_repeat)]
        ends = [event(enable_timing=True) for _ in range(n_repeat)]
        for start, end in zip(starts, ends):
            self.flush()
            start.record()
            self.fn()
            end.record()
            self.check_deadline()
        self.sync()
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]

    def time_graph(self, n_repeat: int) -> list[float]:
        import torch

        retries = 10
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(n_repeat):
                    self.fn()
            self.sync()
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(retries)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(retries)]
            for start, end in zip(starts, ends):
                self.flush()
                start.record()
                graph.replay()
                end.record()
                self.check_deadline()
            self.sync()
        return [s.elapsed_time(e) / n_repeat for s, e in zip(starts, ends)]

    def time_cupti(self, n_repeat: int) -> list[float]:
        import torch
        from torch.profiler import ProfilerActivity, profile, record_function

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(n_repeat):
                with record_function(_FLUSH_RANGE):
                    self.flush()
                self.fn()
                self.check_deadline()
            torch.cuda.synchronize()
        total_us = 0.0
        flush_us = 0.0
        for evt in prof.events():
            if getattr(getattr(evt, "device_type", None), "name", "") != "CUDA":
                continue
            if getattr(evt, "is_user_annotation", False):
                if evt.key == _FLUSH_RANGE:
                    flush_us += evt.self_device_time_total
                continue
            total_us += evt.self_device_time_total
        return [max(total_us - flush_us, 0.0) / n_repeat / 1e3]


__all__ = [
    "RETURN_MODES",
    "TIMERS",
    "BenchmarkError",
    "BenchmarkTimeout",
    "default_family",
    "check_device",
    "do_bench",
    "resolve_timer",
    "summarize",
]
