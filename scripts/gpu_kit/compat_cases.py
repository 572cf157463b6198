"""The kit's TileLang-compatibility cases (build half only): issue 13's operators on a GPU.

The GPU-style kernels of ``tests/tileops_compat_kernels.py`` (those tests/test_tileops_compat_cuda.py
compiles with nvcc here), each with its torch reference. Integer-valued inputs keep the atomic
sums exact in every dtype; the values ``return_prev=True`` gives back depend on the order the
threads ran in and are checked as a chain (:func:`gpu_kit.checks.exchange_chain`). Built for
sm_90 only (the other architectures add nothing these kernels do not already show). Nothing
here is timed against torch (no reference op): the kernels check operators, not speed.
"""

from __future__ import annotations

import functools
from typing import Any

from gpu_kit.cases import ROOT, Case, _load_module, _spec

ARCHS = ("sm_90",)


def _ints(low: int, high: int) -> dict[str, Any]:
    return {"init": "randint", "low": low, "high": high}


def _out(dtype: str = "float32", init: str = "nan") -> dict[str, Any]:
    return {"dtype": dtype, "init": init, "role": "out"}


# -- references (CPU torch; inputs in parameter order, outputs in parameter order) ----------


def _atomics(a, bitwise, block=64):
    import torch

    vals = a.long().tolist()
    c = [sum(vals), max([0] + vals), min([0] + vals), 0, 0, 0, sum(vals), 0]
    if bitwise:
        c[3] = functools.reduce(lambda p, q: p | q, vals, 0)
        c[4] = 0  # 0 & anything
        c[5] = functools.reduce(lambda p, q: p ^ q, vals, 0)
    rows = a.double().reshape(-1, block)
    prev = torch.cat([torch.zeros(1, dtype=torch.float64), a.double().cumsum(0)[:-1]])  # one order of many
    g = torch.zeros(8, dtype=torch.float64)
    g[0:6] = rows[:, 0:6].sum(0)
    e = torch.tensor([1, 0])  # E[0] = atomic_load(E[1]) + 1
    dt = a.dtype
    return (torch.tensor(c).to(dt), prev.to(dt), rows.sum(0).to(dt), g.to(dt), e.to(dt))


def _vector_prev(v):
    import torch

    prev = torch.cat([torch.zeros(1, 6, dtype=torch.float64), v.double().cumsum(0)[:-1]])
    return (v.double().sum(0).to(v.dtype), prev.to(v.dtype))


def _reduce_bits(a):
    import torch

    out = torch.zeros(a.shape[0], 6, dtype=torch.int64)
    for r, row in enumerate(a.long().tolist()):
        out[r, 0] = functools.reduce(lambda p, q: p & q, row)
        out[r, 1] = functools.reduce(lambda p, q: p | q, row)
        out[r, 2] = functools.reduce(lambda p, q: p ^ q, row)
        out[r, 3] = 0x0F ^ int(out[r, 2])
    return (out.to(a.dtype),)


def _reduce_nan(a):
    import torch

    x = a.double()
    nan_row = torch.isnan(x).any(1)
    r0 = x.nan_to_num(nan=float("-inf")).amax(1)
    r1 = x.nan_to_num(nan=float("inf")).amin(1)
    r2 = x.abs().nan_to_num(nan=0.0).amax(1)
    cols = [r0, r1, r2] + [torch.where(nan_row, torch.full_like(r, float("nan")), r) for r in (r0, r1, r2)]
    return (torch.stack(cols, 1).to(a.dtype),)


def _scans(a, bm=8):
    import torch

    m, n = a.shape
    s0 = a.cumsum(1)
    tiles = a.reshape(m // bm, bm, n)
    s1 = tiles.flip(1).cumsum(1).flip(1).reshape(m, n)
    s2 = a.flip(1).cummax(1).values.flip(1)
    v = torch.full_like(a, float("nan"))
    v[::bm] = a[::bm].cumsum(1)
    return (s0, s1, s2, v)


def _layout(a):
    import torch

    b, m, n = a.shape
    edge = torch.full((b, n, m), -1.0)
    edge[:, :, 2:m] = a[:, 1 : m - 1, :].transpose(1, 2)  # the region overhangs Edge by one column
    return (a.transpose(1, 2).contiguous(), edge, a.reshape(b, m * n).clone(), a.view(torch.int32).clone())


def _math(a, q):
    import torch

    x = a.double()
    pos = x.abs() + 1
    f = torch.stack([x.exp(), torch.pow(10.0, x), pos.log(), pos.log2(), pos.log10(), x.tan(), x.cos(), x.sin(),
                     1 / (x + 4), x.clamp(-0.5, 0.5)], 1)
    g = torch.arange(a.shape[0])
    d = g + (q.long() * q.long()).sum(1)
    u = (g + 7) // 8 * 8
    return (f.to(a.dtype), d.to(torch.int32), u.to(torch.int32))


def _fma_exact(a, b, c):
    """Round-to-nearest fused multiply-add of float64 tensors (exact rational arithmetic)."""
    import torch
    from fractions import Fraction

    out = [float(Fraction(x) * Fraction(y) + Fraction(z)) for x, y, z in zip(a.tolist(), b.tolist(), c.tolist())]
    return torch.tensor(out, dtype=torch.float64)


def _ieee(a, b, c, modes):
    """Every operation rounded to nearest (the other modes are within the case's 2 ulp)."""
    import torch

    x, y, z = a.double(), b.double(), c.double()
    fma = _fma_exact(x, y, z) if a.dtype == torch.float64 else x * y + z  # float32 products are exact in float64
    results = [x + y, x - y, x * y, x / y, 1 / x, x.sqrt(), fma, 1 / x.sqrt()]
    cols = [r for r in results for _ in range(modes)]
    return (torch.stack(cols, 1).to(a.dtype),)


def _vectors(a, b):
    import torch

    x, y = a.double(), b.double()
    rows = [x + y, x - y, x * y, x * y + x, torch.maximum(x, y), torch.minimum(x, y), x.abs(), x]
    swapped = b.reshape(-1, 2).flip(1).reshape(-1)
    return (torch.stack(rows, 0).to(a.dtype), swapped.clone())


def _gpu_only(a, i, block=64, warp=32):
    """What the warp votes, shuffles and block votes give, thread by thread (64-thread blocks)."""
    import torch

    v = i.long().tolist()
    n = len(v)
    p, u = [], []
    for g in range(n):
        t = g % block
        blk = v[g - t: g - t + block]
        w0 = g - g % warp
        lanes = v[w0: w0 + warp]
        lane = g - w0
        pos = [x > 0 for x in lanes]
        total = (
            int(any(pos)) + int(all(pos)) * 2 + sum(x > 0 for x in blk) * 4 + int(all(x != 0 for x in blk))
            + int(any(x != 0 for x in blk)) + lanes[lane ^ 1] + lanes[lane + 1 if lane + 1 < warp else lane]
            + lanes[lane - 1 if lane >= 1 else lane] + lanes[0]
            + sum(1 << k for k, x in enumerate(lanes) if x == v[g])  # match_any: the lanes with this value
            + (-1 if len(set(lanes)) == 1 else 0)  # match_all: the full mask as int32, or 0
            + t
            + ((v[g] & -v[g]).bit_length() if v[g] else 0)  # __ffs
            + (((v[g] & 0xFFFFFFFF) & -(v[g] & 0xFFFFFFFF)).bit_length() - 1 if v[g] else -1)  # __fns(v, 0, 1)
        )
        p.append((total + 2**31) % 2**32 - 2**31)
        ballot = lambda pred: sum(1 << k for k, x in enumerate(lanes) if pred(x))  # noqa: E731
        u.append(ballot(lambda x: x > 0) + ballot(lambda x: x > 1) + 0xFFFFFFFF)
    return (torch.tensor(p, dtype=torch.int32), torch.tensor(u, dtype=torch.uint64), 2 * a)


def _reducers(a, ints):
    import torch

    bits = [functools.reduce(lambda p, q: p | q, row) for row in ints.long().tolist()]
    return (a.sum(1), a.amax(1).clamp(min=0.5), torch.tensor(bits, dtype=torch.int32))


# -- the catalogue -------------------------------------------------------------------------


def compat_cases() -> list[Case]:
    """The compatibility-operator cases (ids ``compat.*``)."""
    KS = _load_module(ROOT / "tests" / "tileops_compat_kernels.py", "gpu_kit_tileops_compat_kernels")
    cases: list[Case] = []

    def add(name, func, params, expected_fn, rtol=1e-5, atol=1e-5, checks=None):
        case_id = f"compat.{name}"
        specs = [_spec(case_id, p[0], p[1], **(p[2] if len(p) > 2 else {})) for p in params]
        cases.append(Case(id=case_id, source="compat", title=f"tileops_compat_kernels: {name}", func=func,
                          params=specs, reference=None, rtol=rtol, atol=atol, expected_fn=expected_fn,
                          checks=checks, archs=ARCHS))

    prev_check = {"P": {"name": "exchange_chain", "addend": "A", "final": ["C", 6]}}
    for dtype, n, dynamic, low, high in (("int32", 640, True, -4, 5), ("float32", 640, False, -4, 5),
                                         ("float16", 640, True, 0, 3), ("bfloat16", 256, False, 0, 2),
                                         ("float64", 640, False, -4, 5)):
        bitwise = dtype == "int32"
        add(f"atomics_{dtype}", (lambda n=n, dt=dtype, d=dynamic, b=bitwise: KS.atomics(n, dt, dynamic=d, bitwise=b)),
            [("A", (n,), {"dtype": dtype, **_ints(low, high)}), ("C", (8,), _out(dtype, "zeros")),
             ("P", (n,), _out(dtype, "zeros")), ("S", (64,), _out(dtype, "zeros")), ("G", (8,), _out(dtype, "zeros")),
             ("E", (2,), _out(dtype, "zeros"))],
            (lambda a, b=bitwise: _atomics(a, b)), rtol=0, atol=0, checks=prev_check)
    for dtype, dynamic in (("float32", True), ("bfloat16", False)):
        add(f"vector_prev_{dtype}", (lambda dt=dtype, d=dynamic: KS.vector_prev(40, dt, dynamic=d)),
            [("V", (40, 6), {"dtype": dtype, **_ints(0, 3)}), ("Acc", (6,), _out(dtype, "zeros")),
             ("Prev", (40, 6), _out(dtype, "zeros"))],
            _vector_prev, rtol=0, atol=0,
            checks={"Prev": {"name": "exchange_chain", "addend": "V", "final": "Acc"}})
    add("reduce_bits", lambda: KS.reductions(37, 12, 8, "int32", dynamic=True, style="gpu"),
        [("A", (37, 12), {"dtype": "int32", **_ints(-(2**30), 2**30)}), ("O", (37, 6), _out("int32", "zeros"))],
        _reduce_bits, rtol=0, atol=0)
    for dtype in ("float32", "bfloat16"):
        add(f"reduce_nan_{dtype}", (lambda dt=dtype: KS.reductions(16, 10, 8, dt, style="gpu")),
            [("A", (16, 10), {"dtype": dtype, "nan_at": [34, 90, 129]}), ("O", (16, 6), _out(dtype))],
            _reduce_nan, rtol=0, atol=0)
    for name, dynamic in (("scans", False), ("scans_dynamic", True)):
        add(name, (lambda d=dynamic: KS.scans(32, 24, 8, dynamic=d, style="gpu")),
            [("A", (32, 24))] + [(o, (32, 24), _out()) for o in ("S0", "S1", "S2", "V")], _scans)
    add("layout", lambda: KS.layout(3, 5, 4, dynamic=True, style="gpu"),
        [("A", (3, 5, 4)), ("Tr", (3, 4, 5), _out()), ("Edge", (3, 4, 5), _out()), ("R", (3, 20), _out()),
         ("Bits", (3, 5, 4), _out("int32"))], _layout, rtol=0, atol=0)
    for dtype, dynamic, tol in (("float32", False, 1e-3), ("float16", True, 5e-3)):
        add(f"math_{dtype}", (lambda dt=dtype, d=dynamic: KS.math(200, dt, dynamic=d)),
            [("A", (200,), {"dtype": dtype}), ("F", (200, 10), _out(dtype)),
             ("Q", (200, 4), {"dtype": "int8", **_ints(-128, 128)}), ("D", (200,), _out("int32", "zeros")),
             ("U", (200,), _out("int32", "zeros"))], _math, rtol=tol, atol=tol)
    for dtype, dynamic, modes, tol in (("float32", False, 4, 2.4e-7), ("float64", True, 4, 4.5e-16),
                                       ("float16", False, 1, 2e-3), ("bfloat16", True, 1, 1.6e-2)):
        name = f"ieee_{dtype}"
        func = ((lambda dt=dtype, d=dynamic: KS.ieee(128, dt, dynamic=d)) if modes == 4
                else (lambda dt=dtype, d=dynamic: KS.ieee_half(128, dt, dynamic=d)))
        add(name, func,
            [("A", (128,), {"dtype": dtype}), ("B", (128,), {"dtype": dtype}), ("C", (128,), {"dtype": dtype}),
             ("O", (128, 8 * modes), _out(dtype))],
            (lambda a, b, c, m=modes: _ieee(a, b, c, m)), rtol=tol, atol=1e-30)
    for dtype, tol in (("float16", 1e-3), ("bfloat16", 8e-3)):
        add(f"vectors_{dtype}", (lambda dt=dtype: KS.vectors(16, dt)),
            [("A", (16,), {"dtype": dtype}), ("B", (16,), {"dtype": dtype}), ("O", (8, 16), _out(dtype)),
             ("L", (16,), _out(dtype))], _vectors, rtol=tol, atol=tol)
    add("gpu_only", lambda: KS.gpu_only(256),
        [("A", (256,)), ("I", (256,), {"dtype": "int32", **_ints(0, 4)}), ("P", (256,), _out("int32", "zeros")),
         ("U", (256,), _out("uint64", "zeros")), ("O", (256,), _out())], _gpu_only, rtol=0, atol=0)
    add("reducers", lambda: KS.reducers(8, 40),
        [("A", (8, 40)), ("S", (8,), _out()), ("X", (8,), _out()), ("B", (8,), _out("int32", "zeros")),
         ("I", (8, 40), {"dtype": "int32", **_ints(0, 2**20)})], _reducers)
    _warp_cases(add)
    return cases


def _warp_cases(add) -> None:
    """The warp/thread-index helpers and barriers of ``tests/warp_kernels.py`` (cases
    ``compat.warp_*``): indices, elections and exchanges through shared memory thread by thread,
    warp reductions lane by lane (the references are that file's own)."""
    WK = _load_module(ROOT / "tests" / "warp_kernels.py", "gpu_kit_warp_kernels")
    n = 2 * 128
    add("warp_indices", lambda: WK.warp_indices(2),
        [("A", (n,), {"dtype": "int32", **_ints(-1000, 1000)}), ("I", (n, WK.INDEX_COLUMNS), _out("int32", "zeros"))],
        WK.warp_indices_reference, rtol=0, atol=0)
    for dtype, low, high, tol in (("int32", -(2**20), 2**20, 0), ("int8", -128, 128, 0), ("uint64", 0, 2**40, 0),
                                  ("float32", None, None, 1e-5), ("float16", None, None, 2e-3),
                                  ("bfloat16", None, None, 1.6e-2), ("float64", None, None, 1e-12)):
        values = {"dtype": dtype, **_ints(low, high)} if low is not None else {"dtype": dtype}
        if dtype == "float32":  # a NaN lane: sum NaN, max/min ignore it (fmaxf/fminf)
            values["nan_at"] = [5]
        cols = 5 if low is not None else 3
        add(f"warp_reduce_{dtype}", (lambda dt=dtype: WK.warp_reduce(dt, 64)),
            [("X", (64,), values), ("O", (64, cols), _out(dtype, "zeros"))],
            WK.warp_reduce_reference, rtol=tol, atol=tol)
    add("warp_barriers", lambda: WK.barriers(200, dynamic=True),
        [("A", (200,)), ("B", (200,), _out())], WK.barriers_reference, rtol=0, atol=0)
