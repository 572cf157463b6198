"""A child made by ``os.fork()`` while another thread compiles kernel K can compile K itself.

The per-key thread lock of the kernel cache (and the other thread locks of the compile path) was
copied into the child locked: the thread holding it does not exist there, so the child asking for
K waited for ever. Each such lock is now replaced by a fresh one in the child
(``os.register_at_fork``). The scenario runs in a fresh interpreter; a slow C compiler makes the
fork land while the parent's thread is building, and a faulthandler timer in the child turns a
hang into a failing exit status.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or shutil.which("cc") is None,
                                reason="needs os.fork and a C compiler named cc")

SCRIPT = textwrap.dedent(
    """
    import torch
    torch.set_num_threads(1)  # torch's own OpenMP pool is not fork-safe
    import faulthandler, os, sys, threading, time
    import tilelang, tilelang.language as T

    @T.prim_func
    def scale(A: T.Tensor((256,), "float32"), C: T.Tensor((256,), "float32")):
        with T.Kernel(4, threads=64) as bx:
            for i in T.Parallel(64):
                C[bx * 64 + i] = A[bx * 64 + i] * 3.0

    @T.prim_func
    def warm(A: T.Tensor((8,), "float32"), C: T.Tensor((8,), "float32")):
        for i in range(8):
            C[i] = A[i] + 1.0

    def build(tag):
        kernel = tilelang.compile(scale, out_idx=-1, target="c", execution_backend="cython")
        print(tag, kernel(torch.ones(256))[0].item(), flush=True)

    tilelang.compile(warm, out_idx=-1, target="c", execution_backend="cython")  # every lazy import done
    open(os.environ["CC_ARMED"], "w").close()  # the C compiler is slow from now on
    thread = threading.Thread(target=build, args=("parent",))
    thread.start()
    while not os.path.exists(os.environ["CC_STARTED"]):  # the thread is inside the C compiler now
        time.sleep(0.01)
    pid = os.fork()
    if pid == 0:
        faulthandler.dump_traceback_later(12, exit=True)  # a hang: exit status 1 with the stacks
        build("child")
        sys.stdout.flush()
        os._exit(0)
    thread.join()
    _, status = os.waitpid(pid, 0)
    print("child exit", os.waitstatus_to_exitcode(status), flush=True)
    """
)

# After the warm-up (CC_ARMED), each real compile (not a version or flag probe) says it has begun
# (CC_STARTED) and takes two seconds more.
SLOW_CC = """#!/bin/sh
case "$*" in *--version*|*-dumpmachine*|*probe*) exec cc "$@" ;; esac
if [ -e "$CC_ARMED" ]; then touch "$CC_STARTED"; sleep 2; fi
exec cc "$@"
"""


def test_fork_child_compiles_the_kernel_a_parent_thread_is_compiling(tmp_path):
    pytest.importorskip("torch")
    from tilelang_core.backends import get_registry

    record = get_registry().get("cython")
    if record is None or not record.usable or not get_registry().probe(record, "c").available:
        pytest.skip("tilelang-backend-cython is not installed/available")
    script = tmp_path / "fork_during_compile.py"
    script.write_text(SCRIPT)
    slow_cc = tmp_path / "slow_cc.sh"
    slow_cc.write_text(SLOW_CC)
    slow_cc.chmod(0o755)
    env = {
        **{k: v for k, v in os.environ.items() if k != "TILELANG_DISABLE_CACHE"},  # the child loads the parent's entry
        "CC": str(slow_cc),
        "CC_ARMED": str(tmp_path / "cc_armed"),
        "CC_STARTED": str(tmp_path / "cc_started"),
        "TILELANG_CACHE_DIR": str(tmp_path / "cache"),
    }
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=90,
                          cwd=tmp_path)
    out = proc.stdout.splitlines()
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert "parent 3.0" in out and "child 3.0" in out and "child exit 0" in out, proc.stdout + proc.stderr[-4000:]
    # the entry the parent wrote is whole (written in tmp/, renamed into kernels/), and tmp/ is empty
    entries = [p for shard in (tmp_path / "cache" / "kernels").iterdir() for p in shard.iterdir()]
    assert len(entries) == 2 and all((p / "tilelang-kernel.json").is_file() for p in entries), entries
    assert list((tmp_path / "cache" / "tmp").iterdir()) == []


def _module_locks(package: Any) -> list[tuple[Any, str]]:
    """(module, name) of every thread lock held in a module-level variable of ``package``."""
    import _thread
    import importlib
    import pkgutil
    import threading

    kinds = (_thread.LockType, type(threading.RLock()))
    found = []
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        module = importlib.import_module(info.name)
        found += [(module, name) for name, value in vars(module).items()
                  if isinstance(value, kinds) and not name.startswith("AST_LOCK")]
    return found


@pytest.mark.parametrize("package", ["tilelang_core", "tilelang_backend_cython", "tilelang_backend_tvmffi"])
def test_every_module_level_lock_is_renewed_in_a_fork_child(package):
    """A lock held by another thread at the fork would stay locked in the child for ever: each one
    of the core and of the CPU backends is named to fork_locks.renew_after_fork. (The AST lock,
    imported by name elsewhere, resets in place: ast_lock.py.)"""
    from tilelang_core import fork_locks

    locks = _module_locks(pytest.importorskip(package))
    assert locks, f"no module-level lock found in {package}: the scan is broken"
    missing = [f"{m.__name__}.{name}" for m, name in locks if name not in fork_locks._owners.get(m, ())]
    assert not missing, f"not renewed after fork: {missing}"
