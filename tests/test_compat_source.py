"""Kernels defined where Python keeps no source: ``python -c``, ``python < file``, a pipe, the prompt."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import textwrap
import time

import pytest

PROGRAM = textwrap.dedent(
    """
    import torch, tilelang, tilelang.language as T

    @T.macro
    def double(x):
        return x * 2

    @T.prim_func
    def twice(A: T.Tensor((8,), T.float32), B: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=8):
            for i in T.Parallel(8):
                B[i] = A[i] * 2

    k = tilelang.compile(twice, target="c", execution_backend="cython")
    a = torch.arange(8, dtype=torch.float32); b = torch.empty(8)
    k(a, b)
    print("RESULT", b.tolist() == (a * 2).tolist())
    """
)


def _env(tmp_path):
    env = dict(os.environ)
    env.setdefault("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    return env


@pytest.mark.slow
def test_kernel_in_python_dash_c(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=_env(tmp_path)
    )
    assert done.returncode == 0, done.stderr
    assert "RESULT True" in done.stdout


@pytest.mark.slow
def test_kernel_from_stdin_redirected_from_a_file(tmp_path):
    script = tmp_path / "k.py"
    script.write_text(PROGRAM)
    with open(script) as stdin:
        done = subprocess.run(
            [sys.executable, "-"], stdin=stdin, capture_output=True, text=True, timeout=300, cwd=tmp_path,
            env=_env(tmp_path),
        )
    assert done.returncode == 0, done.stderr
    assert "RESULT True" in done.stdout


@pytest.mark.slow
def test_kernel_from_a_pipe_says_where_kernels_can_be_defined(tmp_path):
    done = subprocess.run(
        [sys.executable, "-"], input=PROGRAM, capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env=_env(tmp_path),
    )
    assert done.returncode != 0
    assert "KernelDefinitionError" in done.stderr
    assert "standard input through a pipe" in done.stderr and "python -c" in done.stderr
    assert "could not get source code" not in done.stderr


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "forkpty"), reason="needs a pseudo-terminal")
def test_kernel_typed_at_the_interactive_prompt(tmp_path):
    """A real interactive interpreter on a pseudo-terminal (readline on), kernel typed line by line."""
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # the child: an interactive Python
        os.chdir(tmp_path)
        env = _env(tmp_path)
        env["PYTHONSTARTUP"] = ""
        env["TERM"] = "dumb"
        os.execve(sys.executable, [sys.executable, "-i", "-q"], env)
    lines = [
        "import torch, tilelang, tilelang.language as T",
        "@T.prim_func",
        "def twice(A: T.Tensor((8,), T.float32), B: T.Tensor((8,), T.float32)):",
        "    with T.Kernel(1, threads=8):",
        "        for i in T.Parallel(8):",
        "            B[i] = A[i] * 2",
        "",
        "k = tilelang.compile(twice, target='c', execution_backend='cython')",
        "a = torch.arange(8, dtype=torch.float32); b = torch.empty(8); k(a, b)",
        "print('RESULT', b.tolist() == (a * 2).tolist())",
        "exit()",
    ]
    output = b""
    try:
        for line in lines:
            os.write(fd, line.encode() + b"\r")
            time.sleep(0.05)
        deadline = time.time() + 240
        while time.time() < deadline:
            ready, _, _ = select.select([fd], [], [], 1.0)
            if ready:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                output += chunk
                if b"RESULT" in output.split(b"print(")[-1] or b"Error" in output:
                    if b"RESULT True" in output or b"Error" in output:
                        break
    finally:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
        os.close(fd)
    text = output.decode(errors="replace")
    assert "RESULT True" in text, text[-3000:]
