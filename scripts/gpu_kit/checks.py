"""Checks for kit outputs that have no one right value (both halves; needs only torch).

Most outputs are compared with the expected tensor (``rtol``/``atol``). Some are not determined
by the inputs alone: the values ``atomic_add(..., return_prev=True)`` returns depend on the order
in which the GPU's threads got to the cell. A case names such an output in its ``checks``
(``{"P": {"name": "exchange_chain", ...}}``, JSON in the manifest) and the check below decides
instead, given every tensor of the call by parameter name (CPU tensors).
"""

from __future__ import annotations

from typing import Any, Callable, Optional


def exchange_chain(tensors: dict[str, Any], output: str, addend: str, final: Any, start: float = 0) -> Optional[str]:
    """``output`` holds the values a cell had before each atomic add of ``addend`` to it.

    Then, per lane (a column of a 2-D ``output``), the values before the adds plus the final
    value are the start value plus the values after the adds: each previous value was seen by
    exactly one add, whatever the order. ``final`` names the tensor holding the cell (``"Acc"``,
    one cell per lane) or ``["C", 6]`` (one element of a tensor).
    """
    import torch

    prev = tensors[output].detach().cpu().double()
    added = tensors[addend].detach().cpu().double()
    if prev.shape != added.shape:
        return f"{output}: shape {tuple(prev.shape)} differs from {addend}'s {tuple(added.shape)}"
    if isinstance(final, (list, tuple)):
        cells = tensors[final[0]].detach().cpu().double().reshape(-1)[int(final[1])].reshape(1)
    else:
        cells = tensors[final].detach().cpu().double().reshape(-1)
    lanes = prev.reshape(prev.shape[0], -1)
    adds = added.reshape(added.shape[0], -1)
    if cells.numel() != lanes.shape[1]:
        return f"{output}: {lanes.shape[1]} lanes but {cells.numel()} final cells"
    for lane in range(lanes.shape[1]):
        before = torch.cat([lanes[:, lane], cells[lane:lane + 1]]).sort().values
        after = torch.cat([torch.tensor([float(start)], dtype=torch.float64), lanes[:, lane] + adds[:, lane]]).sort().values
        if not torch.equal(before, after):
            where = int((before != after).nonzero()[0])
            return (f"{output} lane {lane}: the previous values do not chain (sorted position {where}: "
                    f"{before[where].item()} vs {after[where].item()})")
    return None


#: name -> check function (see the module docstring).
CHECKS: dict[str, Callable[..., Optional[str]]] = {"exchange_chain": exchange_chain}


def run(output: str, check: dict[str, Any], tensors: dict[str, Any]) -> Optional[str]:
    """Apply ``check`` to ``output``: None when it holds, else what is wrong."""
    try:
        fn = CHECKS[check["name"]]
    except KeyError:
        return f"{output}: unknown kit check {check.get('name')!r}; known: {', '.join(sorted(CHECKS))}"
    kwargs = {k: v for k, v in check.items() if k != "name"}
    return fn(tensors, output, **kwargs)
