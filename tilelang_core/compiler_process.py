"""Running a native compiler (``cc``, ``nvcc``, a linker) for a backend, bounded in time and output.

:func:`run_compiler` is what backends use instead of ``subprocess.run``:

* **Time.** The compiler runs in a process group of its own; past :func:`compile_timeout_s`
  seconds (``$TILELANG_COMPILE_TIMEOUT_SECONDS``, default 600, ``0``: no limit) the whole group
  (the driver and the ``cc1``/``as``/``ld`` it started) is killed and the run reports it. A
  compiler that hangs (a wrapper script waiting on a lock, a network file system that stopped
  answering) no longer hangs ``tilelang.compile``. Ctrl-C kills the group as well.
* **Output.** Standard output and error are read through a pipe (no disk needed: a full
  temporary folder cannot hide the compiler's message) and kept bounded: the first and last
  :data:`OUTPUT_HEAD` / :data:`OUTPUT_TAIL` bytes, with a line saying how much was left out. A
  compiler printing megabytes of warnings once made a ``BuildError`` of as many megabytes. With
  ``output_file`` the whole output is written there too (where the backend keeps its build
  folder), as long as the disk takes it.
* **Ends.** :attr:`CompilerRun.failure` says how the compiler ended in words: an exit code, a
  signal by name (``SIGKILL``: often the kernel's out-of-memory killer; ``SIGXFSZ``: a file grew
  past ``ulimit -f``), or the time limit.
* **Temporary files.** The compiler gets a temporary folder of its own (``$TMPDIR`` set to a fresh
  ``tilelang-cc-*`` folder in the usual one), removed when the run ends, however it ends. gcc and
  nvcc write their intermediate files (``cc*.s``, ``cc*.o``) to ``$TMPDIR`` and remove them only
  when they end by themselves: each compile killed for its time limit or by Ctrl-C left about two
  of them in the user's temporary folder for good.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterator, Optional, Sequence

from .env_numbers import seconds_from_env
from .errors import BuildError

#: Environment variable: seconds a compiler run may take (shared with ``tilelang.contrib.nvcc``).
TIMEOUT_ENV = "TILELANG_COMPILE_TIMEOUT_SECONDS"
#: Seconds a compiler run may take when ``$TILELANG_COMPILE_TIMEOUT_SECONDS`` is unset or empty.
DEFAULT_TIMEOUT_S = 600.0
#: Bytes of the start and of the end of a compiler's output kept in :attr:`CompilerRun.output`.
OUTPUT_HEAD = 32 << 10
OUTPUT_TAIL = 32 << 10

_CHUNK = 1 << 16
_SIGNAL_HINTS = {
    "SIGKILL": "the kernel's out-of-memory killer, or someone, stopped it",
    "SIGXFSZ": "a file it wrote grew past the file-size limit (ulimit -f)",
    "SIGSEGV": "it crashed",
    "SIGBUS": "it crashed (often a full disk under a memory-mapped file)",
    "SIGABRT": "it aborted",
    "SIGTERM": "it was stopped",
}


def compile_timeout_s() -> Optional[float]:
    """Seconds a compiler run may take: ``$TILELANG_COMPILE_TIMEOUT_SECONDS``, default
    :data:`DEFAULT_TIMEOUT_S`; ``0`` means no limit (None).

    :raises SettingError: the value is not a number of seconds from 0 to 1000000
        (:func:`tilelang_core.env_numbers.seconds_from_env`).
    """
    value = seconds_from_env(TIMEOUT_ENV, DEFAULT_TIMEOUT_S, zero_allowed=True, zero_means="no limit", example="120")
    return value or None


def probe_timeout_s(default: float = 60.0) -> float:
    """Seconds a quick probe of the compiler (``--version``, a flag check) may take: ``default``,
    or less when ``$TILELANG_COMPILE_TIMEOUT_SECONDS`` is lower."""
    limit = compile_timeout_s()
    return min(default, limit) if limit else default


@dataclass
class CompilerRun:
    """How a compiler run ended and what it printed (bounded, see the module docstring)."""

    command: list[str]
    returncode: Optional[int]
    """The exit status (negative: killed by that signal); None when it timed out."""
    output: str
    """Standard output and error together: all of it, or its start and end with a line saying
    how many bytes were left out in between."""
    output_bytes: int
    """How many bytes the compiler printed in all."""
    output_file: Optional[Path]
    """Where the whole output was written (None: not asked for, or the disk did not take it all)."""
    timeout: Optional[float]
    seconds: float
    missing: Optional[Path] = None
    """The file the run was to write (``writes=``) when it ended with exit code 0 without writing
    it, or wrote it empty (a ``$CC`` such as ``gcc -fsyntax-only``, or ``true``)."""

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.missing is None

    @property
    def failure(self) -> str:
        """How the run ended, in words (``"exit code 1"``, ``"killed by signal SIGKILL (...)"``, ...)."""
        if self.returncode is None:
            return (f"stopped after {self.timeout:g} s: it ran longer than ${TIMEOUT_ENV} allows (default "
                    f"{DEFAULT_TIMEOUT_S:g} s; set it higher, or 0 for no limit, if the compiler is merely slow)")
        if self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = f"signal {-self.returncode}"
            hint = _SIGNAL_HINTS.get(name)
            return f"killed by signal {name}" + (f" ({hint})" if hint else "")
        if self.returncode == 0 and self.missing is not None:
            return f"exit code 0, but it wrote no {self.missing.name}"
        return f"exit code {self.returncode}"

    def build_error(self, what: str, source: Optional[os.PathLike] = None) -> "BuildError":
        """The :class:`~tilelang_core.errors.BuildError` of this failed run of the compiler building
        ``what`` (``"kernel 'vadd'"``): how it ended, the command, where ``source`` is kept, and what
        it printed."""
        return BuildError(
            f"compiling {what} failed ({self.failure})\ncommand: {shlex.join(self.command)}\n"
            + (f"source kept at: {source}\n" if source is not None else "")
            + (f"compiler output:\n{self.output}" if self.output else "the compiler printed nothing"),
            command=self.command, output=self.output, source=source,
        )


def bounded_output(text: str, whole: Optional[Path] = None) -> str:
    """A compiler's ``text`` (one a library returned, NVRTC's log) kept as :func:`run_compiler`
    keeps a compiler's output: its first and last bytes with a line saying how much was left out;
    with ``whole``, all of it is written to that file too and the line says so."""
    collector = _Collector(io.BytesIO(text.encode("utf-8", errors="replace")), whole)
    collector.run()
    return collector.text().strip()


class _Collector:
    """Reads a pipe to its end, keeping the first and last bytes (and, optionally, a full copy)."""

    def __init__(self, pipe: IO[bytes], copy: Optional[Path]) -> None:
        self.pipe = pipe
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_size = 0
        self.total = 0
        self.copy_path = copy
        self.copy: Optional[IO[bytes]] = None
        self.copy_complete = copy is not None
        if copy is not None:
            try:
                self.copy = open(copy, "wb")
            except OSError:
                self.copy_complete = False

    def run(self) -> None:
        try:
            while True:
                chunk = self.pipe.read1(_CHUNK) if hasattr(self.pipe, "read1") else self.pipe.read(_CHUNK)
                if not chunk:
                    break
                self._keep(chunk)
        except (OSError, ValueError):
            pass
        finally:
            self._close_copy()

    def _keep(self, chunk: bytes) -> None:
        if self.copy is not None:
            try:
                self.copy.write(chunk)
            except OSError:  # the disk is full: the excerpt still says what matters
                self._close_copy()
                self.copy_complete = False
        self.total += len(chunk)
        room = OUTPUT_HEAD - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail.append(chunk)
            self.tail_size += len(chunk)
            while self.tail and self.tail_size - len(self.tail[0]) >= OUTPUT_TAIL:
                self.tail_size -= len(self.tail.popleft())

    def _close_copy(self) -> None:
        if self.copy is not None:
            try:
                self.copy.close()
            except OSError:
                self.copy_complete = False
            self.copy = None

    def text(self) -> str:
        tail = b"".join(self.tail)[-OUTPUT_TAIL:]
        left_out = self.total - len(self.head) - len(tail)
        head = bytes(self.head).decode("utf-8", errors="replace")
        if left_out <= 0:
            return head + tail.decode("utf-8", errors="replace")
        where = f"; all of it is in {self.copy_path}" if self.copy_complete else ""
        return (head + f"\n[... {left_out} bytes of compiler output left out here{where} ...]\n"
                + tail.decode("utf-8", errors="replace"))


@contextlib.contextmanager
def writing_build_file(directory: os.PathLike, path: os.PathLike, kernel: str) -> Iterator[None]:
    """Writing ``path`` into a backend's build ``directory`` for ``kernel``: on an ``OSError`` (a
    full disk, a file-size limit) the directory is removed and the error names the file and what
    to do (same errno)."""
    try:
        yield
    except OSError as exc:
        shutil.rmtree(directory, ignore_errors=True)
        raise type(exc)(exc.errno, f"cannot write {path} while building kernel '{kernel}': "
                        f"{exc.strerror or exc}; free space there or set TMPDIR to a folder with room") from None


def nvcc_arch_flags(arch: str) -> list[str]:
    """nvcc's flags for ``arch``: ``-arch=sm_80`` for a plain architecture; for an
    architecture-specific or family one (``sm_90a``, ``sm_100a``, ``sm_100f``) only that
    architecture's code and PTX, ``-gencode=arch=compute_100a,code=[sm_100a,compute_100a]``:
    ``-arch=sm_100a`` also assembles the portable ``compute_100`` PTX, where the instructions of
    ``sm_100a`` alone (the ``.rs`` stochastic-rounding conversions of ``T.cast(..., round="rs")``)
    are an error ("Feature '.rs' not supported on .target 'sm_100'")."""
    m = re.fullmatch(r"sm_(\d+)([a-z]+)", arch)
    if m is None:
        return [f"-arch={arch}"]
    virtual = f"compute_{m.group(1)}{m.group(2)}"
    return [f"-gencode=arch={virtual},code=[{arch},{virtual}]"]


def kill_group(proc: subprocess.Popen) -> None:
    """Kill ``proc`` and its process group (it was started with ``start_new_session=True``); a
    process already gone is no error."""
    try:
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover - Windows
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass


def run_compiler(command: Sequence[str], *, cwd: Optional[os.PathLike] = None, timeout: Optional[float] = -1.0,
                 output_file: Optional[os.PathLike] = None, env: Optional[dict] = None,
                 writes: Optional[os.PathLike] = None) -> CompilerRun:
    """Run ``command`` (a compiler) and wait for it, at most ``timeout`` seconds.

    :param timeout: seconds; the default (-1) means :func:`compile_timeout_s`, None no limit.
    :param output_file: also write the whole output there (kept by the caller).
    :param writes: the file the command is to write (relative: to ``cwd``); a run that ends with
        exit code 0 without it, or with it empty, is not :attr:`CompilerRun.ok` (its
        :attr:`~CompilerRun.missing`).
    :raises OSError: the program cannot be started (not found, not executable, no memory or
        descriptors for a new process).
    :raises SettingError: ``$TILELANG_COMPILE_TIMEOUT_SECONDS`` is not a time limit.
    """
    if timeout is not None and timeout < 0:
        timeout = compile_timeout_s()
    cmd = [str(word) for word in command]
    with _private_temp(env) as env:
        run = _run(cmd, cwd, timeout, output_file, env)
    if writes is not None and run.returncode == 0:
        target = Path(cwd or ".", writes)
        try:
            empty = target.stat().st_size == 0
        except OSError:
            empty = True
        if empty:
            run = dataclasses.replace(run, missing=target)
    return run


@contextlib.contextmanager
def _private_temp(env: Optional[dict]) -> Iterator[Optional[dict]]:
    """``env`` (or this process's environment) with ``TMPDIR`` set to a fresh folder, removed
    afterwards; unchanged where no folder can be made (the compiler then says why it cannot
    write)."""
    base = (env or os.environ).get("TMPDIR") or None
    try:
        # absolute: gcc passed a relative TMPDIR such as "-tmp" on to "as" in "-tmp/ccXXXX.s", an option
        folder = os.path.abspath(tempfile.mkdtemp(prefix="tilelang-cc-", dir=base if base and os.path.isdir(base) else None))
    except OSError:
        yield env
        return
    try:
        yield {**(os.environ if env is None else env), "TMPDIR": folder}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _run(cmd: list[str], cwd: Optional[os.PathLike], timeout: Optional[float], output_file: Optional[os.PathLike],
         env: Optional[dict]) -> CompilerRun:
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=(os.name == "posix"))
    assert proc.stdout is not None
    collector = _Collector(proc.stdout, Path(output_file) if output_file is not None else None)
    reader = threading.Thread(target=collector.run, name="tilelang-compiler-output", daemon=True)
    returncode: Optional[int]
    try:
        try:
            reader.start()
        except RuntimeError:  # no thread to be had (address space or thread limit): collect it all at the end
            reader = None
            try:
                out, _ = proc.communicate(timeout=timeout)
                returncode = proc.returncode
            except subprocess.TimeoutExpired:
                kill_group(proc)
                out, _ = proc.communicate()
                returncode = None
            collector._keep(out or b"")
            collector._close_copy()
        else:
            try:
                returncode = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                kill_group(proc)
                proc.wait()
                returncode = None
    except BaseException:  # Ctrl-C: the compiler and what it started go too
        kill_group(proc)
        proc.wait()
        raise
    finally:
        if reader is not None:
            reader.join(5.0)  # a process that escaped the group may hold the pipe: do not wait on it
        proc.stdout.close()
    return CompilerRun(command=cmd, returncode=returncode, output=collector.text().strip(), output_bytes=collector.total,
                       output_file=collector.copy_path if collector.copy_complete else None, timeout=timeout,
                       seconds=time.monotonic() - start)


__all__ = ["DEFAULT_TIMEOUT_S", "TIMEOUT_ENV", "CompilerRun", "bounded_output", "compile_timeout_s", "kill_group",
           "nvcc_arch_flags", "probe_timeout_s", "run_compiler", "writing_build_file"]
