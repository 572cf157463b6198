"""``T.Pipelined``: a loop whose iterations may be software-pipelined."""

from __future__ import annotations

from numbers import Integral
from typing import Any, Optional, Sequence

from tvm.tirx.script.builder import ir as _B

from ...errors import LoweringError
from ._common import PIPELINED_STAGES_KEY, location


def Pipelined(
    start: Any,
    stop: Any = None,
    num_stages: int = 0,
    order: Optional[Sequence[int]] = None,
    stage: Optional[Sequence[int]] = None,
    annotations: Any = None,
    sync: Any = None,
    group: Any = None,
):
    """``for k in T.Pipelined(n, num_stages=3)``: a serial loop over ``range(n)`` (or ``range(start, stop)``).

    CPU targets run it as a plain serial loop. GPU targets accept ``num_stages`` (recorded on the
    loop as the ``tl.pipelined_num_stages`` annotation) and currently also run the loop serially;
    overlapping copies with compute may be added later without changing kernels. ``order``,
    ``stage``, ``annotations`` (TileLang's sixth argument; a dict), ``sync`` and ``group`` are
    accepted for TileLang compatibility.

    :raises LoweringError: ``num_stages`` is not a non-negative int, ``annotations`` not a dict.
    """
    if annotations is not None and not isinstance(annotations, dict):
        raise LoweringError(f"{location()}: T.Pipelined: annotations must be a dict or None, got {type(annotations).__name__}")
    if isinstance(num_stages, bool) or not isinstance(num_stages, Integral) or num_stages < 0:
        raise LoweringError(f"{location()}: T.Pipelined: num_stages must be an int >= 0, got {num_stages!r}")
    from ..operand_checks import check_loop_bounds

    check_loop_bounds("T.Pipelined", start=start, stop=stop)
    if stop is None:
        start, stop = 0, start
    return _B.serial(start, stop, annotations={PIPELINED_STAGES_KEY: int(num_stages)})
