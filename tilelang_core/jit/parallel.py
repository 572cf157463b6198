"""``tilelang.par_compile``: compile many kernels on a thread pool, results in input order."""

from __future__ import annotations

import atexit
import collections
import functools
import os
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Any, Literal, Optional, Sequence, Union

from ..errors import TileLangError
from ..warning_location import user_location, warnings_at
from .kernel import JITKernel
from .outputs import OutIdx


class ParCompileError(TileLangError, RuntimeError):
    """Some kernels of a :func:`par_compile` call failed; the others are in ``results``.

    ``failures`` is a list of ``(index, exception)``; ``results`` has a kernel at every index
    that compiled and ``None`` at the failed ones.
    """

    def __init__(self, failures: list[tuple[int, BaseException]], results: list[Optional[JITKernel]]) -> None:
        self.failures = failures
        self.results = results
        lines = [f"  [{i}] {type(e).__name__}: {e}" for i, e in failures]
        super().__init__(
            f"{len(failures)} of {len(results)} kernels failed to compile (the other {len(results) - len(failures)} "
            f"are in .results):\n" + "\n".join(lines)
        )


class CompileTimeout(TileLangError, TimeoutError):
    """A kernel of a :func:`par_compile` call with ``timeout=`` was still compiling when its time ran out."""


def default_workers() -> int:
    """Threads used by :func:`par_compile`: the cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return max(1, os.cpu_count() or 1)


def par_compile(
    funcs: Sequence[Any],
    out_idx: OutIdx = None,
    execution_backend: Optional[str] = None,
    target: Any = "auto",
    target_host: Any = None,
    verbose: Optional[bool] = None,
    pass_configs: Optional[dict[str, Any]] = None,
    compile_flags: Union[None, str, Sequence[str]] = None,
    *,
    num_workers: Optional[int] = None,
    progress: bool = True,
    errors: Literal["raise", "return"] = "raise",
    timeout: Optional[float] = None,
    ignore_error: bool = False,
) -> list[Any]:
    """Compile many kernels at once; returns them in the order of ``funcs``.

    :param funcs: prim_funcs (compiled with the other arguments, as :func:`tilelang.compile`
        does), or callables taking no arguments that return a :class:`JITKernel` (for example
        ``functools.partial(my_jit_function, 128, 64)``).
    :param num_workers: threads; default: the cores this process may use. Native compilers
        run as subprocesses, so builds overlap even though lowering holds the GIL.
    :param progress: show a tqdm progress bar (on stderr).
    :param errors: ``"raise"`` (default): after every kernel finished, raise
        :class:`ParCompileError` listing each failure with its index, the compiled kernels in
        its ``results``; ``"return"``: put the exception object at each failed index instead.
    :param ignore_error: TileLang's form: True puts None at each failed index (each failure is
        logged as a warning on the ``tilelang.jit`` logger) instead of raising.
    :param timeout: seconds each kernel may take from the moment its build starts; one still
        building then fails with :class:`CompileTimeout` and is not waited for (its thread
        finishes in the background: a native compiler run cannot be interrupted safely).
    """
    from .compile import compile as tl_compile

    if errors not in ("raise", "return"):
        raise ValueError(f"errors must be 'raise' or 'return', got {errors!r}")
    if ignore_error:
        errors = "return"
    if _is_prim_func(funcs) or callable(funcs) or isinstance(funcs, (str, bytes)) or not hasattr(funcs, "__iter__"):
        raise TypeError(f"par_compile: funcs must be a list of prim_funcs or of callables returning kernels, got "
                        f"{type(funcs).__name__}; for one kernel use tilelang.compile, or pass [func]")
    if num_workers is not None and (isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1):
        raise ValueError(f"par_compile: num_workers must be an int >= 1 or None (the usable cores), got {num_workers!r}")
    items = list(funcs)
    options = dict(
        out_idx=out_idx,
        execution_backend=execution_backend,
        target=target,
        target_host=target_host,
        verbose=verbose,
        pass_configs=pass_configs,
        compile_flags=compile_flags,
    )

    started: dict[int, float] = {}
    callers_line = user_location()  # a worker's warnings name it: the worker's own stack has no user's line

    def job(index: int, item: Any) -> Any:
        started[index] = time.monotonic()
        with warnings_at(callers_line):
            if callable(item) and not _is_prim_func(item):
                return item()
            return tl_compile(item, **options)

    if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
        raise ValueError(f"timeout must be a positive number of seconds or None, got {timeout!r}")
    results: list[Any] = [None] * len(items)
    failures: list[tuple[int, BaseException]] = []
    workers = min(num_workers or default_workers(), max(1, len(items)))
    bar = _progress(len(items), progress)

    def fail(index: int, exc: BaseException) -> None:
        failures.append((index, exc))
        results[index] = exc if errors == "return" else None
        if bar is not None:
            bar.update(1)

    abandoned = False
    finished = False
    futures: dict = {}
    try:
        running = _DaemonJobs([functools.partial(job, i, item) for i, item in enumerate(items)], workers)
        futures = {future: i for i, future in enumerate(running.futures)}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=None if timeout is None else min(0.05, timeout), return_when=FIRST_COMPLETED)
            for future in done:
                index = futures[future]
                try:
                    results[index] = future.result()
                except Exception as exc:  # noqa: BLE001 - reported per kernel
                    fail(index, exc)
                    continue
                if bar is not None:
                    bar.update(1)
            if timeout is not None:
                now = time.monotonic()
                for future in list(pending):
                    index = futures[future]
                    if index in started and now - started[index] > timeout:
                        pending.discard(future)
                        abandoned = True
                        fail(index, CompileTimeout(f"kernel {index} was still compiling after the timeout of {timeout} s"))
                        running.abandon(index)  # its thread is not waited for at exit either
                        running.add_worker()  # its thread is lost to the queue: the others still get built
        finished = True
    finally:
        # jobs not started yet are dropped, after a timeout or when the call was interrupted (Ctrl-C:
        # they went on building in the background before); those running finish in the background
        if abandoned or not finished:
            for future in futures:
                future.cancel()
        if bar is not None:
            bar.close()
    failures.sort(key=lambda f: f[0])
    if failures and errors == "raise":
        raise ParCompileError(failures, results)
    if ignore_error:  # TileLang's form: None where a kernel failed, each failure logged
        import logging

        for index, exc in failures:
            logging.getLogger("tilelang.jit").warning("par_compile: kernel %d failed to compile: %s: %s", index,
                                                      type(exc).__name__, exc)
            results[index] = None
    return results


class _DaemonJobs:
    """Run jobs (callables) on daemon threads; one :class:`Future` per job, in :attr:`futures`.

    Daemon threads, unlike a ``ThreadPoolExecutor``'s (joined when the interpreter exits), do not
    keep the process alive: a build abandoned for its ``timeout`` cannot hold the program's exit.
    A job whose future was cancelled before it started is skipped. :meth:`add_worker` starts one
    more thread: the caller does so for each job it abandons, so that the jobs still queued do not
    wait for a thread that may never come back.

    At the interpreter's exit, the jobs still running are waited for (at most :data:`EXIT_WAIT_S`;
    :func:`_wait_at_exit`), but those abandoned for their timeout (:meth:`abandon`), which must not
    hold the program's exit: a daemon thread still inside TVM's C++ code when Python finalizes is
    stopped by unwinding through it, and the process aborted with "terminate called without an
    active exception" (Ctrl-C during a ``par_compile`` or an autotune with tvm_ffi). Jobs not
    started are never started then.
    """

    def __init__(self, jobs: list, workers: int) -> None:
        self.jobs = jobs
        self.futures = [Future() for _ in jobs]
        self._queue: "collections.deque[int]" = collections.deque(range(len(jobs)))
        self._lock = threading.Lock()
        self._threads = 0
        for _ in range(max(1, min(workers, len(jobs)))):
            self.add_worker()

    def add_worker(self) -> None:
        """Start one more worker thread (it ends when the queue is empty)."""
        with self._lock:
            if not self._queue:
                return
            self._threads += 1
            number = self._threads
        thread = threading.Thread(target=self._work, name=f"tilelang-par-compile-{number}", daemon=True)
        _LIVE[thread] = (self, -1)
        thread.start()

    def abandon(self, index: int) -> None:
        """Stop counting the thread running job ``index`` among those the exit waits for."""
        for thread, job in list(_LIVE.items()):
            if job == (self, index):
                _LIVE[thread] = None

    def _work(self) -> None:
        try:
            self._run_jobs()
        finally:
            _LIVE.pop(threading.current_thread(), None)

    def _run_jobs(self) -> None:
        while True:
            with self._lock:
                if not self._queue or _EXITING.is_set():
                    return
                index = self._queue.popleft()
            future = self.futures[index]
            if not future.set_running_or_notify_cancel():
                continue
            if _LIVE.get(threading.current_thread(), ()) is not None:
                _LIVE[threading.current_thread()] = (self, index)
            try:
                future.set_result(self.jobs[index]())
            except BaseException as exc:  # noqa: BLE001 - delivered through the future
                future.set_exception(exc)


#: Worker threads of every ``par_compile`` still running -> ``(jobs, index of the job it runs)``, or
#: None once that job was abandoned for its timeout; and whether the interpreter is exiting.
_LIVE: "dict[threading.Thread, Any]" = {}
_EXITING = threading.Event()
#: The longest the interpreter's exit waits for builds still running (seconds).
EXIT_WAIT_S = 120.0


def _wait_at_exit() -> None:
    """``atexit``: let the builds still running end (see :class:`_DaemonJobs`); start no other."""
    _EXITING.set()
    deadline = time.monotonic() + EXIT_WAIT_S
    for thread, job in list(_LIVE.items()):
        if job is not None:
            thread.join(max(0.0, deadline - time.monotonic()))


atexit.register(_wait_at_exit)


def _is_prim_func(item: Any) -> bool:
    import sys

    tvm = sys.modules.get("tvm")
    if tvm is None:
        return False
    return isinstance(item, (tvm.tirx.PrimFunc, tvm.IRModule))


def _progress(total: int, enabled: bool) -> Optional[Any]:
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return None
    return tqdm(total=total, desc="tilelang.par_compile", unit="kernel", leave=False)


__all__ = ["CompileTimeout", "ParCompileError", "default_workers", "par_compile"]
