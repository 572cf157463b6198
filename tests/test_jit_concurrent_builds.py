"""Threads asking a @tilelang.jit function for one new specialisation at once build it once."""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang
import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from eager_kernels import eager_add  # noqa: E402

@pytest.mark.parametrize("form", ["lazy", "direct"])
def test_threads_asking_for_one_new_specialisation_build_it_once(form, monkeypatch):
    """With the kernel cache off, each of 6 threads asking at once built the kernel (6 builds, the
    function's body run 6 times); they now wait for the first."""
    import threading

    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    bodies = []

    def double(n):
        @T.prim_func
        def double(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=1):
                for i in T.serial(n):
                    B[i] = A[i] * 2.0

        return double

    @tilelang.jit(target="c")
    def lazy(n):
        bodies.append(n)
        return double(n)

    @tilelang.jit(target="c")
    def direct(A, B):
        bodies.append(A.shape)
        return double(A.shape[0])

    results, start = [], threading.Barrier(6)

    def ask():
        start.wait()
        if form == "lazy":
            results.append(lazy(16))
        else:
            out = torch.zeros(16)
            direct(torch.ones(16), out)
            results.append(out)

    threads = [threading.Thread(target=ask) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(results) == 6 and len(bodies) == 1, bodies
    if form == "lazy":
        assert len({id(k) for k in results}) == 1
    else:
        assert all(torch.equal(out, torch.full((16,), 2.0)) for out in results)


@pytest.mark.parametrize("first_call", [True, False], ids=["first call", "new shape"])
def test_threads_asking_an_eager_function_at_once_build_it_once(first_call, monkeypatch):
    """The eager style: threads making the first call at once each made their own specialiser and
    built the kernel (4 threads, 4 lowerings and 4 builds with the cache off); a new shape asked by
    several threads at once was built by each too."""
    import threading

    from tilelang_core.jit import compile as compile_module

    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    builds = []
    compile_function = compile_module.compile
    monkeypatch.setattr(compile_module, "compile", lambda *a, **k: builds.append(1) or compile_function(*a, **k))

    add = eager_add()

    if not first_call:
        add(torch.ones(8), torch.ones(8))
        builds.clear()
    results, start = [], threading.Barrier(4)

    def ask():
        a = torch.randn(16)
        start.wait()
        results.append(torch.equal(add(a, a), a + a))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert results == [True] * 4 and len(builds) == 1, builds
