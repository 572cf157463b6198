"""NVRTC in a child process, bounded in time by ``$TILELANG_COMPILE_TIMEOUT_SECONDS``.

NVRTC cannot be stopped from inside the process: its cancellation callback
(``nvrtcSetFlowCallback``) is not called while the front end instantiates templates or
evaluates ``constexpr`` code, so a source that recurses without end (a template instantiating
two new ones at each step) compiled forever and grew by about 150 MB a second. The backend
therefore compiles in a worker process (:func:`worker_command`, running :func:`main`) that stays
up and takes one compile after another: after the first compile (which starts it and loads
NVRTC, as the first in-process compile loads it) a compile costs what it costs in-process plus
a pipe round trip. Past the time limit the worker is killed (memory and CPU back at once), the
compile raises :class:`CompileTimedOut`, and the next compile starts a new worker. A worker that
dies (the out-of-memory killer) raises :class:`WorkerDied`. The worker finds its modules where
this process finds them (this process's ``sys.path`` is its ``PYTHONPATH``), not in the current
directory unless this process looks there too: a user's own ``cuda.py`` or ``tilelang_core/``
there once shadowed ``cuda.bindings`` and the core in the worker (see :data:`WORKER_BOOT`). A
worker that answers it cannot run NVRTC is not kept. Compiles from several threads each use a
worker of their own (idle ones are kept, at most :data:`MAX_IDLE`, and killed when this
process exits; a worker whose parent is gone exits within a second, even mid-compile). A forked
process never uses its parent's workers.

Messages are ``marshal``-encoded tuples of bytes, str and lists, each after its 8-byte length:
request ``(source, name, options)``; answer ``("ok", cubin, log)``, ``("failed", log)`` (NVRTC
rejected the source) or ``("error", text)`` (NVRTC could not be used, or the worker could not
import the backend).
"""

from __future__ import annotations

import atexit
import marshal
import os
import selectors
import struct
import subprocess
import sys
import threading
import time
from typing import IO, Optional

#: Idle workers kept for the next compiles (one per thread compiling at the same time).
MAX_IDLE = 4

#: The program the worker runs (``python -c``). ``python -m`` would put the current directory
#: first on ``sys.path`` (``-c`` puts ``''`` there) and ``-P``, which would not, needs Python 3.11;
#: so the worker drops the empty entry itself before importing anything of its own.
WORKER_BOOT = ("import sys; sys.path[:] = [p for p in sys.path if p]; "
               "from tilelang_backend_nvrtc.worker import main; main()")

_HEADER = struct.Struct("<Q")
_idle: list["_Worker"] = []
_idle_lock = threading.Lock()


class CompileTimedOut(Exception):
    """The compile ran past the time limit; the worker was killed."""


class WorkerDied(Exception):
    """The worker process ended during a compile (how, in words, is the message)."""


def _write(stream: IO[bytes], value: object) -> None:
    data = marshal.dumps(value)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _read_exact(stream: IO[bytes], size: int) -> Optional[bytes]:
    chunks, left = [], size
    while left:
        chunk = stream.read(left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class _Worker:
    """One worker process and the pipes to it."""

    def __init__(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # this process's modules, this plugin
        self.proc = subprocess.Popen(worker_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                     start_new_session=True)
        self.owner = os.getpid()

    def usable(self) -> bool:
        """Started by this process (not inherited through ``fork``) and still running."""
        return self.owner == os.getpid() and self.proc.poll() is None

    def ask(self, request: tuple, timeout: float) -> tuple:
        """Send ``request``, wait for the answer at most ``timeout`` seconds."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            _write(self.proc.stdin, request)
        except (BrokenPipeError, ConnectionResetError):
            raise WorkerDied(_status_text(self.proc.wait())) from None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        buffer = bytearray()
        need = _HEADER.size
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while True:
                if len(buffer) >= need:
                    if need == _HEADER.size:
                        need += _HEADER.unpack(bytes(buffer[:_HEADER.size]))[0]
                        continue
                    return marshal.loads(bytes(buffer[_HEADER.size:need]))
                left = deadline - time.monotonic()
                if left <= 0:
                    self.kill()
                    raise CompileTimedOut()
                if not sel.select(left):
                    continue
                chunk = os.read(fd, max(need - len(buffer), 1 << 16))
                if not chunk:
                    status = self.proc.wait()
                    raise WorkerDied(_status_text(status))
                buffer += chunk

    def kill(self) -> None:
        """End the worker and wait for it."""
        from tilelang_core.compiler_process import kill_group  # not at the top: the worker imports this module

        kill_group(self.proc)
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()  # type: ignore[union-attr]
            except OSError:
                pass


def worker_command() -> list[str]:
    """The command line of a worker process (:data:`WORKER_BOOT` under this Python)."""
    return [sys.executable, "-c", WORKER_BOOT]


def _status_text(status: int) -> str:
    """How a worker ended, in the core's words for a compiler's end (``exit code 1``, ``killed by
    signal SIGKILL (the kernel's out-of-memory killer, ...)``: the hint only for a signal)."""
    from tilelang_core.compiler_process import CompilerRun  # not at the top: the worker imports this module

    return CompilerRun(command=worker_command(), returncode=status, output="", output_bytes=0, output_file=None,
                       timeout=None, seconds=0.0).failure


def compile_in_worker(source: bytes, name: str, options: list[str], timeout: float) -> tuple:
    """NVRTC's answer for ``source`` (see the module docstring), from a worker process.

    :raises CompileTimedOut: past ``timeout`` seconds (the worker is killed).
    :raises WorkerDied: the worker ended during the compile.
    """
    worker = None
    with _idle_lock:
        while _idle and worker is None:
            candidate = _idle.pop()
            worker = candidate if candidate.usable() else None
    if worker is None:
        worker = _Worker()
    try:
        answer = worker.ask((source, name, list(options)), timeout)
    except BaseException:
        worker.kill()  # timed out, died, or interrupted (Ctrl-C) mid-compile: never reused
        raise
    with _idle_lock:
        if len(_idle) < MAX_IDLE and answer[0] != "error":  # one that cannot run NVRTC is not kept
            _idle.append(worker)
            worker = None
    if worker is not None:
        worker.kill()
    return answer


@atexit.register
def _kill_idle() -> None:
    with _idle_lock:
        workers, _idle[:] = list(_idle), []
    for worker in workers:
        if worker.owner == os.getpid():
            worker.kill()


def _exit_with_parent() -> None:
    """A thread of the worker that ends it once the process that started it is gone (NVRTC
    releases the GIL while it compiles, so this runs mid-compile too)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="tilelang-nvrtc-parent-watch", daemon=True).start()


def _answer(request: bytes) -> tuple:
    """The answer to one marshalled request (see the module docstring); never raises an Exception."""
    try:
        from .compiler import _CompileFailed, _run_nvrtc
    except Exception as exc:  # noqa: BLE001 - a module shadowing the core's: said in the answer, not a dead worker
        return ("error", f"cannot import the backend's compiler module ({type(exc).__name__}: {exc})")
    source, name, options = marshal.loads(request)
    try:
        image, log = _run_nvrtc(source, name, options)
        return ("ok", image, log)
    except _CompileFailed as failure:
        return ("failed", failure.log)
    except Exception as exc:  # noqa: BLE001 - handed to the parent, which raises it as a BuildError
        return ("error", f"{type(exc).__name__}: {exc}")


def main() -> None:
    """The worker: answer compile requests on stdin until it closes."""
    _exit_with_parent()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write into the answers
    while True:
        header = _read_exact(stdin, _HEADER.size)
        if header is None:
            return
        data = _read_exact(stdin, _HEADER.unpack(header)[0])
        if data is None:
            return
        _write(stdout, _answer(data))


if __name__ == "__main__":
    main()
