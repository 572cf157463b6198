"""The run half's report: ``gpu-kit-report.json`` (everything) and ``gpu-kit-report.md`` (short).

Statuses and exit codes of ``gpu-kit-run.sh`` (also in docs/gpu.md):

==================  ====  ==================================================================
status              exit  meaning
==================  ====  ==================================================================
passed              0     every kernel loaded, ran and matched; graph replays matched
failed              1     some kernel did not load, raised, or gave wrong results, or an input
                          differs from the build's (``problems``; also without a GPU)
no-cuda-device      2     the kit installed and every kernel was loaded, but torch sees no GPU
                          (with ``--standin-cpu``: 0 or 1 from the stand-in run of the c kernels)
setup-failed        3     the kit could not be installed or read (no torch, pip failed, bad DIR)
==================  ====  ==================================================================

Standard library only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

EXIT_CODES = {"passed": 0, "failed": 1, "no-cuda-device": 2, "setup-failed": 3}
REPORT_JSON = "gpu-kit-report.json"
REPORT_MD = "gpu-kit-report.md"

#: Result statuses that are not failures.
NOT_FAILURES = ("ok", "not-for-this-device")


def summarize(report: dict[str, Any]) -> dict[str, dict[str, int]]:
    """backend -> counts of load and run outcomes (from ``loads`` and ``results``)."""
    exports = {e["id"]: e for e in report.get("kit", {}).get("exports", [])}
    out: dict[str, dict[str, int]] = {}
    for eid, load in report.get("loads", {}).items():
        backend = exports.get(eid, {}).get("backend", eid.split("--")[1] if "--" in eid else "?")
        row = out.setdefault(backend, {"exports": 0, "loaded": 0})
        row["exports"] += 1
        row["loaded"] += bool(load.get("loaded"))
    for eid, result in report.get("results", {}).items():
        backend = exports.get(eid, {}).get("backend", "?")
        row = out.setdefault(backend, {"exports": 0, "loaded": 0})
        status = result.get("status", "?")
        row[status] = row.get(status, 0) + 1
        graph = result.get("graph")
        if graph is not None:
            key = "graph_ok" if graph == "ok" else ("graph_skipped" if graph.startswith("not checked") else "graph_failed")
            row[key] = row.get(key, 0) + 1
    return out


def problems(report: dict[str, Any]) -> list[str]:
    """One line per failed load, run or graph replay."""
    lines = []
    for eid, load in sorted(report.get("loads", {}).items()):
        if not load.get("loaded") and not load.get("other_arch"):
            lines.append(f"{eid}: not loaded: {load.get('error', '?')}")
    for case, info in sorted(report.get("inputs", {}).items()):
        if info.get("inputs") != "same":
            lines.append(f"{case}: {info.get('inputs')}")
    for eid, result in sorted(report.get("results", {}).items()):
        status = result.get("status")
        if status not in NOT_FAILURES:
            lines.append(f"{eid}: {status}: {result.get('error', '')}".rstrip(": "))
        graph = result.get("graph")
        if status == "ok" and graph and graph != "ok" and not graph.startswith("not checked"):
            lines.append(f"{eid}: CUDA graph: {graph}")
    if report.get("dispatch_error"):
        lines.append(f"dispatch timing: {report['dispatch_error']}")
    return lines


def _cell(result: dict[str, Any]) -> str:
    status = result.get("status", "?")
    if status != "ok":
        return {"wrong": "WRONG", "error": "ERROR", "not-for-this-device": "other arch", "not-run": "not run",
                "timeout": "TIMEOUT", "crashed": "CRASHED"}.get(status, status)
    timing = result.get("timing") or {}
    graph = "" if result.get("graph") in ("ok", None) or str(result.get("graph")).startswith("not checked") else ", graph FAILED"
    if "ratio" in timing and timing["ratio"] is not None:
        return f"ok {timing['kernel_ms'] * 1000:.1f} us, {timing['ratio']:.2f}x torch{graph}"
    if "kernel_ms" in timing:
        return f"ok {timing['kernel_ms'] * 1000:.1f} us{graph}"
    return f"ok{graph}"


def markdown(report: dict[str, Any]) -> str:
    """The short report: status, machine, per-backend summary, dispatch ratios, per-case table."""
    m = report.get("machine", {})
    device = m.get("device") or {}
    kit = report.get("kit", {})
    lines = [
        "# GPU check kit report",
        "",
        f"- date: {report.get('date', '?')}; status: **{report.get('status')}** (exit {report.get('exit_code')})"
        + (f"; {report['message']}" if report.get("message") else ""),
        f"- machine: {device.get('name', 'no CUDA device')}"
        + (f" (sm {device.get('capability')}, {device.get('memory_gib')} GiB)" if device else "")
        + f"; torch {m.get('torch', '?')} (CUDA {m.get('torch_cuda')}); Python {m.get('python', '?')}"
        + (f"; driver {m['driver']}" if m.get("driver") else ""),
        f"- kit: built {kit.get('created', '?')} with {', '.join(f'{k} {v}' for k, v in (kit.get('build') or {}).items() if k in ('tilelang-core', 'torch', 'nvcc', 'apache-tvm', 'nvidia-cuda-nvrtc'))}; "
        f"{len(kit.get('cases', []))} cases, {len(kit.get('exports', []))} kernels"
        + (f", {len(kit.get('build_failures', []))} build failures" if kit.get("build_failures") else ""),
        f"- took {report.get('seconds', 0):.0f} s" + (" (CPU stand-in run: no GPU was checked)" if report.get("standin") else ""),
        "",
    ]
    summary = report.get("summary") or {}
    if summary:
        known = ["exports", "loaded", "ok", "wrong", "error", "timeout", "crashed", "not-for-this-device", "not-run",
                 "graph_ok", "graph_failed", "graph_skipped"]
        present = {key for row in summary.values() for key, count in row.items() if count}
        cols = [c for c in known if c in ("exports", "loaded") or c in present]
        cols += sorted(present - set(known))
        lines += ["| backend | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
        for backend, row in sorted(summary.items()):
            lines.append(f"| {backend} | " + " | ".join(str(row.get(c, 0)) for c in cols) + " |")
        lines.append("")
    dispatch = report.get("dispatch") or {}
    if dispatch:
        ref = dispatch.get("torch", {})
        lines += [f"Per-call dispatch, 16-element tensors (ratio to torch.add(a, b, out=c) = {ref.get('add_out_ns')} ns; "
                  f"out_idx to torch.add(a, b) = {ref.get('add_ns')} ns):", "",
                  "| backend | 3 tensors | 8 tensors | 16 tensors | out_idx |", "|---|---|---|---|---|"]
        for backend, tags in sorted(dispatch.items()):
            if backend == "torch":
                continue
            cells = [f"{tags[t]['ns']:.0f} ns ({tags[t]['ratio']:.2f}x)" if t in tags else "-" for t in ("t3", "t8", "t16", "out_idx")]
            lines.append(f"| {backend} | " + " | ".join(cells) + " |")
        lines.append("")
    results = report.get("results") or {}
    if results:
        exports = {e["id"]: e for e in kit.get("exports", [])}
        shown_arch = report.get("table_arch")
        backends = sorted({exports[i]["backend"] for i in results if i in exports})
        lines += [f"Kernels ({shown_arch or 'all architectures'}; device time per call, ratio to torch's op):", "",
                  "| case | " + " | ".join(backends) + " |", "|---" * (len(backends) + 1) + "|"]
        rows: dict[str, dict[str, str]] = {}
        for eid, result in results.items():
            e = exports.get(eid)
            if e is None or (shown_arch and e["arch"] != shown_arch):
                continue
            rows.setdefault(e["case"], {})[e["backend"]] = _cell(result)
        for case in sorted(rows):
            lines.append(f"| {case} | " + " | ".join(rows[case].get(b, "-") for b in backends) + " |")
        lines.append("")
    issues = report.get("problems") or []
    if issues:
        lines += [f"Problems ({len(issues)}):", ""] + [f"- {p[:400]}" for p in issues[:40]]
        if len(issues) > 40:
            lines.append(f"- ... {len(issues) - 40} more in {REPORT_JSON}")
        lines.append("")
    return "\n".join(lines)


def write(report: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """Write both files into ``out`` (created); returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    report["summary"] = summarize(report)
    report.setdefault("problems", problems(report))
    json_path, md_path = out / REPORT_JSON, out / REPORT_MD
    json_path.write_text(json.dumps(report, indent=1, default=str))
    md_path.write_text(markdown(report))
    return json_path, md_path
