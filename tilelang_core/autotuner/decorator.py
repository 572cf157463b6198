"""``@tilelang.autotune(configs=...)`` stacked on ``@tilelang.jit``: tune once per call signature.

::

    @tilelang.autotune(configs=[{"block_M": 32, "block_N": 32}, {"block_M": 64, "block_N": 64}])
    @tilelang.jit(out_idx=-1)
    def matmul(M, N, K, block_M=32, block_N=32):
        ...                      # returns a T.prim_func

    kernel = matmul(1024, 1024, 1024)   # tunes block_M/block_N (or reads the stored result)
    kernel = matmul(1024, 1024, 1024)   # same arguments: the same kernel, no work

Called with torch tensors (``matmul_direct(a, b)``), copies of the tensors are the tuning inputs (a kernel
that writes its arguments changes them once) and the
call runs the best kernel on them, as ``@tilelang.jit``'s direct form does.
"""

from __future__ import annotations

import inspect
import logging
import sys
import threading
from typing import Any, Callable, Optional, Sequence

from ..fork_locks import renew_after_fork
from ..profiler.supply import TensorSupplyType
from .capture import get_autotune_inputs
from .key import describe_value
from .param import AutotuneConfigError, AutotuneResult
from .tuner import AutoTuner, _jit_options, materialize_configs


def _freeze(value: Any, keep: dict[str, Any]) -> str:
    """``value`` as a string key. A value known only by its address is keyed by that address,
    and ``value`` is then kept alive in ``keep`` (so no later object can get the address)."""
    import json

    pinned: list[Any] = []

    def pin(obj: Any) -> int:
        pinned.append(obj)
        return id(obj)

    text = json.dumps(describe_value(value, pin=pin), sort_keys=True)
    if pinned:
        keep[text] = value
    return text


class AutoTuneImpl:
    """A ``@tilelang.jit`` function wrapped by ``@tilelang.autotune``; call it like the original.

    Attributes: ``jit_impl`` (the ``@tilelang.jit`` function), ``configs``, the profile options,
    ``results`` (the :class:`AutotuneResult` of each tuned call signature, by key) and
    ``_tuner_cache`` (upstream's name for the same table).
    """

    def __init__(self, jit_impl: Any, configs: Any, **options: Any) -> None:
        self.jit_impl = jit_impl
        self.configs = materialize_configs(configs)
        self.warmup = options.pop("warmup")
        self.rep = options.pop("rep")
        self.timeout = options.pop("timeout")
        self.do_not_specialize = tuple(options.pop("do_not_specialize") or ())
        self.early_stop = options.pop("early_stop")
        self.early_stop_factor = options.pop("early_stop_factor")
        self.executor = options.pop("executor")
        self.cache_key = options.pop("cache_key")
        self.profile_options = options
        self._tuner_cache: dict[Any, AutotuneResult] = {}
        self._told_untuned: set = set()  # the tuned parameters calls gave, already logged (_explicit_tunables)
        self._kernels: dict[Any, Any] = {}
        self._given_kernels: dict[Any, tuple] = {}  # calls that give tuned parameters: (kernel, key) (_given_kernel)
        self._tuned_call: dict[Any, str] = {}
        self._kept: dict[str, Any] = {}  # arguments keyed by the address of a value in them (_freeze)
        # re-entrant: a ref_prog/supply_prog may call this function with other arguments while it
        # is being tuned (a plain Lock hung for ever); the same arguments are refused by the tuner
        self._lock = threading.RLock()
        renew_after_fork(self, "_lock")  # held for a whole tuning run: a fork child gets a fresh one
        self.func = getattr(jit_impl, "func", jit_impl)
        self.signature = _with_const_keywords(inspect.signature(self.func), jit_impl)
        # the options are checked now, where the decorator is written, not at the first call
        AutoTuner(jit_impl, self.configs, cache_key=self.cache_key).set_profile_args(
            warmup=self.warmup, rep=self.rep, timeout=self.timeout, **self.profile_options)
        if self.early_stop and (isinstance(self.early_stop_factor, bool)
                                or not isinstance(self.early_stop_factor, (int, float)) or self.early_stop_factor < 1.0):
            raise AutotuneConfigError(f"early_stop_factor must be a number >= 1.0, got {self.early_stop_factor!r}")
        if self.executor is not None and not callable(getattr(self.executor, "submit", None)):
            raise AutotuneConfigError(f"executor must have the concurrent.futures.Executor interface (submit), got "
                                      f"{type(self.executor).__name__}")
        unknown = [n for n in self.do_not_specialize if n not in self.signature.parameters]
        if unknown:
            raise AutotuneConfigError(
                f"do_not_specialize names {', '.join(map(repr, unknown))}, which {self.func.__qualname__}() does not "
                f"take (its parameters: {', '.join(self.signature.parameters)})"
            )
        try:
            import functools

            functools.update_wrapper(self, self.func)
        except AttributeError:  # pragma: no cover
            pass

    def __reduce__(self) -> str:
        """Pickled by reference, as the function it decorates would be: by its module and
        qualified name (a decorated function at a module's top level pickles, a local one cannot;
        what it compiled stays behind)."""
        return getattr(self, "__qualname__", None) or type(self).__qualname__

    @property
    def results(self) -> dict[Any, AutotuneResult]:
        return dict(self._tuner_cache)

    def get_tuner(self) -> AutoTuner:
        """A fresh :class:`AutoTuner` with this decorator's options."""
        return (
            AutoTuner(self.jit_impl, self.configs, cache_key=self.cache_key)
            .set_compile_args(**_jit_options(self.jit_impl))
            .set_profile_args(warmup=self.warmup, rep=self.rep, timeout=self.timeout, **self.profile_options)
        )

    get_tunner = get_tuner  # upstream's spelling

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return_kernel = kwargs.pop("__return_kernel", False)
        torch = sys.modules.get("torch")
        self._refuse_tensor_keywords(kwargs, torch)
        tensors = [a for a in args if torch is not None and isinstance(a, torch.Tensor)]
        call_args, inputs, target = self._specs(args) if tensors else (args, None, None)
        try:
            bound = self.signature.bind_partial(*call_args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self.func.__qualname__}(): {exc}") from None
        configs_given = self._explicit_tunables(bound, (call_args, kwargs))
        if configs_given:
            kernel = self._given_kernel(call_args, kwargs, bound, target)
        else:
            kernel = self._tuned_kernel(call_args, kwargs, bound, inputs, target)
        if tensors and not return_kernel:
            return kernel(*tensors)
        return kernel

    def _refuse_tensor_keywords(self, kwargs: dict[str, Any], torch: Any) -> None:
        """Refuse torch tensors passed by keyword, as ``@tilelang.jit`` does.

        Before, such a tensor was keyed by its shape, dtype and device only (the direct form
        looked at positional arguments alone), so ``f(8, table=torch.tensor([1.0]))`` and then
        ``f(8, table=torch.tensor([5.0]))`` got the first call's kernel, built from the first
        table's values.
        """
        if torch is None:
            return
        names = [k for k, v in kwargs.items() if isinstance(v, torch.Tensor)]
        if names:
            raise TypeError(
                f"{self.func.__qualname__}(): pass tensors positionally in the direct form (got tensor keyword "
                f"argument(s) {', '.join(names)}); a tensor whose values the kernel reads when it is defined must be "
                f"passed as plain Python values (e.g. table.tolist()) instead"
            )

    def compile(self, *args: Any, **kwargs: Any) -> Any:
        """The tuned kernel for these arguments (never runs it)."""
        return self(*args, **kwargs, __return_kernel=True)

    # -- pieces ----------------------------------------------------------------------------------

    def _specs(self, args: tuple) -> tuple[tuple, list[Any], Any]:
        """The direct form: tensors become TensorSpecs for the function, and copies of them the tuning inputs."""
        import torch

        from ..devices import family_of_torch_device
        from ..jit.decorator import DEVICE_TARGETS, TensorSpec

        specs, inputs, device = [], [], None
        for a in args:
            if isinstance(a, torch.Tensor):
                specs.append(TensorSpec(a.shape, str(a.dtype).replace("torch.", ""), a.device.type))
                # tuned on a copy: candidates run many times, and a kernel that writes its
                # arguments (A += 1) must change the caller's tensor once, by the real call
                inputs.append(a.detach().clone())
                device = device or a.device
            else:
                specs.append(a)
        target = None
        if _jit_options(self.jit_impl).get("target", "auto") == "auto" and device is not None:
            family_of_torch_device(device)
            target = DEVICE_TARGETS.get(device.type)
        return tuple(specs), inputs, target

    def _config_keys(self, call: Optional[tuple] = None) -> set[str]:
        configs = self.configs
        if callable(configs):
            if call is None:
                return set()
            try:  # the configs of this call: the tuner calls it with the same arguments
                configs = configs(*call[0], **call[1])
            except Exception:  # noqa: BLE001 - the tuner reports it when it calls the function
                return set()
        keys: set[str] = set()
        for config in configs or ():
            if isinstance(config, dict):
                keys.update(k for k in config if k != "pass_configs")
        return keys

    def _explicit_tunables(self, bound: inspect.BoundArguments, call: tuple) -> bool:
        """Whether the call (``(args, kwargs)``) already gives a value to a tuned parameter (then it
        is not tuned: compiled for the values given, as TileLang does). Logged as a warning once per
        set of such parameters, as TileLang logs it (a config naming a parameter every call gives
        turned tuning off without a word)."""
        given = sorted(self._config_keys(call) & set(bound.arguments))
        if given and tuple(given) not in self._told_untuned:
            self._told_untuned.add(tuple(given))
            logging.getLogger("tilelang.autotuner").warning(
                "%s: the call gives tuned parameter(s) %s, so it is compiled for the values given and not tuned "
                "(leave them out of the call to tune them)", self.func.__qualname__, ", ".join(given))
        return bool(given)

    def _arguments(self, bound: inspect.BoundArguments) -> dict[str, Any]:
        """The call's arguments with the signature's defaults filled in: ``f()`` and
        ``f(<the default>)`` are one call."""
        full = inspect.BoundArguments(bound.signature, dict(bound.arguments))
        full.apply_defaults()
        return dict(full.arguments)

    def _key(self, bound: inspect.BoundArguments) -> Any:
        """The in-process key of a call: its arguments (defaults filled in, ``do_not_specialize``
        ones left out) and the inputs of an enclosing ``set_autotune_inputs`` (by shape, dtype and
        device, as in the stored result's key)."""
        args = {k: v for k, v in self._arguments(bound).items() if k not in self.do_not_specialize}
        return _freeze({"arguments": args, "inputs": get_autotune_inputs()}, self._kept)

    def _tuned_kernel(self, args: tuple, kwargs: dict[str, Any], bound: inspect.BoundArguments, inputs: Any, target: Any) -> Any:
        key = self._key(bound)
        result = self._tuner_cache.get(key)
        if result is None:
            with self._lock:
                result = self._tuner_cache.get(key)
                if result is None:
                    tuner = self.get_tuner()
                    if target is not None:
                        options = _jit_options(self.jit_impl)
                        options["target"] = target
                        tuner.set_compile_args(**options)
                    tuner.set_kernel_parameters((args, kwargs))
                    arguments = self._arguments(bound)
                    tuner.set_key_arguments({k: v for k, v in arguments.items() if k not in self.do_not_specialize})
                    if inputs is not None:
                        tuner.set_inputs(inputs)
                    result = tuner.run(executor=self.executor, early_stop=self.early_stop,
                                       early_stop_factor=self.early_stop_factor)
                    self._tuned_call[key] = _freeze(arguments, self._kept)
                    self._tuner_cache[key] = result
        exact = _freeze(self._arguments(bound), self._kept)
        if self._tuned_call.get(key) == exact:
            return result.kernel
        # a do_not_specialize argument differs from the tuned call: same config, this call's kernel
        kernel = self._kernels.get(exact)
        if kernel is None:
            kernel = self._compile_direct(args, {**kwargs, **(result.config or {})}, target)
            self._kernels[exact] = kernel
        return kernel

    def _given_kernel(self, args: tuple, kwargs: dict[str, Any], bound: inspect.BoundArguments, target: Any) -> Any:
        """The kernel of a call that gives tuned parameters itself: compiled for the values given,
        once per set of arguments (before, every such call built it again, ~400x a plain
        ``@tilelang.jit`` call). ``_tuner_cache`` gets an entry per set of arguments
        (``do_not_specialize`` ones left out, ``set_autotune_inputs`` not looked at), as upstream
        counts them: its ``config`` the tuned parameters given, no latency, no trials."""
        arguments = self._arguments(bound)
        exact = _freeze(arguments, self._kept)
        known = self._given_kernels.get(exact)
        if known is None:
            with self._lock:
                known = self._given_kernels.get(exact)
                if known is None:
                    # not tuned, so not keyed by set_autotune_inputs' tensors (upstream's key is the arguments)
                    kept = {k: v for k, v in arguments.items() if k not in self.do_not_specialize}
                    known = (self._compile_direct(args, kwargs, target), _freeze({"given": kept}, self._kept))
                    self._given_kernels[exact] = known
        kernel, key = known
        if key not in self._tuner_cache:
            given = {k: v for k, v in bound.arguments.items() if k in self._config_keys((args, kwargs))}
            self._tuner_cache.setdefault(key, AutotuneResult(config=given, kernel=kernel))
        return kernel

    def _compile_direct(self, args: tuple, kwargs: dict[str, Any], target: Any) -> Any:
        from .candidate import build_candidate
        from .tuner import jit_mode, unwrap_jit

        options = _jit_options(self.jit_impl)
        if target is not None:
            options["target"] = target
        config = {}
        if "pass_configs" in kwargs:
            kwargs = dict(kwargs)
            config["pass_configs"] = kwargs.pop("pass_configs")
        return build_candidate(unwrap_jit(self.jit_impl), args, kwargs, config, options, jit_mode(self.jit_impl))

    def __repr__(self) -> str:
        return f"<tilelang.autotune {self.func.__qualname__} ({len(self._tuner_cache)} tuned)>"


def autotune(
    func: Optional[Callable[..., Any]] = None,
    *,
    configs: Any = None,
    warmup: int = 25,
    rep: int = 100,
    timeout: float = 100,
    supply_type: Any = TensorSupplyType.Auto,
    ref_prog: Optional[Callable[..., Any]] = None,
    supply_prog: Optional[Callable[..., Any]] = None,
    rtol: float = 1e-2,
    atol: float = 1e-2,
    max_mismatched_ratio: float = 0.01,
    skip_check: bool = False,
    manual_check_prog: Optional[Callable[..., Any]] = None,
    cache_input_tensors: bool = False,
    do_not_specialize: Optional[Sequence[str]] = None,
    early_stop: bool = False,
    early_stop_factor: float = 2.0,
    timer: str = "auto",
    backend: Optional[str] = None,
    return_mode: str = "median",
    executor: Any = None,
    cache_key: Optional[str] = None,
) -> Callable[[Any], AutoTuneImpl]:
    """Tune a ``@tilelang.jit`` function over ``configs``; see :class:`AutoTuneImpl` and docs/autotune.md.

    :param configs: list of dicts of argument values, or a callable taking the call's arguments
        and returning one.
    :param warmup: warm-up calls per candidate; :param rep: timed calls per candidate.
    :param timeout: seconds per candidate for compiling, and again for checking and timing.
    :param supply_type: how generated inputs are filled (a ``TensorSupplyType``).
    :param ref_prog: reference implementation: candidates that disagree with it are skipped.
    :param supply_prog: ``supply_prog(params) -> inputs`` instead of generated inputs.
    :param rtol, atol, max_mismatched_ratio: tolerances of the check against ``ref_prog``.
    :param skip_check: time without checking.
    :param manual_check_prog: ``manual_check_prog(kernel_outputs, ref_outputs)`` judges instead.
    :param cache_input_tensors: reuse one set of inputs for every candidate that fits.
    :param do_not_specialize: parameter names whose values do not start a new tuning run; the
        best config of the first call is reused (compiled for each call's values).
    :param early_stop, early_stop_factor: stop timing candidates clearly slower than the best.
    :param timer: the profiler's timer (``backend`` is upstream's name for it).
    :param return_mode: how per-call times become a candidate's latency (``median``, ``mean``, ...).
    :param executor: a ``concurrent.futures.Executor`` (e.g. Dask's ``client.get_executor()``)
        whose workers build and time the candidates.
    :param cache_key: a name for the callbacks' behaviour; results of a decorator given
        ``ref_prog``/``supply_prog``/``manual_check_prog`` are stored on disk only with one.
    """
    if callable(func) and not isinstance(func, type):
        raise AutotuneConfigError(
            "@tilelang.autotune needs its configs: write @tilelang.autotune(configs=[...]) above @tilelang.jit"
        )
    if configs is None:
        raise AutotuneConfigError("@tilelang.autotune(configs=...) is required: a list of dicts or a callable returning one")

    def decorate(impl: Any) -> AutoTuneImpl:
        from ..jit.decorator import JitFunction

        if not isinstance(impl, JitFunction):
            raise AutotuneConfigError(
                f"@tilelang.autotune decorates a @tilelang.jit function (put @tilelang.jit below it), got "
                f"{type(impl).__name__}"
            )
        return AutoTuneImpl(
            impl,
            configs,
            warmup=warmup,
            rep=rep,
            timeout=timeout,
            supply_type=supply_type,
            ref_prog=ref_prog,
            supply_prog=supply_prog,
            rtol=rtol,
            atol=atol,
            max_mismatched_ratio=max_mismatched_ratio,
            skip_check=skip_check,
            manual_check_prog=manual_check_prog,
            cache_input_tensors=cache_input_tensors,
            do_not_specialize=do_not_specialize,
            early_stop=early_stop,
            early_stop_factor=early_stop_factor,
            timer=timer,
            backend=backend,
            return_mode=return_mode,
            executor=executor,
            cache_key=cache_key,
        )

    return decorate


__all__ = ["AutoTuneImpl", "autotune"]


def _with_const_keywords(signature: inspect.Signature, jit_impl: Any) -> inspect.Signature:
    """``signature`` plus a keyword-only parameter per ``T.const`` of an eager-style function that
    the signature does not take: ``f.compile(M=1024, N=1024, K=1024, block_M=...)`` names the
    constants as the eager ``compile`` does, and they are part of the tuning key."""
    eager = getattr(jit_impl, "_eager_function", None)
    try:
        analysis = getattr(eager(), "analysis", None) if callable(eager) else None
    except Exception:  # noqa: BLE001 - not an eager function after all: the plain signature
        analysis = None
    params = list(signature.parameters.values())
    if analysis is None or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return signature
    extra = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY) for name in analysis.const_names
             if name not in signature.parameters]
    return signature.replace(parameters=params + extra) if extra else signature

