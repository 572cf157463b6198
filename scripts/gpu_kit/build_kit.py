"""Build half of the GPU check kit: ``scripts/gpu-kit-build.sh DIR [options]`` (no GPU needed).

For every installed backend that can build ``cuda`` kernels here and each architecture
(``--archs``, default sm_90 and sm_80), every case of :mod:`.cases` is compiled with
``tilelang.compile(..., execution_backend=<backend>, target="cuda -arch=<arch>")`` and exported
with ``kernel.export``. Beside the kernels the kit holds each case's input specs (seeds) and
expected outputs (torch on the CPU; with a CPU backend installed, also checked against the same
kernel built for ``c``), the wheels the run needs (:mod:`.wheels`), TVM's runtime libraries for
tvm_ffi kernels, and the run half itself. Layout of DIR::

    MANIFEST.json        what is in the kit: cases, exports, versions, build failures, wheels
    README.md            how to run it
    gpu-kit-run.sh       the run half (also scripts/gpu-kit-run.sh in the repository)
    gpu_kit/             the run half's Python modules (standard library and torch only)
    kernels.tar.xz       kernels/<case>--<backend>--<arch>/ : one kernel.export() each
    expected/<case>.pt   expected outputs (torch.save of {name: tensor})
    wheels/              project wheels (+ cython sdist) and dependency wheels
    tvm-runtime.tar.xz   libtvm_runtime.so, libtvm_runtime_cuda.so and TVM's licence

Exit status: 0 kit complete; 1 kit written but some kernels failed to build, export or check
(MANIFEST.json ``build_failures``) or it is over the size limit; 2 nothing written (bad
arguments, DIR holds something that is not a kit).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Optional

if __package__ in (None, ""):  # run as a script: make ``gpu_kit`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_kit import KIT_FORMAT, RUN_SIDE_MODULES  # noqa: E402
from gpu_kit import references, tensors  # noqa: E402

HERE = Path(__file__).resolve().parent
SCRIPTS = HERE.parent
DEFAULT_ARCHS = ("sm_90", "sm_80")
SIZE_LIMIT_MIB = 48
MANIFEST = "MANIFEST.json"


class KitError(Exception):
    """A kit cannot be built at all (exit status 2)."""


def log(message: str) -> None:
    print(f"[gpu-kit-build] {message}", flush=True)


# -- what to build with ---------------------------------------------------------------------


def cuda_backends(wanted: Optional[list[str]] = None) -> tuple[list[str], dict[str, dict]]:
    """Backends that can build ``cuda`` kernels here, and a note on every installed one."""
    from tilelang_core.backends import get_registry
    from tilelang_core.backends.selection import declared_kind

    registry = get_registry()
    usable, notes = [], {}
    for record in registry.records():
        if wanted and record.name not in wanted:
            continue
        kind = declared_kind(record, "cuda") if record.status == "ok" else None
        if record.status != "ok":
            notes[record.name] = {"version": record.version, "status": "skipped", "reason": f"{record.status}: {record.reason}"}
            continue
        if kind is None:
            continue  # a CPU-only backend
        availability = registry.probe(record, kind)
        if not availability.can_build:
            notes[record.name] = {"version": record.version, "status": "skipped", "reason": availability.reason}
            continue
        usable.append(record.name)
        notes[record.name] = {"version": record.version, "distribution": record.distribution, "status": "built",
                              "here": "build only: " + availability.reason if availability.build_only else "available"}
    for name in wanted or []:
        if name not in notes:
            raise KitError(f"--backends names {name!r}, which is not an installed execution backend with a cuda target")
    return usable, notes


def toolchain_versions() -> dict[str, str]:
    """Versions of what built the kernels (for the manifest and the report)."""
    from importlib.metadata import PackageNotFoundError, version

    import torch

    out = {"python": platform.python_version(), "platform": platform.platform(), "torch": torch.__version__}
    for dist in ("tilelang-core", "tilelang-backend-cython", "tilelang-backend-nvrtc", "tilelang-backend-tvmffi",
                 "apache-tvm", "apache-tvm-ffi", "cuda-bindings", "nvidia-cuda-nvrtc"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            pass
    nvcc = os.environ.get("TILELANG_NVCC") or shutil.which("nvcc")
    if nvcc:
        try:
            text = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
            out["nvcc"] = next((line.split("release", 1)[1].strip() for line in text.splitlines() if "release" in line), "?")
        except (OSError, subprocess.TimeoutExpired):
            pass
    return out


# -- cases: definitions, inputs, expected outputs, CPU check -------------------------------


def signature_problem(func: Any, specs: list[dict[str, Any]]) -> Optional[str]:
    """What in ``specs`` does not match the parameters of the PrimFunc ``func`` (None: all match).

    Position by position: a tensor spec for each buffer parameter (same dtype, same rank, the
    same size where the kernel's is a constant), a scalar spec for each scalar one (same dtype).
    Anything that is not a PrimFunc is left to ``tilelang.compile``."""
    from tvm import tirx

    if not isinstance(func, tirx.PrimFunc):
        return None
    params = list(func.params)
    if len(params) != len(specs):
        return (f"the kernel has {len(params)} parameters ({', '.join(p.name for p in params)}), the case lists "
                f"{len(specs)} ({', '.join(str(s.get('name')) for s in specs)}); give every parameter a spec, in order")
    for i, (param, spec) in enumerate(zip(params, specs)):
        where = f"param {i} ({spec['name']!r})"
        buffer = func.buffer_map[param] if param in func.buffer_map else None
        if tensors.is_scalar(spec):
            if buffer is not None:
                return f"{where} is a scalar spec, but the kernel's parameter {buffer.name} is a tensor; give it a tensor spec"
            if str(param.dtype) != spec["dtype"]:
                return f"{where}: the kernel's scalar {param.name} is {param.dtype}, the spec says {spec['dtype']}"
            continue
        if buffer is None:
            return (f"{where} is a tensor spec, but the kernel's parameter {param.name} is a scalar ({param.dtype}); "
                    f"give it a scalar spec: {{'name': {param.name!r}, 'role': 'scalar', 'dtype': '{param.dtype}', 'value': ...}}")
        if str(buffer.dtype) != spec["dtype"]:
            return f"{where}: the kernel's tensor {buffer.name} is {buffer.dtype}, the spec says {spec['dtype']}"
        dims = [int(d) if isinstance(d, tirx.IntImm) else None for d in buffer.shape]
        if len(dims) != len(spec["shape"]) or any(d is not None and d != n for d, n in zip(dims, spec["shape"])):
            shown = [d if d is not None else "?" for d in dims]
            return f"{where}: the kernel's tensor {buffer.name} has shape {shown}, the spec says {spec['shape']}"
    return None


def check_case(case) -> None:
    """KitError when a case's definition cannot work: bad specs, or specs that do not match its
    kernel's parameters (caught here, not on the GPU machine)."""
    problems = tensors.check_specs(case.params)
    if not problems:
        try:
            problem = signature_problem(case.func(), case.params)
        except Exception as exc:  # noqa: BLE001 - a kernel that does not parse is a build failure later
            problem = None
            log(f"case {case.id}: kernel not checked against its specs ({type(exc).__name__}: {str(exc)[:200]})")
        problems = [problem] if problem else []
    if problems:
        module = {"compat": "compat_cases.py", "barrier": "barrier_cases.py"}.get(case.source, "cases.py")
        raise KitError(f"case {case.id} is defined wrongly: {'; '.join(problems)} (fix its definition in "
                       f"scripts/gpu_kit/{module}; nothing was written)")


def _outputs_in_order(case, results) -> dict[str, Any]:
    names = [s["name"] for s in case.params if s["role"] in ("out", "ret")]
    results = list(results) if isinstance(results, (list, tuple)) else [results]
    if len(results) != len(names):
        raise KitError(f"case {case.id}: its reference returned {len(results)} tensors for outputs {names}")
    return dict(zip(names, results))


def expected_outputs(case) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """(name -> expected tensor, name -> input digest, notes) of one case, computed on the CPU."""
    import torch

    args = tensors.call_arguments(case.params)
    inputs = tensors.reference_inputs(case.params, args)
    digests = tensors.input_digests(case.params, args)
    notes = []
    if case.expected_fn is not None:
        expected = _outputs_in_order(case, case.expected_fn(*inputs))
        if case.reference is not None:  # the timed reference must compute what the example's own does
            named = _outputs_in_order(case, references.call(case.reference, inputs))
            for name, want in expected.items():
                try:
                    torch.testing.assert_close(named[name].to(want.dtype), want, rtol=case.rtol, atol=case.atol)
                except AssertionError:
                    notes.append(f"reference {case.reference['name']!r} disagrees with the example's own; not timed")
                    case.reference = None
                    break
    else:
        expected = _outputs_in_order(case, references.call(case.reference, inputs))
    return {k: v.contiguous() for k, v in expected.items()}, digests, notes


def cpu_check(case, expected: dict[str, Any]) -> Optional[str]:
    """Build the case for ``c`` (else ``llvm``) with ``auto`` and compare with the expected outputs
    (None when equal)."""
    import torch

    import tilelang

    from gpu_kit.worker import compare

    try:
        kernel = tilelang.compile(case.func(), out_idx=case.out_idx, execution_backend="auto", target="c")
    except Exception as first_error:  # noqa: BLE001 - vector dtypes: c cannot print them, llvm can
        try:
            kernel = tilelang.compile(case.func(), out_idx=case.out_idx, execution_backend="auto", target="llvm")
        except Exception:  # noqa: BLE001
            raise first_error from None
    args = tensors.call_arguments(case.params)
    returned = kernel(*args.values())
    got = tensors.outputs_of(case.params, args, returned)
    ok, _, first = compare(got, expected, case.rtol, case.atol, case.checks, args)
    return None if ok else f"the kernel built for c disagrees with the expected outputs: {first[:600]}"


def cpu_backend_available() -> bool:
    from tilelang_core.backends import select_backend

    try:
        select_backend("auto", "c")
        return True
    except Exception:  # noqa: BLE001 - any refusal: no CPU backend here
        return False


# -- kernels ----------------------------------------------------------------------------------


def export_id(case_id: str, backend: str, arch: str) -> str:
    return f"{case_id}--{backend}--{arch}"


_FUNC_LOCK = threading.Lock()


def distributions_of(backends: set[str]) -> list[str]:
    """The distributions that provide ``backends`` (by the registry's records)."""
    from tilelang_core.backends import get_registry

    return sorted({r.distribution for r in get_registry().records() if r.name in backends and r.distribution})


def cpu_backends() -> list[str]:
    """Backends that can build *and run* ``c`` kernels here (for ``--cpu-standin``).

    Deprecated backends are left out: the stand-in checks the kit's worker, which the supported
    backends exercise as well, and a deprecated one would only add warnings and a wheel.
    """
    from tilelang_core.backends import get_registry
    from tilelang_core.backends.selection import declared_kind

    registry = get_registry()
    out = []
    for record in registry.records():
        if record.spec is not None and record.spec.deprecated is not None:
            continue
        kind = declared_kind(record, "c") if record.status == "ok" else None
        if kind is not None and registry.probe(record, kind).available:
            out.append(record.name)
    return out


def build_one(case, backend: str, arch: str, into: Path) -> dict[str, Any]:
    """Compile and export one (case, backend, arch); the manifest entry or the failure.

    ``arch`` is a CUDA architecture (``sm_90``), or ``c`` for the CPU stand-in kernels."""
    import tilelang

    eid = export_id(case.id, backend, arch)
    start = time.monotonic()
    entry = {"id": eid, "case": case.id, "backend": backend, "arch": arch}
    try:
        target = "c" if arch == "c" else f"cuda -arch={arch}"
        with _FUNC_LOCK:  # kernels are parsed from source files that some cases write first
            func = case.func()
        kernel = tilelang.compile(func, out_idx=case.out_idx, execution_backend=backend, target=target)
        kernel.export(into / eid)
        entry.update(path=f"kernels/{eid}", kernel=kernel.name)
    except Exception as exc:  # noqa: BLE001 - recorded in the manifest, the others go on
        entry["error"] = f"{type(exc).__name__}: {str(exc)[:2000]}"
    entry["seconds"] = round(time.monotonic() - start, 2)
    return entry


def pack(folder: Path, archive: Path, arcname: str) -> None:
    """``folder`` as ``archive`` (tar + xz), files sorted so that similar libraries lie together."""
    def key(p: Path):
        parts = p.relative_to(folder).parts
        bits = parts[0].split("--") if parts else []
        return (bits[1:] if len(bits) == 3 else bits, parts)

    def clean(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = 0
        return info

    with tarfile.open(archive, "w:xz", preset=6) as tar:
        tar.add(folder, arcname=arcname, recursive=False, filter=clean)
        for path in sorted(folder.rglob("*"), key=key):
            tar.add(path, arcname=f"{arcname}/{path.relative_to(folder)}", recursive=False, filter=clean)


# -- the folder -------------------------------------------------------------------------------


def folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def check_target(out: Path) -> None:
    """DIR may be missing, empty, or a previous kit (replaced); anything else is refused."""
    if not os.path.lexists(out):
        return
    if out.is_symlink() or not out.is_dir():
        raise KitError(f"{out} exists and is not a directory; choose another DIR")
    if any(out.iterdir()) and not _is_kit(out):
        raise KitError(f"{out} holds files and is not a GPU check kit (no {MANIFEST} with kit_format); "
                       f"choose an empty or new DIR (nothing was written)")


def _is_kit(folder: Path) -> bool:
    try:
        return "kit_format" in json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError, TypeError):
        return False


def copy_run_half(into: Path) -> None:
    (into / "gpu_kit").mkdir()
    for name in RUN_SIDE_MODULES:
        shutil.copy2(HERE / name, into / "gpu_kit" / name)
    shutil.copy2(SCRIPTS / "gpu-kit-run.sh", into / "gpu-kit-run.sh")
    (into / "README.md").write_text(
        "# TileLang-Core GPU check kit\n\n"
        "Built by `scripts/gpu-kit-build.sh` on a machine without a GPU. On a machine with an NVIDIA GPU,\n"
        "a CUDA build of torch and Python 3.10+ (no network needed):\n\n"
        "    bash gpu-kit-run.sh . --out report        # or: PYTHON=/path/to/python bash gpu-kit-run.sh .\n\n"
        "It writes report/gpu-kit-report.json and report/gpu-kit-report.md. Exit status: 0 every check\n"
        "passed, 1 a check failed, 2 no CUDA device (every kernel loaded, none run), 3 the kit could not\n"
        "be installed or loaded. See docs/gpu.md in the TileLang-Core repository. MANIFEST.json lists\n"
        "the cases, kernels and versions.\n"
    )


def build(args: argparse.Namespace) -> int:
    from gpu_kit import cases as catalogue
    from gpu_kit import wheels

    out = Path(args.dir).resolve()
    check_target(out)
    archs = [a.strip() for a in args.archs.split(",") if a.strip()]
    bad = [a for a in archs if not (a.startswith("sm_") and a[3:].isdigit())]
    if bad or not archs:
        raise KitError(f"--archs must be a comma-separated list like sm_90,sm_80, got {args.archs!r}")
    wanted = [b.strip() for b in args.backends.split(",") if b.strip()] if args.backends else None
    pythons = [p.strip() for p in args.pythons.split(",") if p.strip()]
    bad = [p for p in pythons if not (p.count(".") == 1 and all(x.isdigit() for x in p.split(".")))]
    if bad:
        raise KitError(f"--pythons must be a comma-separated list like 3.12,3.11, got {args.pythons!r}")
    from gpu_kit.wheels import this_python

    pythons = sorted({*pythons, this_python()}, key=lambda v: tuple(map(int, v.split("."))))
    started = time.monotonic()
    cases = catalogue.all_cases(reduced=args.reduced, only=args.only.split(",") if args.only else None)
    if not cases:
        raise KitError(f"no case matches --only {args.only!r}")
    for case in cases:  # every definition, before anything is built
        check_case(case)
    backends, backend_notes = cuda_backends(wanted)
    if not backends:
        raise KitError("no installed execution backend can build cuda kernels here: " + json.dumps(backend_notes))
    log(f"{len(cases)} cases x backends {', '.join(backends)} x {', '.join(archs)} -> {out}")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
    try:
        failures: list[dict[str, Any]] = []
        (staging / "expected").mkdir()
        case_entries = []
        do_cpu_check = not args.no_cpu_check and cpu_backend_available()
        import torch

        for case in cases:
            expected, digests, notes = expected_outputs(case)
            if do_cpu_check:
                try:
                    problem = cpu_check(case, expected)
                except Exception as exc:  # noqa: BLE001 - a CPU build problem is only a note
                    notes.append(f"not checked on the CPU: {type(exc).__name__}: {str(exc)[:300]}")
                    problem = None
                if problem:
                    failures.append({"case": case.id, "stage": "cpu-check", "error": problem})
            torch.save(expected, staging / "expected" / f"{case.id}.pt")
            case_entries.append({
                "id": case.id, "source": case.source, "title": case.title, "params": case.params,
                "out_idx": case.out_idx, "reference": case.reference, "rtol": case.rtol, "atol": case.atol,
                "expected": f"expected/{case.id}.pt", "input_sha256": digests, "dispatch": case.dispatch,
                "checks": case.checks, "archs": list(case.archs) if case.archs else None, "notes": notes,
            })
        log(f"expected outputs written ({'checked against the c build' if do_cpu_check else 'no CPU check'})")

        kernels = staging / "kernels"
        kernels.mkdir()
        jobs = [(c, b, a) for c in cases for b in backends for a in archs if c.archs is None or a in c.archs]
        if args.cpu_standin:
            jobs += [(c, b, "c") for c in cases for b in cpu_backends()]
        exports = []
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for i, entry in enumerate(pool.map(lambda job: build_one(*job, kernels), jobs), 1):
                if "error" in entry:
                    failures.append({"case": entry["case"], "backend": entry["backend"], "arch": entry["arch"],
                                     "stage": "build", "error": entry["error"]})
                    log(f"[{i}/{len(jobs)}] {entry['id']}: FAILED: {entry['error'].splitlines()[0][:200]}")
                else:
                    exports.append(entry)
                    if i % 10 == 0 or i == len(jobs):
                        log(f"[{i}/{len(jobs)}] built and exported")
        raw_kernels = folder_size(kernels)
        pack(kernels, staging / "kernels.tar.xz", "kernels")
        shutil.rmtree(kernels)
        log(f"kernels: {len(exports)} exports, {raw_kernels / 2**20:.1f} MiB -> "
            f"{(staging / 'kernels.tar.xz').stat().st_size / 2**20:.1f} MiB packed")

        wheel_info: dict[str, Any] = {"included": False}
        tvm_runtime: dict[str, Any] = {"file": None}
        if not args.no_wheels:
            wheel_dir = staging / "wheels"
            distributions = distributions_of({e["backend"] for e in exports})
            try:
                projects = wheels.build_project_wheels(wheel_dir, distributions, pythons=pythons,
                                                       interpreters={"3.12": args.python312} if args.python312 else None,
                                                       log=log)
                requirements = wheels.runtime_requirements(projects["projects"], pythons)
                closure = wheels.dependency_closure(requirements + projects["build_requirements"], pythons)
                wheels.download_dependency_wheels(wheel_dir, closure, pythons)
            except RuntimeError as exc:
                raise KitError(f"the kit's wheels could not be made: {exc}") from None
            wheel_info = {"included": True, "pythons": pythons, **projects, "requirements": requirements,
                          "closure": closure, "files": sorted(p.name for p in wheel_dir.iterdir())}
            log(f"wheels for Python {', '.join(pythons)}: {len(wheel_info['files'])} files; the run installs "
                f"{', '.join(projects['projects'])} and {', '.join(requirements)}")
            for note in projects["notes"]:
                log(note)
            files, why_not = wheels.tvm_runtime_files()
            if files:
                with tarfile.open(staging / "tvm-runtime.tar.xz", "w:xz", preset=6) as tar:
                    for f in files:
                        tar.add(f, arcname=f"tvm-runtime/{f.name}")
                tvm_runtime = {"file": "tvm-runtime.tar.xz", "members": [f.name for f in files]}
            else:
                tvm_runtime = {"file": None, "reason": why_not}
        copy_run_half(staging)

        manifest = {
            "kit_format": KIT_FORMAT,
            "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "reduced": bool(args.reduced),
            "archs": archs,
            "build": toolchain_versions(),
            "backends": backend_notes,
            "cases": case_entries,
            "exports": exports,
            "build_failures": failures,
            "wheels": wheel_info,
            "tvm_runtime": tvm_runtime,
            "size_limit_mib": args.max_mib,
        }
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=1))
        size = folder_size(staging)
        os.chmod(staging, 0o755)
        if os.path.lexists(out):
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            os.rename(out, old)
            os.rename(staging, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    over = size > args.max_mib * 2**20
    log(f"kit {out}: {len(exports)} kernels of {len(cases)} cases, {len(failures)} failure(s), "
        f"size {size / 2**20:.1f} MiB (limit {args.max_mib} MiB){' OVER THE LIMIT' if over else ''}, "
        f"{time.monotonic() - started:.0f} s")
    for f in failures:
        log(f"failure: {f.get('case')} {f.get('backend', '')} {f.get('arch', '')} ({f['stage']}): {f['error'][:300]}")
    return 1 if (failures or over) else 0


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gpu-kit-build.sh", description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", help="the kit folder to create (missing, empty, or a previous kit, which is replaced)")
    parser.add_argument("--reduced", action="store_true", help="the CI-sized set of cases")
    parser.add_argument("--only", help="comma-separated case ids or prefixes (e.g. tileop,dispatch.t3)")
    parser.add_argument("--backends", help="comma-separated backends (default: every one that can build cuda here)")
    parser.add_argument("--archs", default=",".join(DEFAULT_ARCHS), help="CUDA architectures (default: sm_90,sm_80)")
    parser.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1), help="parallel builds")
    parser.add_argument("--no-wheels", action="store_true", help="leave out the wheels and TVM's runtime")
    parser.add_argument("--no-cpu-check", action="store_true", help="do not check expected outputs against c builds")
    parser.add_argument("--pythons", default="3.12",
                        help="Python versions of the GPU machine to carry binary wheels for (default 3.12; "
                             "this Python's is always added)")
    parser.add_argument("--python312", help="a Python 3.12 to build compiled plugins' cp312 wheels with "
                                            "(default: python3.12 on PATH, or pyenv's)")
    parser.add_argument("--cpu-standin", action="store_true",
                        help="also export every case for target c (gpu-kit-run.sh --standin-cpu runs them without a GPU)")
    parser.add_argument("--max-mib", type=float, default=SIZE_LIMIT_MIB, help="size limit of the folder (MiB)")
    return parser.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(argv)
    try:
        return build(args)
    except KitError as exc:
        print(f"gpu-kit-build: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
