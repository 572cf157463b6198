"""Check whether a backend can work on this machine for a target kind."""

from __future__ import annotations

import ctypes.util
import importlib.util
import shutil
import sys
from typing import TYPE_CHECKING

from ..capabilities import Availability, Requirements

if TYPE_CHECKING:
    from .registry import BackendRecord


def check_requirements(requires: Requirements) -> Availability:
    """Check declared executables, shared libraries and Python modules, without importing them."""
    for exe in requires.executables:
        if shutil.which(exe) is None:
            return Availability.no(f"{exe} not found on PATH")
    for lib in requires.shared_libraries:
        if ctypes.util.find_library(lib) is None:
            return Availability.no(f"shared library '{lib}' not found")
    for module in requires.python_modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return Availability.no(f"Python module '{module}' is not installed")
    return Availability.yes()


def probe_backend(record: "BackendRecord", target_kind: str) -> Availability:
    """Declared platform and requirements first, then the plugin's own probe hook."""
    assert record.spec is not None
    cap = record.spec.targets[target_kind]
    if cap.platforms != "all" and sys.platform not in cap.platforms:
        return Availability.no(f"{', '.join(cap.platforms)} only (this is {sys.platform})")
    declared = check_requirements(cap.requires)
    if not declared.available:
        return declared
    if not record.implements("tilelang_backend_probe"):
        return declared
    answer = record.call("tilelang_backend_probe", target_kind=target_kind)
    if answer is None:
        return declared
    if isinstance(answer, dict):
        from pydantic_core import ValidationError

        from .. import schema

        try:
            answer = schema.validate_python(Availability, answer)
        except ValidationError as exc:
            record.mark_broken(f"hook tilelang_backend_probe returned an invalid Availability: {schema.error_summary(exc)}")
            record.ensure_usable()
    if not isinstance(answer, Availability):
        record.mark_broken(
            f"hook tilelang_backend_probe returned {type(answer).__name__}, expected Availability or None"
        )
        record.ensure_usable()
    return answer
