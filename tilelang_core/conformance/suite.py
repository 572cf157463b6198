"""The conformance suite: every check a backend must pass, run against an installed backend.

``Suite(name)`` lists the checks from the backend's declaration alone (``checks()``), and runs
them one at a time (``run_check``) or all (``run``), each returning a :class:`Result` (pass, fail
or skip, with the reason). Checks of a target the backend cannot run here (its probe says why)
are skipped with that reason, except ``build_only`` of a GPU target whose probe says it can build
here (the kernels build, export and load without the device, and their calls refuse). Kernels are compiled with ``tilelang.compile`` through the real
pipeline into a private kernel cache (a temporary directory, removed by ``close``); the error
table, the fresh-process load and the cache checks run in subprocesses so that a crash is
reported, not suffered. The subprocesses start in the suite's temporary directory, so that a
backend's source folder in the current directory does not shadow the installed backend.

Every check of a target runs in a worker subprocess of that target (``_child checks``: one
interpreter runs the target's checks in order, so that the kernels it compiled serve the later
checks), never in the suite's own process: before, the reference kernel, dtype, scalar and threads
checks built and called kernels in the suite's process, so a backend whose call segfaulted killed
``tilelang backends check`` (no failure named the check, no summary, no JSON, temporary folders
left behind) and a call that never returned hung it forever. Now a worker that dies fails the
check it was running, naming the signal, and one that runs longer than :data:`CHECK_TIMEOUT`
seconds is killed and fails it naming the timeout; the next checks run in a fresh worker. The
workers' temporary files go into the suite's temporary directory, removed on every path.
"""

from __future__ import annotations

import collections
import contextlib
import json
import math
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from . import error_table

#: Dtypes the suite makes tensors of (a backend declaring ``dtypes: "all"`` is checked with each).
TENSOR_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                 "float16", "bfloat16", "float32", "float64")
#: Scalar dtypes the suite passes (the kernel language cannot lower a bfloat16 scalar yet).
SCALAR_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                 "float16", "float32", "float64")

#: Target kinds whose tensors live on a GPU.
GPU_KINDS = ("cuda", "nvptx", "rocm", "hip", "metal", "opencl", "vulkan", "webgpu")
#: Seconds a subprocess of the suite may run.
CHILD_TIMEOUT = 300
#: Seconds one check may run in its target's worker subprocess before it is killed and the check
#: fails (more than :data:`CHILD_TIMEOUT`, so that a subprocess the check starts times out first).
CHECK_TIMEOUT = CHILD_TIMEOUT + 60
#: Seconds after which a check still running is named on stderr (which check hangs, while it does).
SLOW_CHECK_NOTE = 60
#: Random wrong calls thrown at the kernels in the error-table subprocess.
FUZZ_CALLS = 2000


class Skip(Exception):
    """The check does not apply here (the reason says why)."""


class Fail(AssertionError):
    """The backend does not conform (the reason says how)."""


@dataclass
class Result:
    """The outcome of one check."""

    check: str
    target: Optional[str]
    status: str
    """``pass``, ``fail`` or ``skip``."""
    reason: str = ""
    seconds: float = 0.0

    def to_dict(self) -> dict:
        """The result as a JSON-ready dict (``tilelang backends check --json``)."""
        return asdict(self)


@dataclass(frozen=True)
class Check:
    """One check: ``id`` (``kernel:dynamic``, ``error:dtype``, ...) for one target kind (or None)."""

    id: str
    target: Optional[str]
    run: Callable[["Suite", Optional[str], str], Optional[str]] = field(compare=False, repr=False)
    """``run(suite, target, id)``: returns a note, or raises :class:`Skip` / :class:`Fail`."""
    needs_device: bool = field(default=True, compare=False)
    """Skipped with the probe's reason where the target cannot run (else the check decides)."""

    @property
    def name(self) -> str:
        """``<target>:<id>`` (just ``<id>`` for checks of the whole backend)."""
        return f"{self.target}:{self.id}" if self.target else self.id


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise Fail(message)


def _close(torch: Any, got: Any, want: Any, what: str) -> None:
    try:
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)
    except AssertionError as exc:
        raise Fail(f"{what}: {str(exc).splitlines()[0]}") from None


class Suite:
    """The conformance checks of the installed backend ``name``.

    :param targets: only these declared target kinds (default: every declared one).
    :param only: only the checks whose name contains one of these strings.
    :param directory: the suite's temporary directory, owned by another suite (a worker's suite
        runs in its parent's directory, and leaves it to the parent to remove).
    :param isolated: run each target's checks in a worker subprocess (False in the worker itself).
    :raises BackendNotInstalledError: no such backend; :raises BackendTargetUnsupportedError: a
        target the backend does not declare.
    """

    def __init__(self, name: str, targets: Optional[list[str]] = None, only: Optional[list[str]] = None, *,
                 directory: Optional[Path] = None, isolated: bool = True) -> None:
        from ..backends import get_registry
        from ..errors import BackendNotInstalledError, BackendTargetUnsupportedError

        self.name = name
        self.registry = get_registry()
        self.record = self.registry.get(name)
        if self.record is None:
            from ..backends.discovery import pip_name_for

            raise BackendNotInstalledError(
                f"execution backend {name!r} is not installed; installed backends: {', '.join(self.registry.names()) or 'none'}; "
                f"install it with: pip install {pip_name_for(name)}"
            )
        declared = list(self.record.spec.targets) if self.record.spec else []
        unknown = [t for t in targets or [] if t not in declared]
        if unknown:
            raise BackendTargetUnsupportedError(
                f"execution backend {name!r} does not declare target(s) {', '.join(unknown)} (it declares: {', '.join(declared)})"
            )
        self.targets = list(targets) if targets else declared
        self.only = list(only or [])  # substrings of check names: when given, only those checks run
        self._owns_tmp = directory is None
        self._tmp = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix=f"tilelang-conformance-{name}-"))
        self.isolated = isolated
        self._kernels: dict[tuple, Any] = {}
        self._children: dict[tuple, dict] = {}
        self._availability: dict[str, Any] = {}
        self._workers: dict[str, _Worker] = {}
        self._visibility: Optional[list[str]] = None  # [problem] once checked ("" when none)

    # -- lifetime -----------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the workers and remove the suite's temporary directory (its kernel cache, exported
        kernels and whatever the subprocesses wrote to their temporary directory)."""
        for worker in list(self._workers.values()):
            worker.stop()
        self._workers.clear()
        if self._owns_tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> "Suite":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @contextlib.contextmanager
    def _environment(self, cache: str = "cache") -> Iterator[dict]:
        """The suite's private kernel cache in ``os.environ`` while a check runs (then restored)."""
        saved = {k: os.environ.get(k) for k in ("TILELANG_CACHE_DIR", "TILELANG_DISABLE_CACHE")}
        os.environ["TILELANG_CACHE_DIR"] = str(self._tmp / cache)
        os.environ.pop("TILELANG_DISABLE_CACHE", None)
        try:
            yield dict(os.environ)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    # -- the list -----------------------------------------------------------------------------

    def capability(self, kind: str) -> Any:
        """The backend's declared ``TargetCapability`` for ``kind``."""
        return self.record.spec.targets[kind]

    def dtypes(self, kind: str, known: tuple[str, ...]) -> list[str]:
        """The dtypes of ``known`` that the backend declares for ``kind``."""
        declared = self.capability(kind).dtypes
        return list(known) if declared == "all" else [d for d in known if d in declared]

    def checks(self) -> list[Check]:
        """Every check (or those :attr:`only` selects), in order, from the declaration alone
        (nothing is probed or compiled)."""
        out = self._all_checks()
        return [c for c in out if any(o in c.name for o in self.only)] if self.only else out

    def _all_checks(self) -> list[Check]:
        out = [Check("declaration", None, _check_declaration)]
        if self.record.spec is None:
            return out
        for kind in self.targets:
            out.append(Check("probe", kind, _check_probe))
            if kind in GPU_KINDS:
                out.append(Check("build_only", kind, _check_build_only, needs_device=False))
            declared = self.capability(kind)
            out += [Check(f"kernel:{k}", kind, fn) for k, fn in KERNEL_CHECKS.items()
                    if k not in DECLARED_KERNEL_CHECKS or getattr(declared, DECLARED_KERNEL_CHECKS[k])]
            out += [Check(f"dtype:{d}", kind, _check_dtype) for d in self.dtypes(kind, TENSOR_DTYPES)]
            out += [Check(f"scalar:{d}", kind, _check_scalar) for d in self.dtypes(kind, SCALAR_DTYPES)]
            cap = self.capability(kind)
            c_source = "device_source" in cap.consumes and cap.device_language == "c"
            out += [Check(f"error:{r.id}", kind, _check_error_row) for r in error_table.rows_for(kind in GPU_KINDS, c_source)]
            out += [Check(name, kind, fn) for name, fn in TARGET_CHECKS.items()]
        return out

    # -- running ------------------------------------------------------------------------------

    def run_check(self, check: Check) -> Result:
        """Run one check; never raises (a crash of the check is a failure with the traceback's last
        line; a check of a target runs in the target's worker subprocess, see :class:`_Worker`)."""
        problem = self.visibility_problem() if self.isolated else ""
        if problem:
            return Result(check.name, check.target, "fail", problem)
        if check.target is not None and self.isolated:
            return self._run_in_worker(check)
        start = time.perf_counter()
        try:
            with self._environment():
                if check.target is not None and check.needs_device:
                    self._require_available(check.target)
                note = check.run(self, check.target, check.id)
            status, reason = "pass", note or ""
        except Skip as exc:
            status, reason = "skip", str(exc)
        except Fail as exc:
            status, reason = "fail", str(exc)
        except Exception as exc:  # noqa: BLE001 - a check that raises is a failure, with the reason
            status, reason = "fail", f"{type(exc).__name__}: {exc}"
        return Result(check.name, check.target, status, reason, round(time.perf_counter() - start, 3))

    def run(self) -> Iterator[Result]:
        """Run every check in order; where a fresh interpreter does not see the backend (see
        :meth:`visibility_problem`), one failed ``declaration`` result saying so instead of a
        failure of every check."""
        problem = self.visibility_problem()
        if problem:
            yield Result("declaration", None, "fail", problem)
            return
        for check in self.checks():
            yield self.run_check(check)

    def visibility_problem(self) -> str:
        """Why a fresh interpreter started in the suite's directory does not see the backend this
        process sees, or ``""``; checked once per suite.

        Before, a backend this process found only through a ``sys.path`` entry of its own (the
        current folder that ``python -m`` adds, holding the ``.egg-info`` that ``pip install .``
        leaves in the project folder, after ``pip uninstall``) passed the listing, and every check
        that runs in a subprocess failed with an ``AttributeError`` on ``None``; now the suite
        fails once, naming the path entry and saying to install the backend."""
        if self._visibility is None:
            self._visibility = [_visibility_problem(self)]
        return self._visibility[0]

    def _run_in_worker(self, check: Check) -> Result:
        """``check`` run by the worker of its target (started when there is none, again after one
        died or was killed): its result, or a failure naming the signal or the timeout."""
        start = time.perf_counter()
        worker = self._workers.get(check.target)
        if worker is None:
            worker = self._workers[check.target] = _Worker(self, check.target)
        answer = worker.run(check.name)
        if isinstance(answer, dict):
            return Result(**answer)
        del self._workers[check.target]
        worker.stop()
        return Result(check.name, check.target, "fail", answer, round(time.perf_counter() - start, 3))

    def availability(self, kind: str) -> Any:
        """The backend's probe answer for ``kind`` (probed once per suite)."""
        if kind not in self._availability:
            self._availability[kind] = self.registry.probe(self.record, kind)
        return self._availability[kind]

    def _require_available(self, kind: str) -> None:
        availability = self.availability(kind)
        if self.record.status != "ok":
            raise Fail(f"the backend is {self.record.status}: {self.record.reason}")
        if not availability.available:
            raise Skip(f"target {kind!r} cannot run here: {availability.reason}")

    # -- helpers for the checks ---------------------------------------------------------------

    def device(self, kind: str) -> str:
        """The torch device of the target's tensors."""
        return _param_device(kind)

    def compile(self, kind: str, kernel_id: str, *, fresh: bool = False, **options: Any) -> Any:
        """The reference kernel ``kernel_id`` compiled for ``kind`` (once per suite unless ``fresh``)."""
        from ..errors import BackendCapabilityError
        from ..jit.compile import compile as tl_compile
        from . import kernels

        key = (kind, kernel_id, json.dumps(options, sort_keys=True))
        if not fresh and key in self._kernels:
            return self._kernels[key]
        func, out_idx = kernels.make(kernel_id)
        options.setdefault("out_idx", out_idx)
        try:
            kernel = tl_compile(func, target=kind, execution_backend=self.name, **options)
        except BackendCapabilityError as exc:
            raise Skip(str(exc)) from None
        if not fresh:
            self._kernels[key] = kernel
        return kernel

    def child(self, kind: str, job: str, spec: dict, env: Optional[dict] = None) -> dict:
        """Run ``python -m tilelang_core.conformance._child job`` once per (kind, job, spec); its JSON lines."""
        key = (kind, job, json.dumps(spec, sort_keys=True))
        if key in self._children:
            return self._children[key]
        spec = {"backend": self.name, "target": kind, "device": self.device(kind), **spec}
        cmd = [sys.executable, "-m", "tilelang_core.conformance._child", job, json.dumps(spec)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=CHILD_TIMEOUT, env=env or _worker_env(self),
                                  cwd=self._tmp)
            out, err, code = proc.stdout, proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            err, code = f"timed out after {CHILD_TIMEOUT} s", None
        lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        err = err or ""  # its start holds faulthandler's report of a crash, its end the last words
        result = {"lines": lines, "code": code, "stderr": err if len(err) <= 6000 else err[:4000] + "\n...\n" + err[-2000:]}
        self._children[key] = result
        return result


class _Worker:
    """A subprocess (``python -m tilelang_core.conformance._child checks``) that runs the checks of
    one target, one at a time, as the parent names them on its stdin; each result comes back as a
    JSON line on its stdout (what the backend prints goes to stderr, passed on to the suite's)."""

    def __init__(self, suite: Suite, kind: str) -> None:
        spec = {"backend": suite.name, "target": kind, "only": suite.only, "directory": str(suite._tmp)}
        cmd = [sys.executable, "-m", "tilelang_core.conformance._child", "checks", json.dumps(spec)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, cwd=suite._tmp, env=_worker_env(suite))
        self.lines: "queue.Queue[Optional[str]]" = queue.Queue()
        self.tail: collections.deque = collections.deque(maxlen=20)
        threading.Thread(target=self._read, daemon=True).start()
        self._stderr = threading.Thread(target=self._forward_stderr, daemon=True)
        self._stderr.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _forward_stderr(self) -> None:
        for line in self.proc.stderr:
            self.tail.append(line)
            with contextlib.suppress(Exception):
                sys.stderr.write(line)
                sys.stderr.flush()

    def run(self, name: str) -> Any:
        """The result of check ``name`` (a :class:`Result`'s fields), or why there is none (a string:
        the worker died, or ran longer than :data:`CHECK_TIMEOUT` seconds)."""
        try:
            self.proc.stdin.write(name + "\n")
            self.proc.stdin.flush()
        except OSError:
            pass  # the worker is gone: its end is reported below
        start, noted = time.monotonic(), False
        while True:
            elapsed = time.monotonic() - start
            if elapsed >= CHECK_TIMEOUT:
                return (f"the check did not finish in {CHECK_TIMEOUT} s (does a call of the backend hang?): its "
                        f"subprocess was killed, the next checks run in a fresh one")
            if not noted and elapsed >= SLOW_CHECK_NOTE:
                noted = True
                print(f"tilelang: conformance check {name} still running after {SLOW_CHECK_NOTE} s (it fails after "
                      f"{CHECK_TIMEOUT} s)", file=sys.stderr, flush=True)
            try:
                line = self.lines.get(timeout=min(1.0, CHECK_TIMEOUT - elapsed))
            except queue.Empty:
                continue
            if line is None:
                return self._death()
            if line.startswith("{") and "result" in (message := json.loads(line)):
                return message["result"]

    def _death(self) -> str:
        code = self.proc.wait()
        self._stderr.join(timeout=5)  # the last lines of stderr (a grandchild may hold it open)
        tail = [line.strip() for line in self.tail if line.strip()][-1:]
        return (f"the check's subprocess {_how_it_ended(code)}" + (f": {tail[0]}" if tail else "")
                + "; the next checks run in a fresh one")

    def stop(self) -> None:
        """End the worker (it ends by itself when its stdin closes; killed if it does not)."""
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _how_it_ended(code: int) -> str:
    """``died by signal 11 (SIGSEGV)`` or ``exited with code 1``."""
    if code >= 0:
        return f"exited with code {code}"
    try:
        return f"died by signal {-code} ({signal.Signals(-code).name})"
    except ValueError:
        return f"died by signal {-code}"


def _worker_env(suite: Suite) -> dict:
    """The worker's environment: the suite's, with ``TMPDIR`` in the suite's directory, so that
    what the worker and its subprocesses leave there is removed with it (even after a crash)."""
    tmp = suite._tmp / "tmp"
    tmp.mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(tmp), "PYTHONFAULTHANDLER": "1"}


_VISIBILITY_CHILD = """
import json, sys
from tilelang_core.backends import get_registry
record = get_registry().get({name!r})
print(json.dumps(None if record is None else [record.distribution, record.version]))
"""


def _visibility_problem(suite: Suite) -> str:
    """Why a fresh interpreter in the suite's directory does not see the backend (see
    :meth:`Suite.visibility_problem`), or ``""``."""
    record = suite.record
    proc = subprocess.run([sys.executable, "-c", _VISIBILITY_CHILD.format(name=suite.name)], capture_output=True,
                          text=True, timeout=CHILD_TIMEOUT, cwd=suite._tmp)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or [""])[-1]
        return f"a fresh interpreter cannot list the execution backends (exit code {proc.returncode}): {tail}"
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    if seen == [record.distribution, record.version]:
        return ""
    metadata = getattr(getattr(record._ep, "entry_point", None), "dist", None)
    where = getattr(metadata, "_path", None)
    found = (f" (this process found it only through the sys.path entry {str(Path(where).parent)!r}, which holds "
             f"{Path(where).name}: the current folder, which `python -m` puts on sys.path, keeps such metadata where "
             f"`pip install .` ran even after `pip uninstall`)") if where else ""
    if seen is None:
        return (f"execution backend {suite.name!r} is not visible in a fresh interpreter{found}: the checks run "
                f"in fresh interpreters, so pip install it (`pip install .` in its project folder), then check again")
    return (f"a fresh interpreter sees execution backend {suite.name!r} as {seen[0]} {seen[1]}, this process as "
            f"{record.distribution} {record.version}{found}: pip install the one to check, then check again")


def _death(child: dict) -> str:
    """How a subprocess ended and in which call (its last ``start`` line), with what its stderr says
    of it: the crash report's first line (faulthandler's "Fatal Python error: ...", or TVM's
    "Segfault encountered", whose handler prints native frames) and its innermost frame that names
    a function (a Python one, else a native one outside the C library's signal code); else the
    last line. Before, it quoted the last line, the outermost native frame
    (``File "<unknown>", line 0, in 0xffffffffffffffff``)."""
    code = child["code"]
    how = "timed out" if code is None else _how_it_ended(code)
    last = next((line["start"] for line in reversed(child["lines"]) if "start" in line), None)
    lines = [line.strip() for line in child["stderr"].strip().splitlines() if line.strip()]
    fatal = next((line.strip("! ") for line in lines if line.startswith("Fatal Python error")
                  or "encountered !!" in line), None)
    frames = [line for line in lines if line.startswith('File "')]
    frame = next((line for line in frames if re.match(r'File ".*\.py", line \d+', line)), None) or next(
        (line for line in frames if "sysdeps/" not in line and not re.search(r"line 0, in (0x)?[0-9a-f]+$", line)), None)
    detail = "; ".join(part for part in (fatal, frame) if part) or (lines[-1] if lines else "")
    return f"the subprocess {how}" + (f" during {last!r}" if last else "") + (f": {detail}" if detail else "")


# -- the declaration and the probe ------------------------------------------------------------

_DECLARATION_CHILD = """
import importlib, json, sys
heavy = {heavy!r}
module = importlib.import_module({module!r})
at_import = sorted(m for m in heavy if m in sys.modules)
spec = module.tilelang_backend_spec()
after_spec = sorted(m for m in heavy if m in sys.modules)
print(json.dumps({{"import": at_import, "spec": after_spec, "api": getattr(module, "TILELANG_PLUGIN_API", None)}}))
"""


def _check_declaration(suite: Suite, _target: None, _id: str) -> Optional[str]:
    from ..testkit import HEAVY_MODULES

    record = suite.record
    _expect(record.status == "ok", f"the backend is {record.status}: {record.reason}")
    module = record.entry_point.split(":")[0]
    code = _DECLARATION_CHILD.format(heavy=HEAVY_MODULES, module=module)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=CHILD_TIMEOUT,
                          cwd=suite._tmp)
    _expect(proc.returncode == 0, f"importing {module} in a fresh interpreter failed: {proc.stderr.strip()[-500:]}")
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    _expect(not seen["import"], f"importing {module} imports {', '.join(seen['import'])}: import them inside the hooks")
    _expect(not seen["spec"], f"tilelang_backend_spec() imports {', '.join(seen['spec'])}: the declaration must be cheap")
    dep = record.spec.deprecated
    if dep and dep.replacement and dep.replacement not in suite.registry.names():
        return f"deprecated in favour of {dep.replacement!r}, which is not installed here"
    return None


def _check_probe(suite: Suite, kind: str, _id: str) -> Optional[str]:
    # _require_available already probed (and failed a broken probe)
    _expect(kind not in GPU_KINDS or suite.record.implements("tilelang_backend_probe"),
            f"target {kind!r} needs a device, but the backend implements no tilelang_backend_probe: it is "
            f"listed as available on every machine, and 'auto' picks it where it cannot run; implement the probe "
            f"(Availability.no(reason), or Availability.build_only_because(reason) when the compiler is here but "
            f"the driver or device is not)")
    return None


# -- reference kernels against torch ----------------------------------------------------------


def _torch():
    import torch

    return torch


def _rand(torch: Any, *shape: int, device: str) -> Any:
    return torch.randn(*shape, device=device)


def _k_static(suite: Suite, kind: str) -> None:
    torch, dev = _torch(), suite.device(kind)
    k = suite.compile(kind, "vadd")
    a, b, c = _rand(torch, 16, device=dev), _rand(torch, 16, device=dev), torch.zeros(16, device=dev)
    _expect(k(a, b, c) is None, "a kernel without out_idx must return None")
    _close(torch, c, a + b, "vadd(A, B, C) wrote C")
    k = suite.compile(kind, "vadd_out")
    out = k(a, b)
    _expect(isinstance(out, torch.Tensor), f"with out_idx=[2] the kernel must return a tensor, got {type(out).__name__}")
    _expect(out.shape == (16,) and out.dtype == torch.float32 and out.is_contiguous() and out.device == a.device,
            f"the output is {tuple(out.shape)} {out.dtype} on {out.device}, expected (16,) float32 contiguous on {a.device}")
    _close(torch, out, a + b, "vadd(A, B)")
    _expect(k(a, b) is not out, "each call must return a new output tensor")


def _k_dynamic(suite: Suite, kind: str) -> None:
    torch, dev = _torch(), suite.device(kind)
    k = suite.compile(kind, "vadd_dyn")
    for n in (63, 64, 65, 1000, 5):
        a, b = _rand(torch, n, device=dev), _rand(torch, n, device=dev)
        _close(torch, k(a, b), a + b, f"vadd_dyn with n={n}")
    k = suite.compile(kind, "rows_out")
    for n in (3, 100):
        x, s = _rand(torch, n, 4, device=dev), _rand(torch, n, device=dev)
        _close(torch, k(x, s), x * s[:, None], f"rows with n={n}")


def _k_sizes(sizes: tuple[int, ...]) -> Callable[[Suite, str], None]:
    def check(suite: Suite, kind: str) -> None:
        torch, dev = _torch(), suite.device(kind)
        vadd, rows, pad = suite.compile(kind, "vadd_dyn"), suite.compile(kind, "rows_out"), suite.compile(kind, "pad_out")
        for n in sizes:
            a, b = _rand(torch, n, device=dev), _rand(torch, n, device=dev)
            out = vadd(a, b)
            _expect(tuple(out.shape) == (n,), f"vadd_dyn with n={n} returned shape {tuple(out.shape)}")
            _close(torch, out, a + b, f"vadd_dyn with n={n}")
            x, s = _rand(torch, n, 4, device=dev), _rand(torch, n, device=dev)
            _close(torch, rows(x, s), x * s[:, None], f"rows with n={n}")
            _close(torch, pad(a), torch.nn.functional.pad(a, (1, 1)), f"pad with n={n}")

    return check


def _k_output_expression(suite: Suite, kind: str) -> None:
    torch, dev = _torch(), suite.device(kind)
    a = _rand(torch, 9, device=dev)
    out = suite.compile(kind, "pad_out")(a)
    _expect(tuple(out.shape) == (11,), f"pad(A of 9) must return shape (11,) (n + 2), got {tuple(out.shape)}")
    _close(torch, out, torch.nn.functional.pad(a, (1, 1)), "pad with out_idx=[1]")
    given = torch.full((11,), 7.0, device=dev)
    suite.compile(kind, "pad")(a, given)
    _close(torch, given, torch.nn.functional.pad(a, (1, 1)), "pad(A, Out) into a given Out")


def _k_several_outputs(suite: Suite, kind: str) -> None:
    torch, dev = _torch(), suite.device(kind)
    a, b = _rand(torch, 10, device=dev), _rand(torch, 10, device=dev)
    got = suite.compile(kind, "sumdiff")(a, b)
    _expect(isinstance(got, list) and len(got) == 2, f"with out_idx=[2, 3] the kernel must return a list of 2 tensors, got {got!r:.80}")
    _close(torch, got[0], a + b, "sumdiff output S")
    _close(torch, got[1], a - b, "sumdiff output D")


def _k_scalar_symbol(suite: Suite, kind: str) -> None:
    torch, dev = _torch(), suite.device(kind)
    out = suite.compile(kind, "iota_out")(6)
    _close(torch, out, torch.arange(6, dtype=torch.int32, device=dev) * 3, "iota(6) with out_idx=[0]")
    a = torch.zeros(5, dtype=torch.int32, device=dev)
    suite.compile(kind, "iota")(a, 5)
    _close(torch, a, torch.arange(5, dtype=torch.int32, device=dev) * 3, "iota(A, 5)")


def _k_offset_views(suite: Suite, kind: str) -> None:
    torch, dev = _torch(), suite.device(kind)
    base = _rand(torch, 40, device=dev)
    a, b = base[3:19], base[20:36]
    _close(torch, suite.compile(kind, "vadd_out")(a, b), a + b, "vadd_out on views with a storage offset")
    big = torch.zeros(30, device=dev)
    suite.compile(kind, "vadd")(a, b, big[5:21])
    _close(torch, big[5:21], a + b, "vadd writing into a view with a storage offset")
    _expect(bool((big[:5] == 0).all() and (big[21:] == 0).all()), "vadd wrote outside the output view")


def _k_aliasing_inputs(suite: Suite, kind: str) -> None:
    """Read-only tensors may share memory; a written tensor right next to an input shares none, nor
    do interleaved views of one storage that share no byte (docs/backend-conventions.md)."""
    torch, dev = _torch(), suite.device(kind)
    k = suite.compile(kind, "vadd")
    a, c = _rand(torch, 16, device=dev), torch.zeros(16, device=dev)
    k(a, a, c)
    _close(torch, c, 2 * a, "vadd(A, A, C): both inputs are the same tensor, only read")
    buf = _rand(torch, 48, device=dev)
    k(buf[0:16], buf[8:24], buf[32:48])
    _close(torch, buf[32:48], buf[0:16] + buf[8:24], "vadd on overlapping read-only views, writing a disjoint one")
    k(buf[0:16], buf[32:48], buf[16:32])
    _close(torch, buf[16:32], buf[0:16] + buf[32:48], "vadd writing a view adjacent to both inputs (no byte shared)")
    x = _rand(torch, 8, device=dev)
    out = suite.compile(kind, "vadd_dyn")(x, x)
    _close(torch, out, 2 * x, "vadd_dyn(X, X) into a fresh out_idx output")
    empty = suite.compile(kind, "pad")
    y = torch.full((2,), 7.0, device=dev)
    empty(y[0:0], y)  # A has no elements: it overlaps nothing, though Out starts at its address
    _close(torch, y, torch.zeros(2, device=dev), "pad(A of 0 elements, Out of 2) at the same address")
    qk = _rand(torch, 3, 8, device=dev)
    want = torch.cat([qk[:, :4] * 2, qk[:, 4:] * 3], 1)
    suite.compile(kind, "halves")(qk[:, :4], qk[:, 4:])  # column halves: byte ranges meet, no byte shared
    _close(torch, qk, want, "halves(Q, K) writing the two column halves of one matrix")


def _k_explicit_strides(suite: Suite, kind: str) -> None:
    torch, dev = _torch(), suite.device(kind)
    k = suite.compile(kind, "colmajor")
    x = _rand(torch, 4, 5, device=dev).t()  # shape (5, 4), strides (1, 5)
    _close(torch, k(x), x, "colmajor on a column-major (1, n)-strided tensor")
    one = _rand(torch, 4, 1, device=dev).t()  # n == 1: the stride of a size-1 dimension is free
    _close(torch, k(one), one, "colmajor with n=1")


def _k_strided_output(suite: Suite, kind: str) -> None:
    """An ``out_idx`` output with declared strides is allocated with them (not compact)."""
    torch, dev = _torch(), suite.device(kind)
    k = suite.compile(kind, "to_colmajor")
    x = _rand(torch, 5, 4, device=dev)
    y = k(x)
    _expect(tuple(y.stride()) == (1, 5), f"to_colmajor returned strides {tuple(y.stride())}, declared (1, n) = (1, 5)")
    _close(torch, y, x, "to_colmajor into a column-major (1, n)-strided output")


def _k_stride_symbol(suite: Suite, kind: str) -> None:
    """A symbol read from a tensor's stride (``dynamic_strides``): each call binds it anew."""
    torch, dev = _torch(), suite.device(kind)
    k = suite.compile(kind, "rowstride")
    base = _rand(torch, 5, 9, device=dev)
    x = base[:, 2:6]  # shape (5, 4), strides (9, 1)
    _close(torch, k(x), x, "rowstride on a view of rows 9 elements apart")
    compact = _rand(torch, 3, 4, device=dev)  # strides (4, 1): s = 4
    _close(torch, k(compact), compact, "rowstride on a compact tensor (s = 4)")


def _k_autograd_inputs(suite: Suite, kind: str) -> None:
    torch, dev = _torch(), suite.device(kind)
    a = torch.nn.Parameter(_rand(torch, 16, device=dev))
    b = _rand(torch, 16, device=dev).requires_grad_()
    _close(torch, suite.compile(kind, "vadd_out")(a, b), (a + b).detach(), "vadd_out on a Parameter and a requires_grad tensor")


def _k_scalars(suite: Suite, kind: str) -> None:
    torch = _torch()
    values = (8, 1.5, True, 7, -5, 2**64 - 1)
    out = suite.compile(kind, "scalars")(*values)
    want = float(8 + 1.5 + 1 + 7 - 5) + float(2**64 - 1)
    _close(torch, out.cpu(), torch.tensor([want], dtype=torch.float64), f"scalars{values}")
    values = (8, -(2**70), True, 7, -5, 3)  # a float scalar takes any int a double holds, beyond int64 too
    out = suite.compile(kind, "scalars")(*values)
    want = 8.0 - float(2**70) + 1.0 + 7.0 - 5.0 + 3.0
    _close(torch, out.cpu(), torch.tensor([want], dtype=torch.float64), f"scalars{values}")
    try:
        import numpy
    except ImportError:  # numpy is optional for torch: its scalars cannot reach a kernel then
        return
    # numpy scalars as the kernel's parameters' dtypes; numpy's bool (no __index__) for bool and int
    values = (numpy.int32(8), numpy.float32(1.5), numpy.bool_(True), numpy.uint8(7), numpy.int64(-5),
              numpy.bool_(False))
    out = suite.compile(kind, "scalars")(*values)
    _close(torch, out.cpu(), torch.tensor([12.5], dtype=torch.float64), f"scalars{tuple(map(repr, values))}")


def _k_ieee(suite: Suite, kind: str) -> None:
    """NaN, infinities and signed zeros as IEEE 754 defines them (no value-changing flags)."""
    torch, dev = _torch(), suite.device(kind)
    inf, nan = float("inf"), float("nan")
    tiny = 1e-45  # float32's smallest subnormal: flushed to 0 where -ffast-math's startup code set FTZ/DAZ
    a = torch.tensor([1.5, -2.0, nan, inf, -inf, 0.0, -0.0, tiny], device=dev)
    clean, zeroed = suite.compile(kind, "ieee")(a)
    want = torch.tensor([1.5, -2.0, 0.0, inf, -inf, 0.0, -0.0, tiny], device=dev)
    _expect(torch.equal(clean, want),
            f"Clean = (A != A ? 0 : A) gave {clean.tolist()} for A = {a.tolist()}, expected {want.tolist()}: "
            f"NaN compares unequal to itself and subnormals are numbers in IEEE 754; was the kernel built with "
            f"value-changing flags such as -ffast-math or -ffinite-math-only (a library linked with -ffast-math "
            f"also flushes subnormals to zero in the whole process that loads it)?")
    got = [(math.isnan(v), math.copysign(1.0, v)) for v in zeroed.tolist()]
    expect = [(math.isnan(v), math.copysign(1.0, v)) for v in (a * 0).tolist()]
    _expect(got == expect,
            f"Zeroed = A * 0 gave {zeroed.tolist()} for A = {a.tolist()}, expected {(a * 0).tolist()} (NaN for "
            f"infinities and NaN, -0.0 for negative A): was the kernel built with value-changing flags such as "
            f"-ffast-math or -fno-signed-zeros?")


def _k_device_assert(suite: Suite, kind: str) -> None:
    """A kernel with ``T.device_assert``: runs when it holds; on CPU targets a failed one raises the text."""
    from .kernels import POSITIVE_MESSAGE

    torch, dev = _torch(), suite.device(kind)
    k = suite.compile(kind, "positive")
    a = torch.rand(100, device=dev) + 0.5
    _close(torch, k(a), a, "positive(A) with every A > 0")
    if kind in GPU_KINDS:
        return  # a failed assertion traps on a GPU: the process's device context is lost
    a[70] = -1.0
    _expect_check_failure(
        lambda: k(a), "positive(A) with A[70] = -1", "a failed T.device_assert",
        "positive() failed: T.device_assert failed at ", f": {POSITIVE_MESSAGE}",
        f"'positive() failed: T.device_assert failed at <file>:<line>: {POSITIVE_MESSAGE}' (the entry returned status "
        f"-3: CallChecker.check_status(status, assert_message) with a callable that takes the status and "
        f"returns the text, see "
        f"docs/backend-conventions.md)")


def _expect_check_failure(call: Callable[[], Any], what: str, failure: str, starts: str, ends: str,
                          expected: str) -> None:
    """``call()`` (``what``) must raise ``RuntimeError`` whose text starts with ``starts`` and ends
    with ``ends``: the text of a kernel check that failed (``failure``), ``expected`` in words."""
    try:
        call()
    except RuntimeError as exc:
        text = str(exc)
        _expect(text.startswith(starts) and text.endswith(ends),
                f"{failure} raised RuntimeError({text!r}); expected the check's text, {expected}")
    except Exception as exc:  # noqa: BLE001 - reported as the failure
        raise Fail(f"{failure} raised {type(exc).__name__}: {exc}; expected RuntimeError") from None
    else:
        raise Fail(f"{what} returned: {failure} did not stop the call")


def _k_division_by_zero(suite: Suite, kind: str) -> None:
    """``C = A // B`` of int32: floor division as torch's (``-2**31 // -1`` wraps to ``-2**31``); on
    CPU targets a 0 in ``B`` raises the division's text instead of crashing the process."""
    torch, dev = _torch(), suite.device(kind)
    k = suite.compile(kind, "quotient")
    pairs = [(7, 2), (-7, 2), (7, -2), (-7, -2), (2**31 - 1, -1), (0, 3), (5, 1)]
    if kind not in GPU_KINDS:  # the value is unspecified on GPUs (PTX div.s32)
        pairs.append((-2**31, -1))
    a = torch.tensor([p[0] for p in pairs], dtype=torch.int32, device=dev)
    b = torch.tensor([p[1] for p in pairs], dtype=torch.int32, device=dev)
    got = k(a, b)
    _expect(torch.equal(got.cpu(), (a // b).cpu()),
            f"quotient(A, B) = A // B gave {got.tolist()} for A = {a.tolist()}, B = {b.tolist()}, "
            f"expected {(a // b).tolist()} (floor division; on CPU targets -2**31 // -1 wraps to -2**31, as in torch)")
    if kind in GPU_KINDS:
        return  # a GPU does not trap on a division by zero, and the value is unspecified
    b[3] = 0
    _expect_check_failure(
        lambda: k(a, b), "quotient(A, B) with B[3] = 0", "a division by zero",
        "quotient() failed: integer division by zero at ", " is 0",
        "'quotient() failed: integer division by zero at <file>:<line>: the divisor ... is 0' (the entry returned "
        "status -3: CallChecker.check_status(status, assert_message); a TVM runtime module's error carries the "
        "text: calling.kernel_check_text, see docs/backend-conventions.md)")


KERNEL_CHECKS: dict[str, Callable] = {
    "static": _k_static,
    "dynamic": _k_dynamic,
    "zero_size": _k_sizes((0,)),
    "one_size": _k_sizes((1,)),
    # past TL_PARALLEL_MIN_WORK (65536): the C entry's block loop runs on the backend's launcher
    # (backend-conventions.md, "Parallel block loops"), with an odd number of blocks and a last one
    # cut short; a launcher that dropped the odd block, or a kernel that wrote only small outputs
    # right, passed every other check
    "large_size": _k_sizes((65536, 70401, 131119)),
    "output_expression": _k_output_expression,
    "several_outputs": _k_several_outputs,
    "scalar_symbol": _k_scalar_symbol,
    "offset_views": _k_offset_views,
    "aliasing_inputs": _k_aliasing_inputs,
    "explicit_strides": _k_explicit_strides,
    "stride_symbol": _k_stride_symbol,
    "strided_output": _k_strided_output,
    "autograd_inputs": _k_autograd_inputs,
    "scalars": _k_scalars,
    "ieee": _k_ieee,
    "device_assert": _k_device_assert,
    "division_by_zero": _k_division_by_zero,
}
KERNEL_CHECKS = {name: (lambda fn: lambda suite, kind, _id: fn(suite, kind))(fn) for name, fn in KERNEL_CHECKS.items()}
#: Kernel checks listed only for targets whose capability declares the named field.
DECLARED_KERNEL_CHECKS = {"stride_symbol": "dynamic_strides"}


def _check_dtype(suite: Suite, kind: str, check_id: str) -> None:
    torch, dev = _torch(), suite.device(kind)
    dtype = check_id.split(":", 1)[1]
    k = suite.compile(kind, f"copy:{dtype}")
    a = (torch.arange(100) % (2 if dtype == "bool" else 7)).to(getattr(torch, dtype)).to(dev)
    out = k(a)
    _expect(out.dtype == a.dtype, f"copy:{dtype} returned dtype {out.dtype}")
    _expect(bool(torch.equal(out, a)), f"copy:{dtype} returned other values than its input")


def _extremes(dtype: str) -> list:
    from ..calling import INT_RANGES

    if dtype == "bool":
        return [True, False]
    if dtype in INT_RANGES:
        return list(INT_RANGES[dtype])
    return {"float16": [1.5, -65504.0], "float32": [1.25, -3.0e38], "float64": [1e300, -2.5e-300]}[dtype]


def _check_scalar(suite: Suite, kind: str, check_id: str) -> None:
    torch, dev = _torch(), suite.device(kind)
    dtype = check_id.split(":", 1)[1]
    k = suite.compile(kind, f"fill:{dtype}")
    for value in _extremes(dtype):
        a = torch.zeros(5, dtype=getattr(torch, dtype), device=dev)
        k(a, value)
        want = torch.full((5,), value, dtype=getattr(torch, dtype), device=dev)
        _expect(bool(torch.equal(a, want)), f"fill:{dtype} with {value!r} wrote {a.tolist()}")


# -- the error table, in a subprocess ---------------------------------------------------------


def _check_error_row(suite: Suite, kind: str, check_id: str) -> Optional[str]:
    row_id = check_id.split(":", 1)[1]
    row = next(r for r in error_table.ROWS if r.id == row_id)
    child = _errors_child(suite, kind)
    got = next((line for line in child["lines"] if line.get("row") == row_id), None)
    if got is None:
        raise Fail(_death(child))
    if got.get("died"):
        raise Fail(got["died"])
    if got.get("skip"):
        raise Skip(got["skip"])
    want_type, want = row.error, row.expected(_param_device(kind))
    _expect(got.get("type") == want_type and got.get("message") == want,
            f"{row.call_text}: expected {want_type}({want!r}), got "
            + (f"{got['type']}({got['message']!r})" if got.get("type") else "no error"))
    return None


def _errors_child(suite: Suite, kind: str) -> dict:
    """What the ``errors`` subprocesses of ``kind`` reported: the selected rows, then the random
    calls if selected. A row whose call ended the subprocess (a crash) is reported as such (a line
    ``{"row": id, "died": why}``), and a fresh subprocess runs the rows after it and the random
    calls: before, one crashing row failed every later row and ``wrong_calls``, none of which had
    run. The merged result's ``code`` and ``stderr`` are those of the last subprocess."""
    key = (kind, "errors", "merged")
    if key in suite._children:
        return suite._children[key]
    names = {c.name for c in suite.checks()}
    rows = [r.id for r in error_table.ROWS if f"{kind}:error:{r.id}" in names]
    fuzz = FUZZ_CALLS if f"{kind}:wrong_calls" in names else 0
    lines: list = []
    while True:
        child = suite.child(kind, "errors", {"rows": rows, "fuzz": fuzz})
        lines += child["lines"]
        done = {line["row"] for line in child["lines"] if "row" in line}
        started = [line["start"] for line in child["lines"] if "start" in line]
        crashed = started[-1] if child["code"] != 0 and started and started[-1] in rows and started[-1] not in done else None
        if crashed is None:
            break
        lines.append({"row": crashed, "died": _death(child)})
        rows = rows[rows.index(crashed) + 1:]
        if not rows and not fuzz:
            break
    merged = {"lines": lines, "code": child["code"], "stderr": child["stderr"]}
    suite._children[key] = merged
    return merged


def _param_device(kind: str) -> str:
    """The torch device type of a target's tensors (``metal`` -> ``mps``), as the messages name it."""
    from ..devices import TORCH_DEVICE_TYPES

    family = {"nvptx": "cuda", "hip": "rocm"}.get(kind, kind) if kind in GPU_KINDS else "cpu"
    return TORCH_DEVICE_TYPES.get(family, family)


def _check_wrong_calls(suite: Suite, kind: str, _id: str) -> str:
    child = _errors_child(suite, kind)
    fuzz = next((line["fuzz"] for line in child["lines"] if "fuzz" in line), None)
    if fuzz is None:
        raise Fail(_death(child))
    if not fuzz["calls"]:  # nothing was checked: never a pass
        refused = fuzz.get("not_built") or []
        why = f"; {refused[0]}" if refused else ""
        raise Skip(f"no random call was made: the backend's declaration refuses every reference kernel of the "
                   f"random calls{why}")
    # the count of every misbehaving call (before, the 5 examples the subprocess sends were counted)
    count = fuzz.get("count", len(fuzz["problems"]))
    _expect(not count, f"{count} of {fuzz['calls']} random calls misbehaved, e.g. {fuzz['problems'][0]}" if count else "")
    _expect(child["code"] == 0, _death(child))
    return f"{fuzz['calls']} random calls ({fuzz['errors']} refused), no crash"


# -- a target that can build but not run here -------------------------------------------------

#: Reference kernels exported and loaded back by the save/load and build-only checks.
ROUND_TRIP_KERNELS = ("vadd_dyn", "pad_out", "scalars")


def _check_build_only(suite: Suite, kind: str, _id: str) -> str:
    """Where the probe says *build only* (a compiler, no driver or device): the reference kernels
    build, their calls refuse with ``BackendUnavailableError``, they export, and a fresh process
    loads the exports (``tilelang.load``, without TVM where the declaration says so) and gets them
    from the disk cache through the load hook, without a device. Reference kernels with a dtype
    the backend does not declare for the target are left out."""
    from ..errors import BackendUnavailableError

    record = suite.record
    _expect(record.status == "ok", f"the backend is {record.status}: {record.reason}")
    availability = suite.availability(kind)
    if availability.available:
        raise Skip(f"target {kind!r} runs here: the other checks build and run its kernels")
    if not availability.can_build:
        raise Skip(f"target {kind!r} can neither build nor run here: {availability.reason}")
    built, refused = [], []
    for kernel_id in ROUND_TRIP_KERNELS:
        try:
            kernel = suite.compile(kind, kernel_id)
        except Skip as exc:  # a dtype the backend does not declare for the target (float64 on Metal)
            refused.append(f"{kernel_id} ({exc})")
            continue
        built.append(kernel_id)
        try:
            kernel()
        except BackendUnavailableError:
            pass
        except Exception as exc:  # noqa: BLE001 - reported as the failure
            raise Fail(f"calling {kernel_id} built for {kind!r} raised {type(exc).__name__}: {exc}; "
                       "expected BackendUnavailableError") from None
        else:
            raise Fail(f"calling {kernel_id} built for {kind!r} returned, though the target cannot run here")
    if not built:
        raise Skip("the backend's declaration refuses every reference kernel: " + "; ".join(refused))
    not_built = f" (not built, as declared: {'; '.join(refused)})" if refused else ""
    if not (record.implements("tilelang_backend_save") and record.implements("tilelang_backend_load")):
        return f"built {len(built)} kernels; their calls refuse (no save/load hooks){not_built}"
    paths = {}
    for kernel_id in built:
        paths[kernel_id] = str(suite.compile(kind, kernel_id).export(suite._tmp / "export-build-only" / kind / kernel_id))
    child = suite.child(kind, "build_only", {"kernels": built, "paths": paths})
    done = next((line for line in child["lines"] if "built_only" in line), None)
    if done is None:
        raise Fail(_death(child))
    _expect(not done["problems"], "; ".join(done["problems"]))
    tvm = ""
    if suite.capability(kind).loads_without_tvm:
        _expect(not done["tvm"], "the declaration claims loads_without_tvm, but tilelang.load imported " + ", ".join(done["tvm"]))
        tvm = " (tilelang.load without importing TVM)"
    return (f"built and exported {len(built)} kernels, a fresh process loaded the exports{tvm} and got them from "
            f"the disk cache; every call refuses with BackendUnavailableError{not_built}")


# -- save/load, the kernel cache, threads -----------------------------------------------------


def _check_save_load(suite: Suite, kind: str, _id: str) -> str:
    """The reference kernels export, and a fresh process loads each from a copy that is removed
    before the first call (the load hook's contract), and gets right results."""
    record = suite.record
    if not (record.implements("tilelang_backend_save") and record.implements("tilelang_backend_load")):
        raise Skip("the backend does not implement tilelang_backend_save/load: kernels are rebuilt in every process")
    exported, refused = {}, []
    for kernel_id in ROUND_TRIP_KERNELS:
        path = suite._tmp / "export" / kind / kernel_id
        if not path.exists():
            try:
                kernel = suite.compile(kind, kernel_id)
            except Skip as exc:  # a dtype the backend does not declare for the target (float64 on Metal)
                refused.append(f"{kernel_id} ({exc})")
                continue
            kernel.export(path)
        exported[kernel_id] = str(path)
    if "vadd_dyn" not in exported:
        raise Skip("the backend's declaration refuses the reference kernel vadd_dyn: " + "; ".join(refused))
    child = suite.child(kind, "load", {"paths": exported})
    done = next((line for line in child["lines"] if "loaded" in line), None)
    if done is None:
        raise Fail(_death(child))
    _expect(not done["problems"], "; ".join(done["problems"]))
    not_built = f" (not built, as declared: {'; '.join(refused)})" if refused else ""
    if suite.capability(kind).loads_without_tvm:
        _expect(not done["tvm"], "the declaration claims loads_without_tvm, but loading imported " + ", ".join(done["tvm"]))
        return "loaded in a fresh process without importing TVM, and ran with the directories removed" + not_built
    return "loaded in a fresh process, and ran with the directories removed" + not_built


def _check_cache(suite: Suite, kind: str, _id: str) -> str:
    from ..cache.store import get_cache

    record = suite.record
    with suite._environment(cache=f"cache-check-{kind}") as env:
        directory = os.environ["TILELANG_CACHE_DIR"]
        first = suite.compile(kind, "vadd_dyn", fresh=True)
        key = getattr(first, "cache_key", None)
        _expect(isinstance(key, str), "tilelang.compile did not go through the kernel cache (no cache_key)")
        again = suite.compile(kind, "vadd_dyn", fresh=True)
        _expect(again is first, "compiling the same kernel again in one process did not return the cached kernel")
        if not (record.implements("tilelang_backend_save") and record.implements("tilelang_backend_load")):
            return "cached in memory only (the backend does not implement save/load)"
        entries = [m for _, m in get_cache(directory).disk.entries() if m is not None]
        _expect(len(entries) == 1 and entries[0].backend.name == suite.name,
                f"expected one disk entry of backend {suite.name!r} in {directory}, found {len(entries)}")
        other = suite.compile(kind, "vadd_dyn", fresh=True, out_idx=None)
        _expect(getattr(other, "cache_key", None) not in (None, key), "another out_idx must give another cache key")
        child = suite.child(kind, "cache", {"key": key}, env=env)
    done = next((line for line in child["lines"] if "cached" in line), None)
    if done is None:
        raise Fail(_death(child))
    _expect(not done["problems"], "; ".join(done["problems"]))
    return "a fresh process loaded the kernel from the disk cache without building it"


def _check_threads(suite: Suite, kind: str, _id: str) -> str:
    torch, dev = _torch(), suite.device(kind)
    k = suite.compile(kind, "vadd_dyn")
    problems: list[str] = []

    def work(seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        try:
            for n in range(1, 600, 29):
                a, b = torch.randn(n, generator=g).to(dev), torch.randn(n, generator=g).to(dev)
                if not torch.equal(k(a, b), a + b):
                    problems.append(f"thread {seed}: wrong result for n={n}")
                    return
        except Exception as exc:  # noqa: BLE001 - reported below
            problems.append(f"thread {seed}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(CHILD_TIMEOUT)
    _expect(not any(t.is_alive() for t in threads), "threads calling one kernel did not finish (a deadlock?)")
    _expect(not problems, "; ".join(problems[:3]))
    return "8 threads x 21 calls"


TARGET_CHECKS: dict[str, Callable] = {
    "wrong_calls": _check_wrong_calls,
    "save_load": _check_save_load,
    "cache": _check_cache,
    "threads": _check_threads,
}


def run_suite(name: str, targets: Optional[list[str]] = None, only: Optional[list[str]] = None) -> list[Result]:
    """Run every check of backend ``name`` (see :class:`Suite`); the results in order."""
    with Suite(name, targets, only) as suite:
        return list(suite.run())
