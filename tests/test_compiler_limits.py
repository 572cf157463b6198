"""A native compiler that hangs, is killed, or prints megabytes (tilelang_core/compiler_process.py).

Before: the cython, tvm_ffi and ctypes backends ran ``$CC`` with ``subprocess.run`` and no time
limit, so a compiler that hung (a wrapper waiting on a lock, a stalled network file system) hung
``tilelang.compile`` for ever; a compiler printing 20 MB of warnings before failing made a
``BuildError`` of 20 MB; a compiler killed by a signal was reported as "exit code -9"; and the
kernel key's ``$CC --version`` run (``subprocess.run(timeout=30)``) killed only the wrapper
script, leaving what it had started running. The compilers here are small shell scripts in front
of the real ``cc``; the kernels are real and lowered for real.
"""

from __future__ import annotations

import os
import sys
import stat
import time
from pathlib import Path

import pytest
import torch

import tilelang
from tilelang_core.compiler_process import OUTPUT_HEAD, OUTPUT_TAIL, compile_timeout_s, run_compiler
from tilelang_core.errors import BuildError, SettingError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vadd_kernel import N, vadd as _vadd  # noqa: E402

pytestmark = pytest.mark.skipif(os.name != "posix", reason="shell-script compilers and process groups are POSIX")


def _script(path: Path, body: str) -> Path:
    """A compiler wrapper: quick probes (``--version``, ``-dumpmachine``, the flag checks, which
    build ``simd.c``/``probe.c``) go to the real ``cc``; a kernel build runs ``body``."""
    path.write_text("#!/bin/sh\n"
                    'case "$*" in *--version*|*-dumpmachine*|*simd.c*|*probe.c*) exec cc "$@";; esac\n' + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting for its parent counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    monkeypatch.delenv("CXX", raising=False)
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR is read again
    return tmp_path


# -- the helper -------------------------------------------------------------------------------------


def test_a_hung_compiler_is_killed_with_everything_it_started(tmp_path):
    """The whole process group goes, not only the driver: its 'cc1' (here a background sleep
    holding the output pipe) made subprocess.run wait after the timeout, or outlived it."""
    pidfile = tmp_path / "child.pid"
    start = time.monotonic()
    run = run_compiler(["sh", "-c", f"echo started; sleep 300 & echo $! > {pidfile}; wait"], timeout=1)
    assert time.monotonic() - start < 10
    assert run.timed_out and not run.ok and run.output == "started"
    assert "TILELANG_COMPILE_TIMEOUT_SECONDS" in run.failure and "stopped after 1 s" in run.failure
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


@pytest.mark.parametrize("ends", ["timeout", "interrupt"])
def test_a_killed_compiler_leaves_no_temporary_files(tmp_path, monkeypatch, ends):
    """gcc writes cc*.s and cc*.o to $TMPDIR and removes them only when it ends by itself: a
    compile killed for its time limit, or by Ctrl-C, left them in the user's temporary folder."""
    users = tmp_path / "users-tmp"
    users.mkdir()
    monkeypatch.setenv("TMPDIR", str(users))
    script = 'echo "$TMPDIR" > ' + str(tmp_path / "seen") + '; touch "$TMPDIR/ccA1b2C3.s"; sleep 300'
    if ends == "timeout":
        run = run_compiler(["sh", "-c", script], timeout=1)
        assert run.timed_out
    else:
        import signal
        import threading

        threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        with pytest.raises(KeyboardInterrupt):
            run_compiler(["sh", "-c", script], timeout=60)
    seen = Path((tmp_path / "seen").read_text().strip())
    assert seen.parent == users and seen.name.startswith("tilelang-cc-"), seen
    assert list(users.iterdir()) == [], "the compiler's own temporary folder is removed with what it wrote there"


def test_megabytes_of_output_are_cut_to_their_start_and_end(tmp_path):
    run = run_compiler(["sh", "-c", "echo FIRST; yes 'warning: noisy' | head -c 5000000; echo LAST; exit 2"],
                       output_file=tmp_path / "out.txt")
    assert run.returncode == 2 and run.failure == "exit code 2"
    assert run.output_bytes > 5_000_000
    assert len(run.output) < OUTPUT_HEAD + OUTPUT_TAIL + 1000
    assert run.output.startswith("FIRST") and run.output.endswith("LAST")
    assert f"bytes of compiler output left out here; all of it is in {tmp_path / 'out.txt'}" in run.output
    assert (tmp_path / "out.txt").stat().st_size == run.output_bytes


@pytest.mark.parametrize("sig, words", [("KILL", "signal SIGKILL (the kernel's out-of-memory killer"),
                                        ("XFSZ", "signal SIGXFSZ (a file it wrote grew past the file-size limit")])
def test_a_compiler_killed_by_a_signal_is_named(sig, words):
    run = run_compiler(["sh", "-c", f"kill -{sig} $$"])
    assert words in run.failure and "exit code" not in run.failure


def test_the_time_limit_setting(monkeypatch):
    monkeypatch.delenv("TILELANG_COMPILE_TIMEOUT_SECONDS", raising=False)
    assert compile_timeout_s() == 600
    monkeypatch.setenv("TILELANG_COMPILE_TIMEOUT_SECONDS", "0")
    assert compile_timeout_s() is None
    monkeypatch.setenv("TILELANG_COMPILE_TIMEOUT_SECONDS", "2.5")
    assert compile_timeout_s() == 2.5
    monkeypatch.setenv("TILELANG_COMPILE_TIMEOUT_SECONDS", "soon")
    with pytest.raises(SettingError, match=r"TILELANG_COMPILE_TIMEOUT_SECONDS must be a number of seconds from 0 to "
                                           r"1000000 \(0: no limit\), got 'soon'"):
        compile_timeout_s()


def test_the_key_does_not_leave_a_hung_version_run_behind(tmp_path, monkeypatch):
    from tilelang_core.cache import key

    pidfile = tmp_path / "child.pid"
    hung = _script(tmp_path / "hungcc", "")
    hung.write_text(f"#!/bin/sh\nsleep 300 & echo $! > {pidfile}\nwait\n")
    monkeypatch.setenv("TILELANG_COMPILE_TIMEOUT_SECONDS", "1")
    start = time.monotonic()
    ident = key._version_output([str(hung)], ["--version"])
    assert time.monotonic() - start < 10 and "stopped after 1 s" in ident
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


# -- the backends ----------------------------------------------------------------------------------

BACKENDS = [("cython", "c"), ("tvm_ffi", "c"), ("ctypes", "c")]


def _compile(backend, target):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # ctypes is deprecated
        return tilelang.compile(_vadd(), out_idx=-1, target=target, execution_backend=backend)


@pytest.mark.parametrize("backend, target", BACKENDS)
def test_a_compiler_that_hangs_gives_a_build_error_in_time(env, monkeypatch, backend, target):
    monkeypatch.setenv("CC", str(_script(env / "hangcc", "sleep 300\n")))
    monkeypatch.setenv("TILELANG_COMPILE_TIMEOUT_SECONDS", "2")
    start = time.monotonic()
    with pytest.raises(BuildError, match=r"stopped after 2 s: it ran longer than \$TILELANG_COMPILE_TIMEOUT_SECONDS"):
        _compile(backend, target)
    assert time.monotonic() - start < 30


@pytest.mark.parametrize("backend, target", BACKENDS)
def test_a_compiler_printing_megabytes_gives_a_short_error(env, monkeypatch, backend, target):
    body = "yes 'error: a very noisy compiler error line' | head -c 8000000 >&2\nexit 1\n"
    monkeypatch.setenv("CC", str(_script(env / "noisycc", body)))
    with pytest.raises(BuildError) as info:
        _compile(backend, target)
    text = str(info.value)
    assert len(text) < 100_000 and "bytes of compiler output left out here" in text and "exit code 1" in text
    assert info.value.output is None or len(info.value.output) < 100_000


@pytest.mark.parametrize("backend, target", BACKENDS)
def test_a_compiler_killed_by_a_signal_says_which(env, monkeypatch, backend, target):
    monkeypatch.setenv("CC", str(_script(env / "killedcc", "kill -KILL $$\n")))
    with pytest.raises(BuildError, match=r"killed by signal SIGKILL"):
        _compile(backend, target)


@pytest.mark.parametrize("backend, target", BACKENDS)
def test_a_slow_but_working_compiler_still_builds(env, monkeypatch, backend, target):
    monkeypatch.setenv("CC", str(_script(env / "slowcc", 'sleep 0.3\nexec cc "$@"\n')))
    kernel = _compile(backend, target)
    a, b = torch.randn(N), torch.randn(N)
    torch.testing.assert_close(kernel(a, b), a + b)


def test_a_run_that_writes_nothing_is_not_ok(tmp_path):
    run = run_compiler(["true"], cwd=tmp_path, writes="kernel.so")
    assert not run.ok and run.returncode == 0 and run.missing == tmp_path / "kernel.so"
    assert run.failure == "exit code 0, but it wrote no kernel.so"
    (tmp_path / "kernel.so").write_bytes(b"\x7fELF")
    assert run_compiler(["true"], cwd=tmp_path, writes="kernel.so").ok


@pytest.mark.parametrize("backend, target", BACKENDS)
def test_a_compiler_that_exits_0_without_writing_the_library_is_a_build_error(env, monkeypatch, backend, target):
    """``CC='gcc -fsyntax-only'`` (or ``true``): cython raised a bare FileNotFoundError of its
    library; tvm_ffi exported, and cached, a kernel without ``kernel.so``."""
    monkeypatch.setenv("CC", str(_script(env / "nullcc", "exit 0\n")))
    with pytest.raises(BuildError, match=r"failed \(exit code 0, but it wrote no \w+\.so\)"):
        _compile(backend, target)


def test_an_llvm_export_with_a_compiler_that_writes_nothing_is_a_build_error(env, monkeypatch):
    kernel = _compile("tvm_ffi", "llvm")
    monkeypatch.setenv("CC", str(_script(env / "nullcc", "exit 0\n")))
    with pytest.raises(BuildError, match=r"exit code 0, but it wrote no kernel\.so"):
        kernel.export(env / "exported")
    assert not (env / "exported").exists()


def test_an_llvm_export_without_any_compiler_says_so(env, monkeypatch):
    kernel = _compile("tvm_ffi", "llvm")
    (env / "empty-bin").mkdir()
    monkeypatch.setenv("PATH", str(env / "empty-bin"))
    monkeypatch.delenv("CC", raising=False)
    with pytest.raises(BuildError, match=r"no C/C\+\+ compiler found to link the kernel library kernel\.so .* install "
                                         r"gcc or clang, or set CC/CXX"):
        kernel.export(env / "exported")


def test_nvcc_arch_flags_keep_architecture_specific_code_to_its_architecture():
    """``-arch=sm_100a`` also assembles the portable compute_100 PTX, which refuses sm_100a's own
    instructions; an architecture-specific or family target gets ``-gencode`` for itself only
    (used by the CUDA builds of the cython and tvm_ffi backends)."""
    from tilelang_core.compiler_process import nvcc_arch_flags

    assert nvcc_arch_flags("sm_80") == ["-arch=sm_80"]
    assert nvcc_arch_flags("sm_100a") == ["-gencode=arch=compute_100a,code=[sm_100a,compute_100a]"]
    assert nvcc_arch_flags("sm_100f") == ["-gencode=arch=compute_100f,code=[sm_100f,compute_100f]"]
