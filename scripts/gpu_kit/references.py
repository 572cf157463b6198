"""torch references of the kit's kernels, by name: expected outputs here, torch timings there.

A case names its reference as ``{"name": ..., "kwargs": {...}}`` (JSON). The build half calls it
on CPU tensors to compute the expected outputs; the run half calls it on CUDA tensors to time
torch's own ops against the kernel. Every function takes the case's ``in`` tensors in parameter
order (plus the keyword arguments) and returns the outputs (``out`` and ``ret`` parameters) in
parameter order, as a tuple.

Needs only torch.
"""

from __future__ import annotations

from typing import Any, Callable


def _add(a, b):
    return (a + b,)


def _sum_inputs(*xs):
    total = xs[0].clone()
    for x in xs[1:]:
        total = total + x
    return (total,)


def _matmul(a, b, trans_a=False, trans_b=False, out_dtype=None):
    import torch

    a = a.T if trans_a else a
    b = b.T if trans_b else b
    result = a.float() @ b.float()
    return (result.to(getattr(torch, out_dtype)) if out_dtype else result,)


def _row_scale(x, s):
    return (x * s[:, None],)


def _copy_edges(a, padded):
    import torch

    p = torch.zeros(tuple(padded), dtype=a.dtype, device=a.device)
    p[: a.shape[0], : a.shape[1]] = a
    return (p, 2 * a)


def _cast(a, dtype):
    import torch

    return (a.to(getattr(torch, dtype)),)


def _corners(x):
    return (x.clone(), x[:, :, 3:4].clone())


def _fill(shape, value, cleared_rows, device="cpu"):
    import torch

    out = torch.full(tuple(shape), float(value), device=device)
    out[:cleared_rows] = 0
    return (out,)


def _reduce(a, op, accumulate):
    """``op`` over dim 0 and dim 1, and dim 1 reduced again into the dim-1 result (``clear=False``)."""
    base = {"sum": lambda d: a.sum(d), "max": lambda d: a.amax(d), "min": lambda d: a.amin(d),
            "abssum": lambda d: a.abs().sum(d), "absmax": lambda d: a.abs().amax(d)}[op]
    r1 = base(1)
    again = {"sum": r1 + r1, "abssum": r1 + r1}.get(op, r1) if accumulate else r1
    return (base(0), r1, again)


def _atomic_sum(a, chunk):
    import torch

    padded = torch.zeros(-(-a.numel() // chunk) * chunk, dtype=a.dtype, device=a.device)
    padded[: a.numel()] = a
    return (a.sum().reshape(1), padded.reshape(-1, chunk).sum(0))


def _count(total, dtype, device="cpu"):
    import torch

    return (torch.full((1,), int(total), dtype=getattr(torch, dtype), device=device),)


def _softmax(a):
    import torch

    return (torch.softmax(a, 1),)


def _rowmax(a):
    return (a.amax(1),)


#: name -> reference function (see the module docstring).
REFERENCES: dict[str, Callable[..., tuple]] = {
    "add": _add,
    "sum_inputs": _sum_inputs,
    "matmul": _matmul,
    "row_scale": _row_scale,
    "copy_edges": _copy_edges,
    "cast": _cast,
    "corners": _corners,
    "fill": _fill,
    "reduce": _reduce,
    "atomic_sum": _atomic_sum,
    "count": _count,
    "softmax": _softmax,
    "rowmax": _rowmax,
}

#: References that make their outputs from keyword arguments alone (no input tensors): they
#: take ``device=`` so the run half can time them on the GPU.
NEEDS_DEVICE = ("fill", "count")


def call(reference: dict[str, Any], inputs: list[Any], device: Any = "cpu") -> tuple:
    """Run the named reference on ``inputs`` (tensors on one device) with its keyword arguments."""
    name = reference["name"]
    try:
        fn = REFERENCES[name]
    except KeyError:
        raise ValueError(f"unknown kit reference {name!r}; known: {', '.join(sorted(REFERENCES))}") from None
    kwargs = dict(reference.get("kwargs") or {})
    if name in NEEDS_DEVICE:
        kwargs["device"] = device
    result = fn(*inputs, **kwargs)
    return tuple(result)
