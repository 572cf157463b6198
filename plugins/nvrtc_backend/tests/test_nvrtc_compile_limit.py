"""NVRTC compiles are bounded by ``$TILELANG_COMPILE_TIMEOUT_SECONDS``, as the C compilers are
(tilelang_backend_nvrtc/worker.py): past the limit the worker process is killed and the build
raises a BuildError saying so; with ``0`` NVRTC runs in this process, without a limit.

The runaway source is a template that instantiates two new ones at each of 40 levels: NVRTC's
front end never finishes it (and grows by about 150 MB a second), and its cancellation callback
is not called there, so before the worker the build hung for good. It runs in a child Python
with a deadline, so that a hang fails the test instead of the test run.
"""

from __future__ import annotations

import os
import shutil
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
    with pytest.raises(BuildError, match=r"the NVRTC worker process ended during the compile: killed by signal "
                                         r"SIGKILL \(the kernel's out-of-memory killer"):
        compile_cubin("twice", SMALL + "// killed\n", Arch.parse("sm_80"))


def test_a_worker_that_exits_is_not_blamed_on_the_out_of_memory_killer(monkeypatch):
    """Out of memory is named only for a worker killed by a signal, not one that exited."""
    from tilelang_core.errors import BuildError

    from tilelang_backend_nvrtc import worker

    monkeypatch.setenv("TILELANG_COMPILE_TIMEOUT_SECONDS", "60")
    worker._kill_idle()  # the next compile starts a worker, with the "Python" below
    monkeypatch.setattr(sys, "executable", shutil.which("false"))  # a worker that exits at once, with 1
    with pytest.raises(BuildError) as info:
        compile_cubin("twice", SMALL + "// exits\n", Arch.parse("sm_80"))
    message = str(info.value)
    assert "the NVRTC worker process ended during the compile: exit code 1\n" in message, message
    assert "SIGKILL" not in message and "memory" not in message, message


#: Modules of a user's own that must not shadow the worker's: a ``cuda.py`` (for ``cuda.bindings``)
#: and a ``tilelang_core/`` package (for the core the backend's compiler module imports).
SHADOWS = {
    "cuda.py": {"cuda.py": "raise ImportError('the user\\'s own cuda.py was imported')\n"},
    "tilelang_core": {"tilelang_core/__init__.py": "", "tilelang_core/compiler_process.py": "# the user's own\n"},
}


def _shadowing_folder(folder, shadow: str):
    """``folder`` holding the user's modules named ``shadow`` (see :data:`SHADOWS`)."""
    for relative, text in SHADOWS[shadow].items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text)
    return folder


@pytest.mark.parametrize("shadow", sorted(SHADOWS))
def test_modules_in_the_current_directory_do_not_shadow_the_workers(shadow, tmp_path):
    """A script run from a folder holding a ``cuda.py`` or a ``tilelang_core/`` of the user's
    compiles with the worker as it does in-process (the worker once had the current directory
    first on its path)."""
    work = _shadowing_folder(tmp_path / "work", shadow)
    script = tmp_path / "script" / "build.py"
    script.parent.mkdir()
    script.write_text(textwrap.dedent(f"""
        from tilelang_backend_nvrtc.arch import Arch
        from tilelang_backend_nvrtc.compiler import compile_cubin
        print("compiled", len(compile_cubin("twice", {SMALL!r}, Arch.parse("sm_80")).image), "bytes")
    """))
    search = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]  # from here
    env = dict(os.environ, TILELANG_COMPILE_TIMEOUT_SECONDS="60", PYTHONPATH=os.pathsep.join(search))
    out = subprocess.run([sys.executable, str(script)], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "compiled" in out.stdout, out.stdout + out.stderr


@pytest.fixture
def fresh_workers():
    """No idle worker before the test (the next compile starts one) nor after it."""
    from tilelang_backend_nvrtc import worker

    worker._kill_idle()
    yield
    worker._kill_idle()


@pytest.mark.parametrize("shadow", sorted(SHADOWS))
def test_a_worker_that_cannot_run_nvrtc_is_a_build_error(shadow, tmp_path, monkeypatch, fresh_workers):
    """The worker imports what this process's path finds: a user's module first on it there (this
    process imported the real ones already) is a BuildError saying what the worker met, not a
    RuntimeError (which marks the backend broken) nor a dead worker blamed on memory."""
    from tilelang_core.errors import BuildError

    from tilelang_backend_nvrtc.toolchain import toolchain

    toolchain()  # this process found NVRTC (and imported cuda.bindings) before the user's folder came first
    monkeypatch.setenv("TILELANG_COMPILE_TIMEOUT_SECONDS", "60")
    monkeypatch.syspath_prepend(str(_shadowing_folder(tmp_path, shadow)))
    with pytest.raises(BuildError) as info:
        compile_cubin("twice", SMALL + f"// {shadow}\n", Arch.parse("sm_80"))
    message = str(info.value)
    assert "NVRTC did not finish compiling kernel 'twice' for sm_80: the NVRTC worker process could not " \
           "compile it: " in message, message
    if shadow == "cuda.py":
        assert "ImportError: the user's own cuda.py was imported" in message, message
    else:
        assert "cannot import the backend's compiler module (ImportError: cannot import name 'DEFAULT_TIMEOUT_S' " \
               f"from 'tilelang_core.compiler_process' ({tmp_path / 'tilelang_core' / 'compiler_process.py'}))" \
               in message, message
    assert "(with $TILELANG_COMPILE_TIMEOUT_SECONDS=0 NVRTC runs in this process" in message, message
    assert "SIGKILL" not in message and "memory" not in message and "source kept at:" in message, message


def test_an_nvrtc_call_failing_in_this_process_is_a_build_error_standin(monkeypatch):
    """With no time limit NVRTC runs in this process; an NVRTC call that fails there (out of memory,
    an internal error: stood in for by a ``nvrtcGetCUBINSize`` that returns an error, since a real one
    cannot be provoked here) raised RuntimeError, which marks the backend broken for the process.
    It is this kernel's BuildError now, as in the worker."""
    from cuda.bindings import nvrtc

    from tilelang_core.errors import BuildError

    monkeypatch.setenv("TILELANG_COMPILE_TIMEOUT_SECONDS", "0")
    monkeypatch.setattr(nvrtc, "nvrtcGetCUBINSize", lambda prog: (nvrtc.nvrtcResult.NVRTC_ERROR_OUT_OF_MEMORY, 0))
    with pytest.raises(BuildError) as info:
        compile_cubin("twice", SMALL + "// in process, failing\n", Arch.parse("sm_80"))
    message = str(info.value)
    assert "NVRTC did not finish compiling kernel 'twice' for sm_80: NVRTC could not compile it in this process: " \
           "RuntimeError: nvrtcGetCUBINSize failed: NVRTC_ERROR_OUT_OF_MEMORY" in message, message
    monkeypatch.undo()
    assert compile_cubin("twice", SMALL + "// in process, failing\n", Arch.parse("sm_80")).image  # nothing cached
