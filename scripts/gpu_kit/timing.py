"""Timings of the run half: per-call dispatch against ``torch.add``, kernels against torch's ops.

* :func:`dispatch_times`: host cost of one call, as bench/dispatch.py measures it on the CPU but
  with 16-element CUDA tensors: each statement is called ``number`` times per round (few enough
  that the launch queue never fills, so the GPU's speed does not hide the host's), the device is
  synchronised between rounds (untimed), statements are interleaved round by round and each keeps
  its best round. References: ``torch.add(a, b, out=c)`` and ``torch.add(a, b)``.
* :func:`kernel_vs_torch`: device time of one kernel call and of the torch reference, both with
  ``tilelang.profiler.do_bench`` (CUDA events, L2 flushed between calls).

Ratios, never absolute targets: the report prints both times and their quotient.
"""

from __future__ import annotations

import gc
import timeit
from typing import Any, Callable, Optional


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def dispatch_times(statements: dict[str, tuple[str, dict[str, Any]]], number: int = 400, repeat: int = 25,
                   device: str = "cuda") -> dict[str, float]:
    """Seconds per call of each ``key -> (statement, globals)`` (best round, GC off)."""
    timers = {}
    for key, (stmt, env) in statements.items():
        timer = timeit.Timer(stmt, globals=env)
        timer.timeit(number=max(1, number // 10))  # warm up (first launches, lazy loads)
        _sync(device)
        timers[key] = timer
    best = {key: float("inf") for key in timers}
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeat):
            for key, timer in timers.items():
                best[key] = min(best[key], timer.timeit(number=number) / number)
                _sync(device)
    finally:
        if was_enabled:
            gc.enable()
    return best


def dispatch_statements(kernels: dict[str, dict[str, tuple[Any, list[Any]]]], device: str = "cuda") -> dict[str, tuple[str, dict]]:
    """The statements :func:`dispatch_times` runs: references, then ``backend:tag`` per kernel.

    ``kernels``: backend -> tag (``t3``, ``t8``, ``t16``, ``out_idx``) -> (kernel, arguments).
    """
    import torch

    a, b, c = (torch.randn(16, device=device) for _ in range(3))
    env = {"add": torch.add, "a": a, "b": b, "c": c}
    out = {"ref:add_out": ("add(a, b, out=c)", env), "ref:add": ("add(a, b)", env)}
    for backend, tags in sorted(kernels.items()):
        for tag, (kernel, args) in sorted(tags.items()):
            names = [f"x{i}" for i in range(len(args))]
            out[f"{backend}:{tag}"] = (f"k({', '.join(names)})", {"k": kernel, **dict(zip(names, args))})
    return out


def dispatch_ratios(times: dict[str, float]) -> dict[str, dict[str, Any]]:
    """backend -> {tag: {"ns": ..., "ratio": ... against add(out=) (add() for out_idx)}}."""
    ref = {"add_out": times["ref:add_out"], "add": times["ref:add"]}
    out: dict[str, dict[str, Any]] = {"torch": {"add_out_ns": round(ref["add_out"] * 1e9, 1), "add_ns": round(ref["add"] * 1e9, 1)}}
    for key, seconds in times.items():
        if key.startswith("ref:"):
            continue
        backend, tag = key.split(":", 1)
        base = ref["add"] if tag == "out_idx" else ref["add_out"]
        out.setdefault(backend, {})[tag] = {"ns": round(seconds * 1e9, 1), "ratio": round(seconds / base, 3)}
    return out


def kernel_vs_torch(kernel_call: Callable[[], Any], torch_call: Optional[Callable[[], Any]],
                    warmup_ms: float = 5, rep_ms: float = 20, device: str = "cuda") -> dict[str, Any]:
    """``{"kernel_ms", "torch_ms", "ratio", "timer"}`` from ``tilelang.profiler.do_bench``."""
    from tilelang_core.profiler.bench import do_bench, resolve_timer

    out: dict[str, Any] = {"timer": resolve_timer("auto", device)}
    out["kernel_ms"] = round(float(do_bench(kernel_call, warmup=warmup_ms, rep=rep_ms, device=device)), 5)
    if torch_call is not None:
        out["torch_ms"] = round(float(do_bench(torch_call, warmup=warmup_ms, rep=rep_ms, device=device)), 5)
        out["ratio"] = round(out["kernel_ms"] / out["torch_ms"], 3) if out["torch_ms"] > 0 else None
    return out
