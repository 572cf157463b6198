"""Bad arguments to ``tilelang.compile`` and ``T.Kernel`` give errors of the core's hierarchy that
name the parameter, never a raw dict, ``shlex`` or TVM diagnostic error."""

from __future__ import annotations

import pytest

import tilelang
import tilelang.language as T
from tilelang_core.errors import CompileFlagsError, PassConfigError, TileLangError


def kernel():
    @T.prim_func
    def copy(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=16) as bx:
            for i in T.Parallel(16):
                B[i] = A[i]

    return copy


@pytest.mark.parametrize("cache", ["on", "off"])
def test_pass_configs_given_as_a_string(cache, monkeypatch, tmp_path):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    if cache == "off":
        monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    else:
        monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    with pytest.raises(PassConfigError, match="pass_configs must be a dict, got str"):
        tilelang.compile(kernel(), target="c", pass_configs="tl.disable_vectorize=True")


def test_unbalanced_quote_in_compile_flags():
    with pytest.raises(CompileFlagsError) as info:
        tilelang.compile(kernel(), target="c", compile_flags='-O2 -DNAME="unfinished')
    msg = str(info.value)
    assert msg.startswith("compile_flags '-O2 -DNAME=\"unfinished'") and "No closing quotation" in msg
    assert "pass a list of flags" in msg
    assert isinstance(info.value, TileLangError) and isinstance(info.value, ValueError)


def test_compile_flags_of_the_wrong_type_stay_a_type_error():
    with pytest.raises(CompileFlagsError, match="compile_flags must be a string or a list of strings") as info:
        tilelang.compile(kernel(), target="c", compile_flags=["-O2", 3])
    assert isinstance(info.value, TypeError)
