"""Phase logging of compiles: ``tilelang.jit.diagnostics.jit_phase`` and ``TILELANG_JIT_DIAGNOSTICS``."""

from __future__ import annotations

import logging

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.jit.diagnostics import jit_phase


def _messages(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "tilelang.jit.diagnostics"]


def test_phase_logs_start_done_failure_and_keeps_the_exception(caplog):
    caplog.set_level(logging.INFO, logger="tilelang.jit.diagnostics")
    with jit_phase("pack", enabled=True, kernel="k1", target="c"):
        pass
    with pytest.raises(KeyError, match="missing"), jit_phase("unpack", enabled=True, backend="b1"):
        raise KeyError("missing")
    logged = _messages(caplog)
    assert logged[0] == "TileLang JIT phase start: pack (kernel='k1', target='c')"
    assert logged[1].startswith("TileLang JIT phase done: pack in ") and logged[1].endswith("(kernel='k1', target='c')")
    assert logged[3].startswith("TileLang JIT phase failed: unpack after ") and "KeyError" in logged[3] and "backend='b1'" in logged[3]


def test_phase_is_silent_unless_asked(caplog, monkeypatch):
    caplog.set_level(logging.INFO, logger="tilelang.jit.diagnostics")
    monkeypatch.delenv("TILELANG_JIT_DIAGNOSTICS", raising=False)
    with jit_phase("quiet"):
        pass
    with jit_phase("off", enabled=False):
        pass
    assert _messages(caplog) == []


def test_compile_logs_lower_and_build_when_the_environment_asks(caplog, monkeypatch):
    monkeypatch.setenv("TILELANG_JIT_DIAGNOSTICS", "1")
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    caplog.set_level(logging.INFO, logger="tilelang.jit.diagnostics")

    @T.prim_func
    def negate(X: T.Tensor((8,), T.float32), Y: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=8):
            for i in T.Parallel(8):
                Y[i] = -X[i]

    kernel = tilelang.compile(negate, target="c")
    logged = _messages(caplog)
    starts = [m for m in logged if "phase start" in m]
    assert [m.split(":")[1].split()[0] for m in starts] == ["lower", "build"]
    assert all("kernel='negate'" in m and "target='c" in m for m in starts)
    assert sum("phase done" in m for m in logged) == 2
    x = torch.randn(8)
    y = torch.empty(8)
    kernel(x, y)
    torch.testing.assert_close(y, -x)


def test_kernel_declared_pass_configs_are_used_and_checked():
    from tilelang_core.errors import PassConfigError

    @T.prim_func
    def plus_one(X: T.Tensor((16,), T.float32), Y: T.Tensor((16,), T.float32)):
        T.annotate_pass_configs({"tl.disable_cse": True, tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True})
        with T.Kernel(1, threads=16):
            for i in T.Parallel(16):
                Y[i] = X[i] + 1.0

    assert "tilelang_pass_configs" in plus_one.attrs
    from tilelang_core.language.hints import declared_pass_configs

    assert declared_pass_configs(plus_one) == {"tl.disable_cse": True}  # keys without effect are dropped when checked
    artifact = tilelang.lower(plus_one, target="c")
    assert artifact.pass_configs["tl.disable_cse"] is True
    assert tilelang.lower(plus_one, target="c", pass_configs={"tl.disable_cse": False}).pass_configs["tl.disable_cse"] is False
    x = torch.randn(16)
    y = torch.empty(16)
    tilelang.compile(plus_one, target="c")(x, y)
    torch.testing.assert_close(y, x + 1)
    with pytest.raises(PassConfigError, match="tl.disable_csee"):

        @T.prim_func
        def misspelled(X: T.Tensor((4,), T.float32)):
            T.annotate_pass_configs({"tl.disable_csee": True})
            with T.Kernel(1, threads=1):
                X[0] = 0.0


def test_the_module_is_an_attribute_of_tilelang_jit_without_importing_it():
    """``tilelang.jit.diagnostics.jit_phase`` after only ``import tilelang`` (as jit.md writes it):
    an AttributeError before, until something imported the submodule (a fresh process)."""
    import subprocess
    import sys

    code = "import tilelang; print(tilelang.jit.diagnostics.jit_phase.__name__, 'diagnostics' in dir(tilelang.jit))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["jit_phase", "True"]
