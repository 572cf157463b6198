"""CPU kernels in a process forked after TVM's thread pool started: serial blocks, not a hang.

The blocks of a CPU kernel run on TVM's thread pool (``TVMBackendParallelLaunch``: LLVM modules'
parallel loops, and the block launcher of the ``c`` target's C entry). The pool belongs to the
thread that first launched parallel work; ``os.fork`` copies it into the child without its worker
threads, and TVM has no after-fork handler, so the child's first parallel kernel waited forever
for workers that do not exist (``multiprocessing`` with the ``fork`` start method, torch
``DataLoader`` workers; whenever ``TVM_NUM_THREADS`` or the core count gives TVM two or more
threads).

Importing this module registers an after-fork handler for the child that sets TVM's maximum
concurrency of the forking thread (the only thread of the child) to 1 through
``runtime.config_threadpool``: every parallel launch of that thread then runs its tasks in the
calling thread, the path TVM takes for one thread, and never reaches the copied pool. Blocks in
such a child run one after the other (correct; other threads the child starts get pools of their
own). ``TVM_BIND_THREADS=0`` is set around the call so that TVM does not set the CPU affinity of the
copied worker handles, which name threads of the parent.
"""

from __future__ import annotations

import os

__all__: list = []


def _serial_in_child() -> None:
    """The after-fork handler of the child (module docstring)."""
    try:
        import tvm_ffi

        configure = tvm_ffi.get_global_func("runtime.config_threadpool", allow_missing=True)
    except Exception:  # noqa: BLE001 - nothing to configure: no TVM runtime loaded
        return
    if configure is None:
        return
    previous = os.environ.get("TVM_BIND_THREADS")
    os.environ["TVM_BIND_THREADS"] = "0"
    try:
        configure(1, 1, ["0"])  # big cores, one thread, one CPU: maximum concurrency 1
    except Exception:  # noqa: BLE001 - an after-fork handler must not raise into os.fork()
        pass
    finally:
        if previous is None:
            del os.environ["TVM_BIND_THREADS"]
        else:
            os.environ["TVM_BIND_THREADS"] = previous


if hasattr(os, "register_at_fork"):  # POSIX; kernel.py imports this module
    os.register_at_fork(after_in_child=_serial_in_child)
