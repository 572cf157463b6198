"""``tilelang.par_compile``: input order, per-kernel failures with their index, progress bar."""

from __future__ import annotations

import functools
import runpy
from pathlib import Path

import pytest

import tilelang
from tilelang_core.errors import BuildError, TileLangError
from tilelang_core.jit.parallel import ParCompileError, default_workers
from tilelang_core.testkit import on_path

KIT = runpy.run_path(str(Path(__file__).with_name("test_cache_kit.py")))
pytest.importorskip("tilelang_core.lowering")
torch = pytest.importorskip("torch")


@pytest.fixture
def pyadd(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    KIT["install_pyadd"](site)
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TL_TEST_BUILD_LOG", str(tmp_path / "builds.log"))
    with on_path(site):
        yield lambda: [line.split()[1] for line in KIT["read_log"](tmp_path / "builds.log")]
    tilelang.cache.clear()


def test_results_in_input_order_with_one_failure(pyadd, capsys):
    sizes = [16, 8, 32, 4, 24]
    funcs = [KIT["make_prim_func"](f"k{i}", n) for i, n in enumerate(sizes)]
    funcs.insert(2, KIT["make_prim_func"]("will_fail", 8))  # the pyadd build hook refuses names with "fail"
    with pytest.raises(ParCompileError) as info:
        tilelang.par_compile(funcs, out_idx=-1, execution_backend="pyadd", target="c", num_workers=4)
    err = info.value
    assert isinstance(err, TileLangError)
    assert [i for i, _ in err.failures] == [2] and isinstance(err.failures[0][1], BuildError)
    assert "[2] BuildError: cannot build will_fail" in str(err) and "1 of 6 kernels failed" in str(err)
    kernels = err.results
    assert kernels[2] is None
    good = [k for k in kernels if k is not None]
    assert [k.name for k in good] == ["k0", "k1", "k2", "k3", "k4"]
    assert [k.params[0].shape[0] for k in good] == sizes
    x = torch.ones(32)
    assert torch.equal(kernels[3](x, x), x + x)
    assert "tilelang.par_compile" in capsys.readouterr().err  # the tqdm bar


def test_errors_return_and_callables(pyadd):
    @tilelang.jit(out_idx=-1, execution_backend="pyadd", target="c")
    def vadd(n):
        return KIT["make_prim_func"]("fail_me" if n < 0 else "jitvadd", abs(n))

    out = tilelang.par_compile(
        [functools.partial(vadd, 8), functools.partial(vadd, -8), KIT["make_prim_func"]("plain", 8)],
        out_idx=-1,
        execution_backend="pyadd",
        target="c",
        errors="return",
        progress=False,
    )
    assert out[0].name == "jitvadd" and isinstance(out[1], BuildError) and out[2].name == "plain"
    kernels = vadd.par_compile([8, 16, (32,)], progress=False)
    assert [k.params[0].shape[0] for k in kernels] == [8, 16, 32] and kernels[0] is out[0]


def test_defaults():
    assert default_workers() >= 1
    assert tilelang.par_compile([], progress=False) == []
    with pytest.raises(ValueError, match="errors must be"):
        tilelang.par_compile([], errors="ignore")


def test_timeout_per_kernel_reports_the_slow_one_and_keeps_the_others(pyadd):
    import threading
    import time

    from tilelang_core.jit.parallel import CompileTimeout

    release = threading.Event()
    fast = KIT["make_prim_func"]("quick", 8)

    def slow():
        release.wait(10)
        return "late"

    # built once first: the timed call finds it in the memory cache, so only the slow one can time out,
    # however loaded the machine is (a first build of it took over the 0.5 s under load)
    tilelang.par_compile([fast], out_idx=-1, execution_backend="pyadd", target="c", progress=False)
    start = time.monotonic()
    out = tilelang.par_compile([fast, slow, fast], out_idx=-1, execution_backend="pyadd", target="c", errors="return",
                               progress=False, num_workers=3, timeout=2.5)
    release.set()
    assert time.monotonic() - start < 8  # not waited for
    assert out[0].name == out[2].name == "quick"
    assert isinstance(out[1], CompileTimeout) and isinstance(out[1], TileLangError) and isinstance(out[1], TimeoutError)
    assert "kernel 1 was still compiling after the timeout of 2.5 s" in str(out[1])
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        tilelang.par_compile([fast], timeout=0)


def test_a_build_abandoned_for_its_timeout_does_not_hold_up_the_queued_ones():
    import threading
    import time

    from tilelang_core.jit.parallel import CompileTimeout

    release = threading.Event()  # the stuck build ends when the test does
    try:
        start = time.monotonic()
        results = tilelang.par_compile([lambda: release.wait(60) or "stuck", lambda: "second", lambda: "third"],
                                       num_workers=1, timeout=0.5, errors="return", progress=False)
        assert time.monotonic() - start < 20  # the queued builds waited for the stuck one's thread before
        assert isinstance(results[0], CompileTimeout) and results[1:] == ["second", "third"]
    finally:
        release.set()


def test_an_interrupted_call_drops_the_builds_not_started(monkeypatch):
    """Before: Ctrl-C stopped the call, but every queued build still started and ran in the
    background (the autotuner compiles through par_compile)."""
    import threading
    import time

    from tilelang_core.jit import parallel

    started = []
    release = threading.Event()

    def job(i):
        def build():
            started.append(i)
            release.wait(5)
            return i
        return build

    real_wait = parallel.wait

    def interrupted_wait(*args, **kwargs):
        real_wait(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(parallel, "wait", interrupted_wait)
    with pytest.raises(KeyboardInterrupt):
        parallel.par_compile([job(i) for i in range(6)], num_workers=1, progress=False, timeout=30)
    release.set()
    time.sleep(0.5)  # a worker that was not stopped takes the next job now
    assert started == [0], started


INTERRUPTED = r'''
import os, signal, sys, threading
import tilelang
import tilelang.language as T

def make(scale):
    @T.prim_func
    def unrolled(A: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=1):
            for i in T.serial(64):
                for k in T.unroll(64):
                    C[i, k] = C[i, k] + A[i, k] * T.float32(scale)
    return unrolled

started = threading.Event()
def build(scale):
    started.set()
    return tilelang.compile(make(scale), execution_backend="tvm_ffi", target="llvm")

def interrupt():  # Ctrl-C while the builds are inside TVM's C++ code
    started.wait(60)
    threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
threading.Thread(target=interrupt, daemon=True).start()
tilelang.par_compile([lambda s=s: build(s) for s in range(8)], num_workers=2, progress=False)
print("finished before the interrupt")
'''


def test_ctrl_c_during_par_compile_ends_with_keyboard_interrupt_not_an_abort(tmp_path):
    """The worker threads were still in TVM's C++ code when Python finalized: the process aborted
    with "terminate called without an active exception" (SIGABRT); it now waits for them at exit."""
    import os
    import subprocess
    import sys

    pytest.importorskip("tilelang_backend_tvmffi")
    env = {**os.environ, "TILELANG_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("TILELANG_DISABLE_CACHE", None)
    proc = subprocess.run([sys.executable, "-c", INTERRUPTED], capture_output=True, text=True, timeout=300, env=env)
    assert "terminate called" not in proc.stderr and proc.returncode != -6, proc.stderr[-2000:]
    assert "KeyboardInterrupt" in proc.stderr or "finished before the interrupt" in proc.stdout, proc.stderr[-2000:]
