"""Choose the execution backend for a target: by name, or ``auto`` by declared priority."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Literal, Optional

from ..errors import (
    BackendNotInstalledError,
    BackendTargetUnsupportedError,
    BackendUnavailableError,
    NoBackendForTargetError,
)
from ..warning_location import warn
from .discovery import pip_name_for
from .registry import BackendRecord, BackendRegistry, get_registry

AUTO = "auto"
#: Environment variable: the backend a compile that names none uses (as in upstream TileLang).
BACKEND_ENV = "TILELANG_EXECUTION_BACKEND"

#: Target kinds that mean the same thing to a backend declaration.
_KIND_ALIASES = {"hip": "rocm"}

class BackendWarning(UserWarning):
    """Something about the installed backends the user should know although the call worked: ``auto``
    skipped a broken backend that might have won, or fell back to the next backend because a build
    failed (the message names the backend and the failure)."""


Verdict = Literal["chosen", "available", "build_only", "unavailable", "unsupported", "broken", "incompatible"]


@dataclass(frozen=True)
class Candidate:
    """One backend considered by selection, with the verdict and why."""

    name: str
    verdict: Verdict
    priority: Optional[int]
    reason: str

    def to_dict(self) -> dict:
        return asdict(self)


def normalize_kind(kind: str) -> str:
    """Canonical target kind (``hip`` -> ``rocm``)."""
    return _KIND_ALIASES.get(kind, kind)


def declared_kind(record: BackendRecord, target_kind: str) -> Optional[str]:
    """The key under which ``record`` declares ``target_kind`` (aliases allowed), or None."""
    if record.spec is None:
        return None
    wanted = normalize_kind(target_kind)
    for kind in record.spec.targets:
        if normalize_kind(kind) == wanted:
            return kind
    return None


def explain_selection(target_kind: str, registry: Optional[BackendRegistry] = None) -> list[Candidate]:
    """Every installed backend with its verdict for ``target_kind``; the chosen one first.

    ``auto`` picks the available backend with the highest declared priority for the target
    kind; ties are broken by name, so the choice is deterministic. A backend that can build
    kernels here but not run them (verdict ``build_only``) is never chosen by ``auto``.
    """
    registry = registry or get_registry()
    candidates: list[Candidate] = []
    for record in registry.records():
        if record.status != "ok":
            candidates.append(Candidate(record.name, record.status, None, record.reason))
            continue
        kind = declared_kind(record, target_kind)
        if kind is None:
            declared = ", ".join(record.spec.targets) if record.spec else ""
            candidates.append(
                Candidate(record.name, "unsupported", None, f"does not declare target {target_kind!r} (declares: {declared})")
            )
            continue
        priority = record.spec.targets[kind].priority
        availability = registry.probe(record, kind)
        if record.status != "ok":  # the probe hook broke it
            candidates.append(Candidate(record.name, record.status, None, record.reason))
        elif availability.available:
            candidates.append(Candidate(record.name, "available", priority, f"priority {priority}"))
        elif availability.can_build:
            candidates.append(
                Candidate(record.name, "build_only", priority, f"can build but not run here: {availability.reason}")
            )
        else:
            candidates.append(Candidate(record.name, "unavailable", priority, availability.reason))
    available = sorted((c for c in candidates if c.verdict == "available"), key=lambda c: (-(c.priority or 0), c.name))
    if available:
        best = available[0]
        others = [c for c in candidates if c is not best]
        reason = f"highest priority ({best.priority}) among available backends"
        if len(available) > 1 and available[1].priority == best.priority:
            reason += f"; tie with {available[1].name} broken by name"
        candidates = [Candidate(best.name, "chosen", best.priority, reason), *others]
    return candidates


def _backends_for(target_kind: str, registry: BackendRegistry) -> list[str]:
    return [r.name for r in registry.records() if r.status == "ok" and declared_kind(r, target_kind)]


def _successor(name: str, registry: BackendRegistry) -> Optional[str]:
    for record in registry.records():
        if record.spec is not None and record.status == "ok" and name in record.spec.supersedes:
            return record.name
    return None


def default_execution_backend() -> str:
    """The backend of a ``tilelang.compile`` (``@tilelang.jit``, autotuner) that names none:
    ``$TILELANG_EXECUTION_BACKEND`` when set and not empty, else ``"auto"``. Read at each compile,
    as upstream TileLang reads it; an explicit ``execution_backend=`` wins."""
    return os.environ.get(BACKEND_ENV, "").strip() or AUTO


def select_backend(name: Optional[str], target_kind: str, registry: Optional[BackendRegistry] = None) -> BackendRecord:
    """The backend to use for ``target_kind``: the one named, or the best one for ``"auto"``; None:
    :func:`default_execution_backend` (a name from ``$TILELANG_EXECUTION_BACKEND`` that is not
    installed says where it came from).

    Raises :class:`BackendNotInstalledError` (with a pip hint and any installed successor),
    :class:`BackendBrokenError`/:class:`BackendIncompatibleError`,
    :class:`BackendTargetUnsupportedError`, :class:`BackendUnavailableError` (with the probe's
    reason) or :class:`NoBackendForTargetError`. A deprecated backend emits a DeprecationWarning.

    A backend named explicitly whose probe says it can build but not run here
    (:attr:`Availability.build_only`) is returned: ``tilelang.compile`` then builds the kernel,
    which can be exported, and whose call raises :class:`BackendUnavailableError` naming what is
    missing. ``auto`` never picks such a backend.
    """
    registry = registry or get_registry()
    if name is None:
        try:
            return select_backend(default_execution_backend(), target_kind, registry)
        except BackendNotInstalledError as exc:
            raise BackendNotInstalledError(
                f"${BACKEND_ENV}={os.environ.get(BACKEND_ENV, '')!r} names the backend of compiles that give none: "
                f"{exc}; set it to an installed backend or 'auto', or unset it"
            ) from None
    if not isinstance(name, str) or not name:
        raise BackendNotInstalledError(
            f"execution_backend must be a backend name or 'auto', got {name!r}; "
            f"installed backends: {', '.join(registry.names()) or 'none'}"
        )
    if name == AUTO:
        return _select_auto(target_kind, registry)
    record = registry.get(name) or registry.get(name.replace("-", "_"))
    if record is None:
        installed = ", ".join(_backends_for(target_kind, registry)) or "none"
        successor = _successor(name, registry)
        if successor:  # a retired name: point at what replaces it first
            raise BackendNotInstalledError(
                f"execution backend {name!r} is retired: the installed backend {successor!r} supersedes it; use "
                f"execution_backend={successor!r} (installed backends for target {target_kind!r}: {installed}; "
                f"to keep using {name!r}: pip install {pip_name_for(name)})"
            )
        raise BackendNotInstalledError(
            f"execution backend {name!r} is not installed; installed backends for target {target_kind!r}: "
            f"{installed}; install it with: pip install {pip_name_for(name)}"
        )
    record.ensure_usable()
    kind = declared_kind(record, target_kind)
    if kind is None:
        others = ", ".join(_backends_for(target_kind, registry)) or "none"
        raise BackendTargetUnsupportedError(
            f"execution backend {name!r} does not support target {target_kind!r} "
            f"(it supports: {', '.join(record.spec.targets)}); installed backends for {target_kind!r}: {others}"
        )
    availability = registry.probe(record, kind)
    record.ensure_usable()
    if not availability.can_build:
        raise BackendUnavailableError(
            f"execution backend {name!r} cannot run target {target_kind!r} on this machine: {availability.reason}"
        )
    _warn_if_deprecated(record)
    return record


def _select_auto(target_kind: str, registry: BackendRegistry) -> BackendRecord:
    record = auto_candidates(target_kind, registry)[0]
    _warn_if_deprecated(record)
    return record


def auto_candidates(target_kind: str, registry: Optional[BackendRegistry] = None) -> list[BackendRecord]:
    """The available backends for ``target_kind`` in the order ``auto`` tries them, best first.

    ``tilelang.compile`` builds with the first and falls back to the next when a build fails
    (docs/hooks.md, exception policy). Warns (:class:`BackendWarning`) about each broken or
    incompatible backend that was skipped although it might have won: one that declares the
    target with a priority at least the chosen one's, or one whose declaration could not even be
    read (a failed import, a name two distributions claim).

    :raises NoBackendForTargetError: no backend is available, with every candidate's verdict.
    """
    registry = registry or get_registry()
    candidates = explain_selection(target_kind, registry)
    if not candidates or candidates[0].verdict != "chosen":
        detail = "; ".join(f"{c.name}: {c.verdict} ({c.reason})" for c in candidates) or "no backends installed"
        hint = "Install one (pip install tilelang-backend-<name>) or choose another target"
        builders = [repr(c.name) for c in candidates if c.verdict == "build_only"]
        if builders:
            others = f" (or {', '.join(builders[1:])})" if len(builders) > 1 else ""
            hint = (
                "To build it here without running it (to read its source, or to export it for a machine "
                f"that can run it), name one of the backends that can: execution_backend={builders[0]}{others}. "
                "Otherwise install one (pip install tilelang-backend-<name>) or choose another target"
            )
        raise NoBackendForTargetError(f"no available execution backend for target {target_kind!r}: {detail}. {hint}")
    chosen = candidates[0]
    others = sorted((c for c in candidates if c.verdict == "available"), key=lambda c: (-(c.priority or 0), c.name))
    records = [registry.get(c.name) for c in (chosen, *others)]
    for c in candidates:
        if c.verdict in ("broken", "incompatible"):
            _warn_skipped(c, registry.get(c.name), chosen, target_kind)
    return [r for r in records if r is not None]


def _warn_skipped(skipped: Candidate, record: Optional[BackendRecord], chosen: Candidate, target_kind: str) -> None:
    kind = declared_kind(record, target_kind) if record is not None and record.spec is not None else None
    if record is not None and record.spec is not None:
        if kind is None:
            return  # it does not declare the target: it could not have won
        priority = record.spec.targets[kind].priority
        if priority < (chosen.priority or 0):
            return
        why = f"it declares priority {priority} for {target_kind!r}, not below {chosen.name!r} ({chosen.priority})"
    else:
        why = "its declaration could not be read, so it may have been the best choice"
    warn(
        f"execution_backend='auto' skipped execution backend {skipped.name!r} for target {target_kind!r} because "
        f"it is {skipped.verdict}: {skipped.reason}; {why}; using {chosen.name!r} "
        f"(`tilelang backends` lists every backend's state)",
        BackendWarning,
    )


def _warn_if_deprecated(record: BackendRecord) -> None:
    warn_if_deprecated(record)


def warn_if_deprecated(record: BackendRecord) -> None:
    """Emit the ``DeprecationWarning`` of a backend that declares itself deprecated (naming its replacement)."""
    dep = record.spec.deprecated if record.spec else None
    if dep is None or getattr(record, "_deprecation_warned", False):
        return
    record._deprecation_warned = True  # once per loaded plugin (so once per process)
    message = f"execution backend {record.name!r} is deprecated since {record.distribution} {dep.since}"
    if dep.replacement:
        message += f"; use execution_backend={dep.replacement!r} instead{_not_installed(dep.replacement)}"
    if dep.message:
        message += f". {dep.message}"
    warn(message, DeprecationWarning)


def _not_installed(name: str) -> str:
    """`` (not installed)`` when no installed plugin is named ``name``, else nothing.

    Before, a ``deprecated.replacement`` naming no installed backend (a typo, or one not yet
    published) was passed on as "use execution_backend='nosuchbackend' instead" as if it would
    work; it cannot be refused when declared (the replacement may simply not be installed here).
    """
    from .registry import get_registry

    try:
        installed = name in get_registry().names()
    except Exception:  # noqa: BLE001 - only a hint: never let it hide the deprecation itself
        return ""
    return "" if installed else " (not installed)"
