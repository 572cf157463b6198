"""A child made by ``os.fork()`` while another thread compiles kernel K can compile K itself.

The per-key thread lock of the kernel cache (and the other thread locks of the compile path) was
copied into the child locked: the thread holding it does not exist there, so the child asking for
K waited for ever. Each such lock is now replaced by a fresh one in the child
(``os.register_at_fork``). Locks of code the package does not own (a module's import lock during a
first compile, pydantic-core's) cannot be renewed: a fork now waits until no other thread is inside
a compile (fork_locks.compiling). The scenario runs in a fresh interpreter, once with that wait and
once without it (the renewed locks alone); a slow C compiler makes the fork land while the parent's
thread is building, and a faulthandler timer in the child turns a hang into a failing exit status.
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
    import tilelang_core.fork_locks as fork_locks
    fork_locks.FORK_WAIT_S = float(os.environ["FORK_WAIT_S"])

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
    before = time.monotonic()
    pid = os.fork()
    if pid == 0:
        faulthandler.dump_traceback_later(12, exit=True)  # a hang: exit status 1 with the stacks
        build("child")
        sys.stdout.flush()
        os._exit(0)
    print("fork waited", "yes" if time.monotonic() - before > 1.0 else "no", flush=True)
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


@pytest.mark.parametrize("wait", [True, False], ids=["fork-waits", "renewed-locks-alone"])
def test_fork_child_compiles_the_kernel_a_parent_thread_is_compiling(tmp_path, wait):
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
        "FORK_WAIT_S": "60" if wait else "0",
    }
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=90,
                          cwd=tmp_path)
    out = proc.stdout.splitlines()
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert "parent 3.0" in out and "child 3.0" in out and "child exit 0" in out, proc.stdout + proc.stderr[-4000:]
    assert f"fork waited {'yes' if wait else 'no'}" in out, proc.stdout  # for the parent's build (2 s), or not
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


# -- the fork waits for other threads' compiles ---------------------------------------------------


def _fork_and_exit() -> float:
    """Fork a child that exits at once; the seconds ``os.fork()`` took in the parent."""
    import time

    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    took = time.monotonic() - start
    os.waitpid(pid, 0)
    return took


def test_a_fork_waits_until_no_other_thread_is_inside_a_compile():
    """A first compile imports modules and builds pydantic-core validators: a child forked while
    another thread was doing so inherited their locks held and hung for good (3 forks in 10)."""
    import threading
    import time

    from tilelang_core.fork_locks import compiling

    inside, leave = threading.Event(), threading.Event()

    def compile_for_a_while():
        with compiling():
            inside.set()
            leave.wait(10)

    worker = threading.Thread(target=compile_for_a_while)
    worker.start()
    inside.wait(10)
    threading.Timer(0.5, leave.set).start()
    took = _fork_and_exit()
    worker.join(10)
    assert took >= 0.4, f"os.fork() returned after {took:.2f} s, inside the other thread's compile"
    assert _fork_and_exit() < 0.4  # nothing in flight: no wait


def test_a_fork_inside_this_threads_own_compile_does_not_wait_for_itself():
    from tilelang_core import fork_locks

    with fork_locks.compiling(), fork_locks.compiling():
        assert _fork_and_exit() < 0.4
        assert fork_locks._GATE.inside == {__import__("threading").get_ident(): 2}
    assert fork_locks._GATE.inside == {}


def test_a_fork_waits_for_a_compile_that_enters_a_nested_section_meanwhile(monkeypatch):
    """compile -> lower is a section inside a section: the thread entering the inner one waited
    for the fork, which waited for the thread, until FORK_WAIT_S (120 s) ran out."""
    import threading
    import time

    from tilelang_core import fork_locks
    from tilelang_core.fork_locks import compiling

    monkeypatch.setattr(fork_locks, "FORK_WAIT_S", 10.0)

    inside, leave = threading.Event(), threading.Event()
    finished = []

    def compile_with_a_nested_lower():
        with compiling():
            inside.set()
            time.sleep(0.3)  # the fork is waiting by now
            with compiling():
                finished.append(time.monotonic())

    worker = threading.Thread(target=compile_with_a_nested_lower)
    worker.start()
    inside.wait(10)
    took = _fork_and_exit()
    worker.join(10)
    assert finished and took < 3, f"os.fork() returned after {took:.1f} s"
