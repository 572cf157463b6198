"""A compiler variable the shell cannot split (``CC='"gcc'``) is the user's setting: the bundled
backends stay usable elsewhere, and what cannot run says which variable to fix
(tilelang_core/env_commands.py). Before, ctypes and cython were listed as broken ("reinstall
it") and tvm_ffi's build reported a bug of the plugin."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tilelang_core.env_commands import command_from_env, program_from_env
from tilelang_core.errors import SettingError

KERNEL = """
import warnings
warnings.simplefilter("ignore", DeprecationWarning)
import tilelang, tilelang.language as T
@T.prim_func
def f(A: T.Tensor((4,), "float32")):
    with T.Kernel(1, threads=4):
        for i in T.Parallel(4):
            A[i] = 1.0
for backend in ("cython", "tvm_ffi", "ctypes"):
    try:
        tilelang.compile(f, target="c", execution_backend=backend)
        print(backend, "ok")
    except Exception as exc:
        print(backend, type(exc).__name__, exc)
"""


def test_the_helpers(monkeypatch):
    monkeypatch.setenv("CC", "gcc -O2 '-DX=a b'")
    assert command_from_env("CC", "cc") == ["gcc", "-O2", "-DX=a b"] and program_from_env("CC", "cc") == "gcc"
    monkeypatch.setenv("CC", "  ")
    assert command_from_env("CC", "cc") == ["cc"]
    monkeypatch.setenv("CC", '"gcc')
    with pytest.raises(SettingError, match=r"""^\$CC='"gcc' is not a command line \(No closing quotation\)"""):
        command_from_env("CC", "cc")
    assert program_from_env("CC", "cc") == '"gcc'


def test_an_unsplittable_cc_leaves_no_backend_broken_and_names_cc():
    env = {**os.environ, "CC": '"gcc'}
    listing = subprocess.run([sys.executable, "-m", "tilelang", "backends", "--json"], capture_output=True, text=True,
                             env=env)
    rows = json.loads(listing.stdout)
    rows = rows["backends"] if isinstance(rows, dict) else rows
    assert not [r["name"] for r in rows if r["status"] == "broken"], listing.stdout
    out = subprocess.run([sys.executable, "-c", KERNEL], capture_output=True, text=True, env=env).stdout
    lines = dict(line.split(" ", 1) for line in out.strip().splitlines())
    assert set(lines) == {"cython", "tvm_ffi", "ctypes"}, out
    for backend, text in lines.items():
        assert text.startswith("BackendUnavailableError") and "$CC='\"gcc'" in text and "broken" not in text, (backend, text)
