"""The shared call rules added after the first version of the backend, with the recording stand-in
for ``torch.mps.compile_shader``: the ``stream`` keyword, tensors too large for a kernel's 32-bit
indices (``TensorParam.index_limit``) and written tensors overlapping another argument
(``TensorParam.written``), refused before anything is allocated or launched, with the messages
every backend shares (docs/backend-conventions.md, "Index range" and "Overlapping arguments").

Inputs too large are stride-0 views (a few KiB of memory); outputs too large are refused from
their shape alone. The overlap of MPS tensors is decided per storage (``data_ptr()`` of an ``mps``
tensor is its ``MTLBuffer`` handle plus the offset, not a device address); that part is checked on
a Mac by test_metal_mps.py.
"""

from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.lowering.signature import INDEX_LIMIT_32

from mps_standin import StandinRuntime

HINT = "compile it with pass_configs={'tl.config_index_bitwidth': 64}"


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")


def add_one(M, N=65536):
    @T.prim_func
    def add1(X: T.Tensor((M, N), "int8"), Y: T.Tensor((M, N), "int8")):
        with T.Kernel(M, threads=128) as bx:
            for j in T.Parallel(N):
                Y[bx, j] = X[bx, j] + T.int8(1)

    return add1


def shifted_add():
    n = T.dynamic("n")

    @T.prim_func
    def sadd(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 64), threads=64) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < n:
                    C[bx * 64 + i] = A[bx * 64 + i] + B[bx * 64 + i]

    return sadd


def standin(func, out_idx=None, device_type="cpu", **passes):
    kernel = tilelang.compile(func, out_idx=out_idx, execution_backend="metal", target="metal",
                              pass_configs=passes or None)
    runtime = StandinRuntime(device_type=device_type)
    return kernel.runner.with_runtime(runtime), runtime


def test_the_stream_keyword_is_accepted_and_checked_with_standin_shader_library():
    kernel, rt = standin(shifted_add(), out_idx=[2])
    a, b = torch.randn(10), torch.randn(10)
    kernel(a, b, stream=None)
    kernel(a, b, stream=0)
    assert len(rt.calls) == 2
    with pytest.raises(TypeError) as info:
        kernel(a, b, stream="s")
    assert str(info.value) == (
        "sadd() keyword 'stream': expected an int (a cudaStream_t) or a torch.cuda.Stream, got str"
    )
    with pytest.raises(TypeError) as info:
        kernel(a, b, out=a)
    assert str(info.value) == "sadd() got an unexpected keyword argument 'out' (only 'stream' is accepted)"
    assert len(rt.calls) == 2 and len(rt.sources) == 1


def test_a_too_large_input_is_refused_before_the_device_check_with_standin_shader_library():
    kernel, rt = standin(add_one(T.dynamic("m")), out_idx=[1], device_type="mps")
    assert kernel.artifact.params[0].index_limit == INDEX_LIMIT_32
    big = torch.zeros(1, 65536, dtype=torch.int8).expand(32769, 65536)  # 2**31 + 65536 elements, 64 KiB
    with pytest.raises(ValueError) as info:
        kernel(big)
    assert str(info.value) == (
        f"add1() argument 'X' (#0): 2147549184 elements ('m' = 32769) exceed this kernel's 32-bit index limit "
        f"of {INDEX_LIMIT_32}; {HINT}"
    )
    # within the limit the next rule speaks: these CPU tensors are not on mps
    with pytest.raises(ValueError, match=r"^add1\(\) argument 'X' \(#0\): expected a tensor on mps, got cpu$"):
        kernel(big[:16])
    assert rt.calls == []


def test_a_too_large_output_is_refused_before_it_is_allocated_with_standin_shader_library():
    m = T.dynamic("m")

    @T.prim_func
    def widen(X: T.Tensor((m,), "int8"), Y: T.Tensor((m, 65536), "int8")):
        with T.Kernel(m, threads=128) as bx:
            for j in T.Parallel(65536):
                Y[bx, j] = X[bx]

    kernel, rt = standin(widen, out_idx=[1])
    with pytest.raises(ValueError) as info:
        kernel(torch.zeros(32769, dtype=torch.int8))  # Y would be 2 GiB: refused from its shape alone
    assert str(info.value) == (
        f"widen(): output 'Y' would have 2147549184 elements ('m' = 32769), over this kernel's 32-bit index "
        f"limit of {INDEX_LIMIT_32}; {HINT}"
    )
    assert rt.calls == []
    assert kernel(torch.ones(2, dtype=torch.int8)).shape == (2, 65536) and len(rt.calls) == 1


def test_64_bit_indices_lift_the_limit_with_standin_shader_library():
    kernel, _ = standin(add_one(T.dynamic("m")), out_idx=[1], device_type="mps", **{"tl.config_index_bitwidth": 64})
    assert kernel.artifact.params[0].index_limit is None
    big = torch.zeros(1, 65536, dtype=torch.int8).expand(32769, 65536)
    with pytest.raises(ValueError, match="expected a tensor on mps, got cpu$"):  # no index-limit refusal
        kernel(big)


def test_a_written_tensor_overlapping_an_input_is_refused_with_standin_shader_library():
    kernel, rt = standin(shifted_add())
    assert [p.written for p in kernel.artifact.params] == [False, False, True]
    buf, b = torch.zeros(512), torch.zeros(256)
    with pytest.raises(ValueError) as info:
        kernel(buf[0:256], b, buf[1:257])
    assert str(info.value) == (
        "sadd() arguments 'A' (#0) and 'C' (#2) overlap in memory, and the kernel writes 'C'; pass tensors "
        "that do not share memory (for example a .clone())"
    )
    with pytest.raises(ValueError, match=r"arguments 'A' \(#0\) and 'C' \(#2\) overlap"):
        kernel(b, b, b)
    with pytest.raises(ValueError, match=r"arguments 'B' \(#1\) and 'C' \(#2\) overlap"):
        kernel(torch.zeros(256), b, b)
    assert rt.calls == []
    kernel(buf[0:256], buf[0:256], buf[256:512])  # read-only tensors may alias; adjacent is no overlap
    kernel(torch.zeros(0), torch.zeros(0), torch.zeros(0))  # empty tensors overlap nothing
    assert len(rt.calls) == 1  # the empty call launches nothing


class StandinMPSTensor:
    """What ``_byte_range`` reads of an ``mps`` tensor: the storage's handle (a number unrelated to
    other storages' memory), the offset into it, the sizes."""

    def __init__(self, handle, offset, numel, element_size=4):
        self.device = type("D", (), {"type": "mps"})()
        self._handle, self._offset, self._numel, self._size = handle, offset, numel, element_size
        self.shape, self._stride = (numel,), (1,)

    def data_ptr(self):
        return self._handle + self._offset * self._size

    def untyped_storage(self):
        return type("S", (), {"data_ptr": lambda _: self._handle})()

    def storage_offset(self):
        return self._offset

    def element_size(self):
        return self._size

    def numel(self):
        return self._numel

    def stride(self):
        return self._stride


def test_overlap_on_mps_is_decided_within_one_storage_with_standin_tensors():
    from tilelang_backend_metal.arguments import _byte_range

    # two storages whose handles lie 256 bytes apart, each 4 KiB long: distinct buffers, no overlap
    a, b = StandinMPSTensor(0x1000, 0, 1024), StandinMPSTensor(0x1100, 0, 1024)
    (base_a, lo_a, n_a), (base_b, lo_b, n_b) = _byte_range(a), _byte_range(b)
    assert base_a != base_b and (lo_a, n_a) == (0, 4096) and (lo_b, n_b) == (0, 4096)
    # two views of one storage: the ranges are offsets into it
    assert _byte_range(StandinMPSTensor(0x1000, 10, 4)) == (0x1000, 40, 16)
    # CPU tensors keep the address rule
    buf = torch.zeros(512)
    assert _byte_range(buf[4:8]) == (None, buf.data_ptr() + 16, 16)
    assert _byte_range(torch.zeros(0))[2] == 0
