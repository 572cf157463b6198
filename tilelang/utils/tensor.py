"""``tilelang.utils.tensor``: ``TensorSupplyType``, ``get_tensor_supply`` and ``torch_assert_close``.

``TensorSupplyType`` is the profiler's (:mod:`tilelang_core.profiler.supply`);
``get_tensor_supply(supply_type)`` returns a function that makes an input tensor for a kernel
parameter with a static shape (:func:`tilelang_core.profiler.supply.tensor_supply`);
``torch_assert_close`` is :func:`tilelang.testing.torch_assert_close`.
"""

from tilelang_core.profiler.supply import TensorSupplyType  # noqa: F401
from tilelang_core.profiler.supply import tensor_supply as get_tensor_supply  # noqa: F401
from tilelang_core.testing import torch_assert_close  # noqa: F401

__all__ = ["TensorSupplyType", "get_tensor_supply", "torch_assert_close"]
