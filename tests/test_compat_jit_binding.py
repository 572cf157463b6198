"""How ``@tilelang.jit`` calls bind to the function's signature: one kernel per distinct bound arguments."""

from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T


def _make_scaler():
    built = []

    @tilelang.jit(out_idx=-1, target="c")
    def scaler(n: int, factor: float = 2.0, shifted: bool = False):
        built.append((n, factor, shifted))
        offset = 1.0 if shifted else 0.0

        @T.prim_func
        def scale(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32)):
            with T.Kernel(1, threads=n):
                for i in T.Parallel(n):
                    Y[i] = X[i] * factor + offset

        return scale

    return scaler, built


def test_equivalent_calls_share_one_kernel_and_compute_right():
    scaler, built = _make_scaler()
    first = scaler(16)
    assert scaler(16, 2.0) is first
    assert scaler(n=16, shifted=False) is first
    assert scaler(shifted=False, factor=2.0, n=16) is first
    shifted = scaler(16, shifted=True)
    assert shifted is not first
    assert built == [(16, 2.0, False), (16, 2.0, True)]
    x = torch.randn(16)
    torch.testing.assert_close(first(x), x * 2.0)
    torch.testing.assert_close(shifted(x), x * 2.0 + 1.0)


def test_parse_args_key_and_python_binding_errors():
    scaler, _ = _make_scaler()
    key, tensors = scaler.func.parse_args(16)
    assert key == ((16, 2.0, False), None) and tensors == {}
    assert scaler.func.parse_args(n=16, factor=2.0, shifted=False)[0] == key
    extra, _ = scaler.func.parse_args(16, block=64)
    assert extra == ((16, 2.0, False, (("block", 64),)), None)
    with pytest.raises(TypeError, match="multiple values"):
        scaler.func.parse_args(16, n=16)
    with pytest.raises(TypeError, match="missing a required argument"):
        scaler.func.parse_args(factor=3.0)


def test_unhashable_values_in_keys():
    @tilelang.jit
    def factory(n, tiles=[1, 2], opts={"axis": [0]}, **rest):  # noqa: B006 - defaults on purpose
        raise AssertionError("not called by parse_args")

    omitted, _ = factory.func.parse_args(4)
    assert omitted == factory.func.parse_args(4, tiles=[1, 2], opts={"axis": [0]})[0]
    assert omitted != factory.func.parse_args(4, tiles=(1, 2))[0]  # a list is not a tuple
    hash(omitted)
    key, tensors, compile_kwargs = factory.func._parse_phase1_key(4, extra={"k": [3]})
    hash(key)
    assert tensors == {} and compile_kwargs == {"n": 4, "tiles": [1, 2], "opts": {"axis": [0]}, "extra": {"k": [3]}}

    class Box:
        __hash__ = None

    with pytest.raises(TypeError, match="unhashable JIT compile-time cache key value for parameter 'opts'"):
        factory.func.parse_args(4, opts=Box())


def test_tensor_arguments_are_named_not_keyed():
    @tilelang.jit
    def copy(A, B, block: int = 8):
        M = T.const("M")
        A: T.Tensor[[M], T.float32]
        B: T.Tensor[[M], T.float32]
        with T.Kernel(T.ceildiv(M, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < M:
                    B[bx * block + i] = A[bx * block + i]

    a, b = torch.randn(20), torch.zeros(20)
    key, tensors, compile_kwargs = copy.func._parse_phase1_key(a, b)
    assert key == (8,) and compile_kwargs == {"block": 8}
    assert tensors["A"] is a and tensors["B"] is b
    (values, tensor_key), _ = copy.func.parse_args(a, b)
    assert values == (8,) and tensor_key == (("A", (20,), "torch.float32", "cpu"), ("B", (20,), "torch.float32", "cpu"))
    copy(a, b)
    torch.testing.assert_close(b, a)


def test_call_form_must_be_hashable_and_mode_is_settable():
    scaler, _ = _make_scaler()
    with pytest.raises(TypeError, match="unhashable"):
        scaler(16, factor=[2.0])
    scaler.func.set_mode("lazy")
    assert scaler.mode == "lazy"
    with pytest.raises(ValueError, match="'auto', 'lazy' or 'eager'"):
        scaler.func.set_mode("later")


def test_assume_informs_the_simplifier_and_is_not_printed():
    @T.prim_func
    def zero_range(A: T.Tensor((64,), T.float32), lo: T.int32, hi: T.int32):
        with T.Kernel(1, threads=1):
            for i in T.serial(hi - lo):
                T.assume(lo + i < 64)
                A[lo + i] = 0.0

    kernel = tilelang.compile(zero_range, target="c")
    assert "assume" not in kernel.get_kernel_source()
    a = torch.ones(64)
    kernel(a, 10, 20)
    expected = torch.ones(64)
    expected[10:20] = 0
    torch.testing.assert_close(a, expected)
