"""Subprocess side of the conformance suite: ``python -m tilelang_core.conformance._child JOB SPEC``.

Jobs (SPEC is JSON with ``backend``, ``target``, ``device`` and the job's fields):

- ``errors``: make every error-table row's call (``rows``), then ``fuzz`` random wrong calls;
- ``load``: ``tilelang.load`` the exported kernels (``paths``) and call them;
- ``cache``: compile a kernel the parent cached (``key``) and count the build hook's calls;
- ``build_only``: for a target that cannot run here, ``tilelang.load`` the exported kernels
  (``paths``; reporting whether that imported TVM), then compile the kernels the parent cached
  (``kernels``): each must come from the disk cache, and its call refuse;
- ``checks``: the worker of one target (``target``, ``only``, ``directory``: the parent suite's):
  run each check named on a line of stdin, answer ``{"result": ...}`` (see ``suite._Worker``).

Each result is one JSON line on stdout, flushed before the next call, so that the parent can
tell which call a crash happened in (``{"start": ...}`` lines mark each call).
"""

from __future__ import annotations

import contextlib
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

#: Bytes of address space a capped call may add to what the process already uses.
CAP_MARGIN = 1 << 30


def emit(**fields: Any) -> None:
    print(json.dumps(fields, default=str), flush=True)


def _compile(spec: dict, kernel_id: str) -> Any:
    from ..jit.compile import compile as tl_compile
    from . import kernels

    func, out_idx = kernels.make(kernel_id)
    return tl_compile(func, out_idx=out_idx, target=spec["target"], execution_backend=spec["backend"])


def _record(spec: dict) -> Any:
    """The registry's record of the backend under test.

    Before, a backend that this interpreter does not see gave ``None``, and the job failed with
    ``AttributeError: 'NoneType' object has no attribute 'call'``; now it fails saying so."""
    from ..backends import get_registry

    record = get_registry().get(spec["backend"])
    if record is None:
        raise SystemExit(f"execution backend {spec['backend']!r} is not visible in a fresh interpreter (the suite's "
                         f"process found it only through a sys.path entry of its own, e.g. the current folder that "
                         f"`python -m` adds, holding an .egg-info): pip install it, then check again")
    return record


def _status7(spec: dict) -> Any:
    from ..artifact import BuildOptions
    from .kernels import status7_artifact

    record = _record(spec)
    return record.call("tilelang_backend_build", artifact=status7_artifact(), options=BuildOptions())


def errors(spec: dict) -> None:
    import torch

    from ..errors import BackendCapabilityError
    from .error_table import ROWS, Maker

    maker = Maker(torch, spec["device"])
    built: dict[str, Any] = {}
    for row in (r for r in ROWS if r.id in spec["rows"]):
        emit(start=row.id)
        try:
            if row.kernel not in built:
                built[row.kernel] = _status7(spec) if row.kernel == "status7" else _compile(spec, row.kernel)
            kernel = built[row.kernel]
        except BackendCapabilityError as exc:
            emit(row=row.id, skip=str(exc))
            continue
        except Exception as exc:  # noqa: BLE001 - reported as the row's outcome
            emit(row=row.id, type=f"(building the kernel) {type(exc).__name__}", message=str(exc))
            continue
        args, kwargs = row.call(maker)
        try:
            with address_space_capped(row.capped and spec["device"] == "cpu"):
                kernel(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - compared with the table by the parent
            emit(row=row.id, type=type(exc).__name__, message=str(exc))
        else:
            emit(row=row.id, type=None, message=None)
    not_built: list[str] = []
    if spec["fuzz"]:
        for kernel_id in ("vadd", "vadd_out", "vadd_dyn", "rows", "pad", "iota", "colmajor", "scalars"):
            try:
                built.setdefault(kernel_id, _compile(spec, kernel_id))
            except BackendCapabilityError as exc:
                not_built.append(f"{kernel_id}: {exc}")
    fuzz(spec, {k: v for k, v in built.items() if k != "status7"}, torch, not_built)


@contextlib.contextmanager
def address_space_capped(enabled: bool) -> Iterator[None]:
    """While enabled (on Linux), cap the address space at :data:`CAP_MARGIN` above what the process
    uses: a call that tries to allocate gigabytes raises instead of exhausting the machine. The
    soft limit is restored afterwards (an unprivileged process may raise it back to the hard one)."""
    if not enabled or not sys.platform.startswith("linux"):
        yield
        return
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/status") as status:
        used = int(status.read().split("VmSize:")[1].split()[0]) * 1024
    cap = used + CAP_MARGIN
    for limit in (soft, hard):
        if limit != resource.RLIM_INFINITY:
            cap = min(cap, limit)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _random_value(rng: random.Random, torch: Any, device: str) -> Any:
    choice = rng.randrange(12)
    if choice < 6:
        dtype = rng.choice([torch.float32, torch.float32, torch.float16, torch.float64, torch.int32, torch.int64,
                            torch.bool, torch.uint8])
        shape = [rng.choice([0, 1, 3, 4, 5, 8, 16]) for _ in range(rng.randrange(4))]
        t = torch.zeros(shape, dtype=dtype, device=device)
        how = rng.randrange(8)
        if how == 1 and t.dim() >= 2:
            t = t.transpose(0, 1)
        elif how == 2 and t.dim() >= 1 and t.shape[-1] > 1:
            t = t[..., ::2]
        elif how == 3:
            t = torch.empty(shape, dtype=dtype, device="meta")
        elif how == 4 and t.numel() > 0:
            t = torch.zeros(t.numel() + 3, dtype=dtype, device=device)[3:].view(shape)
        elif how == 5 and t.dim() >= 1:
            t = torch.zeros([1] * t.dim(), dtype=dtype, device=device).expand(*shape)
        elif how == 6 and t.dim() >= 1 and device == "cpu":
            t = t.to_sparse()
        return t
    return rng.choice([
        None, rng.randint(-(2**70), 2**70), rng.randint(-3, 70), rng.choice([0.5, float("nan"), float("inf"), -1e300]),
        rng.choice([True, False]), rng.choice(["", "x", "8"]), [1.0, 2.0], object(),
    ])


def _good_args(rng: random.Random, torch: Any, kernel: Any, device: str) -> list:
    """A right call of ``kernel`` (symbols drawn small), from its artifact."""
    from ..symbolic import evaluate

    art = kernel.artifact
    symbols = {s: rng.choice([0, 1, 3, 8]) for s in art.symbol_names()}
    args = []
    for index, p in enumerate(art.params):
        if index in kernel.out_idx:
            continue
        if p.kind == "tensor":
            shape = [evaluate(d, symbols) for d in p.shape]
            args.append(torch.zeros(shape, dtype=getattr(torch, p.dtype), device=device))
        else:
            bound = next((s.name for s in art.symbols if s.param_index == index and s.dim is None), None)
            args.append(symbols[bound] if bound else {"bool": True}.get(p.dtype, 1.5 if "float" in p.dtype else 3))
    if any(p.strides for p in art.params if p.kind == "tensor"):
        args = [a.t().contiguous().t() if hasattr(a, "dim") and a.dim() == 2 else a for a in args]
    return args


def fuzz(spec: dict, built: dict[str, Any], torch: Any, not_built: Any = ()) -> None:
    """Random calls: each must succeed or raise TypeError/ValueError starting with ``name()``.

    ``not_built`` (why reference kernels were not built) is reported with the count of calls, so that
    the parent can say why none was made."""
    rng = random.Random(20240601)
    kernels = [(k, getattr(k, "name", None) or getattr(getattr(k, "artifact", None), "name", "")) for k in built.values()]
    problems: list[str] = []
    refused = 0
    for call in range(spec["fuzz"] if kernels else 0):
        kernel, name = kernels[call % len(kernels)]
        args = _good_args(rng, torch, kernel, spec["device"])
        if rng.random() < 0.15:
            args = args[: rng.randrange(len(args) + 1)] + [_random_value(rng, torch, spec["device"])] * rng.randrange(2)
        for i in range(len(args)):
            if rng.random() < 0.35:
                args[i] = _random_value(rng, torch, spec["device"])
        kwargs = rng.choice([{}, {}, {}, {"stream": None}, {"stream": 0}, {"stream": "s"}, {"bogus": 1}])
        emit(start=f"random call #{call} of {name}")
        try:
            kernel(*args, **kwargs)
        except (TypeError, ValueError) as exc:
            refused += 1
            if not str(exc).startswith(f"{name}() "):
                problems.append(f"{name}{_describe(args)} raised {type(exc).__name__}({str(exc)!r:.200}), which does not start with '{name}() '")
        except Exception as exc:  # noqa: BLE001 - reported
            problems.append(f"{name}{_describe(args)} raised {type(exc).__name__}: {str(exc):.200}")
    # "count": every call that misbehaved (before, the parent counted the 5 examples sent)
    emit(fuzz={"calls": spec["fuzz"] if kernels else 0, "errors": refused, "problems": problems[:5],
               "count": len(problems), "not_built": list(not_built)})


def _describe(args: list) -> str:
    def one(a: Any) -> str:
        if hasattr(a, "dtype") and hasattr(a, "shape"):
            return f"Tensor({tuple(a.shape)}, {a.dtype}, {a.device}, strides={a.stride() if a.layout.__repr__() == 'torch.strided' else a.layout})"
        return repr(a)[:40]

    return "(" + ", ".join(one(a) for a in args) + ")"


def load(spec: dict) -> None:
    import torch

    import tilelang_core

    problems: list[str] = []
    dev = spec["device"]
    paths = spec["paths"]
    emit(start="tilelang.load")
    kernels = {}
    for name, path in paths.items():  # each from a copy, removed before any call (the load hook's contract)
        copy = Path(tempfile.mkdtemp(prefix="tilelang-check-load-")) / "kernel"
        try:
            shutil.copytree(path, copy)
            kernels[name] = tilelang_core.load(copy)
        finally:
            shutil.rmtree(copy.parent, ignore_errors=True)
    a, b = torch.randn(100, device=dev), torch.randn(100, device=dev)
    if not torch.allclose(kernels["vadd_dyn"](a, b), a + b):
        problems.append("the loaded vadd_dyn returned a wrong result")
    try:
        kernels["vadd_dyn"](a, torch.randn(99, device=dev))
        problems.append("the loaded vadd_dyn accepted inputs of different lengths")
    except ValueError as exc:
        if "bound it to 100" not in str(exc):
            problems.append(f"the loaded vadd_dyn raised {exc!r} for inputs of different lengths")
    if "pad_out" in kernels:  # kernels the backend's declaration refuses were not exported
        out = kernels["pad_out"](a[:5])
        if tuple(out.shape) != (7,) or not torch.allclose(out, torch.nn.functional.pad(a[:5], (1, 1))):
            problems.append("the loaded pad returned a wrong result")
    if "scalars" in kernels:
        got = float(kernels["scalars"](8, 1.5, True, 7, -5, 2**64 - 1)[0])
        if got != float(8 + 1.5 + 1 + 7 - 5) + float(2**64 - 1):
            problems.append(f"the loaded scalars returned {got}")
    tvm = sorted(m for m in sys.modules if m == "tvm" or m.startswith("tvm."))
    emit(loaded=len(kernels), problems=problems, tvm=tvm[:5])


def _count_hook_calls(spec: dict) -> list[str]:
    """The names of the backend's hooks called from now on, in order (a live list)."""
    record = _record(spec)
    calls: list[str] = []
    original = record.call

    def counting(hook: str, **kwargs: Any) -> Any:
        calls.append(hook)
        return original(hook, **kwargs)

    record.call = counting  # type: ignore[method-assign]
    return calls


def cache(spec: dict) -> None:
    import torch

    calls = _count_hook_calls(spec)
    emit(start="compile")
    kernel = _compile(spec, "vadd_dyn")
    problems = []
    if getattr(kernel, "cache_key", None) != spec["key"]:
        problems.append(f"the kernel's cache key in a fresh process is {getattr(kernel, 'cache_key', None)}, "
                        f"in the first process {spec['key']}")
    if "tilelang_backend_build" in calls:
        problems.append("a fresh process rebuilt the kernel instead of loading it from the disk cache")
    if "tilelang_backend_load" not in calls:
        problems.append("a fresh process did not call tilelang_backend_load")
    a, b = torch.randn(77, device=spec["device"]), torch.randn(77, device=spec["device"])
    if not torch.allclose(kernel(a, b), a + b):
        problems.append("the kernel loaded from the disk cache returned a wrong result")
    emit(cached=True, problems=problems)


def build_only(spec: dict) -> None:
    from ..errors import BackendUnavailableError

    import tilelang_core

    problems = []
    for kernel_id, path in spec.get("paths", {}).items():  # first the exports, before anything imports TVM
        emit(start=f"tilelang.load {kernel_id}")
        try:
            tilelang_core.load(path)
        except Exception as exc:  # noqa: BLE001 - reported as a problem
            problems.append(f"tilelang.load of the export of {kernel_id} in a fresh process raised {type(exc).__name__}: {exc}")
    tvm = sorted(m for m in sys.modules if m == "tvm" or m.startswith("tvm."))
    calls = _count_hook_calls(spec)
    for kernel_id in spec["kernels"]:
        emit(start=f"compile {kernel_id}")
        try:
            kernel = _compile(spec, kernel_id)
        except Exception as exc:  # noqa: BLE001 - reported as a problem
            problems.append(f"compiling {kernel_id} again in a fresh process (a disk cache hit: the load hook) "
                            f"raised {type(exc).__name__}: {exc}")
            continue
        if "tilelang_backend_build" in calls:
            problems.append(f"a fresh process rebuilt {kernel_id} instead of loading it from the disk cache")
        if "tilelang_backend_load" not in calls:
            problems.append(f"a fresh process did not call tilelang_backend_load for {kernel_id}")
        calls.clear()
        emit(start=f"call {kernel_id}")
        try:
            kernel()
            problems.append(f"calling {kernel_id} loaded from the disk cache returned, though the target cannot run here")
        except BackendUnavailableError:
            pass
        except Exception as exc:  # noqa: BLE001 - reported as a problem
            problems.append(f"calling {kernel_id} loaded from the disk cache raised {type(exc).__name__}: {exc}")
    emit(built_only=True, problems=problems, tvm=tvm[:5])


def checks(spec: dict) -> None:
    """The worker of one target: runs the checks named on stdin, one a line, in a suite that shares
    the parent's directory (its kernel cache and exports), until stdin closes. What the backend
    prints (file descriptor 1 included) goes to stderr: stdout carries the results alone."""
    import os

    from .suite import Suite

    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _record(spec)
    with Suite(spec["backend"], [spec["target"]], spec["only"] or None, directory=Path(spec["directory"]),
               isolated=False) as suite:
        known = {c.name: c for c in suite.checks()}
        for line in sys.stdin:
            name = line.strip()
            if name in known:
                result = suite.run_check(known[name]).to_dict()
            else:
                result = {"check": name, "target": spec["target"], "status": "fail",
                          "reason": f"the worker of target {spec['target']!r} has no check named {name!r}"}
            answers.write(json.dumps({"result": result}, default=str) + "\n")
            answers.flush()


def main(argv: list[str]) -> int:
    job, spec = argv[1], json.loads(argv[2])
    {"errors": errors, "load": load, "cache": cache, "build_only": build_only, "checks": checks}[job](spec)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
