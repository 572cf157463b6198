"""Run half, stage 2 (in the kit's venv, on the GPU): run exported kernels and check them.

``python worker.py KIT WORK --exports ID,ID,... [--deadline EPOCH]``: for each export, in order:
load it, make the case's inputs (CPU, from their seeds) and move them to the GPU, call the kernel,
compare every output with the expected one (the case's rtol/atol, NaN equal to NaN), then capture
one call in a CUDA graph, reset the outputs, replay the graph and compare again, and finally time
the kernel and the case's torch reference. ``--dispatch`` instead times per-call dispatch of the
given dispatch-bench exports against ``torch.add`` (:mod:`.timing`).

Protocol with the parent (:mod:`.run_kit`): one line per event on stdout, ``GPUKIT {json}``:
``{"start": id}`` before an export, then its result. ``--device cpu`` is the stand-in run of the
kit's ``c`` kernels on a machine without a GPU (no graph capture; CPU timers). Exit status 75 means the CUDA context broke
(a sticky error such as an illegal address): the parent starts a new worker for the rest.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Optional

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_kit import references, tensors  # noqa: E402

CONTEXT_BROKEN = 75
PREFIX = "GPUKIT "


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(PREFIX + json.dumps(obj) + "\n")
    sys.stdout.flush()


def sass_runs_on(arch: str, capability: str) -> bool:
    """Whether machine code for ``arch`` (sm_XY) runs on a device of ``capability`` ("X.Y")."""
    digits = arch[3:].rstrip("af")
    major, minor = int(digits[:-1]), int(digits[-1])
    dev_major, dev_minor = (int(x) for x in capability.split("."))
    return major == dev_major and minor <= dev_minor


def context_ok(device: str) -> bool:
    import torch

    if device != "cuda":
        return True
    try:
        torch.cuda.synchronize()
        (torch.ones(1, device="cuda") + 1).cpu()
        return True
    except Exception:  # noqa: BLE001 - any error here means the context is gone
        return False


def compare(got: dict[str, Any], expected: dict[str, Any], rtol: float, atol: float,
            checks: Optional[dict[str, dict]] = None, inputs: Optional[dict[str, Any]] = None) -> tuple[bool, float, str]:
    """(all close, max abs error, first difference) of the outputs against the expected ones.

    An output named in ``checks`` is decided by its check (:mod:`gpu_kit.checks`) instead, given
    every tensor of the call (``inputs`` and the outputs) by name."""
    import torch

    from gpu_kit import checks as kit_checks

    worst, first = 0.0, ""
    checks = checks or {}
    every = None  # every tensor of the call on the CPU, made for the first check only
    for name, want in expected.items():
        have = got[name].detach().cpu()
        if have.shape != want.shape or have.dtype != want.dtype:
            return False, float("inf"), f"{name}: got {tuple(have.shape)} {have.dtype}, expected {tuple(want.shape)} {want.dtype}"
        if name in checks:
            if every is None:
                every = {k: v.detach().cpu() if hasattr(v, "detach") else v for k, v in {**(inputs or {}), **got}.items()}
            problem = kit_checks.run(name, checks[name], every)
            first = first or (problem or "")
            continue
        if want.dtype in (torch.uint16, torch.uint32, torch.uint64):  # few torch ops take these
            have, want = have.double(), want.double()
        diff = (have.double() - want.double()).abs()
        both_nan = torch.isnan(have.double()) & torch.isnan(want.double())
        diff = torch.where(both_nan, torch.zeros_like(diff), diff.nan_to_num(nan=float("inf")))
        worst = max(worst, float(diff.max()) if diff.numel() else 0.0)
        try:
            torch.testing.assert_close(have, want, rtol=rtol, atol=atol, equal_nan=True)
        except AssertionError as exc:
            first = first or f"{name}: {str(exc).strip().splitlines()[0]} {' '.join(str(exc).split())[:300]}"
    return not first, worst, first


def sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def run_export(kit: Path, work: Path, case: dict, export: dict, device: str, capability: str) -> dict[str, Any]:
    import torch

    import tilelang

    result: dict[str, Any] = {"id": export["id"]}
    start = time.perf_counter()
    kernel = tilelang.load(work / export["path"])
    expected = torch.load(kit / case["expected"], weights_only=True)
    args = tensors.call_arguments(case["params"], device)
    try:
        returned = kernel(*args.values())
        sync(device)
    except Exception as exc:  # noqa: BLE001 - classified below
        result.update(status="error", error=f"{type(exc).__name__}: {exc}"[:2000])
        if device == "cuda" and not sass_runs_on(export["arch"], capability):
            result["status"] = "not-for-this-device"
        return result
    got = tensors.outputs_of(case["params"], args, returned)
    ok, worst, first = compare(got, expected, case["rtol"], case["atol"], case.get("checks"), args)
    result.update(status="ok" if ok else "wrong", max_abs_err=worst, seconds=round(time.perf_counter() - start, 3))
    if not ok:
        result["error"] = first
        return result
    if device == "cuda" and not sass_runs_on(export["arch"], capability):
        result["note"] = f"{export['arch']} code ran on a {capability} device (PTX or a rebuild)"
    result["graph"] = graph_check(kernel, case, args, expected) if device == "cuda" else "not checked (CPU stand-in)"
    inputs = tensors.reference_inputs(case["params"], args)
    reference = case.get("reference")
    try:
        from gpu_kit.timing import kernel_vs_torch

        torch_call = (lambda: references.call(reference, inputs, device=device)) if reference else None
        result["timing"] = kernel_vs_torch(lambda: kernel(*args.values()), torch_call, device=device)
    except Exception as exc:  # noqa: BLE001 - a timing failure is reported, the check stands
        result["timing"] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
    return result


def graph_check(kernel: Any, case: dict, args: dict[str, Any], expected: dict[str, Any]) -> str:
    """"ok" when a CUDA-graph replay of one call gives the expected outputs (after a call with
    other tensors), else what went wrong."""
    import torch

    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            returned = kernel(*args.values())
        # a call with other tensors in between: the graph must keep the arguments it captured,
        # not read a backend's reused argument storage when it replays
        kernel(*[t.clone() if hasattr(t, "clone") else t for t in args.values()])
        torch.cuda.synchronize()
        tensors.reset_outputs(case["params"], args)
        rets = returned if isinstance(returned, (list, tuple)) else ([] if returned is None else [returned])
        for t in rets:
            t.fill_(float("nan") if t.dtype.is_floating_point else -1)
        graph.replay()
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - reported as the graph result
        return f"error: {type(exc).__name__}: {exc}"[:1000]
    ok, _, first = compare(tensors.outputs_of(case["params"], args, returned), expected, case["rtol"], case["atol"],
                           case.get("checks"), args)
    return "ok" if ok else f"wrong after replay: {first}"


def run_dispatch(work: Path, cases: dict[str, dict], exports: list[dict], device: str) -> dict[str, Any]:
    import tilelang
    from gpu_kit.timing import dispatch_ratios, dispatch_statements, dispatch_times

    kernels: dict[str, dict[str, Any]] = {}
    for export in exports:
        case = cases[export["case"]]
        kernel = tilelang.load(work / export["path"])
        args = list(tensors.call_arguments(case["params"], device).values())
        kernels.setdefault(export["backend"], {})[case["dispatch"]] = (kernel, args)
    times = dispatch_times(dispatch_statements(kernels, device), device=device)
    return {"dispatch": dispatch_ratios(times), "exports": [e["id"] for e in exports]}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("kit")
    parser.add_argument("work")
    parser.add_argument("--exports", required=True)
    parser.add_argument("--deadline", type=float, default=float("inf"))
    parser.add_argument("--dispatch", action="store_true")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                        help="cpu: the stand-in run of the kit's c kernels on a machine without a GPU")
    args = parser.parse_args(argv)
    kit, work = Path(args.kit), Path(args.work)
    manifest = json.loads((kit / "MANIFEST.json").read_text())
    cases = {c["id"]: c for c in manifest["cases"]}
    by_id = {e["id"]: e for e in manifest["exports"]}
    wanted = [by_id[i] for i in args.exports.split(",") if i]
    import torch

    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        emit({"fatal": "no CUDA device (torch.cuda.is_available() is false)"})
        return 2
    capability = "%d.%d" % torch.cuda.get_device_capability(0) if device == "cuda" else "cpu"
    if args.dispatch:
        try:
            emit(run_dispatch(work, cases, wanted, device))
        except Exception as exc:  # noqa: BLE001
            emit({"dispatch_error": f"{type(exc).__name__}: {exc}"[:2000], "traceback": traceback.format_exc(limit=8)[-3000:]})
        return 0
    for export in wanted:
        if time.time() > args.deadline:
            emit({"id": export["id"], "status": "not-run", "error": "the run's time budget was spent"})
            continue
        emit({"start": export["id"]})
        try:
            result = run_export(kit, work, cases[export["case"]], export, device, capability)
        except Exception as exc:  # noqa: BLE001 - load or setup failure of this export
            result = {"id": export["id"], "status": "error", "error": f"{type(exc).__name__}: {exc}"[:2000],
                      "traceback": traceback.format_exc(limit=8)[-3000:]}
        emit(result)
        troubled = result["status"] in ("error", "wrong") or str(result.get("graph", "")).startswith("error")
        if troubled and not context_ok(device):
            return CONTEXT_BROKEN
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
