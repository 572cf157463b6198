"""Numbers of seconds (or days) given as text in a setting: one parser, one error message.

:func:`seconds_from_env` reads the time settings (``$TILELANG_COMPILE_TIMEOUT_SECONDS``,
``$TILELANG_PLUGIN_TIMEOUT``, ``$TILELANG_CACHE_LOCK_TIMEOUT``); :func:`number_in_range` is its
parsing and its message, also used for ``tilelang cache prune --days``. Each caller keeps its own
range (whether 0 is allowed and what it means, the largest value). The message names the
setting, the range expected, the text given and what to do::

    TILELANG_PLUGIN_TIMEOUT must be a number of seconds greater than 0 and at most 1000000,
    got 'soon'; set it to such a number (for example 30), or unset it for the default of 60 s
"""

from __future__ import annotations

import math
import os
from typing import Optional

from .errors import SettingError

#: The largest number of seconds a time setting takes (about 11.6 days).
MAX_SECONDS = 1e6


def range_text(zero_allowed: bool, maximum: Optional[float], zero_means: Optional[str] = None) -> str:
    """The accepted range in words: ``"from 0 to 1000000 (0: no limit)"``, ``"greater than 0 and
    at most 1000000"``, ``">= 0"``, ``"> 0"``."""
    if maximum is None:
        text = ">= 0" if zero_allowed else "> 0"
    elif zero_allowed:
        text = f"from 0 to {maximum:.10g}"
    else:
        text = f"greater than 0 and at most {maximum:.10g}"
    return f"{text} (0: {zero_means})" if zero_allowed and zero_means else text


def number_in_range(text: str, *, name: str, unit: str, zero_allowed: bool, maximum: Optional[float],
                    remedy: str, zero_means: Optional[str] = None) -> float:
    """``text`` (surrounding blanks ignored) as a finite number from 0 (``zero_allowed``) or above
    0, up to ``maximum`` (None: no bound).

    :param name: the setting, as the message names it (``"TILELANG_PLUGIN_TIMEOUT"``, ``"--days"``).
    :param unit: ``"seconds"``, ``"days"``.
    :param remedy: what to do, the end of the message (``"unset it for the default of 60 s"``).
    :raises ValueError: ``"<name> must be a number of <unit> <range>, got <text>; <remedy>"``.
    """
    try:
        value = float(text.strip())
    except ValueError:
        value = math.nan
    low_ok = value >= 0 if zero_allowed else value > 0
    if not (math.isfinite(value) and low_ok and (maximum is None or value <= maximum)):
        raise ValueError(f"{name} must be a number of {unit} {range_text(zero_allowed, maximum, zero_means)}, "
                         f"got {text!r}; {remedy}")
    return value


def seconds_from_env(variable: str, default: float, *, zero_allowed: bool, zero_means: Optional[str] = None,
                     maximum: float = MAX_SECONDS, example: str = "30") -> float:
    """``$variable`` as a number of seconds (:func:`number_in_range`), ``default`` when it is unset
    or blank.

    :raises SettingError: the value is not a number of seconds in the range.
    """
    raw = os.environ.get(variable, "").strip()
    if not raw:
        return default
    remedy = f"set it to such a number (for example {example}), or unset it for the default of {default:g} s"
    try:
        return number_in_range(raw, name=variable, unit="seconds", zero_allowed=zero_allowed, maximum=maximum,
                               remedy=remedy, zero_means=zero_means)
    except ValueError as exc:
        raise SettingError(str(exc)) from None


__all__ = ["MAX_SECONDS", "number_in_range", "range_text", "seconds_from_env"]
