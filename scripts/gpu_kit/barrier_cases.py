"""The kit's barrier cases (build half only): shared-memory barriers the CUDA lowering places.

Kernels whose ``__syncthreads()`` come from ``PlanSharedBarriers`` in places the emulated GPU
checks here, and that a real GPU should agree with (ids ``barrier.*``):

* ``while_counter``: a block-uniform ``while k < n`` (``k`` from ``T.alloc_var``) with a copy into
  shared memory and a read of other threads' elements inside; ``n`` = 0 (no iteration: the
  barrier after the loop), 1 and 4 (every tile);
* ``break_out``: a serial loop a ``break`` may leave right after the copy into shared memory
  (``if k == n: T.loop_break()``), the tile read after the loop; ``n`` = 0, 1, 3 and 7 (no break);
* ``local_if``: an ``if`` on a local every thread sets to ``n`` (16 and below: skipped);
* ``bf16_atomics_*``: ``T.atomic_add(S[i % 3], V[i])`` and ``atomic_max`` into a bfloat16 shared
  tile (with ``return_prev=True``), fragment and local tile (the value read after the add: GPUs
  have no ``return_prev`` into per-thread memory);
* ``shared_atomics``: atomics into a shared tile in a ``T.Parallel`` loop, then ``T.copy`` of the
  tile out (the barrier after the atomics), adding a scalar weight ``w`` (int32 and float32);
* ``read_once``: tile atomics whose scalar value is an element of their own destination
  (``T.atomic_add(A[0:8, 0:16], A[0, 0])``, tests/test_atomic_tile_scalar_read_once.py's kernel):
  every thread reads it, a block barrier, then the updates (docs/tile-operators.md), so every
  element gets the old value;
* ``empty_grid``: ``T.Kernel(4, 0)``, a static grid of no block: the launch is skipped and the
  output keeps its values.

The first three are the kernels of tests/test_shared_barriers_uniform_while.py, the shared bf16
one that of tests/test_atomic_on_chip_tiles.py (imported, with their references and shapes);
the per-thread bf16 ones and ``shared_atomics`` (that file's histogram with the threads count and
the weight as parameters) are variants of those, defined here. Each runs with 64 and
256 threads where the kernel takes a threads count, for sm_90 only, untimed (no torch op).
"""

from __future__ import annotations

from typing import Any

from gpu_kit.cases import ROOT, Case, _load_module, _spec

ARCHS = ("sm_90",)
THREADS = (64, 256)
SLOTS, BLOCKS = 5, 6  # shared_atomics: a histogram of SLOTS cells per block


def _tests(name: str) -> Any:
    return _load_module(ROOT / "tests" / f"{name}.py", f"gpu_kit_{name}")


def _with_out(fill, size: int, threads: int):
    """The reference of a test kernel that writes its output in place, as the kit's form."""
    import torch

    def reference(a, scalar):
        o = torch.full((size,), float("nan"))
        fill(a, o, scalar, threads)
        return (o,)

    return reference


def shared_histogram(threads: int, dtype: str):
    """Per block, ``C`` into a shared tile, ``1`` and ``w`` added atomically to cell ``I[i]`` by
    every thread, the tile copied out to row ``bx`` of ``P``."""
    import tilelang.language as T

    scalar = getattr(T, dtype)

    @T.prim_func
    def shared_atomics(I: T.Tensor((BLOCKS * threads,), "int32"), C: T.Tensor((SLOTS,), dtype),
                       P: T.Tensor((BLOCKS, SLOTS), dtype), w: scalar):
        with T.Kernel(BLOCKS, threads=threads) as bx:
            S = T.alloc_shared((SLOTS,), dtype)
            T.copy(C, S)
            for i in T.Parallel(threads):
                T.atomic_add(S[I[bx * threads + i]], 1)
                T.atomic_add(S[I[bx * threads + i]], w)
            T.copy(S, P[bx, 0:SLOTS])

    return shared_atomics


def _histogram_reference(threads: int):
    import torch

    def reference(i, c, w):
        counts = torch.stack([torch.bincount(i[b * threads:(b + 1) * threads].long(), minlength=SLOTS)
                              for b in range(BLOCKS)])
        return ((c.double() + counts.double() * (1 + w)).to(c.dtype),)

    return reference


def bf16_tile_atomics(scope: str, n: int, k: int):
    """tests/test_atomic_on_chip_tiles.py's ``bf16_tiles`` for a per-thread tile on a GPU, where
    ``return_prev`` into local memory is refused: ``P[i]`` is the cell read after the add."""
    import tilelang.language as T

    @T.prim_func
    def bf16_tiles_after(V: T.Tensor((n,), "bfloat16"), C: T.Tensor((k,), "bfloat16"), P: T.Tensor((n,), "bfloat16")):
        with T.Kernel(1, threads=1) as bx:
            if scope == "fragment":
                S = T.alloc_fragment((k,), "bfloat16")
            else:
                S = T.alloc_local((k,), "bfloat16")
            for j in T.serial(k):
                S[j] = C[j]
            for i in T.serial(n):
                T.atomic_add(S[i % k], V[i])
                P[i] = S[i % k]
            for j in T.serial(k):
                T.atomic_max(S[j], T.bfloat16(7))
                C[j] = S[j]

    return bf16_tiles_after


def _bf16_reference(c_spec: dict, n: int, k: int, after: bool):
    """What the adds on one thread give: C's initial values (regenerated from their spec) plus V
    cell by cell, each add's previous value (``after``: the new value) in P, then ``max(., 7)``."""
    import torch

    from gpu_kit import tensors

    def reference(v):
        c = tensors.make(c_spec).double()
        p = torch.zeros(n, dtype=torch.float64)
        for i in range(n):
            p[i] = c[i % k] + (float(v[i]) if after else 0.0)
            c[i % k] += float(v[i])
        return (c.clamp(min=7).to(torch.bfloat16), p.to(torch.bfloat16))

    return reference


def _read_once_reference(a_spec: dict, b_spec: dict):
    from gpu_kit import tensors

    def reference():
        a, b = tensors.make(a_spec), tensors.make(b_spec)
        return (a + a[0, 0], b ^ b[0, 0])

    return reference


def empty_grid(threads: int):
    """A kernel over a static grid of 4 x 0 blocks: nothing runs."""
    import tilelang.language as T

    @T.prim_func
    def empty_grid(O: T.Tensor((threads,), "float32")):
        with T.Kernel(4, 0, threads=threads) as (bx, by):
            for i in T.Parallel(threads):
                O[i] = -1.0

    return empty_grid


def _unchanged_reference(spec: dict):
    from gpu_kit import tensors

    return lambda: (tensors.make(spec),)


def barrier_cases() -> list[Case]:
    """The barrier cases (ids ``barrier.*``)."""
    W = _tests("test_shared_barriers_uniform_while")
    A = _tests("test_atomic_on_chip_tiles")
    R = _tests("test_atomic_tile_scalar_read_once")
    cases: list[Case] = []

    def add(name, func, params, expected_fn, title, rtol=0.0, atol=0.0):
        case_id = f"barrier.{name}"
        specs = []
        for p in params:
            if p[1] == "scalar":  # (name, "scalar", dtype, value)
                specs.append({"name": p[0], "role": "scalar", "dtype": p[2], "value": p[3]})
            else:
                specs.append(_spec(case_id, p[0], p[1], **(p[2] if len(p) > 2 else {})))
        cases.append(Case(id=case_id, source="barrier", title=title, func=func, params=specs, reference=None,
                          rtol=rtol, atol=atol, expected_fn=expected_fn, archs=ARCHS))

    K = W.K
    out = {"init": "nan", "role": "out"}
    loops = (("while_counter", W._counter, W._counter_ref, (0, 1, 4), K + 1),
             ("break_out", W._break_out, W._break_out_ref, (0, 1, 3, 7), K + 1),
             ("local_if", W._local_if, W._local_if_ref, (8, 16, 17), 1))
    for name, make, fill, values, out_tiles in loops:
        for t in THREADS:
            in_tiles = 1 if name == "local_if" else K
            for n in values:
                add(f"{name}.t{t}.n{n}", (lambda make=make, t=t: make(t)),
                    [("A", (in_tiles * t,)), ("O", (out_tiles * t,), out), ("n", "scalar", "int32", n)],
                    _with_out(fill, out_tiles * t, t),
                    f"test_shared_barriers_uniform_while: {make.__name__.lstrip('_')}({t}), n={n}")
    for scope in ("shared", "fragment", "local"):
        c_init = {"dtype": "bfloat16", "init": "randint", "low": -30, "high": 10, "role": "out"}  # read, then written
        c_spec = _spec(f"barrier.bf16_atomics_{scope}", "C", (A.K,), **c_init)
        after = scope != "shared"
        make = (lambda s=scope: bf16_tile_atomics(s, A.N, A.K)) if after else (lambda: A._bf16_tiles("shared"))
        add(f"bf16_atomics_{scope}", make,
            [("V", (A.N,), {"dtype": "bfloat16", "init": "randint", "low": 0, "high": 5}), ("C", (A.K,), c_init),
             ("P", (A.N,), {"dtype": "bfloat16", "init": "nan", "role": "out"})],
            _bf16_reference(c_spec, A.N, A.K, after),
            f"{'bf16_tile_atomics' if after else 'test_atomic_on_chip_tiles: bf16_tiles'}({scope!r})")
    for dtype, weights in (("int32", (0, 100)), ("float32", (-2.25,))):
        for t in THREADS:
            for w in weights:
                tag = str(w).replace("-", "m").replace(".", "p")
                add(f"shared_atomics.{dtype}.t{t}.w{tag}", (lambda t=t, d=dtype: shared_histogram(t, d)),
                    [("I", (BLOCKS * t,), {"dtype": "int32", "init": "randint", "low": 0, "high": SLOTS}),
                     ("C", (SLOTS,), {"dtype": dtype, "init": "randint", "low": -4, "high": 5}),
                     ("P", (BLOCKS, SLOTS), {"dtype": dtype, "init": "nan", "role": "out"}),
                     ("w", "scalar", dtype, w)],
                    _histogram_reference(t), f"shared_atomics({t}, {dtype}), w={w}")
    for t in THREADS:
        a_init = {"init": "randint", "low": -4, "high": 5, "role": "out"}  # read, then written
        b_init = {"dtype": "int32", "init": "randint", "low": 0, "high": 1 << 20, "role": "out"}
        a_spec, b_spec = _spec(f"barrier.read_once.t{t}", "A", (8, 16), **a_init), _spec(
            f"barrier.read_once.t{t}", "B", (4, 8), **b_init)
        add(f"read_once.t{t}", (lambda t=t: R._self_alias(t)), [("A", (8, 16), a_init), ("B", (4, 8), b_init)],
            _read_once_reference(a_spec, b_spec), f"test_atomic_tile_scalar_read_once: self_alias({t})")
    o_init = {"init": "randint", "low": -4, "high": 5, "role": "out"}
    o_spec = _spec("barrier.empty_grid.t64", "O", (64,), **o_init)
    add("empty_grid.t64", lambda: empty_grid(64), [("O", (64,), o_init)], _unchanged_reference(o_spec),
        "empty_grid(64): T.Kernel(4, 0) launches nothing")
    return cases
