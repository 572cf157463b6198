"""Comparing a kernel's outputs with a reference's, tolerating a share of mismatched elements."""

from __future__ import annotations

import math
from typing import Any, Sequence


def as_output_list(value: Any) -> list[Any]:
    """A kernel's or a reference's return value as a list of outputs (None -> [])."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def assert_tensors_close(
    actual: Any,
    expected: Any,
    *,
    rtol: float = 1e-2,
    atol: float = 1e-2,
    max_mismatched_ratio: float = 0.01,
    name: str = "output",
    actual_name: str = "kernel",
    expected_name: str = "reference",
) -> None:
    """Raise ``AssertionError`` unless at most ``max_mismatched_ratio`` of the elements differ.

    An element matches when ``|actual - expected| <= atol + rtol * |expected|`` (NaNs match
    NaNs). Shapes must be equal; dtypes and devices may differ (both sides are compared in a
    common dtype on the CPU). float8 tensors are compared as float32. A tensor on one side and
    something else on the other is an ``AssertionError`` saying so.

    :raises ValueError: ``rtol``/``atol`` not numbers >= 0, or ``max_mismatched_ratio`` outside [0, 1].
    """
    import torch

    check_tolerances(rtol, atol, max_mismatched_ratio)
    if isinstance(actual, torch.Tensor) != isinstance(expected, torch.Tensor):
        def what(value: Any) -> str:
            if isinstance(value, torch.Tensor):
                return f"a tensor of shape {tuple(value.shape)}"
            return f"{value!r} ({type(value).__name__}, not a tensor)"

        raise AssertionError(f"{name}: {actual_name} gave {what(actual)}, {expected_name} gave {what(expected)}; "
                             f"the reference must return what the kernel returns")
    if not isinstance(actual, torch.Tensor):
        if actual != expected:
            raise AssertionError(f"{name}: {actual_name} gave {actual!r}, {expected_name} gave {expected!r}")
        return
    if tuple(actual.shape) != tuple(expected.shape):
        raise AssertionError(
            f"{name}: {actual_name} has shape {tuple(actual.shape)}, {expected_name} has shape {tuple(expected.shape)}"
        )
    if _integral(actual) and _integral(expected):
        # exactly: as float64, int64 values past 2**53 that differ by 1 would compare equal
        a, e = _cpu(actual), _cpu(expected)
        close, gap = _integer_closeness(a, e, rtol, atol)
    else:
        a, e = _comparable(actual), _comparable(expected)
        if a.dtype != e.dtype:
            common = torch.promote_types(a.dtype, e.dtype)
            a, e = a.to(common), e.to(common)
        close = torch.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
        gap = (a - e).abs().to(torch.float64)
    total = close.numel()
    bad = int((~close).sum().item()) if total else 0
    if total and bad / total > max_mismatched_ratio:
        diff = torch.where(torch.isnan(gap), torch.full_like(gap, float("inf")), gap)  # NaN against a number
        diff = torch.where(close, torch.full_like(diff, -1.0), diff)  # report an element that differs
        worst = int(torch.argmax(diff.reshape(-1)).item())
        where = tuple(int(i) for i in _unravel(worst, tuple(actual.shape)))
        lhs, rhs = a.reshape(-1)[worst].item(), e.reshape(-1)[worst].item()
        exact = isinstance(lhs, int) and isinstance(rhs, int)  # integers: the exact difference, never rounded
        largest = abs(lhs - rhs) if exact else f"{float(diff.reshape(-1)[worst]):.6g}"
        raise AssertionError(
            f"{name}: {bad} of {total} elements ({bad / total:.2%}) differ between {actual_name} and {expected_name} "
            f"beyond atol={atol}, rtol={rtol} (allowed: {max_mismatched_ratio:.2%}); largest difference "
            f"{largest} at {where}: {actual_name} {_show(a.reshape(-1)[worst])}, "
            f"{expected_name} {_show(e.reshape(-1)[worst])}"
        )


def _integer_closeness(a: Any, e: Any, rtol: float, atol: float) -> tuple[Any, Any]:
    """``(close, gap)`` of two integer (or bool) tensors, exact at every size.

    Integers that int64 holds are compared as int64. A ``uint64`` side was compared as float64,
    so values past 2**53 that differ by 1 compared equal; now each side is moved down by 2**63
    into int64 (the bits of a ``uint64`` with the top bit flipped), where differences are
    unchanged, and only an element whose other side is negative (which no ``uint64`` equals)
    takes its gap from float64.
    """
    import torch

    uint64 = getattr(torch, "uint64", None)
    if uint64 is None or (a.dtype != uint64 and e.dtype != uint64):
        a, e = a.to(torch.int64), e.to(torch.int64)
        gap = integer_gap(a, e)
        return (a == e) | (gap <= atol + rtol * e.to(torch.float64).abs()), gap
    lowest = torch.tensor(-(2**63), dtype=torch.int64)

    def moved_down(t: Any) -> tuple[Any, Any]:  # (t - 2**63 where t >= 0, whether t < 0)
        if t.dtype == uint64:
            return t.view(torch.int64) ^ lowest, torch.zeros(t.shape, dtype=torch.bool)
        t = t.to(torch.int64)
        return t ^ lowest, t < 0

    (ma, negative_a), (me, negative_e) = moved_down(a), moved_down(e)
    one_negative = negative_a | negative_e
    float_gap = (a.to(torch.float64) - e.to(torch.float64)).abs()
    gap = torch.where(one_negative, float_gap, integer_gap(ma, me))
    close = ((ma == me) & ~one_negative) | (gap <= atol + rtol * e.to(torch.float64).abs())
    return close, gap


def integer_gap(a: Any, e: Any) -> Any:
    """``|a - e|`` of two int64 tensors as float64, without wrapping around.

    Before, the gap was ``(a - e).abs()`` in int64, which wraps for differences of 2**63 or more:
    ``2**62`` against ``-2**62`` gave a gap of -2**63, which passed every tolerance, and large
    differences were reported with wrong sizes. Now the larger minus the smaller is taken (at
    most 2**64 - 1, so only its top bit can wrap) and read as unsigned.
    """
    import torch

    larger_minus_smaller = torch.where(a >= e, a - e, e - a)  # wraps to a negative int64 past 2**63 - 1
    gap = larger_minus_smaller.to(torch.float64)
    return torch.where(larger_minus_smaller < 0, gap + 2.0**64, gap)


def check_tolerances(rtol: Any, atol: Any, max_mismatched_ratio: Any, error: type = ValueError) -> None:
    """Raise ``error`` unless ``rtol`` and ``atol`` are numbers >= 0 and ``max_mismatched_ratio``
    one in [0, 1] (what :func:`assert_tensors_close` takes; the autotuner checks them up front)."""
    for name, value, high in (("rtol", rtol, math.inf), ("atol", atol, math.inf), ("max_mismatched_ratio",
                                                                                 max_mismatched_ratio, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= high:
            share = " (the share of elements allowed to differ)" if high == 1 else ""
            raise error(f"{name} must be a number in [0, {high:g}]{share}, got {value!r}")


def _show(value: Any) -> str:
    number = value.item()
    return str(number) if isinstance(number, int) else f"{number:.6g}"


def _cpu(t: Any) -> Any:
    t = t.detach()
    return t.cpu() if t.device.type != "cpu" else t


def _integral(t: Any) -> bool:
    """An integer or bool tensor (compared exactly, :func:`_integer_closeness`)."""
    return not (t.dtype.is_floating_point or t.dtype.is_complex) and "float" not in str(t.dtype)


def _comparable(t: Any) -> Any:
    import torch

    t = _cpu(t)
    if t.dtype == torch.bool or not (t.dtype.is_floating_point or t.dtype.is_complex) or "float8" in str(t.dtype):
        return t.to(torch.float64)
    if t.dtype in (torch.float16, torch.bfloat16):
        return t.to(torch.float32)
    return t


def _unravel(flat: int, shape: Sequence[int]) -> list[int]:
    out = []
    for extent in reversed(shape):
        out.append(flat % extent if extent else 0)
        flat = flat // extent if extent else 0
    return list(reversed(out))


__all__ = ["as_output_list", "assert_tensors_close", "check_tolerances", "integer_gap"]
