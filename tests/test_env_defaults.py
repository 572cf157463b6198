"""Upstream TileLang's settings of a compile that gives none: ``TILELANG_EXECUTION_BACKEND`` and
``TILELANG_VERBOSE`` (both were ignored: every such compile used ``auto`` and stayed quiet).

An explicit ``execution_backend=`` / ``verbose=`` wins; ``execution_backend="auto"`` given
explicitly is ``auto``. The variables are read at each compile, by ``tilelang.compile``,
``@tilelang.jit`` and the autotuner alike (tilelang_core/backends/selection.py,
tilelang_core/jit/compile.py); a name that is not installed or a value that is not yes/no is an
error naming the variable.
"""

from __future__ import annotations

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.env import env
from tilelang_core.errors import BackendNotInstalledError, SettingError


@T.prim_func
def add_one(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
    with T.Kernel(1, threads=16):
        for i in T.Parallel(16):
            B[i] = A[i] + 1


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")  # each compile chooses its backend anew
    monkeypatch.delenv("TILELANG_EXECUTION_BACKEND", raising=False)
    monkeypatch.delenv("TILELANG_VERBOSE", raising=False)


def _backend(kernel) -> str:
    return kernel.backend.name


def test_execution_backend_comes_from_the_environment_when_not_given(monkeypatch):
    auto = _backend(tilelang.compile(add_one, out_idx=-1, target="c"))
    other = "tvm_ffi" if auto != "tvm_ffi" else "cython"
    monkeypatch.setenv("TILELANG_EXECUTION_BACKEND", other)
    assert env.get_default_execution_backend() == env.TILELANG_EXECUTION_BACKEND == other
    kernel = tilelang.compile(add_one, out_idx=-1, target="c")
    assert _backend(kernel) == other
    torch.testing.assert_close(kernel(torch.ones(16)), torch.full((16,), 2.0))

    @tilelang.jit(out_idx=-1, target="c")
    def built():
        return add_one

    assert _backend(built()) == other
    # an explicit choice wins, and so does an explicit "auto"
    assert _backend(tilelang.compile(add_one, out_idx=-1, target="c", execution_backend=auto)) == auto
    assert _backend(tilelang.compile(add_one, out_idx=-1, target="c", execution_backend="auto")) == auto


def test_a_backend_named_by_the_environment_that_is_not_installed_says_where_the_name_came_from(monkeypatch):
    monkeypatch.setenv("TILELANG_EXECUTION_BACKEND", "nosuchbackend")
    with pytest.raises(BackendNotInstalledError, match=r"^\$TILELANG_EXECUTION_BACKEND='nosuchbackend' names the "
                                                       r"backend of compiles that give none: execution backend "
                                                       r"'nosuchbackend' is not installed.*unset it$"):
        tilelang.compile(add_one, out_idx=-1, target="c")
    monkeypatch.setenv("TILELANG_EXECUTION_BACKEND", "  ")  # empty: auto
    assert tilelang.compile(add_one, out_idx=-1, target="c")(torch.ones(16))[0] == 2.0


def test_verbose_comes_from_the_environment_when_not_given(monkeypatch, capsys):
    tilelang.compile(add_one, out_idx=-1, target="c")
    assert "[tilelang]" not in capsys.readouterr().out
    monkeypatch.setenv("TILELANG_VERBOSE", "on")
    assert env.get_default_verbose() is True
    tilelang.compile(add_one, out_idx=-1, target="c")
    assert "[tilelang] add_one: target 'c'" in capsys.readouterr().out
    tilelang.compile(add_one, out_idx=-1, target="c", verbose=False)
    assert "[tilelang]" not in capsys.readouterr().out
    monkeypatch.setenv("TILELANG_VERBOSE", "loud")
    with pytest.raises(SettingError, match=r"^\$TILELANG_VERBOSE='loud' is not a yes/no value; set it to 1 "):
        tilelang.compile(add_one, out_idx=-1, target="c")


def _keep_builds():
    from tilelang_backend_cython.compiler import keep_builds

    return keep_builds()


@pytest.mark.parametrize("variable,read,unset", [
    ("TILELANG_JIT_DIAGNOSTICS", lambda: __import__("tilelang_core.jit.diagnostics").jit.diagnostics.diagnostics_enabled(), False),
    ("TILELANG_ENABLE_IR_SPAN", lambda: __import__("tilelang_core.language.spans").language.spans.spans_enabled(), True),
    ("TILELANG_CYTHON_KEEP_BUILD", _keep_builds, False),
])
def test_yes_no_switches_refuse_other_values(monkeypatch, variable, read, unset):
    """These switches took any value silently ('maybe' meant off for the first and on for the
    others); they now read yes/no as TILELANG_VERBOSE does, with their own default when unset."""
    monkeypatch.delenv(variable, raising=False)
    assert read() is unset
    for text, want in (("yes", True), ("0", False), ("", unset)):
        monkeypatch.setenv(variable, text)
        assert read() is want
    monkeypatch.setenv(variable, "maybe")
    default = "1 (or true, yes, on) or unset it" if unset else "0 (or false, no, off) or unset it"
    with pytest.raises(SettingError, match=rf"^\${variable}='maybe' is not a yes/no value; .*{re.escape(default)}"):
        read()
