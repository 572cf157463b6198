"""``T.im2col``: one tile of the im2col matrix of a 2-D convolution (TileLang's operator; ``T.c2d_im2col``
is its old name)."""

from __future__ import annotations

from typing import Any

from tvm.tirx.script.builder import ir as _B
from tvm import tirx

from ._common import (
    OperandTypeError,
    all_of,
    as_tile,
    cast,
    check_options,
    fail,
    guarded,
    is_unit,
    loop_nest,
    per_thread,
    shape_text,
    static_int,
    zero,
)

_EVICTION_POLICIES = (None, "evict_normal", "evict_first", "evict_last")


def _positive(op: str, operands: Any, name: str, value: Any, minimum: int) -> int:
    number = static_int(value)
    if isinstance(value, bool) or number is None or number < minimum:
        fail(op, operands, f"{name} must be an int >= {minimum} known when the kernel is defined, got {value!r}",
             OperandTypeError)
    return number


def im2col(
    img: Any,
    col: Any,
    nhw_step: Any,
    c_step: Any,
    kernel: int,
    stride: int,
    dilation: int,
    pad: int,
    eviction_policy: Any = None,
    annotations: Any = None,
) -> None:
    """Fill ``col`` with one tile of the im2col matrix of a square-kernel 2-D convolution:
    ``T.im2col(data, data_shared, by, k_iter, K, S, D, P)``.

    ``img`` is the input image in NHWC layout, ``(N, H, W, C)``. Its im2col matrix has one row per
    output position, ``N * OH * OW`` rows in ``(n, oh, ow)`` order, and one column per filter tap,
    ``K * K * C`` columns in ``(kh, kw, c)`` order (the order of a ``(K, K, C, F)`` filter viewed
    as ``(K * K * C, F)``), where ``OH = (H + 2 * pad - dilation * (K - 1) - 1) // stride + 1``
    and ``OW`` likewise. Element ``(m, k)`` is ``img[n, oh * stride + kh * dilation - pad,
    ow * stride + kw * dilation - pad, c]``, and 0 where that falls in the padding.

    ``col`` (``(BM, BK)``, any scope, converted to its dtype) receives rows
    ``nhw_step * BM ...`` and columns ``c_step * BK ...``; the parts of the tile past the last
    row or column of the matrix get 0, so ``T.gemm`` of the tile with a filter tile sums the
    right products at the edges. ``eviction_policy`` (CUDA's cache hint) and ``annotations``
    are accepted and do not change the result.

    :raises LoweringError: ``img`` is not a 4-D buffer, ``col`` not a 2-D tile, or ``kernel``,
        ``stride``, ``dilation`` (ints >= 1) or ``pad`` (an int >= 0) are not numbers known when
        the kernel is defined (the message names the operands and the kernel line).
    """
    op = "T.im2col"
    operands = (img, col)
    source = as_tile(op, operands, img, "image", allow_element=False)
    if source.kind != "buffer" or len(source.shape) != 4:
        fail(op, operands, f"image must be a whole 4-D NHWC buffer (N, H, W, C), got {source.name} "
             f"{shape_text(source.extents)}")
    tile = as_tile(op, operands, col, "column tile", allow_element=False)
    if len(tile.extents) != 2:
        fail(op, operands, f"column tile must be 2-D (rows: output positions, columns: filter taps), got "
             f"{tile.name} {shape_text(tile.extents)}")
    k = _positive(op, operands, "kernel", kernel, 1)
    s = _positive(op, operands, "stride", stride, 1)
    d = _positive(op, operands, "dilation", dilation, 1)
    p = _positive(op, operands, "pad", pad, 0)
    if eviction_policy not in _EVICTION_POLICIES:
        fail(op, operands, f"eviction_policy must be one of {_EVICTION_POLICIES}, got {eviction_policy!r}")
    check_options(op, operands, annotations=annotations)

    n_img, h_img, w_img, c_img = source.shape
    out_h = (h_img + 2 * p - d * (k - 1) - 1) // s + 1
    out_w = (w_img + 2 * p - d * (k - 1) - 1) // s + 1
    rows, cols = tile.extents
    img_buffer = source.buffer

    nhw_step = getattr(nhw_step, "scalar", nhw_step)  # T.alloc_var's wrapper
    c_step = getattr(c_step, "scalar", c_step)

    def body(vs: list) -> None:
        r, c = vs
        squeezed = [v for v, e in zip(vs, tile.extents) if not is_unit(e)]
        m = nhw_step * rows + r
        tap = c_step * cols + c
        n = m // (out_h * out_w)
        oh = m // out_w % out_h
        ow = m % out_w
        channel = tap % c_img
        kw = tap // c_img % k
        kh = tap // (c_img * k)
        h = oh * s + kh * d - p
        w = ow * s + kw * d - p
        inside = all_of([m < n_img * out_h * out_w, tap < k * k * c_img, h >= 0, h < h_img, w >= 0, w < w_img])
        value = tirx.if_then_else(inside, cast(img_buffer[n, h, w, channel], tile.dtype), zero(tile.dtype))
        guarded(tile.bounds_condition(squeezed),
                lambda: _B.buffer_store(tile.buffer, value, tile.indices(squeezed)))

    loop_nest(tile.extents, parallel=not per_thread(tile), body=body)


def c2d_im2col(img: Any, col: Any, nhw_step: Any, c_step: Any, kernel: int, stride: int, dilation: int, pad: int,
               eviction_policy: Any = None, annotations: Any = None) -> None:
    """TileLang's former name of :func:`im2col` (same arguments, same result)."""
    im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad, eviction_policy, annotations)
