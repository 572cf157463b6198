"""A tensor whose storage does not hold its elements is refused at the call, never read or written.

``t.untyped_storage().resize_(0)`` (as FSDP and activation offloading do) keeps the tensor's
shape with no memory behind it: the cython and ctypes backends passed its NULL data pointer to
the kernel, which crashed the process (SIGSEGV). A storage shrunk under a view (``resize_(64)``
behind a million floats) was read past its end, or written into the heap (a crash at exit).
tvm_ffi refuses a NULL data pointer (tvm-ffi's own check); it does not compare the storage's
size with the view, which would cost its calls more than torch's own operations spend on it
(they do not check either).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402


def adds():
    n = T.dynamic("n")

    @T.prim_func
    def add(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 256)) as bx:
            for i in T.Parallel(256):
                if bx * 256 + i < n:
                    C[bx * 256 + i] = A[bx * 256 + i] + B[bx * 256 + i]

    return add


@pytest.mark.parametrize("backend,target", cpu_pairs())
@pytest.mark.parametrize("which", [0, 2], ids=["input", "output"])
def test_a_freed_storage_is_refused(backend, target, which):
    kernel = tilelang.compile(adds(), target=target, execution_backend=backend)
    args = [torch.randn(100), torch.randn(100), torch.empty(100)]
    args[which].untyped_storage().resize_(0)
    with pytest.raises(ValueError, match="'A' \\(#0\\)|'C' \\(#2\\)|NULL"):
        kernel(*args)
    empty = [torch.empty(0), torch.empty(0), torch.empty(0)]
    empty[which].untyped_storage().resize_(0)
    kernel(*empty)  # no elements: nothing to hold


@pytest.mark.parametrize("backend,target", [p for p in cpu_pairs() if p.values[0] in ("cython", "ctypes")])
@pytest.mark.parametrize("which", [0, 2], ids=["input", "output"])
def test_a_storage_smaller_than_the_view_is_refused(backend, target, which):
    kernel = tilelang.compile(adds(), target=target, execution_backend=backend)
    args = [torch.randn(1000), torch.randn(1000), torch.empty(1000)]
    args[which].untyped_storage().resize_(64)
    name = "'A' (#0)" if which == 0 else "'C' (#2)"
    with pytest.raises(ValueError, match=f"{name[:4]}.*storage holds 64 bytes"):
        kernel(*args)
    fits = torch.randn(2000)[1000:]  # an offset view that its storage holds
    out = torch.empty(1000)
    kernel(fits, fits, out)
    assert torch.equal(out, fits + fits)


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_a_tensor_without_storage_is_refused_by_name(backend, target):
    """A torch.func.vmap-batched tensor has no storage: tvm_ffi and ctypes let torch's bare
    RuntimeError ("Cannot access data pointer of Tensor that doesn't have storage") through, and
    cython's DLPack reader said only that (no remedy). Every backend now words it alike."""
    kernel = tilelang.compile(adds(), target=target, execution_backend=backend)
    other = torch.ones(3)
    with pytest.raises(ValueError, match=r"add\(\) argument 'A' \(#0\): expected a dense tensor with storage, "
                                         r"got one without \(Cannot access storage of BatchedTensorImpl\); "
                                         r"pass a plain tensor"):
        torch.func.vmap(lambda row: kernel(row, other, torch.empty(3)))(torch.ones(2, 3))
