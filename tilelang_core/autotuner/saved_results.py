"""``AutotuneResult.save_to_disk`` / ``load_from_disk``: a tuning result in a folder of its own.

TileLang's names for keeping the best kernel a tuning run found, to ship it or to skip tuning
later. The folder holds ``best_config.json`` (the best configuration), ``latency.json`` (its
latency and ``ref_prog``'s, in ms), ``tilelang-tuning-result.json`` (what this is, for
:func:`load`), and ``kernel/``, the best kernel as :meth:`JITKernel.export` writes it (loaded
with :func:`tilelang.load`, with its checks: ownership, file list, SHA-256, backend version).

The folder is written beside ``path`` and renamed into place (exchanged with a previous result in
one step where the system can: jit/export_swap.py, as exports are), so a reader sees a whole result. An existing ``path`` is replaced only when it is such a result itself; anything else there
(a user's folder, a file) is refused and left as it was.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Union

from .param import AutotuneError

__all__ = ["save", "load", "MARKER"]

#: The file that makes a folder a saved tuning result (its format version inside).
MARKER = "tilelang-tuning-result.json"
_FORMAT = 1
_CONFIG = "best_config.json"
_LATENCY = "latency.json"
_KERNEL = "kernel"


def _is_saved_result(path: Path) -> bool:
    try:
        return json.loads((path / MARKER).read_text()).get("format") == _FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def _json_text(what: str, value: Any) -> str:
    try:
        return json.dumps(value, indent=1, sort_keys=True)
    except TypeError as exc:
        raise TypeError(
            f"save_to_disk: the {what} cannot be written as JSON ({exc}); configurations saved this way hold "
            f"numbers, strings, booleans, None, lists and dicts"
        ) from None


def save(result: Any, path: Union[str, os.PathLike], verbose: bool = False) -> Path:
    """Write ``result`` (an :class:`AutotuneResult` with a kernel) into the folder ``path``."""
    from ..jit.export_swap import exchange, recover_leftovers, side_name

    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise ValueError(f"save_to_disk: path must name the folder to write, got {path!r}")
    if result.kernel is None or result.config is None:
        raise AutotuneError("save_to_disk: this result has no kernel to save (no configuration compiled and ran)")
    target = Path(path)
    recover_leftovers(target, _is_saved_result)  # what a killed save left beside it (as export does)
    if os.path.lexists(target) and not (target.is_dir() and not target.is_symlink() and _is_saved_result(target)):
        raise FileExistsError(
            f"save_to_disk: {target} exists and is not a saved tuning result (no {MARKER}); it is left as it is. "
            f"Choose another path, or remove it yourself"
        )
    config = _json_text("best configuration", result.config)
    latency = _json_text("latencies", {"latency": result.latency, "ref_latency": result.ref_latency})
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = side_name(target, "tmp")
    try:
        staging.mkdir(mode=0o755)
        (staging / _CONFIG).write_text(config + "\n")
        (staging / _LATENCY).write_text(latency + "\n")
        result.kernel.export(staging / _KERNEL)
        (staging / MARKER).write_text(json.dumps({"format": _FORMAT}) + "\n")  # last: the folder is whole
        if not os.path.lexists(target):
            os.rename(staging, target)
        elif not exchange(staging, target):  # no one-step exchange here: the previous result moves aside first
            old = side_name(target, "old")
            os.rename(target, old)
            os.rename(staging, target)
            staging = old
        # staging now holds the previous result, if any: removed below
    finally:
        if os.path.lexists(staging):
            shutil.rmtree(staging, ignore_errors=True)
    if verbose:
        print(f"saved the tuning result (config {result.config}, {result.latency} ms) to {target}")
    return target


def load(cls: type, path: Union[str, os.PathLike], trusted: bool = False) -> Any:
    """The :class:`AutotuneResult` saved in the folder ``path`` (its kernel loaded, ready to call)."""
    from ..jit.export import load as load_kernel

    target = Path(path)
    if not target.is_dir():
        raise FileNotFoundError(f"load_from_disk: {target} is not a folder holding a saved tuning result")
    if not _is_saved_result(target):
        raise AutotuneError(f"load_from_disk: {target} is not a saved tuning result (no readable {MARKER}); "
                            "save one with AutotuneResult.save_to_disk")
    try:
        config = json.loads((target / _CONFIG).read_text())
        latency = json.loads((target / _LATENCY).read_text())
    except (OSError, ValueError) as exc:
        raise AutotuneError(f"load_from_disk: {target} is damaged ({exc}); save the result again") from None
    kernel = load_kernel(target / _KERNEL, trusted=trusted)
    return cls(latency=latency.get("latency"), config=config, ref_latency=latency.get("ref_latency"),
               libcode=kernel.get_kernel_source(), kernel=kernel, from_cache=True)
