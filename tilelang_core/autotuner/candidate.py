"""One candidate configuration: build it, check it against the reference, time it.

The same functions run in the tuning process (after ``par_compile`` built every candidate) and
on the workers of an executor (:func:`run_candidate`, which builds and times one candidate on
the worker's own machine and reports back plain data, never a kernel object).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from ..errors import TileLangError
from .device_lock import exclusive_timing
from .key import callable_name
from .param import MissingTuningInputs, NestedTuningError, ProfileArgs, Status

logger = logging.getLogger("tilelang.autotuner")

#: Config key that carries per-config ``pass_configs`` instead of a function argument.
PASS_CONFIGS_KEY = "pass_configs"


def build_candidate(
    func: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any], config: dict[str, Any], compile_kwargs: dict[str, Any],
    mode: str = "auto",
) -> Any:
    """``func(*args, **kwargs, **config)`` compiled with ``compile_kwargs`` (a JITKernel).

    ``func`` returns a prim_func (compiled here with :func:`tilelang.compile`, so the kernel
    cache applies) or a JITKernel; an eager-style function (its body is the kernel, jit/eager.py)
    is specialised for these arguments and compiled the way ``@tilelang.jit`` does. ``mode`` is
    the ``@tilelang.jit(mode=...)`` of the function: ``"lazy"`` / ``"eager"`` decide the style,
    ``"auto"`` tells it from the source. A ``pass_configs`` entry of the config is merged over the
    compile arguments' ``pass_configs`` instead of being passed to ``func``.
    """
    from ..jit.compile import compile as tl_compile
    from ..jit.eager import EagerFunction, is_eager_style
    from ..jit.kernel import JITKernel

    config = dict(config)
    options = dict(compile_kwargs)
    extra_passes = config.pop(PASS_CONFIGS_KEY, None)
    if extra_passes:
        options["pass_configs"] = {**(options.get("pass_configs") or {}), **extra_passes}
    if mode == "eager" or (mode == "auto" and is_eager_style(func)):  # the body is the kernel: calling it would run T.Kernel outside any prim_func
        options.pop("out_idx", None)  # the eager style's outputs are its T.empty tensors
        return EagerFunction(func, options).compile(*args, **{**kwargs, **config})
    produced = func(*args, **{**kwargs, **config})
    if isinstance(produced, JITKernel):
        return produced
    return tl_compile(produced, **options)


@dataclass
class BenchState:
    """What consecutive candidates share in one process: cached inputs, the reference's outputs
    on the last set of inputs and the reference's time."""

    inputs: Optional[list[Any]] = None
    ref_latency: Optional[float] = None
    best_latency: Optional[float] = None
    reference: Optional[tuple[list[Any], Any]] = None
    """(inputs, what ref_prog returned on them): kept while candidates share those inputs."""
    slow_reference: bool = False
    """The reference was too slow to time within the timeout (said once, not retried)."""
    slow_reference_said: bool = False
    """A reference call longer than the timeout was reported (once)."""


class WrongResult(AssertionError):
    """The candidate's outputs do not match the reference's."""


def _compatible(inputs: Sequence[Any], profiler: Any) -> bool:
    """Whether cached inputs fit this candidate's parameters (count, dtypes, static dims)."""
    import torch

    from ..artifact import TensorParam

    params = profiler._get_params()
    if len(params) != len(inputs):
        return False
    for param, value in zip(params, inputs):
        if isinstance(param, TensorParam):
            if not isinstance(value, torch.Tensor) or str(value.dtype).replace("torch.", "") != param.dtype:
                return False
            if value.dim() != len(param.shape):
                return False
            if any(isinstance(d, int) and d != s for d, s in zip(param.shape, value.shape)):
                return False
    return True


def candidate_inputs(kernel: Any, profile: ProfileArgs, state: BenchState, given: Optional[list[Any]]) -> tuple[Any, list[Any]]:
    """The profiler of ``kernel`` and the inputs to check and time it on."""
    profiler = kernel.get_profiler(profile.supply_type)
    if given is not None:
        return profiler, list(given)
    if profile.cache_input_tensors and state.inputs is not None and _compatible(state.inputs, profiler):
        return profiler, state.inputs
    if profile.supply_prog is not None:
        inputs = list(profile.supply_prog(profiler._get_params()))
    else:
        from ..profiler.supply import TensorSupplyError

        try:
            inputs = profiler._get_inputs()
        except TensorSupplyError as exc:
            raise MissingTuningInputs(
                f"{exc}. Tuning generates its inputs, and cannot make these: tune on real inputs with "
                f"`with tilelang.autotuner.set_autotune_inputs(a, b, ...):` around the call, or give "
                f"@tilelang.autotune(supply_prog=...)"
            ) from None
    if profile.cache_input_tensors:
        state.inputs = inputs
    return profiler, inputs


def check_and_time(
    kernel: Any,
    profile: ProfileArgs,
    *,
    warmup: int,
    rep: int,
    timeout: Optional[float],
    state: BenchState,
    inputs: Optional[list[Any]] = None,
    early_stop_factor: Optional[float] = None,
) -> float:
    """Check ``kernel`` against ``profile.ref_prog`` (unless ``skip_check``) and return its latency (ms).

    The reference's outputs come from :func:`reference_outputs`, outside the deadline. Also
    times the reference once per ``state`` (``state.ref_latency``; within ``timeout`` of its
    own, else it is not reported and a warning names ``ref_prog``). The timing holds this
    machine's lock of the kernel's device (:func:`~.device_lock.exclusive_timing`), so workers
    sharing a machine never time at the same moment.

    :raises WrongResult: the check failed (its message says how), also when
        ``manual_check_prog`` returned False.
    :raises BenchmarkTimeout: the check and timing together took longer than ``timeout`` seconds.
    """
    from ..profiler.bench import BenchmarkTimeout

    profiler, ins = candidate_inputs(kernel, profile, state, inputs)
    deadline = None
    if not profile.skip_check and profile.ref_prog is not None:
        expected = reference_outputs(profile, profiler, ins, state, timeout)  # not this candidate's time

        def reference(*_: Any) -> Any:
            return expected

        deadline = time.monotonic() + timeout if timeout else None
        try:
            if profile.manual_check_prog is not None:
                profiler.manual_assert_close(reference, input_tensors=ins, manual_check_prog=profile.manual_check_prog)
            else:
                profiler.assert_allclose(
                    reference,
                    input_tensors=ins,
                    rtol=profile.rtol,
                    atol=profile.atol,
                    max_mismatched_ratio=profile.max_mismatched_ratio,
                )
        except AssertionError as exc:
            raise WrongResult(str(exc) or "the check failed") from None
        if deadline is not None and time.monotonic() > deadline:
            raise BenchmarkTimeout("the correctness check went past the timeout")
    elif timeout:
        deadline = time.monotonic() + timeout
    baseline = None
    if early_stop_factor is not None and state.best_latency is not None:
        baseline = state.best_latency * early_stop_factor
    n_warmup, n_repeat = max(warmup, 1), max(rep, 1)  # counts of calls: 0 would mean "from milliseconds" to do_bench
    with exclusive_timing(profiler.family) as waited:
        if deadline is not None:
            deadline += waited  # waiting for another process's timing is not this candidate's time
        latency = profiler.do_bench(
            n_warmup=n_warmup,
            n_repeat=n_repeat,
            input_tensors=ins,
            timer=profile.timer,
            return_mode=profile.return_mode,
            early_stop_baseline=baseline,
            deadline=deadline,
        )
        if profile.ref_prog is not None and state.ref_latency is None and not state.slow_reference:
            try:
                state.ref_latency = profiler.do_bench(
                    profile.ref_prog, n_warmup=n_warmup, n_repeat=n_repeat, input_tensors=ins, timer=profile.timer,
                    return_mode=profile.return_mode, deadline=time.monotonic() + timeout if timeout else None,
                )
            except BenchmarkTimeout:  # the reference's time is not the candidate's: it is not reported
                state.slow_reference = True
                logger.warning(
                    "ref_prog %s is too slow to time: its %d warm-up and %d timed calls took longer than the timeout of "
                    "%s s, so the reference's latency is not reported (the candidates are not affected)",
                    callable_name(profile.ref_prog), n_warmup, n_repeat, timeout,
                )
    if state.best_latency is None or latency < state.best_latency:
        state.best_latency = latency
    return latency


def reference_outputs(profile: ProfileArgs, profiler: Any, ins: Sequence[Any], state: BenchState,
                      timeout: Optional[float]) -> Any:
    """What ``profile.ref_prog`` returns on ``ins``: computed once per set of inputs (candidates
    sharing their inputs, ``cache_input_tensors`` or given ones, share it), before and outside
    a candidate's deadline, so a slow reference never makes a correct candidate time out.

    A reference call longer than ``timeout`` is not an error: a warning names ``ref_prog`` and
    says what it costs (it is called again for each new set of inputs).
    """
    from ..devices import synchronize

    if state.reference is not None:
        seen, outputs = state.reference
        if len(seen) == len(ins) and all(a is b for a, b in zip(seen, ins)):
            return outputs
    start = time.monotonic()
    outputs = profile.ref_prog(*ins)  # type: ignore[misc]
    synchronize(profiler.family)
    took = time.monotonic() - start
    state.reference = (list(ins), outputs)  # the inputs are kept: their identity is never another's
    if timeout and took > timeout and not state.slow_reference_said:
        state.slow_reference_said = True
        logger.warning(
            "ref_prog %s took %.1f s on one set of inputs, longer than the timeout of %s s per candidate: its time is "
            "not charged to the candidates, but it runs again for every new set of inputs (cache_input_tensors=True "
            "or set_autotune_inputs computes it once)", callable_name(profile.ref_prog), took, timeout,
        )
    return outputs


def classify(exc: BaseException) -> tuple[Status, str]:
    """The trial status and a one-paragraph reason for an exception a candidate raised."""
    from ..jit.parallel import CompileTimeout
    from ..profiler.bench import BenchmarkTimeout

    if isinstance(exc, (BenchmarkTimeout, CompileTimeout)):
        return "timeout", str(exc)
    if isinstance(exc, WrongResult):
        return "wrong_result", str(exc)
    text = str(exc).strip()
    if len(text) > 2000:
        text = text[:2000] + " ..."
    return "error", f"{type(exc).__name__}: {text}"


# -- on an executor's worker --------------------------------------------------------------------


class FunctionRef:
    """A function sent to a worker by module and qualified name (imported there), when it can be.

    A ``@tilelang.jit`` function's module attribute is the wrapper, not the function, so pickle
    would send the function by value, and cloudpickle drops the file name of code sent by value
    (TVMScript then cannot read the kernel's source). A worker importing the module gets the very
    same source, globals and closures instead. Deliberately not callable: executors treat
    callable arguments as functions to serialise by value.
    """

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func
        self.module = getattr(func, "__module__", None)
        self.qualname = getattr(func, "__qualname__", None)

    @staticmethod
    def _resolve(module: str, qualname: str) -> Callable[..., Any]:
        import importlib

        from .key import unwrap

        value: Any = importlib.import_module(module)
        for part in qualname.split("."):
            value = getattr(value, part)
        return unwrap(value)

    def importable(self) -> bool:
        if not self.module or not self.qualname or "<" in self.qualname or self.module == "__main__":
            return False
        try:
            return self._resolve(self.module, self.qualname) is self.func
        except Exception:  # noqa: BLE001
            return False

    def __reduce__(self) -> Any:
        if self.importable():
            return (_imported, (self.module, self.qualname))
        return (_given, (self.func,))


def _imported(module: str, qualname: str) -> FunctionRef:
    ref = FunctionRef.__new__(FunctionRef)
    ref.func, ref.module, ref.qualname = FunctionRef._resolve(module, qualname), module, qualname
    return ref


def _given(func: Callable[..., Any]) -> FunctionRef:
    return FunctionRef(func)


def resolve_function(func: Any) -> Callable[..., Any]:
    """The function a job carries (a :class:`FunctionRef` or the function itself)."""
    return func.func if isinstance(func, FunctionRef) else func


@dataclass
class CandidateJob:
    """Everything a worker needs to build and time one configuration (sent through the executor)."""

    index: int
    config: dict[str, Any]
    func: Callable[..., Any]
    args: tuple
    kwargs: dict[str, Any]
    compile_kwargs: dict[str, Any]
    profile: ProfileArgs
    warmup: int
    rep: int
    timeout: Optional[float]
    inputs: Optional[list[Any]] = None
    cache_dir: str = ""
    mode: str = "auto"  # the function's @tilelang.jit(mode=...)


@dataclass
class CandidateOutcome:
    """What a worker reports for one configuration: plain data only."""

    index: int
    status: Status
    latency: Optional[float] = None
    ref_latency: Optional[float] = None
    reason: str = ""
    kernel_cache_key: Optional[str] = None
    backend: tuple[str, str] = ("", "")
    device: dict[str, Any] = field(default_factory=dict)
    cache_dir: str = ""
    worker: str = ""
    timer: str = ""


def worker_name() -> str:
    """``host:pid`` of this process."""
    return f"{socket.gethostname()}:{os.getpid()}"


def remote_device_identity(family: str) -> dict[str, Any]:
    """``device_identity(family)`` on whichever machine runs this (an executor's worker)."""
    from ..devices import device_identity

    return device_identity(family)


def _build_with_timeout(job: CandidateJob) -> Any:
    from ..jit.parallel import CompileTimeout

    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["kernel"] = build_candidate(resolve_function(job.func), job.args, job.kwargs, job.config,
                                            job.compile_kwargs, job.mode)
        except BaseException as exc:  # noqa: BLE001 - reported for this config
            box["error"] = exc

    thread = threading.Thread(target=target, name=f"tilelang-autotune-build-{job.index}", daemon=True)
    thread.start()
    thread.join(job.timeout if job.timeout else None)
    if thread.is_alive():
        raise CompileTimeout(f"compiling took longer than the timeout of {job.timeout} s")
    if "error" in box:
        raise box["error"]
    return box["kernel"]


def run_candidate(job: CandidateJob) -> CandidateOutcome:
    """Build, check and time one configuration here. Failures are outcomes, except
    :class:`MissingTuningInputs` and :class:`NestedTuningError`, raised: every configuration
    would meet them."""
    from ..cache.location import default_cache_dir
    from ..devices import device_identity
    from ..profiler.bench import resolve_timer

    worker = worker_name()
    cache_dir = str(default_cache_dir())
    try:
        kernel = _build_with_timeout(job)
    except Exception as exc:  # noqa: BLE001
        status, reason = classify(exc)
        if status == "error":
            status = "compile_error"
            if not isinstance(exc, TileLangError):
                reason += "\n" + "".join(traceback.format_exception(exc)[-12:]).strip()
        return CandidateOutcome(job.index, status, reason=reason, worker=worker, cache_dir=cache_dir)
    backend = (kernel.backend.name, kernel.backend.version)
    family = kernel.get_profiler().family
    try:
        state = BenchState()
        latency = check_and_time(
            kernel, job.profile, warmup=job.warmup, rep=job.rep, timeout=job.timeout, state=state, inputs=job.inputs
        )
        return CandidateOutcome(
            job.index,
            "ok",
            latency=latency,
            ref_latency=state.ref_latency,
            kernel_cache_key=kernel.cache_key,
            backend=backend,
            device=device_identity(family),
            cache_dir=cache_dir,
            worker=worker,
            timer=resolve_timer(job.profile.timer, family),
        )
    except (MissingTuningInputs, NestedTuningError):
        raise
    except Exception as exc:  # noqa: BLE001
        status, reason = classify(exc)
        if status == "error":
            reason += "\n" + "".join(traceback.format_exception(exc)[-3:]).strip()
        return CandidateOutcome(
            job.index, status, reason=reason, kernel_cache_key=kernel.cache_key, backend=backend, worker=worker,
            cache_dir=cache_dir,
        )


__all__ = [
    "BenchState",
    "CandidateJob",
    "CandidateOutcome",
    "PASS_CONFIGS_KEY",
    "WrongResult",
    "build_candidate",
    "check_and_time",
    "classify",
    "reference_outputs",
    "remote_device_identity",
    "run_candidate",
]
