"""Warnings of this package name the user's line, whichever path reached them: a fixed
``stacklevel`` pointed into the package on all paths but one (a cache that could not save a
kernel named ``tilelang_core/jit/compile.py`` for both ``tilelang.compile`` and ``@tilelang.jit``)."""

from __future__ import annotations

import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.cache.store import CacheWarning
from tilelang_core.jit.outputs import UnwrittenOutputWarning
from tilelang_core.warning_location import user_stacklevel


def _one_unwritten(n):
    @T.prim_func
    def two_outputs(A: T.Tensor((n,), "float32"), Unused: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=1):
            for i in T.serial(n):
                C[i] = A[i] + 1.0

    return two_outputs


def _only(caught, category):
    found = [w for w in caught if issubclass(w.category, category)]
    assert len(found) == 1, [str(w.message) for w in caught]
    return found[0]


def test_a_warning_of_tilelang_compile_names_the_callers_line(monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tilelang.compile(_one_unwritten(8), target="c", out_idx=[1, 2]); line = _line()  # noqa: E702
    found = _only(caught, UnwrittenOutputWarning)
    assert (found.filename, found.lineno) == (__file__, line)


def test_a_warning_of_a_jit_call_names_the_callers_line(monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")

    @tilelang.jit(target="c", out_idx=[1, 2])
    def kernel(n):
        return _one_unwritten(n)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel(8); line = _line()  # noqa: E702
    found = _only(caught, UnwrittenOutputWarning)
    assert (found.filename, found.lineno) == (__file__, line)


def test_a_cache_that_cannot_save_warns_at_the_callers_line(tmp_path, monkeypatch):
    (tmp_path / "cache").mkdir(mode=0o700)
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    from tilelang_core.cache import store

    def refuse(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store.E, "write_entry", refuse)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tilelang.compile(_one_unwritten(16), target="c", out_idx=[2]); line = _line()  # noqa: E702
    found = _only(caught, CacheWarning)
    assert "could not be saved to the cache" in str(found.message)
    assert (found.filename, found.lineno) == (__file__, line)


def _line():
    """The line of the caller (the statement the warning should name is on the same line)."""
    import sys

    return sys._getframe(1).f_lineno


def test_user_stacklevel_counts_the_frames_of_the_package_and_names_the_caller():
    assert user_stacklevel() == 1  # this test's frame is not the package's
    with pytest.warns(UserWarning, match="here") as caught:
        warnings.warn("here", UserWarning, stacklevel=user_stacklevel())
    assert caught[0].filename == __file__


def test_a_warning_on_a_par_compile_worker_names_the_line_that_called_par_compile(monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tilelang.par_compile([_one_unwritten(8)], target="c", out_idx=[1, 2], progress=False); line = _line()  # noqa: E702
    found = _only(caught, UnwrittenOutputWarning)
    assert (found.filename, found.lineno) == (__file__, line)


def test_a_warning_while_autotuning_names_the_line_of_the_tuned_call(monkeypatch, tmp_path):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)

    @tilelang.autotune(configs=[{"scale": 1.0}, {"scale": 2.0}], warmup=1, rep=2)
    @tilelang.jit(out_idx=[1, 2], target="c")
    def tuned(n, scale=1.0):
        @T.prim_func
        def k(A: T.Tensor((n,), "float32"), Unused: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=1):
                for i in T.serial(n):
                    C[i] = A[i] * scale

        return k

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tuned(16); line = _line()  # noqa: E702
    found = [w for w in caught if issubclass(w.category, UnwrittenOutputWarning)]
    assert found, [str(w.message) for w in caught]
    assert {(w.filename, w.lineno) for w in found} == {(__file__, line)}, [(w.filename, w.lineno) for w in found]
