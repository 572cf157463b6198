"""The record each example module lists in ``EXAMPLES`` (used by run_all.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional


@dataclass
class Example:
    name: str
    build: Callable[[], Any]  # returns a prim_func
    inputs: Callable[[], tuple]  # returns the input tensors
    reference: Callable[..., Any]  # torch reference of the output
    out_idx: Optional[Any] = -1
    rtol: float = 1e-5
    atol: float = 1e-5
