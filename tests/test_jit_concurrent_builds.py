"""Threads asking a @tilelang.jit function for one new specialisation at once build it once."""

from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T

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
