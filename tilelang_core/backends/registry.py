"""The backend registry: loads plugins on first need, validates them, isolates failures.

Each plugin gets a pluggy ``PluginManager`` of its own, so calling a hook calls exactly that
backend. A plugin that fails to import, declares an unknown hook, returns an invalid
declaration, claims a name another distribution claims too, or raises inside a hook is marked
*broken* with the reason; a plugin written for another plugin API version is *incompatible* and
none of its hooks is called. Neither affects other backends or ``import tilelang``.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator, Literal, Optional

import pluggy

from .. import hookspecs
from ..capabilities import Availability, BackendSpec
from ..errors import BackendBrokenError, BackendIncompatibleError, TileLangError
from .discovery import ENTRY_POINT_GROUP, BackendEntryPoint, discover

Status = Literal["ok", "broken", "incompatible"]


@dataclass
class BackendRecord:
    """What the registry knows about one installed backend."""

    name: str
    distribution: Optional[str]
    version: Optional[str]
    entry_point: str
    status: Status = "ok"
    reason: str = ""
    spec: Optional[BackendSpec] = None
    _manager: Optional[pluggy.PluginManager] = field(default=None, repr=False)
    _probes: dict[str, Availability] = field(default_factory=dict, repr=False)

    @property
    def usable(self) -> bool:
        return self.status == "ok"

    def mark_broken(self, reason: str) -> None:
        self.status = "broken"
        self.reason = reason
        self._manager = None

    def ensure_usable(self) -> None:
        """Raise the error that explains why this backend cannot be used, if it cannot."""
        if self.status == "broken":
            raise BackendBrokenError(
                f"execution backend {self.name!r} ({self.distribution or 'unknown distribution'}) is broken: "
                f"{self.reason}. Reinstall or uninstall it (pip uninstall {self.distribution or self.name})."
            )
        if self.status == "incompatible":
            raise BackendIncompatibleError(
                f"execution backend {self.name!r} ({self.distribution}) is incompatible: {self.reason}. "
                f"Install a version of {self.distribution} made for this tilelang-core."
            )

    def call(self, hook: str, **kwargs: Any) -> Any:
        """Call one of this backend's hooks.

        Errors of the core's own classes (a failed compiler run, a bad artifact) pass through.
        Any other exception is a plugin bug: the backend is marked broken and the call raises
        :class:`BackendBrokenError` quoting it.
        """
        self.ensure_usable()
        assert self._manager is not None
        try:
            return getattr(self._manager.hook, hook)(**kwargs)
        except TileLangError:
            raise
        except (TypeError, ValueError) as exc:
            if hook in ("tilelang_backend_build", "tilelang_backend_load"):
                raise  # argument problems the backend reports to the caller
            self.mark_broken(f"hook {hook} raised {type(exc).__name__}: {exc}")
            self.ensure_usable()
        except Exception as exc:  # noqa: BLE001 - isolate plugin failures
            if isinstance(exc, OSError) and hook in ("tilelang_backend_save", "tilelang_backend_load"):
                raise  # the environment (disk full, permissions), not a plugin bug: the cache warns and copes
            self.mark_broken(f"hook {hook} raised {type(exc).__name__}: {exc}")
            self.ensure_usable()

    def implements(self, hook: str) -> bool:
        """Whether the plugin implements ``hook``."""
        if self._manager is None:
            return False
        return bool(getattr(self._manager.hook, hook).get_hookimpls())


class BackendRegistry:
    """Installed execution backends of one entry-point group.

    ``path`` limits discovery to distributions installed in those directories (the test kit
    uses it to see only throwaway plugins); by default every distribution on ``sys.path``.
    """

    def __init__(self, group: str = ENTRY_POINT_GROUP, path: Optional[list[str]] = None) -> None:
        self.group = group
        self.path = path
        self._lock = threading.RLock()
        self._entry_points: Optional[list[BackendEntryPoint]] = None
        self._records: dict[str, BackendRecord] = {}

    # -- metadata only ------------------------------------------------------------------------

    def _eps(self) -> list[BackendEntryPoint]:
        with self._lock:
            if self._entry_points is None:
                self._entry_points = discover(self.group, self.path)
            return self._entry_points

    def names(self) -> list[str]:
        """Names of installed backends, from metadata alone (imports nothing)."""
        return sorted({ep.name for ep in self._eps()})

    def refresh(self) -> None:
        """Forget everything; the next lookup re-reads metadata (after pip install/uninstall)."""
        import importlib

        importlib.invalidate_caches()
        with self._lock:
            self._entry_points = None
            self._records.clear()

    # -- loading ------------------------------------------------------------------------------

    def get(self, name: str) -> Optional[BackendRecord]:
        """The record of backend ``name`` (loading its plugin if needed), or None if not installed."""
        with self._lock:
            if name in self._records:
                return self._records[name]
            eps = [ep for ep in self._eps() if ep.name == name]
            if not eps:
                return None
            record = _load(eps)
            self._records[name] = record
            return record

    def is_current(self, record: BackendRecord) -> bool:
        """Whether ``record`` is still this registry's loaded record for its name (not refreshed away)."""
        with self._lock:
            return self._records.get(record.name) is record

    def records(self) -> list[BackendRecord]:
        """Records of every installed backend, sorted by name (loads every plugin)."""
        return [r for r in (self.get(n) for n in self.names()) if r is not None]

    def probe(self, record: BackendRecord, target_kind: str) -> Availability:
        """Whether ``record`` can work here for ``target_kind`` (cached per process)."""
        from .probe import probe_backend

        with self._lock:
            if target_kind not in record._probes:
                record._probes[target_kind] = probe_backend(record, target_kind)
            return record._probes[target_kind]


def _load(eps: list[BackendEntryPoint]) -> BackendRecord:
    first = eps[0]
    record = BackendRecord(first.name, first.distribution, first.version, first.value)
    if len(eps) > 1:
        dists = ", ".join(sorted(ep.distribution or "?" for ep in eps))
        record.distribution = dists
        record.mark_broken(
            f"name {first.name!r} is claimed by several distributions ({dists}); uninstall all but one"
        )
        return record
    try:
        plugin = first.load()
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - a plugin may raise anything on import
        record.mark_broken(f"importing {first.value} raised {type(exc).__name__}: {exc}")
        return record

    api = getattr(plugin, "TILELANG_PLUGIN_API", None)
    if not isinstance(api, int) or isinstance(api, bool):
        record.mark_broken(
            f"{first.value} does not define TILELANG_PLUGIN_API as an int "
            f"(this tilelang-core expects {hookspecs.PLUGIN_API_VERSION})"
        )
        return record
    if api != hookspecs.PLUGIN_API_VERSION:
        record.status = "incompatible"
        record.reason = (
            f"written for plugin API version {api}, but this tilelang-core provides "
            f"plugin API version {hookspecs.PLUGIN_API_VERSION}"
        )
        return record

    from ..core_pin import core_pin_problem

    pin = core_pin_problem(first.entry_point)  # the plugin's tilelang-core>=X,<Y
    if pin:
        record.status, record.reason = "incompatible", pin
        return record

    manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    manager.add_hookspecs(hookspecs)
    try:
        manager.register(plugin, name=first.name)
        manager.check_pending()
    except pluggy.PluginValidationError as exc:
        record.mark_broken(f"plugin {first.name!r} ({first.distribution}) has an invalid hook: {exc}")
        return record
    record._manager = manager

    from .validation import validate_declaration

    try:
        raw = manager.hook.tilelang_backend_spec()
    except Exception as exc:  # noqa: BLE001
        record.mark_broken(f"hook tilelang_backend_spec raised {type(exc).__name__}: {exc}")
        return record
    try:
        record.spec = validate_declaration(raw, first, api)
    except TileLangError as exc:
        record.mark_broken(str(exc))
    return record


_default: Optional[BackendRegistry] = None
_default_lock = threading.Lock()


def get_registry() -> BackendRegistry:
    """The process-wide registry of the ``tilelang.backends`` group."""
    global _default
    with _default_lock:
        if _default is None:
            _default = BackendRegistry()
        return _default


@contextlib.contextmanager
def use_registry(registry: BackendRegistry) -> Iterator[BackendRegistry]:
    """Make ``registry`` the process-wide one inside the ``with`` block (used by the test kit)."""
    global _default
    with _default_lock:
        previous, _default = _default, registry
    try:
        yield registry
    finally:
        with _default_lock:
            _default = previous
