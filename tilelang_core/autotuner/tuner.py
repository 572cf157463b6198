"""``AutoTuner``: compile every configuration, check and time each, keep the fastest.

::

    result = (AutoTuner.from_kernel(matmul_kernel, configs)
              .set_compile_args(out_idx=-1, target="c")
              .set_profile_args(ref_prog=lambda a, b: a @ b)
              .run(warmup=3, rep=20))
    result.kernel, result.config, result.latency, result.trials

Without an executor, candidates compile in parallel on this machine (:func:`tilelang.par_compile`)
and are then checked and timed one after the other in this process. With ``executor=`` (any
``concurrent.futures.Executor``: a Dask ``Client.get_executor()``, a ``ProcessPoolExecutor``),
each worker builds, checks and times its candidates on its own machine, the kernel cache in a
shared directory carries the kernels back, and this process loads the best one from it.
Workers sharing a machine time one candidate at a time per device
(:mod:`tilelang_core.autotuner.device_lock`).

Results persist in the kernel cache directory (see :mod:`tilelang_core.autotuner.records`):
a later process making the same call gets the tuned kernel without tuning or compiling.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import inspect
import logging
import threading
from typing import Any, Callable, Optional, Sequence, Union

from ..fork_locks import renew_after_fork
from ..profiler.compare import check_tolerances
from ..profiler.supply import TensorSupplyType, as_supply_type
from ..warning_location import warn
from .candidate import (
    PASS_CONFIGS_KEY,
    BenchState,
    CandidateJob,
    CandidateOutcome,
    build_candidate,
    check_and_time,
    classify,
    remote_device_identity,
    run_candidate,
)
from .capture import get_autotune_inputs
from .key import Undescribable, describe_value, tuning_key, unwrap
from .key import callable_name as _name
from .param import (
    AutotuneConfigError,
    AutotuneError,
    AutotuneResult,
    CallbackError,
    CompileArgs,
    MissingTuningInputs,
    NestedTuningError,
    ProfileArgs,
    TrialResult,
)

logger = logging.getLogger("tilelang.autotuner")

#: An argument of :meth:`AutoTuner.set_compile_args` that was not given.
_UNSET: Any = type("_Unset", (), {"__repr__": lambda self: "<not given>"})()


class AutoTuner:
    """Tunes ``fn`` (returns a prim_func, or a JITKernel) over ``configs`` (dicts of its arguments).

    ``configs`` is a list of dicts, or a callable returning one when called with the kernel
    arguments of the call (see :meth:`set_kernel_parameters`). A config's keys must be
    parameters of ``fn``, or ``pass_configs`` (merged over the compile arguments' pass_configs).
    ``cache_key`` names the behaviour of callback arguments (``ref_prog``, ``supply_prog``,
    ``manual_check_prog``): without it, results of a tuner given one are not stored on disk.
    """

    #: Results of this process by (tuning key, call): calls that differ only in arguments left
    #: out of the key (``do_not_specialize``) share the key but not the kernel.
    _memory_cache: dict[tuple[str, str], AutotuneResult] = {}
    _memory_lock = threading.Lock()  # a fork child gets a fresh one (renew_after_fork below)
    #: Tuning runs in progress on each thread (a ref_prog that tunes the same call again).
    _running = threading.local()

    @classmethod
    def clear_memory(cls) -> None:
        """Forget the results tuned in this process (``tilelang.cache.clear()`` calls it)."""
        with cls._memory_lock:
            cls._memory_cache.clear()

    def __init__(self, fn: Callable[..., Any], configs: Any, *, cache_key: Optional[str] = None) -> None:
        if not callable(fn):
            raise AutotuneConfigError(f"AutoTuner tunes a function that returns a prim_func, got {type(fn).__name__}")
        if cache_key is not None and not isinstance(cache_key, str):
            raise AutotuneConfigError(f"cache_key must be a string, got {type(cache_key).__name__}")
        self.fn = fn
        self.configs = materialize_configs(configs)
        self.cache_key = cache_key
        self.compile_args = CompileArgs(**_jit_options(fn))
        self.profile_args = ProfileArgs()
        self._kernel_args: tuple = ()
        self._kernel_kwargs: dict[str, Any] = {}
        self._key_arguments: Any = None
        self._inputs: Optional[list[Any]] = None
        self._lost: set[int] = set()  # indices of configs the executor of the last run never ran

    @classmethod
    def from_kernel(cls, kernel: Callable[..., Any], configs: Any, *, cache_key: Optional[str] = None) -> "AutoTuner":
        """An AutoTuner of ``kernel`` (a function returning a prim_func, or a ``@tilelang.jit``
        function, whose compile arguments become the defaults)."""
        return cls(kernel, configs, cache_key=cache_key)

    # -- configuration ---------------------------------------------------------------------------

    def set_compile_args(
        self,
        out_idx: Union[None, int, Sequence[int]] = _UNSET,  # type: ignore[assignment]
        target: Any = _UNSET,
        execution_backend: Optional[str] = _UNSET,  # type: ignore[assignment]
        target_host: Any = _UNSET,
        verbose: Optional[bool] = _UNSET,  # type: ignore[assignment]
        pass_configs: Optional[dict[str, Any]] = _UNSET,  # type: ignore[assignment]
        compile_flags: Union[None, str, Sequence[str]] = _UNSET,  # type: ignore[assignment]
    ) -> "AutoTuner":
        """How candidates are compiled (the arguments of ``tilelang.compile``); returns self.

        An argument not given keeps its default: the value of a ``@tilelang.jit`` function's
        own compile arguments (``AutoTuner.from_kernel(jit_fn, ...)``), else ``tilelang.compile``'s
        (``target`` ``"auto"``, ``execution_backend`` None: ``$TILELANG_EXECUTION_BACKEND``, else
        ``"auto"``; ``out_idx`` None); a ``target`` given as None is ``"auto"``. The backend name is checked now
        against the installed backends, with the errors ``tilelang.compile`` raises (not
        installed, broken, unavailable, no backend for the target).
        """
        given = {name: value for name, value in (
            ("out_idx", out_idx), ("target", target), ("execution_backend", execution_backend),
            ("target_host", target_host), ("verbose", verbose), ("pass_configs", pass_configs),
            ("compile_flags", compile_flags)) if value is not _UNSET}
        args = {**_jit_options(self.fn), **given}
        backend = args.get("execution_backend")
        if backend is not None and not isinstance(backend, str):
            raise AutotuneConfigError(
                f"execution_backend must be a backend name or 'auto' (a string), got {type(backend).__name__}"
            )
        self.compile_args = CompileArgs(
            out_idx=args.get("out_idx"),
            execution_backend=backend,
            target="auto" if args.get("target") is None else args["target"],
            target_host=args.get("target_host"),
            verbose=args.get("verbose"),
            pass_configs=args.get("pass_configs"),
            compile_flags=args.get("compile_flags"),
        )
        self._resolve()
        return self

    def set_profile_args(
        self,
        warmup: int = 25,
        rep: int = 100,
        timeout: float = 30,
        supply_type: Any = TensorSupplyType.Auto,
        ref_prog: Optional[Callable[..., Any]] = None,
        supply_prog: Optional[Callable[..., Any]] = None,
        rtol: float = 1e-2,
        atol: float = 1e-2,
        max_mismatched_ratio: float = 0.01,
        skip_check: bool = False,
        manual_check_prog: Optional[Callable[..., Any]] = None,
        cache_input_tensors: bool = False,
        backend: Optional[str] = None,
        *,
        timer: str = "auto",
        return_mode: str = "median",
    ) -> "AutoTuner":
        """How candidates are checked and timed; returns self.

        :param warmup: warm-up calls per candidate; :param rep: timed calls per candidate (ints
            >= 0, as upstream accepts them; 0 counts as 1).
        :param timeout: seconds per candidate for compiling, and again for checking and timing
            (0: no limit); the reference's outputs are computed outside it.
        :param supply_type: how generated inputs are filled (ignored with ``supply_prog``).
        :param ref_prog: reference implementation; candidates whose outputs differ from it
            (``rtol``, ``atol``, ``max_mismatched_ratio``) are skipped as wrong.
        :param supply_prog: ``supply_prog(params) -> inputs`` instead of generated inputs.
        :param skip_check: time without checking against ``ref_prog``.
        :param manual_check_prog: ``manual_check_prog(kernel_outputs, ref_outputs)`` judges instead:
            raising, or returning False, fails the candidate (``wrong_result``).
        :param cache_input_tensors: reuse one set of inputs for every candidate that fits.
        :param timer: the profiler's timer (``backend`` is upstream's name for it).
        :param return_mode: how per-call times become the latency (``median`` by default).
        """
        from ..profiler.bench import RETURN_MODES, TIMERS

        if backend is not None:
            timer = backend
        if timer not in TIMERS:
            raise AutotuneConfigError(f"timer must be one of {', '.join(TIMERS)}, got {timer!r}")
        if return_mode not in RETURN_MODES:
            raise AutotuneConfigError(f"return_mode must be one of {', '.join(RETURN_MODES)}, got {return_mode!r}")
        for name, value in (("ref_prog", ref_prog), ("supply_prog", supply_prog), ("manual_check_prog", manual_check_prog)):
            if value is not None and not callable(value):
                raise AutotuneConfigError(f"{name} must be callable, got {type(value).__name__}")
        if manual_check_prog is not None and ref_prog is None:
            raise AutotuneConfigError(
                "manual_check_prog(kernel_outputs, ref_outputs) compares with the reference's outputs: give ref_prog "
                "too (without it nothing would be checked)")
        check_tolerances(rtol, atol, max_mismatched_ratio, error=AutotuneConfigError)
        self.profile_args = ProfileArgs(
            warmup=_count(warmup, "warmup"),
            rep=_count(rep, "rep"),
            timeout=_timeout(timeout),
            timer=timer,
            supply_type=as_supply_type(supply_type),
            ref_prog=ref_prog,
            supply_prog=supply_prog,
            rtol=rtol,
            atol=atol,
            max_mismatched_ratio=max_mismatched_ratio,
            skip_check=skip_check,
            manual_check_prog=manual_check_prog,
            cache_input_tensors=cache_input_tensors,
            return_mode=return_mode,
        )
        return self

    def set_kernel_parameters(self, k_parameters: Any, f_parameters: Any = None) -> "AutoTuner":
        """The arguments every candidate is called with besides its config.

        ``k_parameters`` is ``(args, kwargs)`` (kwargs a dict or pairs); ``f_parameters`` is
        accepted for upstream compatibility and unused. Returns self.
        """
        args, kwargs = _kernel_parameters(k_parameters)
        self._kernel_args = args
        self._kernel_kwargs = kwargs
        return self

    def set_key_arguments(self, arguments: Any) -> "AutoTuner":
        """What of the call goes into the tuning key instead of the kernel parameters (the
        decorator leaves ``do_not_specialize`` parameters out this way). Returns self."""
        self._key_arguments = arguments
        return self

    def set_inputs(self, inputs: Optional[Sequence[Any]]) -> "AutoTuner":
        """Inputs to tune on (as ``set_autotune_inputs`` gives them). Returns self."""
        self._inputs = None if inputs is None else list(inputs)
        return self

    # -- resolution --------------------------------------------------------------------------

    def _resolve(self) -> tuple[Any, Any, Any]:
        """(resolved target, backend record, its capability), with compile's errors."""
        from ..backends import select_backend
        from ..backends.selection import declared_kind
        from ..lowering import resolve_target

        args = self.compile_args
        resolved = resolve_target(args.target, args.target_host)
        kind = resolved.kind.name
        record = select_backend(args.execution_backend, kind)  # None: $TILELANG_EXECUTION_BACKEND, else auto
        assert record.spec is not None
        capability = record.spec.targets[declared_kind(record, kind)]
        return resolved, record, capability

    def _configs(self) -> list[dict[str, Any]]:
        configs = self.configs
        if callable(configs):
            configs = self._called_configs(configs)
        if isinstance(configs, dict):
            raise AutotuneConfigError(
                "configs must be a list of dicts (one per candidate), got a single dict; wrap it in a list "
                "or build the product with itertools.product"
            )
        try:
            configs = list(configs)
        except TypeError:
            raise AutotuneConfigError(f"configs must be a list of dicts or a callable, got {type(configs).__name__}") from None
        if not configs:
            raise AutotuneConfigError("configs is empty: give at least one configuration to tune")
        params = _parameters(self.fn)
        for i, config in enumerate(configs):
            if not isinstance(config, dict):
                raise AutotuneConfigError(f"configs[{i}] must be a dict of argument values, got {type(config).__name__}")
            if params is not None:
                unknown = [k for k in config if k not in params and k != PASS_CONFIGS_KEY]
                if unknown:
                    raise AutotuneConfigError(
                        f"configs[{i}] names {', '.join(map(repr, unknown))}, which {_name(self.fn)}() does not take "
                        f"(its parameters: {', '.join(params)})"
                    )
        return [dict(c) for c in configs]

    def _called_configs(self, configs: Callable[..., Any]) -> Any:
        """What the ``configs`` callable returns for this call's arguments.

        Before, its error came out bare (a ``ZeroDivisionError`` with no word of ``configs``);
        now an :class:`AutotuneConfigError` names it, with the original error chained.
        """
        try:
            return configs(*self._kernel_args, **self._kernel_kwargs)
        except AutotuneConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported as the configs' error
            raise AutotuneConfigError(
                f"configs {_name(configs)} (called with the kernel arguments {self._kernel_args!r}, "
                f"{self._kernel_kwargs!r} to make the list of configurations) raised {type(exc).__name__}: {exc}"
            ) from exc

    def _key(self, configs, resolved, record, device) -> Optional[str]:
        from ..cache.location import cache_disabled

        callbacks = self.profile_args.callbacks()
        if cache_disabled() or (callbacks and self.cache_key is None):
            return None
        host = getattr(resolved, "host", None)
        p = self.profile_args
        try:
            return self._tuning_key(configs, resolved, record, device, host, p, callbacks)
        except Undescribable as exc:
            warn(f"the tuning result of {_name(self.fn)} is not kept (in memory or on disk), so each run "
                 f"tunes again: {exc}", RuntimeWarning)
            return None

    def _tuning_key(self, configs, resolved, record, device, host, p, callbacks) -> str:
        return tuning_key(
            function=self.fn,
            arguments=self._key_arguments if self._key_arguments is not None else (self._kernel_args, self._kernel_kwargs),
            configs=configs,
            target=str(resolved),
            backend=(record.name, record.version or "0"),
            compile_args={
                "out_idx": self.compile_args.out_idx,
                "target_host": str(host) if host is not None else None,
                "pass_configs": self.compile_args.pass_configs,
                "compile_flags": self.compile_args.compile_flags,
            },
            profile_args={
                "warmup": p.warmup,
                "rep": p.rep,
                "timeout": p.timeout,
                "timer": p.timer,
                "supply_type": as_supply_type(p.supply_type).name,
                "rtol": p.rtol,
                "atol": p.atol,
                "max_mismatched_ratio": p.max_mismatched_ratio,
                "skip_check": p.skip_check,
                "cache_input_tensors": p.cache_input_tensors,
                "return_mode": p.return_mode,
                "callbacks": callbacks,
            },
            inputs=self._tuning_inputs(),
            device=device,
            explicit=self.cache_key,
        )

    def _tuning_inputs(self) -> Optional[list[Any]]:
        captured = get_autotune_inputs()
        return captured if captured is not None else self._inputs

    # -- running ---------------------------------------------------------------------------------

    def run(
        self,
        warmup: Optional[int] = None,
        rep: Optional[int] = None,
        timeout: Optional[float] = None,
        *,
        executor: Optional[concurrent.futures.Executor] = None,
        num_workers: Optional[int] = None,
        progress: bool = True,
        early_stop: bool = False,
        early_stop_factor: float = 2.0,
        **ignored: Any,
    ) -> AutotuneResult:
        """Tune and return the :class:`AutotuneResult` (or the stored one for the same key).

        :param warmup: warm-up calls per candidate (default: the profile arguments').
        :param rep: timed calls per candidate (default: the profile arguments').
        :param timeout: seconds per candidate (default: the profile arguments').
        :param executor: run candidates there (``concurrent.futures.Executor`` interface, e.g.
            ``distributed.Client(...).get_executor()``); default: this machine.
        :param num_workers: compile threads on this machine (default: its usable cores).
        :param progress: show progress bars.
        :param early_stop: stop timing a candidate whose first calls are already slower than
            ``early_stop_factor`` times the best so far (this machine only).
        :raises AutotuneConfigError: bad configs or arguments.
        :raises AutotuneError: no configuration compiled, ran and passed the check.
        """
        if ignored:
            unknown = sorted(k for k in ignored if k not in _UPSTREAM_RUN_OPTIONS)
            if unknown:
                raise TypeError(f"AutoTuner.run() got unexpected keyword argument(s): {', '.join(unknown)}")
        if early_stop and early_stop_factor < 1.0:
            raise AutotuneConfigError(f"early_stop_factor must be >= 1.0, got {early_stop_factor}")
        if executor is not None and not callable(getattr(executor, "submit", None)):
            raise AutotuneConfigError(
                f"executor must have the concurrent.futures.Executor interface (submit), got {type(executor).__name__}"
            )
        p = self.profile_args
        warmup = p.warmup if warmup is None else _count(warmup, "warmup")
        rep = p.rep if rep is None else _count(rep, "rep")
        timeout = p.timeout if timeout is None else _timeout(timeout)
        if (warmup, rep, timeout) != (p.warmup, p.rep, p.timeout):
            self.profile_args = p = _replace(p, warmup=warmup, rep=rep, timeout=timeout)

        configs = self._configs()
        resolved, record, _capability = self._resolve()
        from ..lowering.target import device_of

        family = device_of(resolved.kind.name)
        device = self._device(family, executor)
        key = self._key(configs, resolved, record, device)

        with self._not_nested(key):
            return self._run_keyed(configs, resolved, record, family, device, key, executor, num_workers, progress,
                                   early_stop, early_stop_factor)

    def _run_keyed(self, configs, resolved, record, family, device, key, executor, num_workers, progress, early_stop,
                   early_stop_factor) -> AutotuneResult:
        from .records import TuningStore, tuning_cache_disabled

        if key is None or tuning_cache_disabled():
            return self._tune(configs, resolved, record, family, device, None, executor, num_workers, progress, early_stop,
                              early_stop_factor)
        memory_key = (key, self._call_digest())
        with self._memory_lock:
            cached = self._memory_cache.get(memory_key)
        if cached is not None and cached.kernel is not None:
            return cached
        store = TuningStore.active()
        lock = store.lock(key) if store is not None else contextlib.nullcontext()
        with lock:
            if store is not None:
                stored = self._from_record(store, key, configs)
                if stored is not None:
                    with self._memory_lock:
                        self._memory_cache[memory_key] = stored
                    return stored
            result = self._tune(configs, resolved, record, family, device, key, executor, num_workers, progress,
                                early_stop, early_stop_factor)
            if self._lost:
                self._warn_not_kept(result)
                return result
            if store is not None:
                self._save(store, key, result, resolved, record)
        with self._memory_lock:
            self._memory_cache[memory_key] = result
        return result

    def _warn_not_kept(self, result: AutotuneResult) -> None:
        """Say that a run in which the executor lost candidates is used but not kept.

        Before, configurations an executor never ran (a lost worker: ``BrokenProcessPool``,
        Dask's ``KilledWorker``, or no result within its deadline) were stored as failed with the
        rest, and every later process read that incomplete result back and never tuned them.
        """
        lost = [t for t in result.trials if t.index in self._lost]
        warn(
            f"the tuning result of {_name(self.fn)} is not stored on disk (nor in AutoTuner's memory), so the "
            f"next run tunes again: the executor did not run {len(lost)} of {len(result.trials)} configuration(s) "
            f"({', '.join(str(t.config) for t in lost)}); the best of the others is used for now",
            RuntimeWarning)

    @contextlib.contextmanager
    def _not_nested(self, key: Optional[str]) -> Any:
        """Refuse to tune a call again while this thread is tuning it (a ``ref_prog`` or
        ``supply_prog`` that calls the tuned function with the arguments being tuned): it would
        wait for its own lock, or recurse without end."""
        ident = key or f"{id(unwrap(self.fn))}:{self._call_digest(during_run=True)}"
        running = getattr(self._running, "idents", None)
        if running is None:
            running = self._running.idents = set()
        if ident in running:
            raise NestedTuningError(
                f"{_name(self.fn)} is being tuned for these arguments, and tuning it was started again from "
                f"inside that run (its ref_prog, supply_prog or manual_check_prog calls it with the same "
                f"arguments): a reference must not be the kernel being tuned; give a reference that computes the "
                f"result another way, or call it with a fixed config (f(..., block_M=64) is not tuned)"
            )
        running.add(ident)
        try:
            yield
        finally:
            running.discard(ident)

    def _call_digest(self, during_run: bool = False) -> str:
        """A digest of this call's complete arguments (``set_kernel_parameters``).

        An argument known only by its address (see :mod:`.key`) makes it a digest no other call
        has, or, ``during_run`` (while the arguments are alive, so no address is reused), the
        digest of that address."""
        import hashlib
        import json
        import uuid

        call = (self._kernel_args, self._kernel_kwargs)
        try:
            text = json.dumps(describe_value(call, pin=id if during_run else None), sort_keys=True)
        except Undescribable:
            text = uuid.uuid4().hex
        return hashlib.sha256(text.encode()).hexdigest()

    def __call__(self) -> AutotuneResult:
        return self.run()

    def generate_cache_key(self, parameters: Any = None, extra_parameters: Any = None) -> Optional[str]:  # noqa: ARG002
        """The key under which :meth:`run` stores and finds its result (64 hex digits), or None
        when the result is not stored: the cache is disabled, or a callback (``ref_prog``,
        ``supply_prog``, ``manual_check_prog``) is given without ``cache_key``.

        Upstream TileLang's name. Its ``parameters`` and ``extra_parameters`` (the tuned
        function's signature and extra values to hash) are accepted and not needed: the key
        covers the function, the call's arguments, the configs, the target and backend, and
        every compile and profile setting that changes the result.
        """
        from ..lowering.target import device_of

        configs = self._configs()
        resolved, record, _capability = self._resolve()
        return self._key(configs, resolved, record, self._device(device_of(resolved.kind.name), None))

    def _device(self, family: str, executor: Optional[concurrent.futures.Executor]) -> dict[str, Any]:
        """Identity of the device candidates are timed on (asked of a worker with an executor)."""
        from ..devices import device_identity

        if executor is None:
            return device_identity(family)
        budget = executor_budget(self.profile_args.timeout)
        future = executor.submit(remote_device_identity, family)
        try:
            return future.result(timeout=budget)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise AutotuneError(
                f"the executor did not say which device its workers time on within {budget:g} s: its workers may all be "
                f"busy, e.g. with candidates of an earlier run whose calls never returned; restart them and tune again"
            ) from None

    def _compile_kwargs(self, resolved: Any, record: Any) -> dict[str, Any]:
        """Compile arguments with the target and backend resolved once for every candidate."""
        kwargs = self.compile_args.as_kwargs()
        kwargs["target"] = str(resolved)
        kwargs["execution_backend"] = record.name
        return kwargs

    def _tune(self, configs, resolved, record, family, device, key, executor, num_workers, progress, early_stop,
              early_stop_factor) -> AutotuneResult:
        compile_kwargs = self._compile_kwargs(resolved, record)
        inputs = self._tuning_inputs()
        self._lost: set[int] = set()  # configs the executor never ran (see _warn_not_kept)
        if executor is None:
            trials, kernels, ref_latency = self._tune_here(
                configs, compile_kwargs, inputs, num_workers, progress, early_stop_factor if early_stop else None
            )
            timer = self._timer(family)
            best = _best(trials)
            if best is None:
                raise _no_success(self.fn, trials)
            kernel = kernels[best.index]
        else:
            trials, outcomes, ref_latency, device = self._tune_on(executor, configs, compile_kwargs, inputs, progress,
                                                                  device)
            best = _best(trials)
            if best is None:
                raise _no_success(self.fn, trials)
            outcome = outcomes[best.index]
            timer = outcome.timer or self._timer(family)
            kernel = self._collect(outcome, configs[best.index], compile_kwargs)
        _annotate(kernel, best, ref_latency)
        return AutotuneResult(
            latency=best.latency,
            config=dict(best.config),
            ref_latency=ref_latency,
            libcode=kernel.get_kernel_source(),
            kernel=kernel,
            trials=trials,
            timer=timer,
            device=device,
            cache_key=key,
            kernel_cache_key=kernel.cache_key,
            from_cache=False,
            best_index=best.index,
        )

    def _timer(self, family: str) -> str:
        from ..profiler.bench import resolve_timer

        return resolve_timer(self.profile_args.timer, family)

    def _build(self, config: dict[str, Any], compile_kwargs: dict[str, Any]) -> Any:
        return build_candidate(unwrap_jit(self.fn), self._kernel_args, self._kernel_kwargs, config, compile_kwargs,
                               jit_mode(self.fn))

    def _tune_here(self, configs, compile_kwargs, inputs, num_workers, progress, early_stop_factor):
        from ..jit.parallel import par_compile

        p = self.profile_args
        builders = [functools.partial(self._build, c, compile_kwargs) for c in configs]
        built = par_compile(builders, errors="return", num_workers=num_workers, progress=progress,
                            timeout=p.timeout or None)
        trials: list[Optional[TrialResult]] = [None] * len(configs)
        kernels: dict[int, Any] = {}
        for i, item in enumerate(built):
            if isinstance(item, BaseException):
                status, reason = classify(item)
                trials[i] = TrialResult(i, configs[i], "compile_error" if status == "error" else status, reason=reason)
                _report(trials[i])
            else:
                kernels[i] = item
        state = BenchState()
        bar = _progress(len(kernels), progress, "tilelang.autotune")
        try:
            for i, kernel in kernels.items():
                try:
                    latency = check_and_time(kernel, p, warmup=p.warmup, rep=p.rep, timeout=p.timeout, state=state,
                                             inputs=inputs, early_stop_factor=early_stop_factor)
                    trials[i] = TrialResult(i, configs[i], "ok", latency=latency)
                    logger.info("config %d %s: %.4f ms", i, configs[i], latency)
                except (MissingTuningInputs, NestedTuningError, CallbackError):
                    raise  # every configuration would fail the same way
                except Exception as exc:  # noqa: BLE001 - one config never aborts the run
                    status, reason = classify(exc)
                    trials[i] = TrialResult(i, configs[i], status, reason=reason)
                    _report(trials[i])
                if bar is not None:
                    bar.update(1)
                    best = _best([t for t in trials if t is not None])
                    if best is not None:
                        bar.set_postfix(best_ms=f"{best.latency:.4g}")
        finally:
            if bar is not None:
                bar.close()
        return [t for t in trials if t is not None], kernels, state.ref_latency

    def _tune_on(self, executor, configs, compile_kwargs, inputs, progress, device):
        from ..cache.location import default_cache_dir

        from .candidate import FunctionRef

        p = self.profile_args
        func = FunctionRef(unwrap_jit(self.fn))
        if not func.importable():
            warn(
                f"{_name(self.fn)} is not importable by module and name ({func.module}), so it is sent to the workers "
                f"by value, without its source file, which TVMScript needs to parse kernels; define it in a module the "
                f"workers can import",
                RuntimeWarning,
            )
        jobs = [
            CandidateJob(
                index=i,
                config=c,
                func=func,
                args=self._kernel_args,
                kwargs=self._kernel_kwargs,
                compile_kwargs=compile_kwargs,
                profile=p,
                warmup=p.warmup,
                rep=p.rep,
                timeout=p.timeout or None,
                inputs=inputs,
                cache_dir=str(default_cache_dir()),
                mode=jit_mode(self.fn),
            )
            for i, c in enumerate(configs)
        ]
        futures = {executor.submit(run_candidate, job): job.index for job in jobs}
        outcomes: dict[int, CandidateOutcome] = {}
        trials: dict[int, TrialResult] = {}
        bar = _progress(len(jobs), progress, "tilelang.autotune (executor)")
        budget = executor_budget(p.timeout)
        try:
            for future, index in self._completed(futures, budget):
                try:
                    outcome = future.result(timeout=0) if future is not None else None
                except (MissingTuningInputs, NestedTuningError, CallbackError):
                    for other in futures:
                        other.cancel()
                    raise  # every configuration would fail the same way
                except Exception as exc:  # noqa: BLE001 - a lost worker, an unpicklable job, ...
                    outcome = CandidateOutcome(index, "error", reason=f"the executor failed to run it: "
                                                                      f"{type(exc).__name__}: {exc}")
                    self._lost.add(index)
                if outcome is None:  # no result in time: the worker is left running it
                    self._lost.add(index)
                    outcome = CandidateOutcome(index, "timeout", reason=(
                        f"the executor gave no result for it within {budget:g} s after the last candidate finished "
                        f"(3 x the timeout of {p.timeout:g} s, for its compile, its check and timing and the "
                        f"reference's timing, plus {executor_grace(p.timeout):g} s): a call that never returns, or a "
                        f"worker that never started it; that worker may still be running it (the tuner cannot stop "
                        f"it: restart the worker, or end the executor's processes)"))
                outcomes[index] = outcome
                trials[index] = TrialResult(index, configs[index], outcome.status, latency=outcome.latency,
                                            reason=outcome.reason, worker=outcome.worker)
                if outcome.status == "ok":
                    logger.info("config %d %s: %.4f ms on %s", index, configs[index], outcome.latency, outcome.worker)
                else:
                    _report(trials[index])
                if bar is not None:
                    bar.update(1)
        finally:
            if bar is not None:
                bar.close()
        ordered = [trials[i] for i in sorted(trials)]
        devices = {describe_key(o.device) for o in outcomes.values() if o.status == "ok"}
        if len(devices) > 1:
            warn(
                f"the executor's workers timed candidates on {len(devices)} different devices; their latencies are "
                f"not comparable (use workers with identical devices)",
                RuntimeWarning,
            )
        oks = [o for o in outcomes.values() if o.status == "ok"]
        if oks and oks[0].device:
            device = oks[0].device
        ref = next((o.ref_latency for o in oks if o.ref_latency is not None), None)
        return ordered, outcomes, ref, device

    @staticmethod
    def _completed(futures: dict[Any, int], budget: Optional[float]) -> Any:
        """``(future, index)`` as the futures finish (in index order when several do at once);
        ``(None, index)`` for each one still unfinished once none has finished for ``budget``
        seconds (None: wait for ever). The clock restarts whenever one finishes, so candidates
        waiting in the executor's queue behind slow ones are not counted as late; those left
        are cancelled (a queued one does not start; a running one cannot be stopped)."""
        import time

        pending = set(futures)
        last = time.monotonic()
        while pending:
            wait = None if budget is None else max(0.0, last + budget - time.monotonic())
            done, pending = concurrent.futures.wait(pending, timeout=wait,
                                                    return_when=concurrent.futures.FIRST_COMPLETED)
            if done:
                last = time.monotonic()
                for future in sorted(done, key=lambda f: futures[f]):
                    yield future, futures[future]
                continue
            for future in sorted(pending, key=lambda f: futures[f]):
                future.cancel()
                yield None, futures[future]
            return

    def _collect(self, outcome: CandidateOutcome, config: dict[str, Any], compile_kwargs: dict[str, Any]) -> Any:
        """The best kernel, from the shared kernel cache (or built here when it is not there)."""
        from ..cache.location import default_cache_dir
        from .records import load_cached_kernel

        kernel = None
        if outcome.kernel_cache_key:
            kernel = load_cached_kernel(outcome.kernel_cache_key, *outcome.backend)
        if kernel is None:
            here = str(default_cache_dir())
            why = (
                f"the worker's kernel cache is {outcome.cache_dir}, this process's is {here}: set TILELANG_CACHE_DIR "
                f"to one shared directory on every machine"
                if outcome.cache_dir and outcome.cache_dir != here
                else "its backend cannot save kernels, or the entry is gone"
            )
            logger.warning("the best kernel (config %s) is not in this process's kernel cache (%s); compiling it here",
                           config, why)
            kernel = self._build(config, compile_kwargs)
        return kernel

    # -- persistence -------------------------------------------------------------------------

    def _save(self, store: Any, key: str, result: AutotuneResult, resolved: Any, record: Any) -> None:
        from .records import NotEncodable, TrialRecord, encode_config, new_record

        try:
            trials = [
                TrialRecord(index=t.index, config=encode_config(t.config), status=t.status, latency=t.latency,
                            reason=t.reason[:4000], worker=t.worker)
                for t in result.trials
            ]
            best = next(t for t in result.trials if t.index == result.best_index)
            doc = new_record(
                key=key,
                function=_name(self.fn),
                best_index=best.index,
                best_config=encode_config(result.config or {}),
                latency=float(result.latency),
                ref_latency=result.ref_latency,
                timer=result.timer,
                device=result.device,
                target=_readable_target(resolved),
                backend_name=record.name,
                backend_version=record.version or "0",
                kernel_cache_key=result.kernel_cache_key,
                call=self._call_digest(),
                trials=trials,
            )
        except NotEncodable as exc:
            warn(f"the tuning result of {_name(self.fn)} is not stored on disk: a config holds {exc}, which "
                 f"JSON cannot hold", RuntimeWarning)
            return
        store.save(doc)

    def _from_record(self, store: Any, key: str, configs: list[dict[str, Any]]) -> Optional[AutotuneResult]:
        from .records import decode_config

        doc = store.load(key)
        if doc is None:
            return None
        config = decode_config(doc.best_config)
        # The kernel of the best config is defined again, not loaded by the stored kernel cache
        # key: the key hashes the kernel's TIR, so code the tuned function calls (a T.macro or
        # helper in another module, which the tuning key cannot see) is noticed when it changed.
        # Unchanged, this is a kernel cache hit (no lowering, no compiling).
        resolved, record, _ = self._resolve()
        try:
            kernel = self._build(config, self._compile_kwargs(resolved, record))
        except Exception as exc:  # noqa: BLE001 - the stored best config no longer builds: tune again
            logger.info("%s's tuned config %s no longer builds (%s: %s): tuning again", _name(self.fn), config,
                        type(exc).__name__, exc)
            return None
        # The stored kernel key is that of the tuned call; a call differing from it only in arguments
        # left out of the tuning key (do_not_specialize) has a kernel of its own, not comparable.
        # (Comparing it tuned again in every process whose first such value differed.)
        same_call = not doc.call or doc.call == self._call_digest()
        if same_call and doc.kernel_cache_key and kernel.cache_key and kernel.cache_key != doc.kernel_cache_key:
            logger.info("the kernel of %s's tuned config %s changed since it was tuned (code it calls, the compiler "
                        "or the backend): tuning again", _name(self.fn), config)
            return None
        if same_call and kernel.cache_key and kernel.cache_key != doc.kernel_cache_key:
            doc.kernel_cache_key = kernel.cache_key
            store.save(doc)
        trials = [TrialResult(t.index, decode_config(t.config), t.status, t.latency, t.reason, t.worker) for t in doc.trials]
        best = TrialResult(doc.best_index, config, "ok", doc.latency)
        _annotate(kernel, best, doc.ref_latency)
        return AutotuneResult(
            latency=doc.latency,
            config=config,
            ref_latency=doc.ref_latency,
            libcode=kernel.get_kernel_source(),
            kernel=kernel,
            trials=trials,
            timer=doc.timer,
            device=doc.device,
            cache_key=key,
            kernel_cache_key=kernel.cache_key,
            from_cache=True,
            best_index=doc.best_index,
        )


# -- helpers -----------------------------------------------------------------------------------

_UPSTREAM_RUN_OPTIONS = {"use_pipeline", "enable_grouped_compile", "group_compile_size", "benchmark_devices",
                         "benchmark_multi_gpu"}


def _readable_target(resolved: Any) -> str:
    from ..lowering.target import target_string

    try:
        return target_string(resolved)
    except Exception:  # noqa: BLE001 - only for people reading the record
        return str(resolved)


def describe_key(value: Any) -> str:
    import json

    return json.dumps(describe_value(value), sort_keys=True)


def unwrap_jit(fn: Any) -> Callable[..., Any]:
    """The Python function of a ``@tilelang.jit`` function (``fn`` itself otherwise)."""
    from ..jit.decorator import JitFunction

    return fn.func if isinstance(fn, JitFunction) else fn


def jit_mode(fn: Any) -> str:
    """The style a ``@tilelang.jit`` function was given (``mode=``, or decided on its first call);
    ``"auto"`` for a plain function."""
    from ..jit.decorator import JitFunction

    return fn.mode if isinstance(fn, JitFunction) else "auto"


def _jit_options(fn: Any) -> dict[str, Any]:
    """Compile arguments of a ``@tilelang.jit`` function (empty for a plain function).

    Read from its ``options`` dict, or from attributes of the same names (upstream's layout).
    """
    from ..jit.decorator import JitFunction

    if not isinstance(fn, JitFunction):
        return {}
    fields = ("out_idx", "execution_backend", "target", "target_host", "verbose", "pass_configs", "compile_flags")
    options = getattr(fn, "options", None)
    if isinstance(options, dict):
        return {k: options[k] for k in fields if k in options}
    return {k: getattr(fn, k) for k in fields if hasattr(fn, k)}


def _parameters(fn: Any) -> Optional[list[str]]:
    try:
        sig = inspect.signature(unwrap(fn))
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values()):
        return None
    return list(sig.parameters)


def _count(value: Any, name: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise AutotuneConfigError(f"{name} must be an int >= {minimum} (a number of calls), got {value!r}")
    return value


def materialize_configs(configs: Any) -> Any:
    """``configs`` as given, except an iterator or generator, read once into a list here (it
    was used up by the first look, and tuning then said 'configs is empty')."""
    if callable(configs) or isinstance(configs, (dict, list, tuple, str, bytes)) or not hasattr(configs, "__iter__"):
        return configs
    return list(configs)


#: Seconds an executor's worker gets beyond 3 x the timeout (at least; the timeout itself when
#: larger) to start a candidate's job, import what it needs and report back.
EXECUTOR_GRACE_S = 5.0


def executor_grace(timeout: float) -> float:
    """The seconds beyond 3 x ``timeout`` an executor's candidate gets (see :func:`executor_budget`)."""
    return max(float(timeout), EXECUTOR_GRACE_S)


def executor_budget(timeout: float) -> Optional[float]:
    """How long the tuner waits for the next result from an executor before it records the
    candidates still unfinished as ``timeout``: 3 x ``timeout`` (a candidate's compile, its check
    and timing, the reference's timing) plus :func:`executor_grace`; None (for ever) when
    ``timeout`` is 0."""
    if not timeout:
        return None
    return 3 * float(timeout) + executor_grace(timeout)


def _timeout(value: Any) -> float:
    """``value`` as a timeout in seconds. NaN and infinity are refused here, where they are given
    (before, ``timeout=float('nan')`` was accepted by the decorator and failed at its first call)."""
    import math

    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or value < 0):
        raise AutotuneConfigError(f"timeout must be a finite number of seconds >= 0 (0: no limit), got {value!r}")
    return float(value)


def _kernel_parameters(k_parameters: Any) -> tuple[tuple, dict[str, Any]]:
    """``(args, kwargs)`` of :meth:`AutoTuner.set_kernel_parameters`, checked.

    Before, a malformed value (``((64,))``, which is ``(64,)``) failed with Python's "not enough
    values to unpack"; now the error names k_parameters and shows the expected form.
    """
    expected = "k_parameters must be a pair (args, kwargs), e.g. ((64,), {}) or ((64,), {'block': 32})"
    if not isinstance(k_parameters, (tuple, list)) or len(k_parameters) != 2:
        raise AutotuneConfigError(f"{expected}, got {k_parameters!r}")
    args, kwargs = k_parameters
    if not isinstance(args, (tuple, list)):
        raise AutotuneConfigError(f"{expected}: its args must be a tuple or list, got {type(args).__name__} {args!r}")
    try:
        kwargs = dict(kwargs)
    except (TypeError, ValueError):
        raise AutotuneConfigError(
            f"{expected}: its kwargs must be a dict (or name-value pairs), got {type(kwargs).__name__} {kwargs!r}"
        ) from None
    if not all(isinstance(k, str) for k in kwargs):
        raise AutotuneConfigError(f"{expected}: the names of its kwargs must be strings, got {list(kwargs)!r}")
    return tuple(args), kwargs


def _replace(profile: ProfileArgs, **changes: Any) -> ProfileArgs:
    import dataclasses

    return dataclasses.replace(profile, **changes)


def _best(trials: Sequence[TrialResult]) -> Optional[TrialResult]:
    ok = [t for t in trials if t.ok and t.latency is not None]
    return min(ok, key=lambda t: (t.latency, t.index)) if ok else None


def _no_success(fn: Any, trials: Sequence[TrialResult]) -> AutotuneError:
    lines = [f"  [{t.index}] {t.config}: {t.status}: {t.reason.splitlines()[0] if t.reason else ''}" for t in trials]
    return AutotuneError(
        f"autotuning {_name(fn)} found no configuration that compiled, ran and passed the check:\n" + "\n".join(lines),
        trials,
    )


def _report(trial: TrialResult) -> None:
    first = trial.reason.splitlines()[0] if trial.reason else ""
    logger.warning("config %d %s skipped (%s): %s", trial.index, trial.config, trial.status, first)


def _annotate(kernel: Any, best: TrialResult, ref_latency: Optional[float]) -> None:
    """Upstream's ``kernel.latency``, ``kernel.config``, ``kernel.ref_latency``."""
    try:
        kernel.latency = best.latency
        kernel.config = dict(best.config)
        kernel.ref_latency = ref_latency
    except AttributeError:  # a kernel type without instance attributes
        pass


def _progress(total: int, enabled: bool, desc: str) -> Any:
    if not enabled or total == 0:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover
        return None
    return tqdm(total=total, desc=desc, unit="config", leave=False)

renew_after_fork(AutoTuner, "_memory_lock")


__all__ = ["AutoTuner"]
