"""Thread locks renewed in a child made by ``os.fork()``.

The child of a fork has only the thread that forked. A lock another thread of the parent held at
that moment (the per-key lock of a kernel it was building, a registry lock held while a plugin
loads) is copied locked, and nothing in the child would ever release it: the child hung the first
time it asked for it. :func:`renew_after_fork` names the attributes of an object (a module, a
class or an instance) that hold such locks, or dicts of them; in the child each attribute gets a
fresh, empty one of its kind, as :mod:`logging` does for its own locks. A fresh object, not the
old one unlocked in place: a ``with`` block of the forking thread that holds an old lock releases
that old object. (A lock other modules import by name cannot be replaced: ``ast_lock.py`` resets
its one lock in place.)
"""

from __future__ import annotations

import _thread
import os
import threading
import weakref
from typing import Any

__all__ = ["renew_after_fork"]

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


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_renew_in_child)
