"""The kit's case catalogue (build half only): which kernels it carries, with their tensors.

Five sources, each a list of :class:`Case`:

* the CUDA examples of ``examples/`` (every ``EXAMPLES`` entry; the example's own torch reference
  gives the expected outputs, a named reference of :mod:`.references` is timed on the GPU);
* the CUDA tile-operator kernels of ``tests/tileops_kernels.py`` in their GPU style (shared tiles,
  fragments, 128 threads), as ``tests/test_tileops_cuda.py`` builds them;
* the TileLang-compatibility operator kernels of ``tests/tileops_compat_kernels.py`` (issue 13:
  atomics, scans, bitwise reductions, transpose/reshape/view, fast math and IEEE rounding, 16-bit
  vector helpers, warp votes and shuffles, reducers), in :mod:`.compat_cases`;
* the barrier kernels of :mod:`.barrier_cases` (block-uniform ``while`` and ``if``, loops left by
  ``break``, atomics into bfloat16 and shared tiles), which take scalar arguments;
* the dispatch-bench kernels of ``bench/dispatch.py`` (3, 8 and 16 tensors, and ``out_idx``).

A kernel's scalar parameter is a scalar spec among ``params`` (:mod:`.tensors`).

``reduced=True`` marks the few cases of the CI-sized kit (``--reduced``). Importing this module
imports no TVM; building a case's ``func`` does.
"""

from __future__ import annotations

import importlib.util
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

ROOT = Path(__file__).resolve().parents[2]

#: Example name (before ``[``) -> the reference timed against it on the GPU.
EXAMPLE_REFERENCES = {
    "vector_add": {"name": "add"},
    "matmul": {"name": "matmul"},
    "row_scale": {"name": "row_scale"},
}

#: Cases of the CI-sized kit.
REDUCED = ("example.vector_add.static_4096", "tileop.softmax", "tileop.atomic", "compat.atomics_int32",
           "barrier.while_counter.t64.n1", "dispatch.t3")


@dataclass
class Case:
    """One kernel of the kit with its tensors, reference and tolerances."""

    id: str
    source: str
    func: Callable[[], Any]
    params: list[dict[str, Any]]
    reference: Optional[dict[str, Any]]
    out_idx: Optional[list[int]] = None
    rtol: float = 1e-5
    atol: float = 1e-5
    expected_fn: Optional[Callable[..., Any]] = None
    dispatch: Optional[str] = None
    title: str = ""
    notes: list[str] = field(default_factory=list)
    checks: Optional[dict[str, dict[str, Any]]] = None  # output -> check instead of a comparison (checks.py)
    archs: Optional[tuple[str, ...]] = None  # built only for these of --archs (None: all)

    @property
    def reduced(self) -> bool:
        return self.id in REDUCED


def seed_of(case_id: str, name: str) -> int:
    """The seed of one input: stable across runs, machines and Python versions."""
    return zlib.crc32(f"{case_id}/{name}".encode()) & 0x7FFFFFFF


def _spec(case_id: str, name: str, shape, dtype: str = "float32", init: str = "randn", role: str = "in",
          **extra: Any) -> dict:
    spec = {"name": name, "shape": [int(n) for n in shape], "dtype": dtype, "init": init, "role": role, **extra}
    if init in ("randn", "randint"):
        spec["seed"] = seed_of(case_id, name)
    return spec


def _load_module(path: Path, name: str, extra_path: Optional[Path] = None) -> Any:
    if extra_path is not None and str(extra_path) not in sys.path:
        sys.path.insert(0, str(extra_path))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _slug(text: str) -> str:
    out = "".join(c if c.isalnum() else "_" for c in text.lower())
    while "__" in out:
        out = out.replace("__", "_")
    return out.strip("_")


# -- examples ------------------------------------------------------------------------------


def example_cases() -> list[Case]:
    """Every ``EXAMPLES`` entry of ``examples/*.py`` (not ``_*.py``, not run_all.py)."""
    import torch

    folder = ROOT / "examples"
    cases = []
    for path in sorted(folder.glob("*.py")):
        if path.name.startswith("_") or path.name == "run_all.py":
            continue
        module = _load_module(path, f"gpu_kit_example_{path.stem}", extra_path=folder)
        for example in getattr(module, "EXAMPLES", []):
            base, _, rest = example.name.partition("[")
            case_id = f"example.{_slug(base)}" + (f".{_slug(rest)}" if rest else "")
            torch.manual_seed(0)
            inputs = example.inputs()
            out_idx = example.out_idx
            n_params = len(inputs) + (len(out_idx) if isinstance(out_idx, (list, tuple)) else (0 if out_idx is None else 1))
            rets = [] if out_idx is None else [i % n_params for i in (out_idx if isinstance(out_idx, (list, tuple)) else [out_idx])]
            results = example.reference(*inputs)
            results = list(results) if isinstance(results, (list, tuple)) else [results]
            params, it_in, it_ret = [], iter(inputs), iter(results)
            for index in range(n_params):
                if index in rets:
                    r = next(it_ret)
                    params.append(_spec(case_id, f"ret{len(params)}", r.shape, str(r.dtype).replace("torch.", ""), "zeros", "ret"))
                else:
                    t = next(it_in)
                    params.append(_spec(case_id, f"in{index}", t.shape, str(t.dtype).replace("torch.", "")))
            cases.append(Case(
                id=case_id, source="example", title=f"{path.name}: {example.name}", func=example.build,
                params=params, reference=EXAMPLE_REFERENCES.get(base), out_idx=rets or None,
                rtol=example.rtol, atol=example.atol, expected_fn=example.reference,
            ))
    return cases


# -- tile operators ------------------------------------------------------------------------


def tileop_cases() -> list[Case]:
    """The GPU-style tile-operator kernels (those of tests/test_tileops_cuda.py, and two more)."""
    KS = _load_module(ROOT / "tests" / "tileops_kernels.py", "gpu_kit_tileops_kernels")
    cases: list[Case] = []

    def add(name, func, params, reference, **kw):
        case_id = f"tileop.{name}"
        specs = [_spec(case_id, *p[:2], **p[2]) if len(p) > 2 else _spec(case_id, *p) for p in params]
        cases.append(Case(id=case_id, source="tileop", title=f"tileops_kernels: {name}", func=func, params=specs,
                          reference=reference, **kw))

    def mm(name, M, N, K, bm, bn, bk, dtype, ta=False, tb=False, style="gpu", tol=1e-4):
        a = (K, M) if ta else (M, K)
        b = (N, K) if tb else (K, N)
        add(name, lambda: KS.matmul(M, N, K, bm, bn, bk, dtype, "float32", ta, tb, style=style),
            [("A", a, {"dtype": dtype}), ("B", b, {"dtype": dtype}), ("C", (M, N), {"init": "nan", "role": "out"})],
            {"name": "matmul", "kwargs": {"trans_a": ta, "trans_b": tb}}, rtol=tol, atol=tol)

    mm("matmul_f16", 96, 80, 72, 32, 32, 16, "float16", tol=1e-3)
    mm("matmul_cpu_style", 96, 80, 72, 32, 32, 16, "float16", style="cpu", tol=1e-3)
    mm("matmul_f32", 96, 80, 72, 32, 32, 16, "float32")
    mm("matmul_tA", 70, 45, 37, 32, 16, 16, "float32", ta=True)
    mm("matmul_tB", 70, 45, 37, 32, 16, 16, "float32", tb=True)
    mm("matmul_tAB", 70, 45, 37, 32, 16, 16, "float16", ta=True, tb=True, tol=1e-3)
    add("copy_edges", lambda: KS.copy_edges(50, 37, 16, 16, "gpu"),
        [("A", (50, 37)), ("P", (64, 48), {"init": "nan", "role": "out"}), ("O", (50, 37), {"init": "nan", "role": "out"})],
        {"name": "copy_edges", "kwargs": {"padded": [64, 48]}}, rtol=0, atol=0)
    add("copy_dynamic", lambda: KS.copy_dynamic(16, 16, "gpu"),
        [("A", (33, 48)), ("B", (33, 48), {"dtype": "float16", "init": "zeros", "role": "out"})],
        {"name": "cast", "kwargs": {"dtype": "float16"}}, rtol=0, atol=0)
    add("copy_corners", lambda: KS.copy_corners(3, 40, 8, "gpu"),
        [("X", (3, 40, 8)), ("O", (3, 40, 8), {"init": "nan", "role": "out"}), ("Col", (3, 40, 1), {"init": "nan", "role": "out"})],
        {"name": "corners"}, rtol=0, atol=0)
    add("gemm_regions", lambda: KS.gemm_regions(12, 10, 16, "gpu"),
        [("A", (12, 16)), ("B", (16, 10)), ("C", (12, 10), {"init": "nan", "role": "out"})],
        {"name": "matmul"}, rtol=1e-4, atol=1e-4)
    add("fill", lambda: KS.fill_kernel(6, 5, "gpu"), [("O", (6, 5), {"init": "nan", "role": "out"})],
        {"name": "fill", "kwargs": {"shape": [6, 5], "value": 3.5, "cleared_rows": 2}}, rtol=0, atol=0)
    for op in KS.REDUCERS:
        add(f"reduce_{op}", (lambda op=op: KS.reduce_both(12, 20, op, "gpu")),
            [("A", (12, 20)), ("R0", (20,), {"init": "zeros", "role": "out"}), ("R1", (12,), {"init": "zeros", "role": "out"}),
             ("R2", (12,), {"init": "zeros", "role": "out"})],
            {"name": "reduce", "kwargs": {"op": op, "accumulate": True}}, rtol=1e-5, atol=1e-5)
    add("atomic", lambda: KS.atomic_sum(1000, 64, "gpu"),
        [("A", (1000,)), ("C", (1,), {"init": "zeros", "role": "out"}), ("D", (64,), {"init": "zeros", "role": "out"})],
        {"name": "atomic_sum", "kwargs": {"chunk": 64}}, rtol=1e-4, atol=1e-3)
    add("softmax", lambda: KS.softmax(37, 64, 8, "gpu"),
        [("A", (37, 64)), ("O", (37, 64), {"init": "nan", "role": "out"})], {"name": "softmax"}, rtol=1e-5, atol=1e-5)
    add("atomic_count", lambda: KS.atomic_count(8, 256),
        [("C", (1,), {"dtype": "int32", "init": "zeros", "role": "out"})],
        {"name": "count", "kwargs": {"total": 8 * 256, "dtype": "int32"}}, rtol=0, atol=0)
    add("running_max", lambda: KS.running_max(37, 50, 16, "gpu"),
        [("A", (37, 50)), ("O", (37,), {"init": "nan", "role": "out"})], {"name": "rowmax"}, rtol=0, atol=0)
    return cases


# -- dispatch bench ------------------------------------------------------------------------


def dispatch_cases() -> list[Case]:
    """bench/dispatch.py's n-ary add with 3, 8 and 16 tensors (last one written), and with out_idx."""
    bench = _load_module(ROOT / "bench" / "dispatch.py", "gpu_kit_bench_dispatch")
    n_elems = bench.N_ELEMS
    cases = []
    for n in (3, 8, 16):
        case_id = f"dispatch.t{n}"
        params = [_spec(case_id, f"in{i}", (n_elems,)) for i in range(n - 1)]
        params.append(_spec(case_id, "out", (n_elems,), init="nan", role="out"))
        cases.append(Case(id=case_id, source="dispatch", title=f"bench/dispatch.py: {n} tensors",
                          func=(lambda n=n: bench.prim_func(n)), params=params, reference={"name": "sum_inputs"},
                          dispatch=f"t{n}"))
    case_id = "dispatch.out_idx"
    params = [_spec(case_id, "in0", (n_elems,)), _spec(case_id, "in1", (n_elems,)),
              _spec(case_id, "out", (n_elems,), init="zeros", role="ret")]
    cases.append(Case(id=case_id, source="dispatch", title="bench/dispatch.py: 3 tensors, out_idx=[2]",
                      func=lambda: bench.prim_func(3), params=params, reference={"name": "add"}, out_idx=[2],
                      dispatch="out_idx"))
    return cases


def all_cases(reduced: bool = False, only: Optional[list[str]] = None) -> list[Case]:
    """The catalogue (the CI-sized part with ``reduced``; ``only``: case ids or prefixes)."""
    from gpu_kit.barrier_cases import barrier_cases
    from gpu_kit.compat_cases import compat_cases

    cases = example_cases() + tileop_cases() + compat_cases() + barrier_cases() + dispatch_cases()
    if reduced:
        cases = [c for c in cases if c.reduced]
    if only:
        cases = [c for c in cases if any(c.id == o or c.id.startswith(o.rstrip(".") + ".") for o in only)]
    return cases
