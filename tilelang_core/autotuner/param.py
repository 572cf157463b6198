"""What the autotuner is given (compile and profile arguments) and what it returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Optional, Sequence, Union

from ..errors import TileLangError
from ..profiler.supply import TensorSupplyType

Status = Literal["ok", "compile_error", "timeout", "wrong_result", "error"]


class AutotuneError(TileLangError, RuntimeError):
    """No configuration compiled, ran and passed the checks; ``trials`` says why for each."""

    def __init__(self, message: str, trials: Sequence["TrialResult"] = ()) -> None:
        super().__init__(message)
        self.trials = list(trials)


class AutotuneConfigError(TileLangError, ValueError):
    """The configurations are not a non-empty list of dicts naming the function's parameters."""


class MissingTuningInputs(AutotuneConfigError):
    """The kernel needs values that generated inputs cannot give (a scalar parameter, a dynamic
    size): the same for every configuration, so tuning stops at the first candidate."""


class NestedTuningError(AutotuneConfigError):
    """Tuning a call was started again from inside its own tuning run (a ``ref_prog`` that calls
    the function being tuned with the same arguments); it stops the run at once."""


class CallbackError(AutotuneError):
    """A callback of the tuner (``ref_prog``, ``supply_prog``) raised, or returned what the tuner
    cannot use. It fails the same way for every configuration, so the run stops at the first one
    with the callback named and its original error chained (before, every configuration was
    recorded as failing with the bare error, which never named the callback)."""


@dataclass(frozen=True)
class CompileArgs:
    """How every candidate is compiled: the arguments of :func:`tilelang.compile`.

    ``execution_backend`` is a backend name or ``"auto"`` (None: ``$TILELANG_EXECUTION_BACKEND``,
    else ``"auto"``, read when tuning starts); it is checked against the installed backends when set
    (the errors ``tilelang.compile`` raises for it).
    """

    out_idx: Union[None, int, Sequence[int]] = None
    execution_backend: Optional[str] = None
    target: Any = "auto"
    target_host: Any = None
    verbose: Optional[bool] = None  # None: $TILELANG_VERBOSE
    pass_configs: Optional[dict[str, Any]] = None
    compile_flags: Union[None, str, Sequence[str]] = None

    def as_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of ``tilelang.compile``."""
        return {
            "out_idx": self.out_idx,
            "execution_backend": self.execution_backend,
            "target": self.target,
            "target_host": self.target_host,
            "verbose": self.verbose,
            "pass_configs": self.pass_configs,
            "compile_flags": self.compile_flags,
        }


@dataclass(frozen=True)
class ProfileArgs:
    """How every candidate is checked and timed.

    ``warmup``/``rep`` are numbers of calls (as upstream's autotuner uses them); ``timeout`` is
    seconds per configuration, for its compile and, separately, for its check and timing;
    ``timer`` is the profiler's timer (``backend`` upstream); ``return_mode`` is how per-call
    times become one latency (the median by default: robust against preemption on a busy CPU).
    """

    warmup: int = 25
    rep: int = 100
    timeout: float = 30
    timer: str = "auto"
    supply_type: Any = TensorSupplyType.Auto
    ref_prog: Optional[Callable[..., Any]] = None
    supply_prog: Optional[Callable[..., Any]] = None
    rtol: float = 1e-2
    atol: float = 1e-2
    max_mismatched_ratio: float = 0.01
    skip_check: bool = False
    manual_check_prog: Optional[Callable[..., Any]] = None
    cache_input_tensors: bool = False
    return_mode: str = "median"

    @property
    def backend(self) -> str:
        """Upstream's name of :attr:`timer`."""
        return self.timer

    def callbacks(self) -> list[str]:
        """Names of the callback arguments that are set (they make results uncacheable on disk)."""
        return [n for n in ("ref_prog", "supply_prog", "manual_check_prog") if getattr(self, n) is not None]


@dataclass(frozen=True)
class TrialResult:
    """One configuration's outcome: ``status`` ``ok`` with its ``latency`` (ms), or why not."""

    index: int
    config: dict[str, Any]
    status: Status
    latency: Optional[float] = None
    reason: str = ""
    worker: str = ""
    """Where it ran (host name and pid) when an executor ran it."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class AutotuneResult:
    """What tuning found.

    ``latency`` (ms) and ``config`` of the best configuration, ``ref_latency`` of ``ref_prog``
    (None without one), ``kernel`` (the best :class:`~tilelang_core.jit.kernel.JITKernel`),
    ``libcode`` (its device source), ``func`` (its prim_func, when this process built it),
    ``trials`` (every configuration's :class:`TrialResult`), ``timer``, ``device`` (identity of
    the device it was timed on), ``cache_key`` (of the stored tuning result, None when not
    stored), ``kernel_cache_key`` (of the best kernel in the kernel cache), ``from_cache``
    (True when it was read back instead of tuned) and ``best_index`` (the index of the best
    trial: of the first fastest one when a config is listed twice).
    """

    latency: Optional[float] = None
    config: Optional[dict[str, Any]] = None
    ref_latency: Optional[float] = None
    libcode: Optional[str] = None
    func: Any = None
    kernel: Any = None
    trials: list[TrialResult] = field(default_factory=list)
    timer: str = ""
    device: dict[str, Any] = field(default_factory=dict)
    cache_key: Optional[str] = None
    kernel_cache_key: Optional[str] = None
    from_cache: bool = False
    best_index: Optional[int] = None

    @property
    def failures(self) -> list[TrialResult]:
        """The configurations that were skipped, with their reasons."""
        return [t for t in self.trials if not t.ok]

    def save_to_disk(self, path: Any, verbose: bool = False) -> Any:
        """Write the best configuration, its latency and its kernel into the folder ``path``
        (TileLang's name; ``best_config.json``, ``latency.json`` and the exported kernel, written
        beside ``path`` and renamed into place). An existing ``path`` is replaced only when it is
        a saved result itself, else ``FileExistsError``. Returns the folder's path.

        :raises AutotuneError: the result has no kernel (no configuration ran).
        :raises TypeError: the configuration holds a value JSON cannot write.
        """
        from .saved_results import save

        return save(self, path, verbose)

    @classmethod
    def load_from_disk(cls, path: Any, compile_args: Any = None, *, trusted: bool = False) -> "AutotuneResult":
        """The result :meth:`save_to_disk` wrote into ``path``, its kernel loaded and ready to call
        (``from_cache`` is True; ``trials`` is empty). ``compile_args`` is accepted for TileLang
        compatibility and not needed: the saved kernel carries its own. ``trusted`` is
        :func:`tilelang.load`'s (the kernel's native code runs: load only folders you trust).

        :raises AutotuneError: ``path`` is not a saved result, or it is damaged.
        """
        del compile_args
        from .saved_results import load

        return load(cls, path, trusted)

    def report(self) -> str:
        """One line per configuration: latency or why it was skipped; the best one marked."""
        lines = []
        for t in self.trials:
            if self.best_index is not None:
                best = t.index == self.best_index
            else:
                best = self.config is not None and t.ok and t.config == self.config
            mark = "*" if best else " "
            what = f"{t.latency:.4f} ms" if t.ok and t.latency is not None else f"{t.status}: {t.reason}"
            lines.append(f"{mark} [{t.index}] {t.config}: {what}")
        return "\n".join(lines)


__all__ = [
    "AutotuneConfigError",
    "AutotuneError",
    "CallbackError",
    "AutotuneResult",
    "CompileArgs",
    "MissingTuningInputs",
    "NestedTuningError",
    "ProfileArgs",
    "TrialResult",
]
