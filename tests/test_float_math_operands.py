"""Two-operand float math with operands of two types (operand_checks.check_float_operands): TVM
took the first operand's type for the call and read the other's bits, so ``T.fmod(x, n)`` of a
float32 ``x`` and an int32 ``n`` gave 3e-20 on ``llvm`` and failed to compile on ``c``, and a
float32/float64 pair failed or was wrong alike. The operands are now converted to the wider float
type, as torch promotes: float32 for a float16 with a bfloat16, and for an integer expression with
a Python float (``T.pow(2.0, n)``)."""

from __future__ import annotations

import pathlib
import re
import sys

import pytest
import torch

import tilelang
import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import PATHS, cpu_pairs, path_id  # noqa: E402


def _mixed(n):
    @T.prim_func
    def mixed(A: T.Tensor((n,), "float32"), N: T.Tensor((n,), "int32"), D: T.Tensor((n,), "float64"),
              Z: T.Tensor((7, n), "float64")):
        with T.Kernel(1, threads=1) as _:
            for i in T.serial(n):
                Z[0, i] = T.fmod(A[i], N[i])
                Z[1, i] = T.atan2(N[i], A[i])
                Z[2, i] = T.hypot(A[i], N[i])
                Z[3, i] = T.copysign(A[i], N[i])
                Z[4, i] = T.atan2(A[i], D[i])
                Z[5, i] = T.pow(A[i], N[i])
                Z[6, i] = T.pow(2.0, N[i])

    return mixed


@pytest.mark.parametrize("backend,target", cpu_pairs())
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_mixed_operands_are_promoted_as_torch_does(backend, target, dynamic):
    kernel = tilelang.compile(_mixed(T.dynamic("n") if dynamic else 5), target=target, execution_backend=backend)
    a = torch.tensor([1.5, -2.0, 3.0, 0.5, 7.25])
    n = torch.tensor([2, 3, -1, 1, -4], dtype=torch.int32)
    d = torch.tensor([0.1, 3.0, -1.0, 7.0, -0.5], dtype=torch.float64)
    z = torch.zeros(7, 5, dtype=torch.float64)
    kernel(a, n, d, z)
    nf = n.float()
    want = torch.stack([torch.fmod(a, nf).double(), torch.atan2(nf, a).double(), torch.hypot(a, nf).double(),
                        torch.copysign(a, nf).double(), torch.atan2(a.double(), d), torch.pow(a, nf).double(),
                        torch.pow(2.0, nf).double()])
    torch.testing.assert_close(z, want, rtol=1e-6, atol=1e-7)


@T.prim_func
def _two_halves(H: T.Tensor((5,), "float16"), G: T.Tensor((5,), "bfloat16"), Z: T.Tensor((2, 5), "float32")):
    with T.Kernel(1, threads=1) as _:
        for i in T.serial(5):
            Z[0, i] = T.hypot(H[i], G[i])
            Z[1, i] = T.atan2(G[i], H[i])


@pytest.mark.parametrize("backend,target", PATHS, ids=path_id)  # not ctypes: it takes no 16-bit floats
def test_float16_with_bfloat16_is_computed_in_float32(backend, target):
    kernel = tilelang.compile(_two_halves, target=target, execution_backend=backend)
    h = torch.tensor([1.0, -3.5, 0.25, 7.0, 2.0], dtype=torch.float16)
    g = torch.tensor([1e5, 2.0, -0.5, 3.0, 1e-3], dtype=torch.bfloat16)
    z = torch.zeros(2, 5)
    kernel(h, g, z)
    torch.testing.assert_close(z, torch.stack([torch.hypot(h, g), torch.atan2(g, h)]))  # torch: both in float32


@T.prim_func
def _float64_and_literals(D: T.Tensor((3,), "float64"), Z: T.Tensor((3, 3), "float64")):
    with T.Kernel(1, threads=1) as _:
        for i in T.serial(3):
            Z[0, i] = T.fmod(D[i], 0.1)
            Z[1, i] = T.copysign(0.5, D[i])
            Z[2, i] = T.atan2(0.5, D[i])


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_a_python_float_next_to_a_float64_operand_is_a_float64_constant(backend, target):
    """TVM made the literal a float32 constant beside the float64 operand: llvm read its bits
    (fmod gave 4.8e-315, copysign lost the sign), c did not compile ('conflicting types for fmod')."""
    kernel = tilelang.compile(_float64_and_literals, target=target, execution_backend=backend)
    d = torch.tensor([0.25, -0.35, 7.0], dtype=torch.float64)
    z = torch.zeros(3, 3, dtype=torch.float64)
    kernel(d, z)
    half = torch.full_like(d, 0.5)
    torch.testing.assert_close(z, torch.stack([torch.fmod(d, 0.1), torch.copysign(half, d), torch.atan2(half, d)]))


def test_integer_operands_with_only_python_ints_are_refused():
    """T.pow(n, 2) of an int32 n: the 2 made a float operand and n was computed in float32 (wrong
    above 2**24); torch computes integers in integers, so it is refused, as before."""
    from tilelang_core.errors import LoweringError

    with pytest.raises(LoweringError, match=r"T.pow: computes on floating-point values only, but its first operand is "
                                            r"the int32 expression N\[i\]"):

        @T.prim_func
        def k(N: T.Tensor((2,), "int32"), Z: T.Tensor((2,), "int32")):
            with T.Kernel(1, threads=1) as _:
                for i in T.serial(2):
                    Z[i] = T.pow(N[i], 2)


@pytest.mark.parametrize("call, example", [
    ("pow", 'T.pow(x, T.cast(y, "float32"))'),
    ("ldexp", 'T.ldexp(T.cast(x, "float32"), n)'),
])
def test_the_refusal_converts_the_operand_it_names(call, example):
    from tilelang_core.errors import LoweringError

    with pytest.raises(LoweringError, match=re.escape(f"convert it first, for example {example}")):

        @T.prim_func
        def k(N: T.Tensor((2,), "int32"), Z: T.Tensor((2,), "float32")):
            with T.Kernel(1, threads=1) as _:
                for i in T.serial(2):
                    match call:
                        case "pow":
                            Z[i] = T.pow(2, N[i])
                        case "ldexp":
                            Z[i] = T.ldexp(N[i], 3)


@T.prim_func
def _fma_mixed(D: T.Tensor((4,), "float64"), H: T.Tensor((4,), "float16"), N: T.Tensor((4,), "int32"),
               Z: T.Tensor((3, 4), "float64")):
    with T.Kernel(1, threads=1) as _:
        for i in T.serial(4):
            Z[0, i] = T.fma(D[i], D[i], 1.0)
            Z[1, i] = T.fma(D[i], 2, N[i])
            Z[2, i] = T.fma(H[i], H[i], N[i])


@pytest.mark.parametrize("backend,target", PATHS, ids=path_id)
def test_fma_operands_of_other_types_are_promoted(backend, target):
    """T.fma(x, y, 1.0) of float64 x, y read the float32 1.0's bits on llvm (x * y + 0); an int32
    third operand gave a wrong value on llvm and a gcc error on c."""
    kernel = tilelang.compile(_fma_mixed, target=target, execution_backend=backend)
    d = torch.tensor([0.5, -1.25, 3.0, 1e10], dtype=torch.float64)
    h = torch.tensor([0.5, -1.25, 3.0, 7.5], dtype=torch.float16)
    n = torch.tensor([1, -2, 3, 4], dtype=torch.int32)
    z = torch.zeros(3, 4, dtype=torch.float64)
    kernel(d, h, n, z)
    hf = h.float()
    want = torch.stack([d * d + 1, d * 2 + n, (hf * hf + n).half().double()])  # float16 with int32: float16, as torch
    torch.testing.assert_close(z, want)


@T.prim_func
def _narrow_nextafter(G: T.Tensor((4,), "bfloat16"), H: T.Tensor((4,), "float16"), Z: T.Tensor((2, 4), "float32")):
    with T.Kernel(1, threads=1) as _:
        for i in T.serial(4):
            Z[0, i] = T.nextafter(G[i], 10.0)
            Z[1, i] = T.nextafter(H[i], -1.0)


@pytest.mark.parametrize("backend,target", PATHS, ids=path_id)
def test_nextafter_of_a_16_bit_float_towards_a_python_float(backend, target):
    """The Python float is a float32 constant: stepping a bfloat16 towards it raised TVM's
    TypeError 'mismatched types' from inside the lowering."""
    kernel = tilelang.compile(_narrow_nextafter, target=target, execution_backend=backend)
    g = torch.tensor([0.05, 0.0, 9.99, -3.0], dtype=torch.bfloat16)
    h = torch.tensor([0.05, 0.0, -1.0, 3.0], dtype=torch.float16)
    z = torch.zeros(2, 4)
    kernel(g, h, z)
    want = torch.stack([torch.nextafter(g, torch.full_like(g, 10.0)).float(), torch.nextafter(h, torch.full_like(h, -1.0)).float()])
    torch.testing.assert_close(z, want, rtol=0, atol=0)
