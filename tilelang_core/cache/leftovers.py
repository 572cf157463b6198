"""What is being written: whether another process may still be at work on a half-written item.

The cache and exports name what they write before it is complete after the writing process:
``tmp/<key>.<pid>.<8 hex>`` (a cache entry), ``tmp/autotune-<key>.<pid>.<8 hex>.json`` (a tuning
record), ``.<name>.tmp-<pid>-<8 hex>`` (an export, :mod:`tilelang_core.jit.export_swap`). Whoever
cleans up (``tilelang cache clear``, an export recovering from a killed one) must leave alone
what a process that still runs is writing: the writer would fail half-way ("could not be saved:
No such file or directory").

A process id only says something on this machine, in this process namespace (another container
sharing the directory has its own ids), and ids are reused; so the cache also keeps what was
written in the last few minutes (:data:`BUSY_AGE_S`), and trusts a running process with a name
for one day at most (:data:`STALE_AGE_S`, the age at which the cache reaps leftovers anyway).

Imports nothing beyond the standard library.
"""

from __future__ import annotations

import os
import re
import time
from typing import Optional

#: Seconds during which an item in ``tmp/`` is taken to be still being written, whoever wrote it.
BUSY_AGE_S = 300.0
#: Seconds after which an item in ``tmp/`` is a leftover even if a process of its id runs.
STALE_AGE_S = 24 * 3600.0

#: The writer's process id in the names the cache gives what it writes in ``tmp/``.
_WRITER = re.compile(r"(?:autotune-)?[0-9a-f]{64}\.(\d+)\.[0-9a-f]{8}(?:\.json)?")


def process_alive(pid: int) -> bool:
    """Whether a process of id ``pid`` runs on this machine (this process counts; so does
    another user's, which this one may not signal)."""
    if pid == os.getpid():
        return True
    if pid <= 0:  # kill() would signal a process group
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # no such process; an id no process can have
        return False
    except OSError:  # another user's process
        return True
    return True


def writer_pid(name: str) -> Optional[int]:
    """The id of the process that writes the ``tmp/`` item ``name``, or None (``trash.*``, other names)."""
    found = _WRITER.fullmatch(name)
    return int(found.group(1)) if found else None


def busy_reason(name: str, mtime: float, now: Optional[float] = None) -> Optional[str]:
    """Why the ``tmp/`` item ``name`` (last modified at ``mtime``) may still be being written, or
    None when it is a leftover that can go.

    It is busy when it was written less than :data:`BUSY_AGE_S` ago, or when the process its name
    holds still runs and it is less than :data:`STALE_AGE_S` old.
    """
    age = (time.time() if now is None else now) - mtime
    if age < BUSY_AGE_S:
        return f"written {max(age, 0.0):.0f} s ago: another process may still be writing it"
    pid = writer_pid(name)
    if pid is not None and age < STALE_AGE_S and process_alive(pid):
        return f"process {pid}, which is still running, is writing it"
    return None


__all__ = ["BUSY_AGE_S", "STALE_AGE_S", "busy_reason", "process_alive", "writer_pid"]
