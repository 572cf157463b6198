"""Check whether a backend can work on this machine for a target kind."""

from __future__ import annotations

import ctypes.util
import importlib.util
import os
import shutil
import sys
from typing import TYPE_CHECKING, Optional

from ..capabilities import Availability, Requirements, TargetCapability
from ..dependencies import install_hint
from ..errors import TileLangError
from .isolation import TIMEOUT_ENV, plugin_timeout, run_plugin_code

if TYPE_CHECKING:
    from .registry import BackendRecord


def check_requirements(requires: Requirements, distribution: Optional[str] = None,
                       native_env: Optional[str] = None, native_program: str = "cc") -> Availability:
    """Check declared executables, shared libraries and Python modules, without importing them.

    A missing Python module's reason says how to install it, from ``distribution``'s declared
    requirements when it lists one (``pip install 'torch>=2.10'``). A missing executable's reason
    quotes ``$native_env`` (the native compiler's variable, ``CC``) when it is set: the program
    usually came from there.
    """
    for exe in requires.executables:
        if shutil.which(exe) is None:
            unsplittable = _unsplittable_setting(native_env, native_program)
            if unsplittable is not None:
                return Availability.no(unsplittable)
            setting = os.environ.get(native_env, "") if native_env else ""
            where = f" (it is ${native_env}={setting!r}; set {native_env} to an installed compiler or unset it)" if (
                setting.strip()) else ""
            return Availability.no(f"{exe} not found on PATH{where}")
    for lib in requires.shared_libraries:
        if ctypes.util.find_library(lib) is None:
            return Availability.no(f"shared library '{lib}' not found")
    for module in requires.python_modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return Availability.no(
                f"Python module '{module}' is not installed; install it with: {install_hint(module, distribution)}"
            )
    return Availability.yes()


def _unsplittable_setting(native_env: Optional[str], program: str) -> Optional[str]:
    """Why ``$native_env`` is not a command line (an unbalanced quote), or None.

    Before, a declaration's program taken from such a value (``program_from_env`` gives the whole
    value back) was looked up on PATH, and the probe said ``"unbalanced not found on PATH``; now
    it says what building would: the SettingError of :func:`command_from_env`, naming the variable.
    """
    from ..env_commands import command_from_env
    from ..errors import SettingError

    if not native_env:
        return None
    try:
        command_from_env(native_env, program)
    except SettingError as exc:
        return str(exc)
    return None


def probe_backend(record: "BackendRecord", target_kind: str) -> Availability:
    """Declared platform and requirements first, then the plugin's own probe hook.

    On a platform outside ``platforms`` but inside ``build_platforms`` the answer is at most
    *build only* (with the probe's reason, else "<platforms> only (this is <platform>)").

    The hook runs bounded in time (:mod:`.isolation`). Never raises for what the plugin does: a
    hook that fails, answers nonsense or does not finish marks the record broken (callers check
    ``record.status``) and gives an unavailable answer with the same reason; a missing dependency
    module gives an unavailable answer saying what to install, and leaves the backend usable.
    """
    assert record.spec is not None
    cap = record.spec.targets[target_kind]
    answer = _probe(record, target_kind, cap)
    if answer.available and not _on(cap.platforms):
        # declared to build here but to run only elsewhere: never more than build only
        reason = answer.reason or f"{', '.join(cap.platforms)} only (this is {sys.platform})"
        return Availability.build_only_because(reason)
    return answer


def _on(platforms: object) -> bool:
    """Whether this machine's ``sys.platform`` is among ``platforms`` ("all" or a list)."""
    return platforms == "all" or sys.platform in platforms  # type: ignore[operator]


def _probe(record: "BackendRecord", target_kind: str, cap: TargetCapability) -> Availability:
    runs_here = _on(cap.platforms)
    if not runs_here and (cap.build_platforms is None or not _on(cap.build_platforms)):
        return Availability.no(f"{', '.join(cap.platforms)} only (this is {sys.platform})")
    compiler = cap.native_compiler
    declared = check_requirements(cap.requires, record.distribution, compiler.env if compiler is not None else None,
                                  compiler.program if compiler is not None else "cc")
    if not declared.available:
        return declared
    if not record.implements("tilelang_backend_probe"):
        return declared
    timeout = plugin_timeout()
    outcome = run_plugin_code(
        lambda: record.call("tilelang_backend_probe", target_kind=target_kind), timeout=timeout, name=record.name
    )
    if not outcome.finished:
        record.mark_broken(
            f"tilelang_backend_probe(target_kind={target_kind!r}) did not finish within {timeout:g} s; "
            f"set {TIMEOUT_ENV} to a larger number of seconds if it is only slow"
        )
        return Availability.no(record.reason)
    if outcome.error is not None:
        exc = outcome.error
        if record.status == "ok" and not isinstance(exc, TileLangError):
            # raised past BackendRecord.call (KeyboardInterrupt in the loading thread): still the plugin's
            record.mark_broken(f"hook tilelang_backend_probe raised {type(exc).__name__}: {exc}")
        return Availability.no(record.reason if record.status != "ok" else str(exc))
    answer = outcome.value
    if answer is None:
        return declared
    if isinstance(answer, dict):
        from pydantic_core import ValidationError

        from .. import schema

        try:
            answer = schema.validate_python(Availability, answer)
        except ValidationError as exc:
            record.mark_broken(f"hook tilelang_backend_probe returned an invalid Availability: {schema.error_summary(exc)}")
            return Availability.no(record.reason)
    if not isinstance(answer, Availability):
        record.mark_broken(
            f"hook tilelang_backend_probe returned {type(answer).__name__}, expected Availability or None"
        )
        return Availability.no(record.reason)
    return answer
