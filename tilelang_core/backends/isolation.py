"""Run a plugin's loading code (import, spec hook, probe hook) bounded in time, output on stderr.

Loading runs in a daemon thread that the caller waits for at most :func:`plugin_timeout`
seconds (``TILELANG_PLUGIN_TIMEOUT``, default :data:`DEFAULT_TIMEOUT`). A plugin that does not
finish in time is left running in its thread, never waited for again, and its record is marked
broken by the caller; the process, other backends and the CLI carry on (the thread does not keep
the interpreter from exiting).

Whatever the plugin code raises, ``SystemExit`` and ``KeyboardInterrupt`` included, is caught in
that thread and handed back as a value: plugin code cannot end the host process. A real Ctrl-C
arrives in the waiting thread and stops the program as usual.

While the caller waits, ``sys.stdout`` points at ``sys.stderr``, so what a plugin prints while
loading cannot mix with a program's own output (``tilelang backends --json``).

Because loading runs in another thread, plugin code that runs while loading must not wait for
the registry itself (it would wait until the time limit).

A thread left running is still running plugin code when the interpreter shuts down, and native
code it holds can abort the process then (``terminate called without an active exception``).
:func:`hung_plugin_threads` lists such threads; the ``tilelang`` command ends with ``os._exit``
after flushing its output when there are any, so its exit status stays the one it reports.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

from ..env_numbers import MAX_SECONDS, seconds_from_env
from ..fork_locks import renew_after_fork

#: Environment variable: seconds one loading step of a plugin may take.
TIMEOUT_ENV = "TILELANG_PLUGIN_TIMEOUT"

#: Default for :data:`TIMEOUT_ENV`: generous, since a probe may import TVM and torch on a busy machine.
DEFAULT_TIMEOUT = 60.0

#: The largest :data:`TIMEOUT_ENV` (about 11.6 days): a thread's wait cannot take much more.
MAX_TIMEOUT = MAX_SECONDS

#: Modules an entry-point module must not pull in at import time.
HEAVY_MODULES = ("torch", "tvm", "tvm_ffi", "cuda", "numpy")  # module names, not backend names


def plugin_timeout() -> float:
    """Seconds one loading step (import and declaration, or one probe) of a plugin may take.

    :raises SettingError: ``TILELANG_PLUGIN_TIMEOUT`` is set but not a number of seconds in
        (0, :data:`MAX_TIMEOUT`].
    """
    return seconds_from_env(TIMEOUT_ENV, DEFAULT_TIMEOUT, zero_allowed=False, maximum=MAX_TIMEOUT)


_redirect_lock = threading.Lock()
renew_after_fork(sys.modules[__name__], "_redirect_lock")  # a fork child gets a fresh one
_redirect_depth = 0
_saved_stdout: Any = None


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """``sys.stdout`` is ``sys.stderr`` inside; safe when several threads load plugins at once
    (the first to enter swaps it, the last to leave puts the original back)."""
    global _redirect_depth, _saved_stdout
    with _redirect_lock:
        if _redirect_depth == 0:
            _saved_stdout, sys.stdout = sys.stdout, sys.stderr
        _redirect_depth += 1
    try:
        yield
    finally:
        with _redirect_lock:
            _redirect_depth -= 1
            if _redirect_depth == 0:
                sys.stdout, _saved_stdout = _saved_stdout, None


@contextlib.contextmanager
def output_to_stderr() -> Iterator[None]:
    """Inside, what is printed goes to stderr: ``sys.stdout`` and, where it is a real file, file
    descriptor 1 (what a plugin's subprocesses, compilers or ``os.write(1, ...)`` print), so that
    the ``--json`` output of ``tilelang backends`` and ``tilelang backends check`` alone is on stdout."""
    sys.stdout.flush()
    try:
        out, err = sys.stdout.fileno(), sys.stderr.fileno()
        saved: Optional[int] = os.dup(out)
    except (AttributeError, OSError, ValueError):  # no file descriptor (captured by pytest)
        saved = None
    if saved is not None:
        os.dup2(err, out)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        if saved is not None:
            os.dup2(saved, out)
            os.close(saved)


@dataclass
class Outcome:
    """What running plugin code gave: its value, or the exception it raised, or nothing in time."""

    value: Any = None
    error: Optional[BaseException] = None
    finished: bool = True
    seconds: float = 0.0
    heavy: list[str] = field(default_factory=list)


_timed_out: list[threading.Thread] = []


def hung_plugin_threads() -> list[threading.Thread]:
    """The loading threads that timed out and are still running plugin code."""
    return [t for t in _timed_out if t.is_alive()]


def run_plugin_code(fn: Callable[[], Any], *, timeout: float, name: str = "plugin") -> Outcome:
    """Call ``fn()`` in a daemon thread, wait at most ``timeout`` seconds, and report.

    ``Outcome.heavy`` lists the :data:`HEAVY_MODULES` that were first imported while ``fn`` ran.
    """
    import time

    outcome = Outcome(finished=False)
    done = threading.Event()

    def target() -> None:
        before = {m for m in HEAVY_MODULES if m in sys.modules}
        start = time.perf_counter()
        try:
            outcome.value = fn()
        except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt too: plugin code may not end the process
            outcome.error = exc
        finally:
            outcome.seconds = time.perf_counter() - start
            outcome.heavy = [m for m in HEAVY_MODULES if m in sys.modules and m not in before]
            done.set()

    thread = threading.Thread(target=target, name=f"tilelang-load-{name}", daemon=True)
    with _stdout_to_stderr():
        thread.start()
        finished = done.wait(timeout)
    if not finished:
        _timed_out.append(thread)
        return Outcome(finished=False, seconds=timeout)
    outcome.finished = True
    return outcome
