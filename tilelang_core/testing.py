"""``tilelang.testing``: helpers for tests of kernels, with TileLang's names.

Use it in your own kernel tests (pytest), as TileLang users do::

    import tilelang.testing

    @tilelang.testing.requires_cuda
    def test_my_kernel():
        ...
        tilelang.testing.torch_assert_close(out, ref, atol=1e-2, rtol=1e-2, max_mismatched_ratio=0.01)

    if __name__ == "__main__":
        tilelang.testing.main()

Every ``requires_*`` helper is a decorator for test functions (and classes) that adds a pytest
``skipif`` mark with a reason saying what is missing; ``requires_X.marks()`` returns the marks
(for ``pytest.param(..., marks=...)``) and ``requires_X.available()`` the answer itself. Checks
are made once per process, when first needed. See docs/testing.md.
"""

from __future__ import annotations

import importlib.util
import inspect
import random
import sys
from typing import Any, Callable, Optional

import pytest

__all__ = [
    "main",
    "set_random_seed",
    "torch_assert_close",
    "Requirement",
    "requires_cuda",
    "requires_cuda_compute_version",
    "requires_cuda_compute_version_ge",
    "requires_cuda_compute_version_gt",
    "requires_cuda_compute_version_lt",
    "requires_cuda_compute_version_le",
    "requires_cuda_compute_version_eq",
    "requires_cuda_or_cdna",
    "requires_rocm",
    "requires_cdna",
    "requires_metal",
    "requires_llvm",
    "requires_package",
]


class Requirement:
    """A named condition a test needs; calling it on a test function or class skips it when unmet.

    :param name: what is required, as the skip reason says it (``"CUDA"``).
    :param check: returns ``None`` when the requirement is met, else the reason it is not.
    """

    def __init__(self, name: str, check: Callable[[], Optional[str]]) -> None:
        self.name = name
        self._check = check
        self._answer: Optional[tuple[bool, str]] = None

    def _evaluate(self) -> tuple[bool, str]:
        if self._answer is None:
            try:
                problem = self._check()
            except Exception as exc:  # noqa: BLE001 - a failing probe means "not available", with why
                problem = f"checking failed: {type(exc).__name__}: {exc}"
            self._answer = (problem is None, f"requires {self.name}: {problem}" if problem else "")
        return self._answer

    def available(self) -> bool:
        """Whether the requirement is met in this process."""
        return self._evaluate()[0]

    def marks(self) -> list:
        """The pytest marks this requirement adds (a ``skipif`` with the reason)."""
        ok, reason = self._evaluate()
        return [pytest.mark.skipif(not ok, reason=reason or f"requires {self.name}")]

    def __call__(self, func: Any = None) -> Any:
        """Mark ``func`` (a test function or class) to be skipped when the requirement is unmet;
        without ``func`` (``@requires_cuda()``, as upstream allows), the decorator itself."""
        if func is None:
            return self
        if not callable(func):
            raise TypeError(f"requires_*: decorate a test function or class, got {func!r}")
        for mark in self.marks():
            func = mark(func)
        return func

    def __repr__(self) -> str:
        return f"<tilelang.testing requirement {self.name!r}>"


# -- probes --------------------------------------------------------------------------------------


def _torch() -> Any:
    import torch

    return torch


def _cuda_problem() -> Optional[str]:
    torch = _torch()
    if getattr(torch.version, "hip", None):
        return "torch is a ROCm build (HIP), not CUDA"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None


def _rocm_problem() -> Optional[str]:
    torch = _torch()
    if not getattr(torch.version, "hip", None):
        return "torch is not a ROCm build"
    if not torch.cuda.is_available():
        return "torch sees no ROCm device"
    return None


def _cdna_problem() -> Optional[str]:
    problem = _rocm_problem()
    if problem:
        return problem
    arch = str(getattr(_torch().cuda.get_device_properties(0), "gcnArchName", ""))
    if not arch.startswith("gfx9"):
        return f"the device is {arch or 'unknown'}, not a CDNA (gfx9xx) GPU"
    return None


def _metal_problem() -> Optional[str]:
    mps = getattr(getattr(_torch(), "backends", None), "mps", None)
    if mps is None or not mps.is_available():
        return "torch sees no Metal (MPS) device"
    return None


def _llvm_problem() -> Optional[str]:
    import tvm

    if tvm.get_global_func("target.build.llvm", allow_missing=True) is None:
        return "this TVM build has no LLVM code generator"
    return None


def cuda_compute_version() -> tuple[int, int]:
    """``(major, minor)`` compute capability of CUDA device 0, ``(0, 0)`` without one."""
    if _cuda_problem() is not None:
        return (0, 0)
    major, minor = _torch().cuda.get_device_capability(0)
    return (int(major), int(minor))


requires_cuda = Requirement("CUDA", _cuda_problem)
requires_rocm = Requirement("ROCm", _rocm_problem)
requires_cdna = Requirement("a CDNA GPU (ROCm, gfx9xx)", _cdna_problem)
requires_metal = Requirement("Metal", _metal_problem)
requires_llvm = Requirement("LLVM", _llvm_problem)
requires_cuda_or_cdna = Requirement(
    "CUDA or a CDNA GPU",
    lambda: None if _cuda_problem() is None or _cdna_problem() is None else "no CUDA device and no CDNA GPU",
)

_COMPARE = {
    "ge": (lambda have, want: have >= want, ">="),
    "gt": (lambda have, want: have > want, ">"),
    "le": (lambda have, want: have <= want, "<="),
    "lt": (lambda have, want: have < want, "<"),
    "eq": (lambda have, want: have == want, "=="),
}


def requires_cuda_compute_version(major_version: int, minor_version: int = 0, mode: str = "ge") -> Requirement:
    """Needs a CUDA device whose compute capability compares to ``major.minor`` as ``mode`` says.

    ``mode`` is ``"ge"`` (default), ``"gt"``, ``"le"``, ``"lt"`` or ``"eq"``. Without a CUDA
    device the test is skipped whatever the mode.
    """
    if mode not in _COMPARE:
        raise ValueError(f"requires_cuda_compute_version: mode must be one of {sorted(_COMPARE)}, got {mode!r}")
    want = (int(major_version), int(minor_version))
    compare, sign = _COMPARE[mode]

    def check() -> Optional[str]:
        problem = _cuda_problem()
        if problem:
            return problem
        have = cuda_compute_version()
        if not compare(have, want):
            return f"the device's compute capability is {have[0]}.{have[1]}"
        return None

    return Requirement(f"CUDA compute capability {sign} {want[0]}.{want[1]}", check)


def requires_cuda_compute_version_ge(major_version: int, minor_version: int = 0) -> Requirement:
    """Needs CUDA compute capability >= ``major.minor``."""
    return requires_cuda_compute_version(major_version, minor_version, "ge")


def requires_cuda_compute_version_gt(major_version: int, minor_version: int = 0) -> Requirement:
    """Needs CUDA compute capability > ``major.minor``."""
    return requires_cuda_compute_version(major_version, minor_version, "gt")


def requires_cuda_compute_version_lt(major_version: int, minor_version: int = 0) -> Requirement:
    """Needs a CUDA device with compute capability < ``major.minor``."""
    return requires_cuda_compute_version(major_version, minor_version, "lt")


def requires_cuda_compute_version_le(major_version: int, minor_version: int = 0) -> Requirement:
    """Needs a CUDA device with compute capability <= ``major.minor``."""
    return requires_cuda_compute_version(major_version, minor_version, "le")


def requires_cuda_compute_version_eq(major_version: int, minor_version: int = 0) -> Requirement:
    """Needs a CUDA device with compute capability exactly ``major.minor``."""
    return requires_cuda_compute_version(major_version, minor_version, "eq")


def requires_package(*names: str) -> Requirement:
    """Needs every named Python package to be importable (``requires_package("numpy", "scipy")``)."""
    if not names or not all(isinstance(n, str) and n for n in names):
        raise TypeError(f"requires_package: give package names as strings, got {names!r}")

    def check() -> Optional[str]:
        missing = [n for n in names if not _importable(n)]
        return f"not installed: {', '.join(missing)}" if missing else None

    return Requirement(f"package{'s' if len(names) > 1 else ''} {', '.join(names)}", check)


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


# -- running and comparing -----------------------------------------------------------------------


def main() -> None:
    """Run the calling test file with pytest (``if __name__ == "__main__": tilelang.testing.main()``).

    Command-line arguments are passed on to pytest; the process exits with pytest's status.
    """
    caller = sys._getframe(1)
    path = inspect.getsourcefile(caller) or caller.f_code.co_filename
    sys.exit(pytest.main([path, *sys.argv[1:]]))


def set_random_seed(seed: int = 42) -> None:
    """Seed Python's ``random``, NumPy (when installed) and torch (CPU and every CUDA device)."""
    random.seed(seed)
    if _importable("numpy"):
        import numpy

        numpy.random.seed(seed)
    torch = _torch()
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def torch_assert_close(
    actual: Any,
    expected: Any,
    rtol: float = 1e-2,
    atol: float = 1e-3,
    max_mismatched_ratio: float = 0.001,
    verbose: bool = False,
    equal_nan: bool = True,
    check_device: bool = True,
    check_dtype: bool = True,
    check_layout: bool = True,
    check_stride: bool = False,
    base_name: str = "LHS",
    ref_name: str = "RHS",
) -> bool:
    """Assert two tensors are close, allowing a small share of elements to differ; returns True
    (as upstream's does: ``assert torch_assert_close(a, b)`` works).

    An element matches when ``|actual - expected| <= atol + rtol * |expected|`` (NaN matches
    NaN when ``equal_nan``). The assertion fails when more than
    ``int(numel * max_mismatched_ratio)`` elements do not match, or when the shapes differ, or
    (each when its ``check_*`` flag is set) the devices, dtypes, layouts or strides differ.

    :raises AssertionError: with the mismatch count, the allowed count, the largest absolute
        difference and the first mismatching elements (index, both values).
    """
    torch = _torch()
    if not isinstance(actual, torch.Tensor) or not isinstance(expected, torch.Tensor):
        raise TypeError(
            f"torch_assert_close compares two torch tensors, got {type(actual).__name__} and {type(expected).__name__}"
        )
    if not 0 <= max_mismatched_ratio <= 1:
        raise ValueError(f"max_mismatched_ratio must be within [0, 1], got {max_mismatched_ratio!r}")
    names = f"{base_name} and {ref_name}"
    if actual.shape != expected.shape:
        raise AssertionError(f"{names} have different shapes: {tuple(actual.shape)} vs {tuple(expected.shape)}")
    if check_device and actual.device != expected.device:
        raise AssertionError(f"{names} are on different devices: {actual.device} vs {expected.device}")
    if check_dtype and actual.dtype != expected.dtype:
        raise AssertionError(f"{names} have different dtypes: {actual.dtype} vs {expected.dtype}")
    if check_layout and actual.layout != expected.layout:
        raise AssertionError(f"{names} have different layouts: {actual.layout} vs {expected.layout}")
    if check_stride and actual.stride() != expected.stride():
        raise AssertionError(f"{names} have different strides: {actual.stride()} vs {expected.stride()}")

    a = _comparable(torch, actual)
    b = _comparable(torch, expected).to(a.device)
    a, b, apart = _in_common_dtype(torch, a, b)
    total = a.numel()
    if total == 0:
        return True
    close = torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    if apart is not None:
        close &= ~apart
    mismatched = int((~close).sum().item())
    allowed = int(total * max_mismatched_ratio)
    if verbose:
        print(f"{names}: {mismatched} of {total} elements differ (allowed: {allowed})")
    if mismatched <= allowed:
        return True
    where = (~close).nonzero()
    shown = []
    for index in where[:5].tolist():
        idx = tuple(index)
        shown.append(f"{list(idx)}: {a[idx].item()!r} vs {b[idx].item()!r}")
    if a.dtype.is_floating_point or a.dtype.is_complex:
        diff = (a - b).abs()
        diff = diff[~torch.isnan(diff)] if equal_nan else diff
        worst = f"; largest absolute difference {diff.max().item() if diff.numel() else float('nan')!r}"
    else:
        worst = ""
    raise AssertionError(
        f"{names} are not close: {mismatched} of {total} elements ({100.0 * mismatched / total:.3g}%) differ "
        f"beyond atol={atol}, rtol={rtol}, more than the {allowed} allowed by "
        f"max_mismatched_ratio={max_mismatched_ratio}{worst}; first mismatches (index: {base_name} vs {ref_name}): "
        + ", ".join(shown)
    )


def _in_common_dtype(torch: Any, a: Any, b: Any) -> tuple:
    """``(a, b, apart)``: two tensors in the dtype they are compared in, and a mask of elements
    that differ whatever the tolerance (None when there are none). Different dtypes compare in the
    dtype torch promotes them to; torch promotes uint16, uint32 and uint64 with nothing (a
    RuntimeError), so those compare in int64 against another integer dtype (exactly; a uint64
    value past int64's range equals no value of a signed dtype, which wrapped into int64 would),
    in float64 against a float, in complex128 against a complex."""
    if a.dtype == b.dtype:
        return a, b, None
    unsigned = (torch.uint16, torch.uint32, torch.uint64)
    if a.dtype not in unsigned and b.dtype not in unsigned:
        common = torch.promote_types(a.dtype, b.dtype)
        return a.to(common), b.to(common), None
    if a.dtype.is_complex or b.dtype.is_complex:
        return a.to(torch.complex128), b.to(torch.complex128), None
    if a.dtype.is_floating_point or b.dtype.is_floating_point:
        return a.to(torch.float64), b.to(torch.float64), None
    apart = None
    for t in (a, b):
        if t.dtype == torch.uint64:
            past = t.view(torch.int64) < 0
            apart = past if apart is None else apart | past
    return a.to(torch.int64), b.to(torch.int64), apart


def _comparable(torch: Any, t: Any) -> Any:
    """``t`` as a dense tensor of a dtype ``torch.isclose`` handles (low-precision floats widened)."""
    t = t.detach()
    if t.layout != torch.strided:
        t = t.to_dense()
    if t.dtype.is_floating_point and t.dtype not in (torch.float32, torch.float64):
        return t.to(torch.float32)  # float16/bfloat16/float8: compare their exact values in float32
    if t.dtype == torch.bool:
        return t.to(torch.int8)
    return t
