"""``TensorSupplyType`` and the input tensors the profiler makes for a kernel's parameters.

The kinds of input have upstream TileLang's meanings:

=========  ==============================================================================
Integer    random integers: 0..2 for unsigned, bool 0/1, float8 from int8 -128..127,
           -2..2 for everything else (floats get integer values, so sums are exact)
Uniform    uniform in [-1, 1) (drawn in float32, then cast); ones for int8; other integer
           dtypes: random integers -4..4 (unsigned: 0..8)
Normal     normal with mean -1 and standard deviation 1 (upstream's parameters); ones for int8;
           other integer dtypes: rounded to the nearest integer (unsigned: its absolute value)
Randn      standard normal, cast to the dtype; integer dtypes: rounded to the nearest integer
           (unsigned: its absolute value)
(bool)     Uniform, Normal and Randn give random False/True, half each, as ``Integer`` does
           (a float draw cast to bool was True almost everywhere)
Zero       zeros
One        ones
Auto       float16/bfloat16/float32: uniform in [-1, 1); other dtypes as ``Integer``
=========  ==============================================================================

Importing this module imports no torch; :func:`make_tensor` does.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Sequence

from ..errors import TileLangError


class TensorSupplyType(Enum):
    """What values the profiler fills generated input tensors with (see the module docstring)."""

    Integer = 1
    Uniform = 2
    Normal = 3
    Randn = 4
    Zero = 5
    One = 6
    Auto = 7


class TensorSupplyError(TileLangError, ValueError):
    """The profiler cannot make an input: unknown supply type or dtype, or a size it lacks."""


def as_supply_type(value: Any) -> TensorSupplyType:
    """``value`` as a :class:`TensorSupplyType` (the enum, its name, or its number)."""
    if isinstance(value, TensorSupplyType):
        return value
    if isinstance(value, str) and value in TensorSupplyType.__members__:
        return TensorSupplyType[value]
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return TensorSupplyType(value)
        except ValueError:
            pass
    # an enum of the same shape from elsewhere (e.g. a copy of upstream's), matched by name
    name = getattr(value, "name", None)
    if isinstance(name, str) and name in TensorSupplyType.__members__:
        return TensorSupplyType[name]
    raise TensorSupplyError(
        f"tensor_supply_type must be a TensorSupplyType ({', '.join(TensorSupplyType.__members__)}), got {value!r}"
    )


_ALIASES = {"bool": "bool", "float8_e4m3": "float8_e4m3fn", "float8_e5m2": "float8_e5m2"}


def torch_dtype(dtype: str) -> Any:
    """The torch dtype of a TVM dtype string (``"float16"`` -> ``torch.float16``)."""
    import torch

    name = _ALIASES.get(dtype, dtype)
    value = getattr(torch, name, None)
    if not isinstance(value, torch.dtype):
        raise TensorSupplyError(f"dtype {dtype!r} has no torch equivalent; pass input_tensors= or supply_prog=")
    return value


def _is_float8(dtype: Any) -> bool:
    return "float8" in str(dtype)


def _is_float4(dtype: Any) -> bool:
    return "float4" in str(dtype)


def _integers(shape: Sequence[int], dtype: Any, device: Any) -> Any:
    import torch

    if dtype == torch.bool:
        return torch.randint(0, 2, tuple(shape), device=device).to(torch.bool)
    if _is_float8(dtype):
        return torch.randint(-128, 128, tuple(shape), dtype=torch.int8, device=device).to(dtype)
    if _is_float4(dtype):
        return torch.randint(0, 16, tuple(shape), dtype=torch.uint8, device=device).to(dtype)
    if not dtype.is_floating_point and not dtype.is_complex and not dtype.is_signed:
        return torch.randint(0, 3, tuple(shape), dtype=dtype, device=device)
    return torch.randint(-2, 3, tuple(shape), dtype=dtype, device=device)


def _is_integer(dtype: Any) -> bool:
    import torch

    return dtype != torch.bool and not dtype.is_floating_point and not dtype.is_complex and not _is_float4(dtype)


def _small_integers(shape: Sequence[int], dtype: Any, kind: TensorSupplyType, device: Any) -> Any:
    """Random small integers for ``Uniform``, ``Normal`` and ``Randn`` on an integer dtype.

    Before, these drew floats and cast them: ``Uniform``'s [-1, 1) truncated to all zeros, and
    ``Normal``/``Randn`` wrapped around to 252..255 for ``uint8``. Now ``Uniform`` draws integers
    uniformly in -4..4 (unsigned: 0..8); ``Normal`` and ``Randn`` round their draws to the
    nearest integer (unsigned: its absolute value), clamped to the dtype's range.
    """
    import torch

    unsigned = not dtype.is_signed
    if kind is TensorSupplyType.Uniform:
        low, high = (0, 9) if unsigned else (-4, 5)
        return torch.randint(low, high, tuple(shape), dtype=dtype, device=device)
    draws = torch.empty(tuple(shape), dtype=torch.float32, device=device)
    draws = draws.normal_(-1.0, 1.0) if kind is TensorSupplyType.Normal else draws.normal_(0.0, 1.0)
    draws = draws.round()
    if unsigned:
        draws = draws.abs()
    info = torch.iinfo(dtype)
    return draws.clamp(max(info.min, -(2**24)), min(info.max, 2**24)).to(dtype)


def make_tensor(shape: Sequence[int], dtype: str, supply_type: TensorSupplyType, device: Any) -> Any:
    """A new tensor of ``shape`` and TVM ``dtype`` on ``device``, filled as ``supply_type`` says."""
    import torch

    tdtype = torch_dtype(dtype)
    shape = tuple(int(d) for d in shape)
    kind = as_supply_type(supply_type)
    if kind is TensorSupplyType.Auto:
        if tdtype in (torch.float16, torch.float32, torch.bfloat16):
            return torch.empty(shape, dtype=tdtype, device=device).uniform_(-1.0, 1.0)
        return _integers(shape, tdtype, device)
    if kind is TensorSupplyType.Integer:
        return _integers(shape, tdtype, device)
    if kind is TensorSupplyType.Zero:
        return torch.zeros(shape, dtype=tdtype, device=device)
    if kind is TensorSupplyType.One:
        return torch.ones(shape, dtype=tdtype, device=device)
    if tdtype == torch.bool:  # Uniform, Normal, Randn: a float cast to bool is True but for exact zeros
        return _integers(shape, tdtype, device)
    if tdtype == torch.int8 and kind in (TensorSupplyType.Uniform, TensorSupplyType.Normal):
        return torch.ones(shape, dtype=tdtype, device=device)
    if _is_integer(tdtype):
        return _small_integers(shape, tdtype, kind, device)
    if kind is TensorSupplyType.Uniform:
        return torch.empty(shape, dtype=torch.float32, device=device).uniform_(-1.0, 1.0).to(tdtype)
    if kind is TensorSupplyType.Normal:
        return torch.empty(shape, dtype=torch.float32, device=device).normal_(-1.0, 1.0).to(tdtype)
    return torch.randn(shape, device=device).to(tdtype)  # Randn


def tensor_supply(supply_type: Any = TensorSupplyType.Integer, device: Any = None) -> Any:
    """A function that makes an input tensor for a kernel parameter, filled as ``supply_type`` says
    (TileLang's ``tilelang.utils.tensor.get_tensor_supply``).

    The function takes a parameter with a static ``shape`` and a ``dtype`` (this package's
    ``TensorParam``, e.g. ``kernel.params[0]``, or any object with those attributes) and returns a
    new tensor on ``device`` (default: the parameter's own device, else CUDA when torch has one,
    else the CPU).

    :raises TensorSupplyError: an unknown supply type (now), or a parameter whose shape is not a
        list of ints (dynamic dimensions have no size to draw: pass the tensor yourself), or whose
        dtype has no torch equivalent (when the function is called).
    """
    kind = as_supply_type(supply_type)

    def get_tensor(param: Any) -> Any:
        import torch

        shape = list(getattr(param, "shape", None) or [])
        if not shape or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
            raise TensorSupplyError(
                f"parameter {getattr(param, 'name', param)!r}: a supplied tensor needs a static shape (ints), got "
                f"{getattr(param, 'shape', None)!r}; dynamic dimensions have no size to draw, so make that tensor yourself"
            )
        where = device or getattr(param, "device", None) or ("cuda" if torch.cuda.is_available() else "cpu")
        return make_tensor(shape, str(param.dtype), kind, where)

    return get_tensor


__all__ = ["TensorSupplyError", "TensorSupplyType", "as_supply_type", "make_tensor", "tensor_supply", "torch_dtype"]
