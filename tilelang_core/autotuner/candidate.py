"""One candidate configuration: build it, check it against the reference, time it.

The same functions run in the tuning process (after ``par_compile`` built every candidate) and
on the workers of an executor (:func:`run_candidate`, which builds and times one candidate on
the worker's own machine and reports back plain data, never a kernel object).
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from ..errors import TileLangError
from ..profiler.compare import as_output_list
from .build_gate import build_slot, marked_building, quiet_for_timing
from .device_lock import exclusive_timing
from .key import callable_name
from .param import AutotuneConfigError, CallbackError, MissingTuningInputs, NestedTuningError, ProfileArgs, Status

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
    from ..jit.eager import is_eager_style
    from ..jit.eager_variants import eager_function
    from ..jit.kernel import JITKernel

    config = dict(config)
    options = dict(compile_kwargs)
    extra_passes = config.pop(PASS_CONFIGS_KEY, None)
    if extra_passes:
        options["pass_configs"] = {**(options.get("pass_configs") or {}), **extra_passes}
    if mode == "eager" or (mode == "auto" and is_eager_style(func)):  # the body is the kernel: calling it would run T.Kernel outside any prim_func
        options.pop("out_idx", None)  # the eager style's outputs are its T.empty tensors
        return eager_function(func, options).compile(*args, **{**kwargs, **config})
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
    reference: Optional[tuple[list[Any], Any, list[Any]]] = None  # (inputs, ref_prog's return, its arguments after)
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


def candidate_inputs(kernel: Any, profile: ProfileArgs, state: BenchState,
                     given: Optional[list[Any]]) -> tuple[Any, list[Any], bool]:
    """The profiler of ``kernel``, the pristine inputs to check and time it on, and whether they
    are shared with other candidates (given ones, or ``cache_input_tensors``).

    The pristine inputs are never passed to a kernel or to ``ref_prog``: each gets
    :func:`fresh_copies` of them.
    """
    profiler = kernel.get_profiler(profile.supply_type)
    if given is not None:
        wanted = [getattr(p, "name", str(p)) for p in profiler._get_params()]
        if len(given) != len(wanted):  # every candidate failed with the call's count error, or ref_prog was blamed
            raise AutotuneConfigError(
                f"set_autotune_inputs gave {len(given)} input(s), but kernel {kernel.name!r} takes {len(wanted)} "
                f"({', '.join(wanted)}), in order; outputs the kernel makes (out_idx) are not inputs"
            )
        return profiler, list(given), True
    if profile.cache_input_tensors and state.inputs is not None and _compatible(state.inputs, profiler):
        return profiler, state.inputs, True
    if profile.supply_prog is not None:
        inputs = supplied_inputs(profile.supply_prog, profiler._get_params())
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
        return profiler, inputs, True
    return profiler, inputs, False


def supplied_inputs(supply_prog: Callable[..., Any], params: list[Any]) -> list[Any]:
    """What ``supply_prog(params)`` returns, as a list of one input per kernel input.

    Before, a supply_prog that raised or returned None or the wrong number of inputs failed
    every configuration with the bare error ("TypeError: 'NoneType' object is not iterable"),
    never naming supply_prog; now the run stops at once with a :class:`CallbackError` that does.
    """
    name = callable_name(supply_prog)
    try:
        produced = supply_prog(params)
    except (MissingTuningInputs, NestedTuningError):
        raise
    except Exception as exc:  # noqa: BLE001 - the same for every configuration
        raise CallbackError(f"supply_prog {name} raised {type(exc).__name__}: {exc}") from exc
    wanted = [getattr(p, "name", str(p)) for p in params]
    if produced is None or isinstance(produced, (str, bytes)) or not hasattr(produced, "__iter__"):
        raise CallbackError(
            f"supply_prog {name} must return a list of {len(params)} input(s) ({', '.join(wanted)}), one per kernel "
            f"input in order, got {type(produced).__name__}: return them, e.g. `return [a, b]`")
    inputs = list(produced)
    if len(inputs) != len(params):
        raise CallbackError(
            f"supply_prog {name} must return {len(params)} input(s) ({', '.join(wanted)}), one per kernel input in "
            f"order (outputs made by the kernel are not included), got {len(inputs)}")
    return inputs


def fresh_copies(inputs: Sequence[Any]) -> list[Any]:
    """A copy of each tensor of ``inputs`` (other values as they are): what one candidate's check
    or timing, or one call of ``ref_prog``, runs on.

    Before, every candidate and the reference ran on the shared inputs themselves: a kernel that
    writes an input (``A[i] += 1``) changed the tensors given to ``set_autotune_inputs``, and every
    later candidate was checked on the changed inputs against the reference computed on the
    original ones, so all but the first failed as ``wrong_result`` and the first always won. A
    copy costs one memory copy per input and call, far below a candidate's compile and timing.
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return list(inputs)
    return [v.detach().clone() if isinstance(v, torch.Tensor) else v for v in inputs]


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

    profiler, pristine, shared = candidate_inputs(kernel, profile, state, inputs)
    deadline = None
    if not profile.skip_check and profile.ref_prog is not None:
        expected, written = reference_outputs(profile, profiler, pristine, state, timeout, shared)  # not its time
        ins = fresh_copies(pristine)

        def reference(*args: Any) -> Any:
            if not as_output_list(expected):  # an in-place reference: what it wrote into its arguments
                _write_back(args, written)
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
    ins = fresh_copies(pristine)
    baseline = None
    if early_stop_factor is not None and state.best_latency is not None:
        baseline = state.best_latency * early_stop_factor
    n_warmup, n_repeat = max(warmup, 1), max(rep, 1)  # counts of calls: 0 would mean "from milliseconds" to do_bench
    with exclusive_timing(profiler.family) as waited, quiet_for_timing() as paused:
        if deadline is not None:
            deadline += waited + paused  # waiting for other timings and builds is not this candidate's time
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
                    profile.ref_prog, n_warmup=n_warmup, n_repeat=n_repeat, input_tensors=fresh_copies(pristine),
                    timer=profile.timer,
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


def _write_back(args: Sequence[Any], written: Sequence[Any]) -> None:
    """Copy the reference's arguments as it left them (``written``) into ``args``, the profiler's
    copies of the inputs, so that an in-place kernel (no ``out_idx``) is compared with what the
    reference wrote (:meth:`~tilelang_core.profiler.Profiler.assert_allclose`)."""
    torch = sys.modules.get("torch")
    for arg, value in zip(args, written):
        if torch is not None and isinstance(arg, torch.Tensor) and isinstance(value, torch.Tensor):
            arg.copy_(value)


def reference_outputs(profile: ProfileArgs, profiler: Any, ins: Sequence[Any], state: BenchState,
                      timeout: Optional[float], shared: bool = False) -> tuple[Any, list[Any]]:
    """What ``profile.ref_prog`` returns on a copy of ``ins``, and that copy as the reference left
    it (what an in-place reference wrote, compared with what an in-place kernel writes; before,
    such a kernel passed every check): computed once for the candidates
    that share their inputs (``shared``: ``cache_input_tensors`` or given ones), once per
    candidate otherwise, before and outside a candidate's deadline, so a slow reference never
    makes a correct candidate time out.

    Before, outputs were reused whenever the inputs were the same objects, also when a
    ``supply_prog`` refilled the same buffers with new values for each candidate: the later
    candidates were checked against the first one's reference and failed. Inputs that are not
    shared are never reused now.

    A reference call longer than ``timeout`` is not an error: a warning names ``ref_prog`` and
    says what it costs (it is called again for each new set of inputs).

    :raises CallbackError: ``ref_prog`` raised (its error chained; it would for every candidate).
    """
    from ..devices import synchronize

    if shared and state.reference is not None:
        seen, outputs, written = state.reference
        if len(seen) == len(ins) and all(a is b for a, b in zip(seen, ins)):
            return outputs, written
    start = time.monotonic()
    written = fresh_copies(ins)
    outputs = _call_reference(profile.ref_prog, written)  # type: ignore[arg-type]
    synchronize(profiler.family)
    took = time.monotonic() - start
    # shared inputs are kept: their identity is never another's
    state.reference = (list(ins), outputs, written) if shared else None
    if timeout and took > timeout and not state.slow_reference_said:
        state.slow_reference_said = True
        logger.warning(
            "ref_prog %s took %.1f s on one set of inputs, longer than the timeout of %s s per candidate: its time is "
            "not charged to the candidates, but it runs again for every new set of inputs (cache_input_tensors=True "
            "or set_autotune_inputs computes it once)", callable_name(profile.ref_prog), took, timeout,
        )
    return outputs, written


def _call_reference(ref_prog: Callable[..., Any], ins: list[Any]) -> Any:
    """``ref_prog(*ins)``; an error is the reference's, not the candidate's.

    Before, a ref_prog that raised (or did not take the kernel's inputs) failed every
    configuration with the bare error ("error: ZeroDivisionError ...") and was called again for
    each; now the first failure stops the run with a :class:`CallbackError` naming ref_prog.
    """
    try:
        return ref_prog(*ins)
    except (MissingTuningInputs, NestedTuningError):
        raise
    except Exception as exc:  # noqa: BLE001 - the same for every configuration
        raise CallbackError(
            f"ref_prog {callable_name(ref_prog)} raised {type(exc).__name__} when called with the kernel's {len(ins)} "
            f"input(s) (ref_prog(*inputs), outputs made by the kernel not included): {exc}") from exc


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
            with marked_building():
                box["kernel"] = build_candidate(resolve_function(job.func), job.args, job.kwargs, job.config,
                                                job.compile_kwargs, job.mode)
        except BaseException as exc:  # noqa: BLE001 - reported for this config
            box["error"] = exc

    thread = threading.Thread(target=target, name=f"tilelang-autotune-build-{job.index}", daemon=True)
    with build_slot():  # not while this process times a candidate (its timeout starts after the wait)
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
    except (MissingTuningInputs, NestedTuningError, CallbackError):
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
    "fresh_copies",
    "classify",
    "reference_outputs",
    "remote_device_identity",
    "run_candidate",
]
