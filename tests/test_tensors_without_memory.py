"""A tensor whose storage has no memory (a FakeTensor, a ``_make_wrapper_subclass`` tensor) is
refused with the argument's name on every backend (tilelang_core.calling.NO_MEMORY_MESSAGE).

The retired ctypes backend passed a FakeTensor's NULL data pointer to the kernel and the process
died (SIGSEGV, as upstream's cython backend does); the cython backend blamed a storage "freed or
shrunk with resize_()" of exactly the tensor's size; tvm_ffi gave TVM's own text.
"""

from __future__ import annotations

import pathlib
import re
import sys

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import tilelang
import tilelang.language as T
from tilelang_core.calling import NO_MEMORY_MESSAGE

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402


@T.prim_func
def copy8(X: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "float32")):
    with T.Kernel(1) as _:
        for i in T.Parallel(8):
            Y[i] = X[i]


class Wrapper(torch.Tensor):
    """A tensor subclass in the style of torch's own wrappers: metadata only, no storage of its own."""

    @staticmethod
    def __new__(cls, inner):
        return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype, device=inner.device)

    def __init__(self, inner):
        self.inner = inner

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        def unwrap(a):
            return a.inner if isinstance(a, Wrapper) else a

        return func(*[unwrap(a) for a in args], **{k: unwrap(v) for k, v in (kwargs or {}).items()})


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_tensors_without_memory_are_refused(backend, target):
    kernel = tilelang.compile(copy8, out_idx=-1, target=target, execution_backend=backend)
    expected = re.escape(f"copy8() argument 'X' (#0): {NO_MEMORY_MESSAGE}")
    with pytest.raises(ValueError, match=expected):
        kernel(Wrapper(torch.randn(8)))
    with FakeTensorMode():
        fake = torch.empty(8)
    with pytest.raises(ValueError, match=expected):
        kernel(fake)
    torch.testing.assert_close(kernel(torch.arange(8.0)), torch.arange(8.0))  # a real tensor still runs


def test_the_error_table_row_words_it_as_the_core():
    from tilelang_core.conformance.error_table import ROWS

    row = next(r for r in ROWS if r.id == "no_memory")
    assert row.message == f"vadd() argument 'A' (#0): {NO_MEMORY_MESSAGE}"
