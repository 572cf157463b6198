"""Run half, stage 1 (in the kit's venv, no GPU needed): load every exported kernel, check inputs.

``python load_stage.py KIT WORK RESULT.json [--exports ID,...] [--no-inputs]``: ``tilelang.load``
on every export unpacked under ``WORK/kernels`` (or those named: the run half loads them in
several processes, :data:`gpu_kit.run_kit.EXPORTS_PER_PROCESS` at most each), the expected outputs
present, and (without ``--no-inputs``) every case's inputs regenerated from their
seeds with the digests the build recorded (so a torch whose random numbers differ is caught before
any kernel runs). Writes one JSON object: the installed backends as the registry sees them, per
export ``loaded`` (seconds, or the error) and per case ``inputs`` (``same`` or what differs), and
whether anything imported TVM's compiler package (it must not). On a GPU, a kernel whose machine
code does not fit the device and that cannot be rebuilt there is marked ``other_arch`` (not a
failure).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_kit import tensors  # noqa: E402


def backends_here() -> dict[str, dict]:
    from tilelang_core.backends import get_registry
    from tilelang_core.backends.selection import declared_kind

    registry = get_registry()
    out = {}
    for record in registry.records():
        entry = {"version": record.version, "status": record.status}
        if record.reason:
            entry["reason"] = record.reason
        kind = declared_kind(record, "cuda") if record.status == "ok" else None
        if kind is not None:
            try:
                a = registry.probe(record, kind)
                entry["cuda"] = "available" if a.available else ("build only: " if a.can_build else "unavailable: ") + a.reason
            except Exception as exc:  # noqa: BLE001 - reported, not fatal
                entry["cuda"] = f"probe failed: {type(exc).__name__}: {exc}"
        out[record.name] = entry
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("kit")
    parser.add_argument("work")
    parser.add_argument("result")
    parser.add_argument("--exports", help="comma-separated export ids (default: every one)")
    parser.add_argument("--no-inputs", action="store_true", help="do not check the cases' inputs")
    args = parser.parse_args(argv)
    kit, work, result_path = Path(args.kit), Path(args.work), Path(args.result)
    manifest = json.loads((kit / "MANIFEST.json").read_text())
    if args.exports is not None:
        wanted = set(args.exports.split(","))
        manifest["exports"] = [e for e in manifest["exports"] if e["id"] in wanted]
    if args.no_inputs:
        manifest["cases"] = []
    import tilelang

    import torch

    from gpu_kit.worker import sass_runs_on

    capability = "%d.%d" % torch.cuda.get_device_capability(0) if torch.cuda.is_available() else None
    result = {"exports": {}, "cases": {}}
    for case in manifest["cases"]:
        problems = []
        if not (kit / case["expected"]).is_file():
            problems.append(f"{case['expected']} is missing")
        for spec in case["params"]:
            if spec["role"] in ("ret", "scalar"):  # scalars carry their value in the spec
                continue
            got = tensors.digest(tensors.make(spec))
            if got != case["input_sha256"].get(spec["name"]):
                problems.append(f"input {spec['name']} from seed {spec.get('seed')} differs from the build's "
                                f"(this torch draws other random numbers)")
        result["cases"][case["id"]] = {"inputs": "same" if not problems else "; ".join(problems)}
    for export in manifest["exports"]:
        start = time.perf_counter()
        try:
            kernel = tilelang.load(work / export["path"])
            entry = {"loaded": True, "seconds": round(time.perf_counter() - start, 4)}
            if getattr(kernel, "cannot_run", None):
                entry["cannot_run"] = kernel.cannot_run
        except Exception as exc:  # noqa: BLE001 - every failure is reported
            entry = {"loaded": False, "error": f"{type(exc).__name__}: {exc}",
                     "traceback": traceback.format_exc(limit=6)[-2000:]}
            arch = export["arch"]
            if capability and arch.startswith("sm_") and not sass_runs_on(arch, capability):
                entry["other_arch"] = True  # e.g. an sm_80 cubin on sm_90 with no NVRTC to rebuild it
        result["exports"][export["id"]] = entry
    result["imported_tvm"] = "tvm" in sys.modules  # before the probes, which may look for TVM
    result["backends"] = backends_here()
    result_path.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
