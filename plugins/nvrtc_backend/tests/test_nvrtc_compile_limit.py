"""NVRTC compiles are bounded by ``$TILELANG_COMPILE_TIMEOUT_SECONDS``, as the C compilers are
(tilelang_backend_nvrtc/worker.py): past the limit the worker process is killed and the build
raises a BuildError saying so; with ``0`` NVRTC runs in this process, without a limit.

The runaway source is a template that instantiates two new ones at each of 40 levels: NVRTC's
front end never finishes it (and grows by about 150 MB a second), and its cancellation callback
is not called there, so before the worker the build hung for good. It runs in a child Python
with a deadline, so that a hang fails the test instead of the test run.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

from tilelang_backend_nvrtc.arch import Arch
from tilelang_backend_nvrtc.compiler import compile_cubin

RUNAWAY = r"""
template <int N, unsigned long long M> struct F {
  static constexpr unsigned long long v = F<N - 1, 2 * M>::v + F<N - 1, 2 * M + 1>::v;
};
template <unsigned long long M> struct F<0, M> { static constexpr unsigned long long v = M; };
extern "C" __global__ void runaway(unsigned long long* p) { *p = F<40, 1>::v; }
"""

SMALL = 'extern "C" __global__ void twice(float* p) { p[threadIdx.x] *= 2.0f; }\n'

CHILD = textwrap.dedent(f"""
    import os, time
    os.environ["TILELANG_COMPILE_TIMEOUT_SECONDS"] = "2"
    from tilelang_core.errors import BuildError
    from tilelang_backend_nvrtc.arch import Arch
    from tilelang_backend_nvrtc.compiler import compile_cubin
    start = time.monotonic()
    try:
        compile_cubin("runaway", {RUNAWAY!r}, Arch.parse("sm_80"))
    except BuildError as exc:
        print("BuildError after", round(time.monotonic() - start, 1), "s")
        print(exc)
    image = compile_cubin("twice", {SMALL!r}, Arch.parse("sm_80")).image  # a new worker takes the next compile
    print("next compile", len(image), "bytes")
""")


def test_a_compile_that_never_ends_stops_at_the_time_limit_with_a_clear_error():
    start = time.monotonic()
    try:
        out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=90)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the NVRTC compile was not stopped ({time.monotonic() - start:.0f} s)")
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    assert "NVRTC did not finish compiling kernel 'runaway' for sm_80: stopped after 2 s: NVRTC ran longer than " \
           "$TILELANG_COMPILE_TIMEOUT_SECONDS allows" in text, text
    assert "--gpu-architecture=sm_80" in text and "source kept at:" in text, text
    seconds = float(text.split("BuildError after ", 1)[1].split(" s", 1)[0])
    assert 2 <= seconds < 30, text
    assert "next compile" in text, text


def test_the_worker_builds_the_same_cubin_as_nvrtc_in_this_process(monkeypatch):
    monkeypatch.setenv("TILELANG_COMPILE_TIMEOUT_SECONDS", "60")
    bounded = compile_cubin("twice", SMALL + "// bounded\n", Arch.parse("sm_80"))
    monkeypatch.setenv("TILELANG_COMPILE_TIMEOUT_SECONDS", "0")
    in_process = compile_cubin("twice", SMALL + "// in process\n", Arch.parse("sm_80"))
    assert bounded.image == in_process.image and bounded.headers == in_process.headers == "standin"


def test_a_worker_that_dies_is_a_clear_build_error(monkeypatch):
    from tilelang_core.errors import BuildError

    from tilelang_backend_nvrtc import worker

    monkeypatch.setenv("TILELANG_COMPILE_TIMEOUT_SECONDS", "60")
    compile_cubin("twice", SMALL + "// warm\n", Arch.parse("sm_80"))
    assert worker._idle, "the worker is kept for the next compile"
    for idle in worker._idle:
        idle.proc.kill()
        idle.proc.wait()
    # a dead idle worker is not used: a new one takes the compile
    assert compile_cubin("twice", SMALL + "// after\n", Arch.parse("sm_80")).image
    original = worker._Worker.ask

    def dies(self, request, timeout):
        self.proc.kill()
        return original(self, request, timeout)

    monkeypatch.setattr(worker._Worker, "ask", dies)
    with pytest.raises(BuildError, match=r"the NVRTC worker process ended during the compile \(signal SIGKILL"):
        compile_cubin("twice", SMALL + "// killed\n", Arch.parse("sm_80"))
