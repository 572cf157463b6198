"""Thread locks renewed in a child made by ``os.fork()``, and a fork that waits for compiles.

The child of a fork has only the thread that forked. A lock another thread of the parent held at
that moment (the per-key lock of a kernel it was building, a registry lock held while a plugin
loads) is copied locked, and nothing in the child would ever release it: the child hung the first
time it asked for it. :func:`renew_after_fork` names the attributes of an object (a module, a
class or an instance) that hold such locks, or dicts of them; in the child each attribute gets a
fresh, empty one of its kind, as :mod:`logging` does for its own locks. A fresh object, not the
old one unlocked in place: a ``with`` block of the forking thread that holds an old lock releases
that old object. (A lock other modules import by name cannot be replaced: ``ast_lock.py`` resets
its one lock in place.)

Renewed locks are not enough where the parent's thread was inside code this package does not own:
a first ``import`` of a module (Python's per-module import lock), pydantic-core building a schema
validator, TVM's C++ code. A child forked then hung for good the first time it did the same
(about 3 forks in 10 during a first compile). So :func:`compiling` marks a compile (or a plugin
load) in progress, and ``os.fork()`` waits, in its before-fork handler, until no other thread of
the process is inside one (at most :data:`FORK_WAIT_S`: past that it forks anyway, as before).
A compile that starts while a fork waits waits for the fork. The forking thread's own compiles
never make it wait (a backend may fork inside its build).
"""

from __future__ import annotations

import _thread
import contextlib
import functools
import os
import threading
import time
import weakref
from typing import Any, Callable, Iterator, TypeVar

__all__ = ["compiling", "renew_after_fork", "waits_for_fork"]

#: The longest ``os.fork()`` waits for other threads' compiles (seconds).
FORK_WAIT_S = 120.0

#: owner -> the names of its attributes to renew (owners are not kept alive).
_owners: "weakref.WeakKeyDictionary[Any, tuple[str, ...]]" = weakref.WeakKeyDictionary()


def renew_after_fork(owner: Any, *names: str) -> None:
    """In a child made by ``os.fork()``, give ``owner.<name>`` for each of ``names`` a fresh
    ``threading.Lock``, ``threading.RLock`` or empty ``dict`` (whichever it holds then)."""
    _owners[owner] = tuple(dict.fromkeys(_owners.get(owner, ()) + names))


_RLOCK = type(threading.RLock())


def _fresh(old: Any) -> Any:
    if isinstance(old, _thread.LockType):
        return threading.Lock()
    if isinstance(old, _RLOCK):
        return threading.RLock()
    if isinstance(old, dict):
        return {}
    raise TypeError(f"renew_after_fork: cannot renew a {type(old).__name__}")


def _renew_in_child() -> None:
    for owner, names in list(_owners.items()):
        for name in names:
            setattr(owner, name, _fresh(getattr(owner, name)))


class _CompileGate:
    """Threads inside a compile (with their depth), and the thread forking, if any."""

    def __init__(self) -> None:
        self.condition = threading.Condition(threading.Lock())
        self.inside: dict[int, int] = {}
        self.forking: "int | None" = None

    @contextlib.contextmanager
    def section(self) -> Iterator[None]:
        me = threading.get_ident()
        with self.condition:
            # a thread already inside (a compile's nested lower or plugin load) goes on: the fork
            # waits for it to leave, so it must not wait for the fork
            while self.forking is not None and self.forking != me and me not in self.inside:
                self.condition.wait()
            self.inside[me] = self.inside.get(me, 0) + 1
        try:
            yield
        finally:
            with self.condition:
                depth = self.inside.pop(me) - 1
                if depth:
                    self.inside[me] = depth
                self.condition.notify_all()

    def before_fork(self) -> None:
        me = threading.get_ident()
        self.condition.acquire()  # held across the fork: nothing enters or leaves a compile meanwhile
        self.forking = me
        deadline = time.monotonic() + FORK_WAIT_S
        while any(thread != me for thread in self.inside):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self.condition.wait(left)

    def after_fork_in_parent(self) -> None:
        self.forking = None
        self.condition.notify_all()
        self.condition.release()

    def after_fork_in_child(self) -> None:
        me = threading.get_ident()
        depth = self.inside.get(me)
        self.condition, self.forking = threading.Condition(threading.Lock()), None
        self.inside = {me: depth} if depth else {}


_GATE = _CompileGate()


def compiling() -> "contextlib.AbstractContextManager[None]":
    """A context in which this thread compiles (or loads plugins): ``os.fork()`` in another thread
    waits until it is left (module docstring)."""
    return _GATE.section()


_F = TypeVar("_F", bound=Callable[..., Any])


def waits_for_fork(fn: _F) -> _F:
    """Decorate ``fn`` to run inside :func:`compiling`."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _GATE.section():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_renew_in_child)
    os.register_at_fork(before=_GATE.before_fork, after_in_parent=_GATE.after_fork_in_parent,
                        after_in_child=_GATE.after_fork_in_child)
