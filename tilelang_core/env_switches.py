"""Yes/no settings given as text in an environment variable: one parser, one error message.

``1``/``true``/``yes``/``on`` mean yes; ``0``/``false``/``no``/``off``, empty or unset mean no
(any case, surrounding spaces ignored). Any other value is a :class:`SettingError` naming the
variable, the text given and what it accepts: a typo of ``true`` no longer silently means "no".
Read by the kernel cache (``TILELANG_DISABLE_CACHE``), the autotuner
(``TILELANG_AUTO_TUNING_DISABLE_CACHE``) and ``tilelang.compile``'s default ``verbose``
(``TILELANG_VERBOSE``), as upstream TileLang reads them, and by ``TILELANG_JIT_DIAGNOSTICS`` and
``TILELANG_ENABLE_IR_SPAN`` (unset: yes).
"""

from __future__ import annotations

import os

from .errors import SettingError

__all__ = ["switch_from_env"]

_YES = {"1", "true", "yes", "on"}
_NO = {"0", "false", "no", "off"}  # unset or empty: the default


def switch_from_env(variable: str, yes_means: str, no_means: str, default: bool = False) -> bool:
    """Whether ``$variable`` says yes (unset or empty: ``default``).

    :param yes_means: what a yes does, for the error (``"turn the kernel cache off"``).
    :param no_means: what a no does (``"keep it on"``).
    :param default: the answer when the variable is unset or empty (``TILELANG_ENABLE_IR_SPAN``: yes).
    :raises SettingError: the value is neither a yes nor a no.
    """
    value = os.environ.get(variable, "").strip().lower()
    if not value:
        return default
    if value in _YES:
        return True
    if value in _NO:
        return False
    yes, no = "1 (or true, yes, on)", "0 (or false, no, off)"
    if default:
        choices = f"set it to {no} to {no_means}, {yes} or unset it to {yes_means}"
    else:
        choices = f"set it to {yes} to {yes_means}, {no} or unset it to {no_means}"
    raise SettingError(f"${variable}={os.environ[variable]!r} is not a yes/no value; {choices}")
