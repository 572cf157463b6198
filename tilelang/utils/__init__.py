"""``tilelang.utils``: the helpers of upstream TileLang's ``tilelang.utils`` that kernel code and tests import.

``TensorSupplyType`` and ``torch_assert_close`` (also in :mod:`tilelang.utils.tensor`, with
``get_tensor_supply``). Upstream's other helpers there work on its compiler's internals and are
not provided (docs/compatibility.md).
"""

from .tensor import TensorSupplyType, get_tensor_supply, torch_assert_close  # noqa: F401

__all__ = ["TensorSupplyType", "get_tensor_supply", "torch_assert_close"]
