"""Symbolic shape expressions, and out_idx normalisation / symbol rebinding on hand-made artifacts."""

from __future__ import annotations

import pytest

from tilelang_core.artifact import KernelArtifact, ScalarParam, SymbolBinding, TensorParam
from tilelang_core.errors import OutIdxError
from tilelang_core.jit.outputs import bind_symbols_from_inputs, normalize_out_idx
from tilelang_core.symbolic import evaluate, free_symbols


@pytest.mark.parametrize(
    "expr, env, value",
    [(7, {}, 7), ("n", {"n": 5}, 5), ("n + 1", {"n": 5}, 6), ("(n + 127) // 128", {"n": 300}, 3),
     ("2 * n - m % 3", {"n": 4, "m": 5}, 6), ("max(n, 4)", {"n": 2}, 4), ("-n", {"n": 2}, -2)],
)
def test_evaluate(expr, env, value):
    assert evaluate(expr, env) == value


@pytest.mark.parametrize("bad", ["__import__('os')", "n.real", "n ** 2", "lambda: 1", "n / 2", "open('x')", "1 +"])
def test_rejects_anything_but_integer_arithmetic(bad):
    with pytest.raises(ValueError, match="invalid symbolic expression"):
        evaluate(bad, {"n": 1})


def test_unbound_symbol_is_a_clear_error():
    with pytest.raises(ValueError, match="unbound symbol"):
        evaluate("n + k", {"n": 1})
    assert free_symbols("min(n, k) + 1") == {"n", "k"}


def artifact(params, symbols):
    return KernelArtifact(name="k", target="c", target_kind="c", params=params, symbols=symbols)


def t(name, shape):
    return TensorParam(name=name, dtype="float32", shape=shape, device="cpu")


def test_normalize_out_idx_forms():
    a = artifact([t("A", [4]), t("B", [4]), t("C", [4])], [])
    assert normalize_out_idx(None, a) == []
    assert normalize_out_idx(-1, a) == [2]
    assert normalize_out_idx([0, -1], a) == [0, 2]
    with pytest.raises(OutIdxError, match=r"out of range.*\[-3, 2\]"):
        normalize_out_idx(3, a)
    with pytest.raises(OutIdxError, match="more than once"):
        normalize_out_idx([2, -1], a)
    with pytest.raises(OutIdxError, match="int or a list"):
        normalize_out_idx("C", a)


def test_scalar_cannot_be_output():
    a = artifact([t("A", [4]), ScalarParam(name="alpha", dtype="float32")], [])
    with pytest.raises(OutIdxError, match="scalar"):
        normalize_out_idx(1, a)


def test_output_before_its_binding_input_is_rebound():
    a = artifact([t("Out", ["n + 1"]), t("Y", ["2 * n"]), t("X", ["n"])],
                 [SymbolBinding(name="n", param_index=1, dim=0)])
    rebound = bind_symbols_from_inputs(a, [0, 1])
    assert rebound.symbols == [SymbolBinding(name="n", param_index=2, dim=0)]
    assert a.symbols[0].param_index == 1  # the original is untouched


def test_output_symbol_bound_by_no_input_is_an_error():
    a = artifact([t("X", [8]), t("Out", ["n"])], [SymbolBinding(name="n", param_index=1, dim=0)])
    with pytest.raises(OutIdxError, match="'Out'.*symbol 'n'.*no input binds it"):
        bind_symbols_from_inputs(a, [1])


def test_output_stride_symbol_bound_by_no_input_names_the_output():
    """Before: "output  of kernel ..." (no name) when the symbol was only in the output's strides."""
    import tilelang
    import tilelang.language as T

    m, s = T.dynamic("m"), T.dynamic("s")

    @T.prim_func
    def sout(X: T.Tensor((m, 4), "float32"), Y: T.StridedTensor((m, 4), (s, 1), "float32")):
        with T.Kernel(1, threads=1) as bx:
            Y[0, 0] = X[0, 0]

    with pytest.raises(OutIdxError, match="output 'Y' of kernel 'sout' has a shape or strides that use symbol 's', "
                                          "but no input binds it"):
        tilelang.compile(sout, execution_backend="cython", target="c", out_idx=[1])


def test_artifact_json_round_trip_keeps_everything():
    from tilelang_core.artifact import DeviceKernel, KernelArg, LaunchConfig

    a = artifact([t("A", ["n", 4]), ScalarParam(name="s", dtype="int32")], [SymbolBinding(name="n", param_index=0, dim=0)])
    a.device_kernels = [DeviceKernel(name="k_kernel", args=[KernelArg(name="A", kind="pointer", dtype="float32", param_index=0),
                                                           KernelArg(name="n", kind="scalar", dtype="int32", symbol="n")],
                                     launch=LaunchConfig(grid=["(n + 127) // 128", 1, 1], block=[128, 1, 1]))]
    a.device_source = "__global__ void k_kernel() {}"
    a.with_tvm_modules(object())
    back = KernelArtifact.from_json(a.to_json())
    assert back == a and back.to_json() == a.to_json()
    assert back.tvm_modules is None
