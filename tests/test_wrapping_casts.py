"""Integer casts that wrap around keep their value through TVM's simplifier (lowering/wrapping_casts.py).

TVM's analyzer bounded ``T.cast(x, dtype)`` by the intersection of ``x``'s bounds with ``dtype``'s
range, as if every value fitted: ``T.max(T.cast(X[i], "int32"), -5)`` of a uint32 ``2**31 + 7``
lost its ``max``, ``T.cast(X[i], "int8") // 127`` of a uint8 181 became a truncating division,
``T.cast(S[i], "uint32") // 2**31`` of an int32 -1 was folded to 0, and a cast of unsigned
arithmetic that wrapped around (``T.cast(X[i] + 100, "int32") >= 100`` of a uint8 200) or of a
narrowing cast of a loop-bounded value (``T.cast(T.cast(k + 200, "uint8"), "int32") < 200``) was
folded to a constant, on every CPU pair. Each column of the
kernel here runs on every CPU pair, with a static and a dynamic size, against Python's exact
two's-complement arithmetic; the CUDA source is compiled with nvcc (no GPU here).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.lowering import lower

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402

N = 100
BLOCK = 64
NVCC = os.environ.get("TILELANG_NVCC") or shutil.which("nvcc") or (
    "/usr/local/bin/nvcc" if os.path.exists("/usr/local/bin/nvcc") else None)


def _signed(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


#: (what the column computes, reference on one row: u8, u32, u64, s32, s8, i as Python ints; Python's
#: // is floor division, as T's // of integers)
COLUMNS = [
    ("max(int32(u32), -5)", lambda u8, u32, u64, s32, s8, i: max(_signed(u32, 32), -5)),
    ("clamp(int32(u32), -5, 5)", lambda u8, u32, u64, s32, s8, i: min(max(_signed(u32, 32), -5), 5)),
    ("int8(u8) // 127", lambda u8, u32, u64, s32, s8, i: _signed(u8, 8) // 127),
    ("int8(u32) // 127", lambda u8, u32, u64, s32, s8, i: _signed(u32, 8) // 127),
    ("max(int64(u64), -5)", lambda u8, u32, u64, s32, s8, i: max(_signed(u64, 64), -5)),
    ("uint32(s32) // 2**31", lambda u8, u32, u64, s32, s8, i: (s32 & 0xFFFFFFFF) >> 31),
    ("uint32(s8) // 2**31", lambda u8, u32, u64, s32, s8, i: (s8 & 0xFFFFFFFF) >> 31),
    ("int32(u8 + 100) >= 100", lambda u8, u32, u64, s32, s8, i: int((u8 + 100) % 256 >= 100)),
    ("int64(u32 + 100) >= 100", lambda u8, u32, u64, s32, s8, i: int((u32 + 100) % 2**32 >= 100)),
    # k = i % BLOCK is the T.Parallel index, which the analyzer bounds by [0, BLOCK - 1]
    ("int32(uint8(uint32(k) + 200)) >= 200", lambda u8, u32, u64, s32, s8, i: int((i % BLOCK + 200) % 256 >= 200)),
    ("int32(uint8(k + 200)) < 200", lambda u8, u32, u64, s32, s8, i: int((i % BLOCK + 200) % 256 < 200)),
]


def casts_kernel(n):
    """Z[i, c] = column c of row i, as int64."""

    @T.prim_func
    def wrapping_casts(U8: T.Tensor((n,), T.uint8), U32: T.Tensor((n,), T.uint32), U64: T.Tensor((n,), T.uint64),
                       S32: T.Tensor((n,), T.int32), S8: T.Tensor((n,), T.int8),
                       Z: T.Tensor((n, len(COLUMNS)), T.int64)):
        with T.Kernel(T.ceildiv(n, BLOCK), threads=BLOCK) as bx:
            for k in T.Parallel(BLOCK):
                if bx * BLOCK + k < n:
                    i = bx * BLOCK + k
                    Z[i, 0] = T.Cast("int64", T.max(T.cast(U32[i], "int32"), -5))
                    Z[i, 1] = T.Cast("int64", T.clamp(T.cast(U32[i], "int32"), -5, 5))
                    Z[i, 2] = T.Cast("int64", T.cast(U8[i], "int8") // T.int8(127))
                    Z[i, 3] = T.Cast("int64", T.cast(U32[i], "int8") // T.int8(127))
                    Z[i, 4] = T.max(T.cast(U64[i], "int64"), T.int64(-5))
                    Z[i, 5] = T.Cast("int64", T.cast(S32[i], "uint32") // T.uint32(2**31))
                    Z[i, 6] = T.Cast("int64", T.cast(S8[i], "uint32") // T.uint32(2**31))
                    Z[i, 7] = T.if_then_else(T.cast(U8[i] + T.uint8(100), "int32") >= 100, T.int64(1), T.int64(0))
                    Z[i, 8] = T.if_then_else(T.cast(U32[i] + T.uint32(100), "int64") >= T.int64(100),
                                             T.int64(1), T.int64(0))
                    Z[i, 9] = T.if_then_else(
                        T.cast(T.cast(T.cast(k, "uint32") + T.uint32(200), "uint8"), "int32") >= 200,
                        T.int64(1), T.int64(0))
                    Z[i, 10] = T.if_then_else(T.cast(T.cast(k + 200, "uint8"), "int32") < 200, T.int64(1), T.int64(0))

    return wrapping_casts


def _inputs():
    rng = np.random.default_rng(9)
    u8 = rng.integers(0, 1 << 8, N, dtype=np.uint8)
    u32 = rng.integers(0, 1 << 32, N, dtype=np.uint32)
    u64 = rng.integers(0, 1 << 64, N, dtype=np.uint64)
    s32 = rng.integers(-(1 << 31), 1 << 31, N, dtype=np.int32)
    s8 = rng.integers(-128, 128, N, dtype=np.int8)
    u8[:4] = [181, 5, 200, 127]
    u32[:5] = [2**31 + 7, 5, 2**32 - 1, 2**31 - 1, 0xFFFFFF80]
    u64[:3] = [2**63 + 7, 5, 2**64 - 1]
    s32[:3] = [-1, 5, -2**31]
    s8[:3] = [-1, 5, -128]
    return u8, u32, u64, s32, s8


@pytest.mark.parametrize("size", ["static", "dynamic"])
@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_casts_that_wrap_keep_their_value(backend, target, size):
    kernel = tilelang.compile(casts_kernel(N if size == "static" else T.dynamic("n")), target=target,
                              execution_backend=backend)
    inputs = _inputs()
    z = torch.zeros((N, len(COLUMNS)), dtype=torch.int64)
    kernel(*(torch.from_numpy(t) for t in inputs), z)
    rows = [[int(v) for v in row] for row in zip(*inputs)]
    for column, (text, ref) in enumerate(COLUMNS):
        want = [ref(*row, i) for i, row in enumerate(rows)]
        assert z[:, column].tolist() == want, (text, backend, target, size)


def uint64_kernel():
    """Signed values cast to uint64 whose 64-bit forms TVM's NarrowDataType narrows to 32 bits: an
    int64 loop variable (narrowed everywhere) and 64-bit casts of int32 values (inside GPU kernels)."""

    @T.prim_func
    def to_uint64(S: T.Tensor((N,), T.int64), Z: T.Tensor((N, 4), T.uint64)):
        with T.Kernel(1, threads=N):
            for k in T.serial(T.int64(N)):
                Z[k, 0] = T.cast(k - T.int64(50), "uint64")
                Z[k, 1] = T.cast(T.cast(T.cast(k, "int32") - 50, "int64"), "uint64") >> T.uint64(1)
                Z[k, 2] = T.cast(T.cast(k, "int32") - 50, "uint64") // T.uint64(2**63)
                Z[k, 3] = T.cast(S[k], "uint64") >> T.uint64(3)

    return to_uint64


def _expected_uint64(s):
    m = (1 << 64) - 1
    return [[(k - 50) & m, ((k - 50) & m) >> 1, ((k - 50) & m) >> 63, (int(s[k]) & m) >> 3] for k in range(N)]


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_signed_values_cast_to_uint64_where_their_64_bit_form_is_narrowed(backend, target):
    kernel = tilelang.compile(uint64_kernel(), target=target, execution_backend=backend)
    s = np.random.default_rng(4).integers(-(1 << 63), (1 << 63) - 1, N, dtype=np.int64)
    s[:3] = [-1, 7, -(1 << 63)]
    z = torch.zeros((N, 4), dtype=torch.uint64)
    kernel(torch.from_numpy(s), z)
    assert z.tolist() == _expected_uint64(s), (backend, target)


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_casts_whose_operand_the_simplifier_makes_a_constant(backend, target):
    """``k // 64`` of ``k < 64`` is 0. Before, folding ``T.cast(-1, "uint64")`` stopped TVM's
    simplifier ("cannot make uint from negative value -1"); the rewrite's reinterprets must not
    reach TVM's LLVM code generator, which takes a reinterpret of 0 for a null pointer ("A zero
    reinterpret shortcut requires pointer result type")."""

    @T.prim_func
    def constant_operands(Z: T.Tensor((64, 3), T.int64)):
        with T.Kernel(1):
            for k in T.serial(64):
                Z[k, 0] = T.Cast("int64", T.cast(k // 64, "uint32"))
                Z[k, 1] = T.Cast("int64", T.cast(T.cast(k, "uint32") // T.uint32(64), "int32"))
                Z[k, 2] = T.Cast("int64", T.cast(k // 64 - 1, "uint64") >> T.uint64(60))

    kernel = tilelang.compile(constant_operands, target=target, execution_backend=backend)
    z = torch.full((64, 3), 7, dtype=torch.int64)
    kernel(z)
    assert z.tolist() == [[0, 0, 15]] * 64, (backend, target)


def test_only_casts_that_may_wrap_are_rewritten():
    @T.prim_func
    def casts(U8: T.Tensor((4,), T.uint8), U32: T.Tensor((4,), T.uint32), S32: T.Tensor((4,), T.int32),
              F: T.Tensor((4,), T.float32), Z: T.Tensor((4, 6), T.int64), W: T.Tensor((4,), T.uint32)):
        with T.Kernel(1):
            for i in T.serial(4):
                Z[i, 0] = T.Cast("int64", T.cast(U32[i], "int32"))  # unsigned -> signed: rewritten
                Z[i, 1] = T.Cast("int64", U8[i])                    # widening a load: as it is
                Z[i, 2] = T.Cast("int64", T.cast(S32[i], "int16"))  # signed -> signed: as it is
                Z[i, 3] = T.Cast("int64", T.cast(F[i], "int32"))    # from float: as it is
                Z[i, 4] = T.Cast("int64", U32[i] + T.uint32(1))     # wrapped arithmetic, widened: masked
                Z[i, 5] = T.Cast("int64", T.cast(U32[i], "uint8"))  # fewer bits: masked
                W[i] = T.cast(S32[i] & 3, "uint32")                 # signed -> unsigned: rewritten

    ir = lower(casts, target="c").device_mod.script()
    assert 'T.reinterpret("int32", U32[i])' in ir, ir
    assert 'T.Cast("int64", U8[i])' in ir, ir
    assert 'T.Cast("int16", S32[i])' in ir, ir
    assert 'T.Cast("int32", F[i])' in ir, ir
    assert 'T.Cast("int64", U32[i] + T.uint32(1) & T.uint32(4294967295))' in ir, ir
    assert 'T.Cast("uint8", U32[i] & T.uint32(255))' in ir, ir
    assert 'T.reinterpret("uint32", S32[i] & 3)' in ir, ir


def test_the_c_source_keeps_the_sign_test_and_reads_inside_the_guard():
    """``T.cast(U32[i], "int32") < 0`` was folded to false; the rewrite's reinterprets are printed
    as casts (TVM's C code generator prints a reinterpret by loading its operand into a variable
    ahead of the statement: ``uint32_t v_ = U32_ptr[i];`` before ``i < n &&``, a read past the end)."""

    @T.prim_func
    def guarded(U32: T.Tensor((T.dynamic("n"),), T.uint32), Z: T.Tensor((8,), T.int32)):
        with T.Kernel(1):
            for i in T.serial(8):
                Z[i] = T.if_then_else(i < U32.shape[0] and T.cast(U32[i], "int32") < 0, 1, 0)

    source = lower(guarded, target="c").device_source
    # the read of U32 is guarded by i < n itself (lowering/access_guards.py: LLVM evaluates both
    # operands of an 'and'), and the sign test reads the guarded value
    # (the loop is versioned: a copy without the guard runs when all 8 elements are inside)
    read = re.search(r"if \((i\w*) < n\) \{\s*(condval\w*) = U32_ptr\[\1\];", source)
    assert read, source
    i, value = read.groups()
    assert f"if (({i} < n) && (((int32_t){value}) < 0)) {{" in source, source
    assert "if (7 < n) {" in source and "if (((int32_t)U32_ptr[i]) < 0) {" in source, source
    assert "*(int32_t *)" not in source, source


def test_the_cuda_source_prints_the_reinterprets_as_casts():
    source = lower(casts_kernel(N), target="cuda").device_source
    assert "max(((int)U32_ptr[" in source, source
    assert "*(int *)" not in source and "*(signed char *)" not in source, source


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
@pytest.mark.parametrize("size", ["static", "dynamic"])
def test_the_cuda_source_compiles_with_nvcc(size):
    kernel = tilelang.compile(casts_kernel(N if size == "static" else T.dynamic("n")), target="cuda",
                              execution_backend="cython")
    assert "max(((int)U32_ptr[" in kernel.get_kernel_source()


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
def test_the_uint64_casts_compile_with_nvcc():
    tilelang.compile(uint64_kernel(), target="cuda", execution_backend="cython")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device (torch.cuda.is_available() is false)")
def test_casts_that_wrap_keep_their_value_on_a_cuda_device():
    kernel = tilelang.compile(casts_kernel(T.dynamic("n")), target="cuda")
    inputs = _inputs()
    z = torch.zeros((N, len(COLUMNS)), dtype=torch.int64, device="cuda")
    kernel(*(torch.from_numpy(t).cuda() for t in inputs), z)
    rows = [[int(v) for v in row] for row in zip(*inputs)]
    for column, (text, ref) in enumerate(COLUMNS):
        assert z[:, column].cpu().tolist() == [ref(*row, i) for i, row in enumerate(rows)], text
