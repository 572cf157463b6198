"""Run half of the GPU check kit: ``gpu-kit-run.sh DIR [--out OUT] [--full]`` on a GPU machine.

Runs under the machine's own Python (``$PYTHON``, else ``python3``; it must import a torch, the
CUDA build for a real check) and needs no network:

1. reads ``DIR/MANIFEST.json``; makes a fresh venv in a private work folder that sees the
   machine's packages and installs the kit's wheels into it with ``pip --no-index`` alone
   (:mod:`.environment`); unpacks the kernels and TVM's runtime libraries;
2. loads every exported kernel with ``tilelang.load`` and regenerates every case's inputs from
   their seeds (:mod:`.load_stage`) - without a CUDA device it stops here, with status
   ``no-cuda-device`` (exit 2; ``--standin-cpu`` then runs the kit's c kernels on the CPU
   instead, as a check of the run half itself);
3. runs every CUDA export on the GPU in worker processes, one per backend and architecture
   (:mod:`.worker`): results against the expected outputs, a CUDA graph replay, device time
   against torch's op; a worker that crashes, hangs (``--export-timeout``) or breaks its CUDA
   context is replaced and the rest goes on;
4. times per-call dispatch of each backend against ``torch.add(out=)`` (:mod:`.timing`);
5. with ``--full``, installs apache-tvm if it can (the kit, ``--wheels`` folders, or the network
   with ``--allow-network``) and runs the repository's ``pytest -m gpu``;
6. writes OUT/gpu-kit-report.json and OUT/gpu-kit-report.md (:mod:`.report`) and exits with
   the report's code (0 passed, 1 failed, 2 no CUDA device, 3 setup failed).

Steps 1-4 stop at ``--budget`` seconds (default 420): what is left is reported as not run.
Standard library only (torch is used in subprocesses).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import queue
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Optional

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_kit import KIT_FORMAT, environment, report as reporting, tensors  # noqa: E402

HERE = Path(__file__).resolve().parent
CONTEXT_BROKEN = 75
PREFIX = "GPUKIT "
#: Most exports one process loads (``--exports-per-process``): a kernel that takes its process
#: down costs only its group's results. (The full kit in one process once stopped in ld.so, with
#: "dl-tls.c: _dl_add_to_slotinfo: Assertion `idx == 0' failed", on a machine without a CUDA
#: driver: each tvm_ffi load retried a failing dlopen of TVM's CUDA runtime, which leaks a glibc
#: TLS module id; the tvm_ffi backend now tries it once. tests/test_cuda_loads_without_driver.py.)
EXPORTS_PER_PROCESS = 64


class Run:
    """State of one run: arguments, folders, the report being filled, the log."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.kit = Path(args.dir).resolve()
        self.out = Path(args.out).resolve()
        self.started = time.time()
        self.deadline = self.started + args.budget
        self.report: dict[str, Any] = {
            "kit_report_format": 1,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "kit_dir": str(self.kit),
            "command": " ".join(["gpu-kit-run.sh", *sys.argv[1:]]),
        }
        self.log_lines: list[str] = []
        self.work: Optional[Path] = None
        self.python: Optional[Path] = None
        self.env = dict(os.environ)

    def log(self, message: str) -> None:
        line = f"[gpu-kit-run {time.time() - self.started:6.1f}s] {message}"
        self.log_lines.append(line)
        print(line, flush=True)

    def finish(self, status: str, message: str = "") -> int:
        code = reporting.EXIT_CODES[status]
        self.report.update(status=status, exit_code=code, message=message, seconds=round(time.time() - self.started, 1))
        self.report["problems"] = reporting.problems(self.report)
        json_path, md_path = reporting.write(self.report, self.out)
        (self.out / "gpu-kit-run.log").write_text("\n".join(self.log_lines) + "\n")
        self.log(f"{status}: {message}" if message else status)
        self.log(f"report: {json_path} and {md_path}")
        print(md_path.read_text(), flush=True)
        return code


# -- setup ------------------------------------------------------------------------------------


def read_manifest(kit: Path) -> dict[str, Any]:
    path = kit / "MANIFEST.json"
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise environment.SetupError(f"{kit} is not a GPU check kit ({path.name} is missing); build one with "
                                     f"scripts/gpu-kit-build.sh DIR") from None
    except (OSError, ValueError) as exc:
        raise environment.SetupError(f"cannot read {path}: {exc}") from None
    if manifest.get("kit_format") != KIT_FORMAT:
        raise environment.SetupError(f"{path} has kit format {manifest.get('kit_format')!r}; this run half reads "
                                     f"format {KIT_FORMAT}: use the gpu-kit-run.sh inside the kit folder")
    bad = [f"case {c.get('id')!r}: {p}" for c in manifest.get("cases") or [] for p in tensors.check_specs(c.get("params"))]
    if bad:
        raise environment.SetupError(f"{path} has cases whose parameters this run half cannot pass: " + "; ".join(bad[:5])
                                     + "; build the kit again with scripts/gpu-kit-build.sh")
    return manifest


def unpack(archive: Path, into: Path) -> None:
    """Extract a kit archive: regular files and folders only, inside ``into``, no special modes."""
    with tarfile.open(archive, "r:xz") as tar:
        members = tar.getmembers()
        for m in members:
            target = (into / m.name).resolve()
            if not (m.isfile() or m.isdir()) or not str(target).startswith(str(into.resolve()) + os.sep):
                raise environment.SetupError(f"{archive} holds {m.name!r}, which a kit never does; build the kit again")
        try:
            tar.extractall(into, members=members, filter="data")
        except TypeError:  # Python without extraction filters: the check above did their job
            tar.extractall(into, members=members)


def nvidia_driver() -> Optional[str]:
    """The NVIDIA driver version nvidia-smi reports (None without one)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.splitlines()[0] if out else None


def setup(run: Run) -> dict[str, Any]:
    manifest = read_manifest(run.kit)
    run.report["kit"] = {k: manifest.get(k) for k in ("created", "reduced", "archs", "build", "backends", "cases",
                                                        "exports", "build_failures", "tvm_runtime")}
    machine_python = run.args.python or os.environ.get("PYTHON") or shutil.which("python3") or sys.executable
    run.log(f"machine Python: {machine_python}")
    info = environment.probe_python(machine_python)
    run.report["machine"] = {k: v for k, v in info.items() if k != "path"}
    run.report["machine"]["driver"] = nvidia_driver()
    if "torch" not in info:
        raise environment.SetupError(f"{machine_python} cannot import torch ({info.get('torch_error')}); run with "
                                     f"PYTHON=/path/to/a/python/with/torch")
    run.work = Path(run.args.work).resolve() if run.args.work else Path(tempfile.mkdtemp(prefix="gpu-kit-run-"))
    run.work.mkdir(parents=True, exist_ok=True)
    os.chmod(run.work, 0o700)
    run.log(f"work folder {run.work}; making a venv that sees the machine's torch {info['torch']}")
    run.python = environment.make_venv(run.work, machine_python, info["path"])
    installed = environment.install_kit(run.python, run.kit, manifest)
    run.report["environment"] = installed
    run.log("installed from the kit: " + (", ".join(installed.get("from_kit") or []) or "nothing beyond the project's wheels"))
    for note in installed["notes"]:
        run.log(note)
    unpack(run.kit / "kernels.tar.xz", run.work)
    tvm = (manifest.get("tvm_runtime") or {}).get("file")
    run.env["TILELANG_CACHE_DIR"] = str(run.work / "cache")
    run.env.pop("TILELANG_DISABLE_CACHE", None)
    if tvm and (run.kit / tvm).is_file():
        unpack(run.kit / tvm, run.work)
        run.env["TILELANG_TVM_LIB_DIR"] = str(run.work / "tvm-runtime")
    run.env["PYTHONNOUSERSITE"] = "1"
    run.env["PYTHONUNBUFFERED"] = "1"
    return manifest


def chunks(ids: list[str], most: int) -> list[list[str]]:
    """``ids`` in order, cut into the fewest runs of at most ``most`` (sizes as even as can be)."""
    if not ids:
        return []
    count = -(-len(ids) // max(1, most))
    size, extra = divmod(len(ids), count)
    out, start = [], 0
    for i in range(count):
        end = start + size + (1 if i < extra else 0)
        out.append(ids[start:end])
        start = end
    return out


def load_all(run: Run, manifest: dict[str, Any]) -> dict[str, Any]:
    """The load stage (:mod:`.load_stage`) over every export, in processes of at most
    ``--exports-per-process`` exports; the first also checks the cases' inputs."""
    ids = [e["id"] for e in manifest["exports"]]
    parts = chunks(ids, run.args.exports_per_process) or [[]]
    run.log(f"loading {len(ids)} kernels in {len(parts)} process(es)")
    merged: dict[str, Any] = {}
    for i, part in enumerate(parts):
        result_path = run.work / f"load-{i}.json"
        cmd = [str(run.python), str(HERE / "load_stage.py"), str(run.kit), str(run.work), str(result_path),
               "--exports", ",".join(part)] + (["--no-inputs"] if i else [])
        timeout = max(60.0, run.deadline - time.time())
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, env=run.env, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise environment.SetupError(f"loading the kernels took more than {timeout:.0f} s") from None
        if proc.returncode != 0 or not result_path.is_file():
            raise environment.SetupError(f"the load stage failed (exit {proc.returncode}, exports {part[:1]} to "
                                         f"{part[-1:]}):\n{(proc.stdout + proc.stderr)[-4000:]}")
        result = json.loads(result_path.read_text())
        if not merged:
            merged = result
        else:
            merged["exports"].update(result["exports"])
            merged["imported_tvm"] = merged["imported_tvm"] or result["imported_tvm"]
    return merged


# -- workers ----------------------------------------------------------------------------------


def _reader(stream, lines: "queue.Queue[Optional[str]]") -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def run_worker(run: Run, ids: list[str], device: str, extra: list[str] = ()) -> tuple[list[dict], Optional[str], int]:
    """Start one worker for ``ids``; (events, the export it was on when it stopped, exit status)."""
    stderr_path = run.work / f"worker-{int(time.time() * 1000)}.stderr"
    cmd = [str(run.python), str(HERE / "worker.py"), str(run.kit), str(run.work), "--exports", ",".join(ids),
           "--deadline", str(run.deadline), "--device", device, *extra]
    events: list[dict] = []
    current: Optional[str] = None
    with open(stderr_path, "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=run.env)
        lines: "queue.Queue[Optional[str]]" = queue.Queue()
        threading.Thread(target=_reader, args=(proc.stdout, lines), daemon=True).start()
        while True:
            wait = min(run.args.export_timeout, max(5.0, run.deadline + 30 - time.time()))
            try:
                line = lines.get(timeout=wait)
            except queue.Empty:
                proc.kill()
                proc.wait()
                return events + ([{"id": current, "status": "timeout",
                                   "error": f"no result after {wait:.0f} s; the worker was stopped"}] if current else []), None, -9
            if line is None:
                break
            if not line.startswith(PREFIX):
                continue
            event = json.loads(line[len(PREFIX):])
            if "start" in event:
                current = event["start"]
                continue
            if event.get("id") == current:
                current = None
            events.append(event)
        code = proc.wait()
    if code not in (0, CONTEXT_BROKEN) and current is not None:
        tail = stderr_path.read_text(errors="replace")[-1500:]
        events.append({"id": current, "status": "crashed", "error": f"the worker died (exit {code}): {tail}"})
        current = None
    return events, current, code


def run_exports(run: Run, ids: list[str], device: str) -> dict[str, dict]:
    """Results of ``ids``, replacing workers that crash, hang or break their context."""
    results: dict[str, dict] = {}
    todo = list(ids)
    while todo:
        events, _, code = run_worker(run, todo, device)
        for event in events:
            if "fatal" in event:
                raise environment.SetupError(event["fatal"])
            results[event["id"]] = event
        left = [i for i in todo if i not in results]
        if left and (code == 0 or len(left) == len(todo)):  # no progress: the worker cannot start or answer
            for i in left:
                results[i] = {"id": i, "status": "error", "error": f"the worker gave no result (exit {code}); "
                                                                   f"see the worker's stderr in the work folder (--keep-work)"}
            break
        todo = left
        if todo:
            run.log(f"worker stopped (exit {code}); a new one takes the {len(todo)} remaining kernels")
    return results


def group_exports(exports: list[dict], most: int = EXPORTS_PER_PROCESS) -> list[list[str]]:
    """The exports of one backend and architecture together, in runs of at most ``most`` (one
    worker process each)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for e in exports:
        groups.setdefault((e["backend"], e["arch"]), []).append(e["id"])
    return [part for k in sorted(groups) for part in chunks(groups[k], most)]


def best_arch(archs: list[str], capability: Optional[str]) -> Optional[str]:
    """The kit architecture whose machine code the device runs natively (highest such), if any."""
    if capability is None:
        return None
    major, minor = (int(x) for x in capability.split("."))
    fitting = [a for a in archs if a.startswith("sm_") and a[3:].isdigit()
               and int(a[3:-1]) == major and int(a[-1]) <= minor]
    return max(fitting, key=lambda a: int(a[3:])) if fitting else None


def dispatch_check(run: Run, manifest: dict, results: dict[str, dict], arch: Optional[str], device: str) -> None:
    cases = {c["id"]: c for c in manifest["cases"]}
    chosen = [e for e in manifest["exports"] if cases[e["case"]].get("dispatch") and results.get(e["id"], {}).get("status") == "ok"
              and (arch is None or e["arch"] == arch)]
    if not chosen:
        run.report["dispatch_error"] = "no dispatch-bench kernel ran correctly, so dispatch was not timed"
        return
    run.log(f"timing per-call dispatch of {len(chosen)} kernels against torch.add")
    events, _, code = run_worker(run, [e["id"] for e in chosen], device, ["--dispatch"])
    for event in events:
        if "dispatch" in event:
            run.report["dispatch"] = event["dispatch"]
        elif "dispatch_error" in event:
            run.report["dispatch_error"] = event["dispatch_error"]
    if "dispatch" not in run.report and "dispatch_error" not in run.report:
        run.report["dispatch_error"] = f"the dispatch worker gave no result (exit {code})"


# -- --full -----------------------------------------------------------------------------------


def full_check(run: Run) -> dict[str, Any]:
    """``pytest -m gpu`` of the repository, once TVM is importable in the venv."""
    repo = HERE.parents[1]
    if not (repo / "tests").is_dir() or not (repo / "pyproject.toml").is_file():
        return {"status": "skipped", "reason": f"needs the repository's tests beside the script ({repo} has none); "
                                               f"run scripts/gpu-kit-run.sh from a clone"}
    env = dict(run.env)
    env.pop("TILELANG_TVM_LIB_DIR", None)
    has_tvm = subprocess.run([str(run.python), "-c", "import tvm"], capture_output=True, env=env).returncode == 0
    if not has_tvm:
        manifest_build = run.report.get("kit", {}).get("build") or {}
        want = f"apache-tvm=={manifest_build['apache-tvm']}" if manifest_build.get("apache-tvm") else "apache-tvm"
        cmd = [str(run.python), "-m", "pip", "install", "--disable-pip-version-check", "-q", "--find-links", str(run.kit / "wheels")]
        for extra in run.args.wheels or []:
            cmd += ["--find-links", str(Path(extra).resolve())]
        if not run.args.allow_network:
            cmd.append("--no-index")
        cmd.append(want)
        run.log(f"--full: installing {want} ({'network allowed' if run.args.allow_network else 'offline, from the given wheels'})")
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env if run.args.allow_network else environment.offline_env())
        if proc.returncode != 0:
            return {"status": "skipped", "reason": f"TVM cannot be installed here: {(proc.stdout + proc.stderr).strip()[-600:]}; "
                                                   f"bring its wheel with --wheels DIR or use --allow-network"}
    cmd = [str(run.python), "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", "tests", "plugins"]
    run.log("--full: " + " ".join(cmd[2:]))
    try:
        proc = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, env=env, timeout=run.args.full_timeout)
    except subprocess.TimeoutExpired:
        return {"status": "failed", "reason": f"pytest -m gpu ran past {run.args.full_timeout} s"}
    tail = (proc.stdout + proc.stderr).strip().splitlines()
    return {"status": "passed" if proc.returncode == 0 else "failed", "exit_code": proc.returncode,
            "summary": tail[-1] if tail else "", "output_tail": "\n".join(tail[-60:])}


# -- main -------------------------------------------------------------------------------------


def checks(run: Run) -> int:
    manifest = setup(run)
    loads = load_all(run, manifest)
    run.report.update(loads=loads["exports"], inputs=loads["cases"], backends_here=loads["backends"],
                      imported_tvm=loads["imported_tvm"])
    loaded = sum(1 for e in loads["exports"].values() if e.get("loaded"))
    run.log(f"loaded {loaded} of {len(loads['exports'])} kernels with tilelang.load")
    machine = run.report["machine"]
    cuda_exports = [e for e in manifest["exports"] if e["arch"].startswith("sm_") and loads["exports"][e["id"]].get("loaded")]
    if not machine.get("cuda_available"):
        standin = [e for e in manifest["exports"] if e["arch"] == "c" and loads["exports"][e["id"]].get("loaded")]
        why = "no CUDA device: torch " + str(machine.get("torch")) + " sees no GPU (torch.cuda.is_available() is false)"
        if not run.args.standin_cpu:
            trouble = reporting.problems(run.report)
            if trouble:
                return run.finish("failed", why + f"; {len(trouble)} problem(s) with the kit before any kernel could run")
            return run.finish("no-cuda-device", why + f"; every kernel was loaded ({loaded} of {len(loads['exports'])}), none was run")
        if not standin:
            return run.finish("no-cuda-device", why + "; --standin-cpu: the kit has no c kernels (build it with --cpu-standin)")
        run.report["standin"] = True
        run.report["table_arch"] = "c"
        run.log(f"{why}; --standin-cpu: running the kit's {len(standin)} c kernels on the CPU instead")
        results: dict[str, dict] = {}
        for ids in group_exports(standin, run.args.exports_per_process):
            results.update(run_exports(run, ids, "cpu"))
        run.report["results"] = results
        dispatch_check(run, manifest, results, "c", "cpu")
        status = "failed" if reporting.problems(run.report) else "passed"
        return run.finish(status, why + "; CPU stand-in run of the c kernels (no GPU checked)")
    capability = machine["device"]["capability"]
    arch = best_arch(manifest.get("archs") or [], capability)
    run.report["table_arch"] = arch
    run.log(f"device {machine['device']['name']} (sm {capability}); running {len(cuda_exports)} CUDA kernels")
    results = {e: {"id": e, "status": "not-for-this-device", "error": load["error"]}
               for e, load in loads["exports"].items() if load.get("other_arch")}
    for ids in group_exports(cuda_exports, run.args.exports_per_process):
        results.update(run_exports(run, ids, "cuda"))
        ok = sum(1 for i in ids if results.get(i, {}).get("status") == "ok")
        run.log(f"{ids[0].split('--', 1)[1]}: {ok} of {len(ids)} ok")
    run.report["results"] = results
    dispatch_check(run, manifest, results, arch, "cuda")
    if run.args.full:
        run.report["full"] = full_check(run)
        run.log(f"--full: {run.report['full']['status']}: {run.report['full'].get('summary') or run.report['full'].get('reason', '')}")
    problems = reporting.problems(run.report)
    full_failed = run.report.get("full", {}).get("status") == "failed"
    return run.finish("failed" if problems or full_failed else "passed", f"{len(problems)} problem(s)" if problems else "")


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gpu-kit-run.sh", description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", help="the kit folder made by scripts/gpu-kit-build.sh")
    parser.add_argument("--out", default="gpu-kit-report", help="report folder (default: ./gpu-kit-report)")
    parser.add_argument("--full", action="store_true", help="also install TVM if possible and run pytest -m gpu")
    parser.add_argument("--wheels", action="append", help="--full: another folder of wheels (apache-tvm's)")
    parser.add_argument("--allow-network", action="store_true", help="--full: pip may use the package index for TVM")
    parser.add_argument("--full-timeout", type=float, default=900, help="--full: seconds for pytest -m gpu")
    parser.add_argument("--python", help="the machine's Python with torch (default: $PYTHON, else python3)")
    parser.add_argument("--work", help="work folder (default: a new private temporary folder, removed at the end)")
    parser.add_argument("--keep-work", action="store_true", help="keep the work folder (venv, unpacked kernels, logs)")
    parser.add_argument("--budget", type=float, default=420, help="seconds for the checks before --full (default 420)")
    parser.add_argument("--export-timeout", type=float, default=120, help="seconds one kernel may take before its worker is stopped")
    parser.add_argument("--exports-per-process", type=int, default=EXPORTS_PER_PROCESS,
                        help=f"most kernels one load or worker process loads (default {EXPORTS_PER_PROCESS})")
    parser.add_argument("--standin-cpu", action="store_true",
                        help="without a GPU: run the kit's c kernels on the CPU (a check of the run half itself)")
    return parser.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> int:
    run = Run(parse_args(argv))
    try:
        return checks(run)
    except environment.SetupError as exc:
        return run.finish("setup-failed", str(exc))
    except KeyboardInterrupt:
        return run.finish("setup-failed", "interrupted")
    finally:
        if run.work is not None and not run.args.keep_work and not run.args.work:
            shutil.rmtree(run.work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
