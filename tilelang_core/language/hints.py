"""Layout and scheduling hints of TileLang, accepted without effect: ``T.annotate_layout``, ``T.use_swizzle``.

In TileLang these steer how its compiler lays tiles out in memory and orders blocks; they do not
change what a kernel computes. This pipeline chooses layouts and block order itself, so the hints
are checked for their form and otherwise ignored (docs/compatibility.md). The layout objects they
take come from :mod:`tilelang.layout` (``T.Layout``, ``T.Fragment``: :mod:`.layout_hints`).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

__all__ = ["annotate_layout", "annotate_pass_configs", "declared_pass_configs", "use_swizzle"]


def annotate_layout(layout_map: Mapping[Any, Any], allow_reannotation: bool = False, allow_buffer_region: bool = False) -> None:
    """``T.annotate_layout({buffer: layout, ...})``: a layout hint per buffer; no effect here.

    :raises TypeError: ``layout_map`` is not a dict whose keys are buffers.
    """
    from tvm import tirx

    if not isinstance(layout_map, Mapping):
        raise TypeError(f"T.annotate_layout expects a dict {{buffer: layout}}, got {type(layout_map).__name__}")
    for key, layout in layout_map.items():
        if not _is_buffer(key):
            raise TypeError(f"T.annotate_layout: keys must be buffers (T.alloc_shared, T.alloc_fragment, ...), got {key!r}")
        _check_injective(key, layout)
    return None


def _is_buffer(value: Any) -> bool:
    from tvm.tirx.buffer import is_buffer_var

    try:
        return bool(is_buffer_var(value))
    except Exception:  # noqa: BLE001 - anything that is not an IR variable
        return False


#: Largest shared buffer (elements) whose layout map :func:`_check_injective` enumerates.
INJECTIVITY_CHECK_LIMIT = 1 << 16


def _as_ints(value: Any) -> Optional[tuple[int, ...]]:
    """A layout map's result as a tuple of Python ints, or None when it is not constant."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    out = []
    for item in items:
        if isinstance(item, bool):
            return None
        if isinstance(item, int):
            out.append(item)
            continue
        number = getattr(item, "value", None)  # an IntImm after constant folding
        if isinstance(number, int):
            out.append(number)
            continue
        return None
    return tuple(out)


def _check_injective(buffer: Any, layout: Any) -> None:
    """A ``Layout(shape, fn)`` hint on a shared buffer must send distinct elements to distinct places.

    The hint has no effect here, but a many-to-one map is a bug in the kernel (in TileLang two
    elements would share storage), so it is refused. Checked when the buffer's shape is
    constant and small enough to enumerate and ``fn`` gives constant results for constant indices.

    :raises LoweringError: two indices map to the same physical coordinates.
    """
    import itertools

    kind = getattr(layout, "kind", None)
    if kind != "Layout" or len(getattr(layout, "args", ())) < 2 or not callable(layout.args[1]):
        return
    scope = str(buffer.ty.storage_scope)
    if not scope.startswith("shared"):
        return
    shape = [getattr(d, "value", d) for d in buffer.shape]
    if not all(isinstance(d, int) for d in shape):
        return
    total = 1
    for d in shape:
        total *= d
    if total > INJECTIVITY_CHECK_LIMIT:
        return
    fn = layout.args[1]
    seen: dict[tuple[int, ...], tuple[int, ...]] = {}
    for index in itertools.product(*(range(d) for d in shape)):
        try:
            place = _as_ints(fn(*index))
        except Exception:  # noqa: BLE001 - a map written for symbolic indices only: not checked
            return
        if place is None:
            return
        other = seen.setdefault(place, index)
        if other != index:
            from ..errors import LoweringError

            raise LoweringError(
                f"T.annotate_layout: the layout of shared buffer `{buffer.name}` must be injective (one physical "
                f"place per element), but indices {other} and {index} both map to physical coordinates {place}; "
                "fix the layout function, or drop the annotation (layouts have no effect in TileLang-Core)"
            )


def use_swizzle(panel_size: int = 8, order: str = "row", enable: bool = True, device_func: Any = None) -> None:
    """``T.use_swizzle(panel_size, order="row")``: a block-rasterization hint; no effect here.

    :raises ValueError: ``order`` is not ``"row"`` or ``"col"``, or ``panel_size`` is not positive.
    """
    if order not in ("row", "col"):
        raise ValueError(f"T.use_swizzle: order must be 'row' or 'col', got {order!r}")
    if not isinstance(panel_size, int) or panel_size < 1:
        raise ValueError(f"T.use_swizzle: panel_size must be a positive int, got {panel_size!r}")
    return None


def _register_count(op: str, reg_count: Any) -> None:
    if isinstance(reg_count, bool) or not isinstance(reg_count, int) or not 24 <= reg_count <= 256 or reg_count % 8:
        from .tileops._common import fail

        fail(op, (reg_count,), f"reg_count must be an int from 24 to 256 in steps of 8 (PTX setmaxnreg), got {reg_count!r}")


def no_set_max_nreg() -> None:
    """``T.no_set_max_nreg()``: TileLang's request not to emit ``setmaxnreg`` in a warp-specialized kernel.

    This pipeline never emits ``setmaxnreg`` (it has no warp specialization), so the request is
    already met: accepted on every target, no effect.
    """
    return None


def disable_warp_group_reg_alloc() -> None:
    """``T.disable_warp_group_reg_alloc()``: TileLang's other name of :func:`no_set_max_nreg`; no effect."""
    return None


def annotate_producer_reg_dealloc(reg_count: int = 24) -> None:
    """``T.annotate_producer_reg_dealloc(24)``: the registers TileLang's warp specialization leaves the
    producer warps; no effect here (no warp specialization, no ``setmaxnreg``).

    :raises LoweringError: (a ``ValueError``) ``reg_count`` is not a ``setmaxnreg`` count (24..256, a
        multiple of 8); the message names the kernel line.
    """
    _register_count("T.annotate_producer_reg_dealloc", reg_count)


def annotate_consumer_reg_alloc(reg_count: int = 240) -> None:
    """``T.annotate_consumer_reg_alloc(240)``: the registers TileLang's warp specialization gives the
    consumer warps; no effect here (see :func:`annotate_producer_reg_dealloc`).

    :raises LoweringError: (a ``ValueError``) ``reg_count`` is not a ``setmaxnreg`` count (24..256, a
        multiple of 8); the message names the kernel line.
    """
    _register_count("T.annotate_consumer_reg_alloc", reg_count)


#: PrimFunc attribute holding the pass configs a kernel declares (``T.annotate_pass_configs``).
PASS_CONFIGS_ATTR = "tilelang_pass_configs"


def annotate_pass_configs(configs: Mapping[Any, Any]) -> None:
    """``T.annotate_pass_configs({key: value})`` in a kernel body: pass configs that travel with the kernel.

    They are validated now (as ``tilelang.compile(..., pass_configs=...)`` validates them) and
    stored in the kernel's attribute ``tilelang_pass_configs``; lowering uses them under the
    ``pass_configs`` given to ``tilelang.compile``/``tilelang.lower``, which win on conflicts.

    :raises PassConfigError: an unknown key or a bad value.
    """
    from tvm.tirx.script.builder import ir as _B

    from ..lowering import validate_pass_configs

    checked = validate_pass_configs({str(k.value if hasattr(k, "value") else k): v for k, v in dict(configs).items()})
    _B.func_attr({PASS_CONFIGS_ATTR: checked})


def declared_pass_configs(func: Any) -> dict[str, Any]:
    """The pass configs a kernel declared with :func:`annotate_pass_configs` (Python values), or ``{}``."""
    attrs = getattr(func, "attrs", None)
    if attrs is None or PASS_CONFIGS_ATTR not in attrs:
        return {}
    out: dict[str, Any] = {}
    for key, value in attrs[PASS_CONFIGS_ATTR].items():
        if hasattr(value, "value") and hasattr(value, "dtype"):
            value = bool(value.value) if str(value.dtype) == "bool" else value.value
        elif hasattr(value, "value"):
            value = value.value
        out[str(key)] = value
    return out
