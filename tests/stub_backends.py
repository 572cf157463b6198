"""What tests of backend selection, building and loading share: throwaway plugin distributions on a
private path (the ``site`` fixture), the hooks of a backend that builds and saves without compiling
anything (:func:`stub_hooks`), and the kernel they compile (:func:`add_one`).

Import it as ``from stub_backends import ...`` after putting this folder on ``sys.path``.
"""

from __future__ import annotations

import pytest

import tilelang.language as T
from tilelang_core.testkit import isolated


def stub_hooks(on_call: str, saved_file: str, saved_text: str) -> str:
    """The build, save and load hooks of a test backend (a plugin ``body``): its kernels run the
    statement ``on_call`` when called, and saving writes ``saved_text`` into ``saved_file``."""
    return f'''
from pathlib import Path

class Kernel:
    def __call__(self, *args, **kwargs):
        {on_call}

@hookimpl
def tilelang_backend_build(artifact, options):
    return Kernel()

@hookimpl
def tilelang_backend_save(kernel, directory):
    (Path(directory) / {saved_file!r}).write_text({saved_text!r})

@hookimpl
def tilelang_backend_load(artifact, directory, options):
    return Kernel()
'''


def add_one(N):
    """``B = A + 1`` on ``N`` float32 elements, one thread (a kernel every CPU backend builds)."""

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=1) as bx:
            for i in T.serial(N):
                B[i] = A[i] + 1.0

    return main


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A fresh folder of throwaway distributions, the only plugins the registry sees; no kernel cache."""
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    root = tmp_path / "site"
    root.mkdir()
    with isolated(root):
        yield root
