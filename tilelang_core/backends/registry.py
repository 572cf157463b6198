"""The backend registry: loads plugins on first need, validates them, isolates failures.

Each plugin gets a pluggy ``PluginManager`` of its own, so calling a hook calls exactly that
backend. Loading a plugin (its import and its declaration) and each of its probes run bounded in
time, with their output on stderr (:mod:`.isolation`). The exception policy (which exception from
which hook means what) is the table in ``tilelang_core.hookspecs`` (docs/hooks.md):

- the plugin's fault marks it *broken* for the process, with the reason: it fails to import,
  lacks a required hook, declares an unknown hook or an invalid declaration, claims a name another
  distribution claims too, does not finish loading in time, or a hook raises something the policy
  does not allow (``SystemExit`` included);
- the environment's fault does not: a missing dependency module gives a
  :class:`~tilelang_core.errors.BackendDependencyError` saying what to install (a plugin that cannot
  even be imported without it is *unavailable*), an ``OSError`` of build, save or load passes
  through;
- a plugin written for another plugin API version is *incompatible* and none of its hooks is called.

None of these affects other backends or ``import tilelang``.
"""

from __future__ import annotations

import contextlib
import difflib
import inspect
import re
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator, Literal, NoReturn, Optional

import pluggy

from ..fork_locks import compiling, renew_after_fork
from .. import hookspecs
from ..capabilities import Availability, BackendSpec
from ..dependencies import dependency_message, missing_module
from ..errors import (
    BackendBrokenError,
    BackendDependencyError,
    BackendIncompatibleError,
    KernelNotSupportedError,
    TileLangError,
)
from .discovery import ENTRY_POINT_GROUP, BackendEntryPoint, discover, metadata_path
from .isolation import TIMEOUT_ENV, plugin_timeout, run_plugin_code

Status = Literal["ok", "broken", "incompatible", "unavailable"]

_BUILD, _SAVE, _LOAD = "tilelang_backend_build", "tilelang_backend_save", "tilelang_backend_load"


@dataclass
class BackendRecord:
    """What the registry knows about one installed backend.

    ``status`` is ``"ok"``, ``"broken"`` (the plugin's fault; ``reason`` says what),
    ``"incompatible"`` (another plugin API version) or ``"unavailable"`` (it cannot be imported
    because a dependency module is missing; ``reason`` says what to install). ``warnings`` holds
    what ``tilelang backends`` reports about a plugin that works (a heavy import at load).
    """

    name: str
    distribution: Optional[str]
    version: Optional[str]
    entry_point: str
    status: Status = "ok"
    reason: str = ""
    spec: Optional[BackendSpec] = None
    warnings: list[str] = field(default_factory=list)
    advice: str = ""
    missing: Optional[str] = None
    _manager: Optional[pluggy.PluginManager] = field(default=None, repr=False)
    _probes: dict[str, Availability] = field(default_factory=dict, repr=False)
    _ep: Optional[BackendEntryPoint] = field(default=None, repr=False)
    _files_hash: Optional[str] = field(default=None, repr=False)

    @property
    def usable(self) -> bool:
        return self.status == "ok"

    @property
    def package(self) -> str:
        """The top-level package of the entry-point module (``tilelang_backend_x``)."""
        return self.entry_point.split(":")[0].split(".")[0]

    def where(self) -> str:
        """``'name' (distribution version)``, for messages."""
        dist = self.distribution or "unknown distribution"
        return f"{self.name!r} ({dist}{' ' + self.version if self.version else ''})"

    def mark_broken(self, reason: str, advice: Optional[str] = None) -> None:
        """Make the backend unusable for the rest of the process, with ``reason`` (and what to do)."""
        self.status = "broken"
        self.reason = reason
        self.advice = (
            f"Reinstall or uninstall it (pip uninstall {self.distribution or self.name})." if advice is None else advice
        )
        self._manager = None

    def mark_unavailable(self, missing: str) -> None:
        """The plugin cannot be loaded because the environment lacks the dependency module ``missing``."""
        self.status = "unavailable"
        self.missing = missing
        self.reason = str(self.dependency_error(missing))
        self._manager = None

    def ensure_usable(self) -> None:
        """Raise the error that explains why this backend cannot be used, if it cannot."""
        if self.status == "broken":
            raise self._broken_error()
        if self.status == "incompatible":
            raise BackendIncompatibleError(
                f"execution backend {self.name!r} ({self.distribution}) is incompatible: {self.reason}. "
                f"Install a version of {self.distribution} made for this tilelang-core."
            )
        if self.status == "unavailable":
            raise BackendDependencyError(self.reason, name=self.missing)

    def _broken_error(self) -> BackendBrokenError:
        return BackendBrokenError(
            f"execution backend {self.name!r} ({self.distribution or 'unknown distribution'}) is broken: "
            f"{self.reason}. {self.advice}".rstrip()
        )

    def missing_dependency(self, exc: BaseException) -> Optional[str]:
        """The module ``exc`` says is missing, when it is not part of the plugin itself (else None)."""
        missing = missing_module(exc)
        if missing is None or missing == self.package:
            return None
        return missing

    def dependency_error(self, missing: str) -> BackendDependencyError:
        """The error for a dependency module ``missing`` that this backend needs."""
        message = dependency_message(
            missing, needed_by=f"execution backend {self.where()}", distribution=self.distribution
        )
        return BackendDependencyError(message, name=missing)

    def call(self, hook: str, **kwargs: Any) -> Any:
        """Call one of this backend's hooks, applying the exception policy (docs/hooks.md).

        - errors of the core's classes (:class:`~tilelang_core.errors.BuildError`,
          :class:`~tilelang_core.errors.KernelNotSupportedError`, ``ArtifactError``, ...) pass through;
        - ``NotImplementedError`` from the build hook refuses the kernel
          (:class:`~tilelang_core.errors.KernelNotSupportedError`);
        - a missing dependency module is :class:`~tilelang_core.errors.BackendDependencyError`
          (environment: the backend stays usable);
        - ``OSError``/``MemoryError`` from build, save or load pass through (environment), and so
          do ``TypeError``/``ValueError`` from load (saved files that make no sense: the cache
          discards the entry and rebuilds);
        - anything else, ``SystemExit`` included, is a bug of the plugin: the backend is marked
          broken and the call raises :class:`~tilelang_core.errors.BackendBrokenError` naming the
          hook and the exception. ``KeyboardInterrupt`` (Ctrl-C) stops the program as usual.
        """
        self.ensure_usable()
        manager = self._manager
        assert manager is not None
        try:
            return getattr(manager.hook, hook)(**kwargs)
        except TileLangError:
            raise
        except NotImplementedError as exc:
            if hook != _BUILD:
                self._hook_failed(hook, exc)
            raise KernelNotSupportedError(str(exc) or "the build hook raised NotImplementedError") from exc
        except ModuleNotFoundError as exc:
            missing = self.missing_dependency(exc)
            if missing is None:
                self._hook_failed(hook, exc)
            raise self.dependency_error(missing) from exc
        except (OSError, MemoryError) as exc:
            if hook not in (_BUILD, _SAVE, _LOAD):
                self._hook_failed(hook, exc)
            raise  # the environment (disk full, permissions): callers warn or report it as it is
        except (TypeError, ValueError) as exc:
            if hook != _LOAD:
                self._hook_failed(hook, exc)
            raise  # the saved files make no sense: the cache discards the entry and rebuilds
        except (Exception, SystemExit, GeneratorExit) as exc:  # noqa: BLE001 - plugin code may not end the process
            self._hook_failed(hook, exc)

    def _hook_failed(self, hook: str, exc: BaseException) -> None:
        """Mark the backend broken by ``exc`` from ``hook`` (a plugin bug) and raise the error saying so."""
        release = " ".join(p for p in (self.distribution or self.name, self.version) if p)
        self.mark_broken(
            f"hook {hook} raised {type(exc).__name__}: {exc}",
            advice=f"This is a bug in {release}: report it to its authors (with the traceback above); "
            f"meanwhile choose another execution backend.",
        )
        raise self._broken_error() from exc

    def returned_wrong_type(self, hook: str, value: Any, expected: str) -> NoReturn:
        """``hook`` returned ``value``, which is not ``expected``: a bug of the plugin, handled like a
        hook that raised (the backend is marked broken and :class:`~tilelang_core.errors.BackendBrokenError`
        is raised, so that ``auto`` falls back to the next backend)."""
        release = " ".join(p for p in (self.distribution or self.name, self.version) if p)
        shown = repr(value)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        self.mark_broken(
            f"hook {hook} returned {type(value).__name__} ({shown}), expected {expected}",
            advice=f"This is a bug in {release}: report it to its authors; meanwhile choose another execution backend.",
        )
        raise self._broken_error()

    def implements(self, hook: str) -> bool:
        """Whether the plugin implements ``hook``."""
        if self._manager is None:
            return False
        return bool(getattr(self._manager.hook, hook).get_hookimpls())

    def files_hash(self) -> str:
        """Content hash of the plugin's code as imported, and of the rest of its installed distribution
        (:func:`.files.plugin_files_hash`; memoised per record, i.e. per process until the registry is
        refreshed); part of the kernel cache key."""
        if self._files_hash is None:
            from .files import plugin_files_hash

            dist = getattr(self._ep.entry_point, "dist", None) if self._ep is not None else None
            self._files_hash = plugin_files_hash(dist, self.package)
        return self._files_hash


class BackendRegistry:
    """Installed execution backends of one entry-point group.

    ``path`` limits discovery to distributions installed in those directories (the test kit
    uses it to see only throwaway plugins); by default every distribution on ``sys.path``.
    """

    def __init__(self, group: str = ENTRY_POINT_GROUP, path: Optional[list[str]] = None) -> None:
        self.group = group
        self.path = path
        self._lock = threading.RLock()
        renew_after_fork(self, "_lock")  # held while a plugin loads or a probe runs: fresh in a fork child
        self._entry_points: Optional[list[BackendEntryPoint]] = None
        self._records: dict[str, BackendRecord] = {}

    # -- metadata only ------------------------------------------------------------------------

    def _eps(self) -> list[BackendEntryPoint]:
        with self._lock:
            if self._entry_points is None:
                self._entry_points = discover(self.group, self.path)
            return self._entry_points

    def entry_points(self) -> list[BackendEntryPoint]:
        """Every installed backend entry point (name, distribution, version), from metadata alone."""
        return list(self._eps())

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
    record = BackendRecord(first.name, first.distribution, first.version, first.value, _ep=first)
    damaged = next((ep for ep in eps if ep.problem is not None), None)
    if damaged is not None:
        record.mark_broken(
            f"entry point {damaged.name} = {damaged.value} cannot be loaded: {damaged.problem}",
            advice=f"Reinstall the distribution that installed it (pip install --force-reinstall <distribution>), or "
                   f"delete {metadata_path(damaged.entry_point.dist)} (and the package it installed) if it is a leftover.",
        )
        return record
    if len(eps) > 1:
        dists = ", ".join(sorted(ep.distribution or "?" for ep in eps))
        record.distribution = dists
        record.mark_broken(
            f"name {first.name!r} is claimed by several distributions ({dists}); uninstall all but one",
            advice="",
        )
        return record
    timeout = plugin_timeout()
    step = [f"importing {first.value}"]
    with compiling():  # a fork waits for the import (fork_locks.py)
        outcome = run_plugin_code(lambda: _load_plugin(record, first, step), timeout=timeout, name=first.name)
    if not outcome.finished:
        # the thread may still be running: give it nothing more to change
        late = BackendRecord(first.name, first.distribution, first.version, first.value, _ep=first)
        late.mark_broken(
            f"loading did not finish within {timeout:g} s ({step[0]} was still running); "
            f"set {TIMEOUT_ENV} to a larger number of seconds if it is only slow"
        )
        return late
    if outcome.error is not None:  # a bug of the core itself, not of the plugin
        raise outcome.error
    if outcome.heavy and record.status == "ok":
        record.warnings.append(
            f"loading {first.value} imported {', '.join(outcome.heavy)}: an entry-point module must import "
            f"cheaply (import heavy modules inside the hooks), or every `import`, listing and selection pays for it"
        )
    return record


def _load_plugin(record: BackendRecord, ep: BackendEntryPoint, step: list[str]) -> None:
    """Import the plugin, check its API version and hooks, and read its declaration (in the loading thread)."""
    try:
        plugin = ep.load()
    except BaseException as exc:  # noqa: BLE001 - a plugin may raise anything on import, SystemExit too
        missing = record.missing_dependency(exc)
        if missing is not None:
            record.mark_unavailable(missing)
        else:
            record.mark_broken(f"importing {ep.value} raised {type(exc).__name__}: {exc}")
        return

    try:
        api = getattr(plugin, "TILELANG_PLUGIN_API", None)
    except BaseException as exc:  # noqa: BLE001 - a module __getattr__ may raise anything
        record.mark_broken(
            f"reading {ep.value}.TILELANG_PLUGIN_API raised {type(exc).__name__}: {exc} (a module-level __getattr__ "
            f"must raise AttributeError for unknown names); define TILELANG_PLUGIN_API = "
            f"{hookspecs.PLUGIN_API_VERSION} in the module"
        )
        return
    if not isinstance(api, int) or isinstance(api, bool):
        record.mark_broken(
            f"{ep.value} does not define TILELANG_PLUGIN_API as an int "
            f"(this tilelang-core expects {hookspecs.PLUGIN_API_VERSION})"
        )
        return
    if api != hookspecs.PLUGIN_API_VERSION:
        record.status = "incompatible"
        record.reason = (
            f"written for plugin API version {api}, but this tilelang-core provides "
            f"plugin API version {hookspecs.PLUGIN_API_VERSION}"
        )
        return

    from ..core_pin import core_pin_problem

    pin = core_pin_problem(ep.entry_point)  # the plugin's tilelang-core>=X,<Y
    if pin:
        record.status, record.reason = "incompatible", pin
        return

    manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    manager.add_hookspecs(hookspecs)
    try:
        manager.register(plugin, name=ep.name)
        manager.check_pending()
    except pluggy.PluginValidationError as exc:
        record.mark_broken(f"plugin {ep.name!r} ({ep.distribution}) has an invalid hook: {_invalid_hook(plugin, exc)}")
        return
    except Exception as exc:  # noqa: BLE001 - pluggy reads every attribute: a module __getattr__ may raise anything
        record.mark_broken(f"registering the hooks of {ep.value} raised {type(exc).__name__}: {exc} (a module-level "
                           f"__getattr__ must raise AttributeError for unknown names)")
        return
    record._manager = manager
    lacking = _lacking_hooks(record, plugin)
    if lacking:
        record.mark_broken(f"plugin {ep.name!r} ({ep.distribution}) {lacking}", advice=(
            f"Install a complete version of {ep.distribution or ep.name}, or uninstall it."
        ))
        return

    from .validation import validate_declaration

    step[0] = f"calling {ep.value}'s tilelang_backend_spec()"
    try:
        raw = manager.hook.tilelang_backend_spec()
    except BaseException as exc:  # noqa: BLE001 - SystemExit too: plugin code may not end the process
        missing = record.missing_dependency(exc)
        if missing is not None:
            record.mark_unavailable(missing)
        else:
            record.mark_broken(f"hook tilelang_backend_spec raised {type(exc).__name__}: {exc}")
        return
    try:
        record.spec = validate_declaration(raw, ep, api)
    except TileLangError as exc:
        record.mark_broken(str(exc))


def _lacking_hooks(record: BackendRecord, plugin: Any) -> str:
    """What the plugin lacks of :data:`~tilelang_core.hookspecs.REQUIRED_HOOKS` and the hook pairs, or ''."""
    missing = [h for h in hookspecs.REQUIRED_HOOKS if not record.implements(h)]
    if missing:
        return (f"does not implement the required hook{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
                + _undecorated(plugin, missing))
    for pair in hookspecs.PAIRED_HOOKS:
        present = [h for h in pair if record.implements(h)]
        if present and len(present) != len(pair):
            absent = [h for h in pair if h not in present]
            return f"implements {', '.join(present)} but not {', '.join(absent)}; they go together" + _undecorated(plugin, absent)
    return ""


def _undecorated(plugin: Any, hooks: list[str]) -> str:
    """A hint for hooks the plugin defines as plain functions (without the ``@hookimpl`` marker)."""
    plain = [h for h in hooks if callable(_attribute(plugin, h))]
    if not plain:
        return ""
    return (f" ({', '.join(plain)} {'is' if len(plain) == 1 else 'are'} defined, but without the "
            f"@hookimpl decorator: from tilelang_core.hookspecs import hookimpl)")


def _attribute(plugin: Any, name: str) -> Any:
    """``getattr(plugin, name, None)``, also None when the lookup raises something other than
    ``AttributeError`` (a module-level ``__getattr__`` with a bug): only used for hints."""
    try:
        return getattr(plugin, name, None)
    except Exception:  # noqa: BLE001 - the hint is left out; the caller reports the real problem
        return None


def _hook_signature(name: str) -> str:
    """``name(arg, ...)`` as the hook specification declares it."""
    spec = getattr(hookspecs, name)
    return f"{name}({', '.join(inspect.signature(spec).parameters)})"


def _invalid_hook(plugin: Any, exc: Exception) -> str:
    """One line for pluggy's validation error: the unknown or mis-declared hook and what is expected."""
    text = str(exc)
    hook = getattr(exc, "hookimpl", None)
    name = getattr(hook, "name", None) if hook is not None else None
    if name is None:
        found = re.search(r"hook '(\w+)'", text)
        name = found.group(1) if found else None
    known = [h for h in dir(hookspecs) if h.startswith("tilelang_backend_")]
    if name is not None and name not in known:
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"unknown hook {name!r}{hint}; the hooks are {', '.join(known)}"
    if name is not None:
        impl = _attribute(plugin, name)
        try:
            declared = f"{name}({', '.join(inspect.signature(impl).parameters)})"
        except (TypeError, ValueError):
            declared = name
        extra = re.search(r"Argument\(s\) (\{.*?\})", text)
        what = f"argument(s) {extra.group(1)} are not in the specification" if extra else " ".join(text.split())
        return (f"{declared}: {what}; the specification is {_hook_signature(name)} "
                f"(an implementation may take fewer of these arguments, not others)")
    return " ".join(text.split())


_default: Optional[BackendRegistry] = None
_default_lock = threading.Lock()
renew_after_fork(sys.modules[__name__], "_default_lock")


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
