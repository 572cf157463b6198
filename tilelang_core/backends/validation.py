"""Turn what a plugin's spec hook returned into a validated :class:`BackendSpec`."""

from __future__ import annotations

from typing import Any

from pydantic_core import ValidationError

from .. import schema
from ..capabilities import BackendSpec, check_integer_types
from ..errors import InvalidBackendSpecError
from .discovery import BackendEntryPoint


def validate_declaration(raw: Any, ep: BackendEntryPoint, api_version: int) -> BackendSpec:
    """Validate ``raw`` (a BackendSpec or dict) for entry point ``ep``.

    Fills ``distribution``, ``version`` and ``plugin_api_version`` when a dict omits them, and
    checks that the declared name is the entry point's name. Errors name the plugin, its
    distribution and the offending field.
    """
    where = f"plugin {ep.name!r} (distribution {ep.distribution or 'unknown'})"
    if isinstance(raw, BackendSpec):
        data = schema.to_python(raw)
    elif isinstance(raw, dict):
        data = dict(raw)
    elif raw is None:
        raise InvalidBackendSpecError(f"{where}: tilelang_backend_spec returned nothing")
    else:
        raise InvalidBackendSpecError(
            f"{where}: tilelang_backend_spec must return a BackendSpec or a dict, got {type(raw).__name__}"
        )
    data.setdefault("distribution", ep.distribution or "unknown")
    data.setdefault("version", ep.version or "0")
    data.setdefault("plugin_api_version", api_version)
    try:
        check_integer_types(data)
    except ValueError as exc:
        raise InvalidBackendSpecError(f"{where} has an invalid capability declaration: {exc}") from None
    try:
        spec = schema.validate_python(BackendSpec, data)
    except ValidationError as exc:
        problems = schema.error_summary(exc)
        raise InvalidBackendSpecError(f"{where} has an invalid capability declaration: {problems}") from None
    if spec.name != ep.name:
        raise InvalidBackendSpecError(
            f"{where}: field 'name' is {spec.name!r} but the entry point is named {ep.name!r}; they must match"
        )
    if spec.plugin_api_version != api_version:
        raise InvalidBackendSpecError(
            f"{where}: field 'plugin_api_version' is {spec.plugin_api_version} but TILELANG_PLUGIN_API is {api_version}"
        )
    return spec
