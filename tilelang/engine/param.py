"""``tilelang.engine.param``: ``KernelParam``, the type of a compiled kernel's ``params`` items.

Upstream TileLang's ``KernelParam`` describes one parameter of a compiled kernel; code written
for it imports it for type annotations (``def check(params: list[KernelParam])``). Here a
kernel's ``params`` are :class:`~tilelang_core.artifact.TensorParam` (``name``, ``dtype``,
``shape``, ...) and :class:`~tilelang_core.artifact.ScalarParam` items, and ``KernelParam`` is
their union: it annotates, and ``isinstance(p, KernelParam)`` is true of each. Upstream's methods
(``is_scalar()``, ``torch_dtype()``, ...) are not provided (docs/compatibility.md).
"""

from tilelang_core.artifact import ScalarParam, TensorParam

KernelParam = TensorParam | ScalarParam

__all__ = ["KernelParam"]
