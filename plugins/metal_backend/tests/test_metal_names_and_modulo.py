"""Float remainders and awkward scalar names in Metal kernels, on the executing stand-in (mps_standin.py).

* TVM 0.27's Metal generator printed a float ``tirx.Mod`` (``T.truncmod``, from which ``%``,
  ``//``, ``T.floormod`` and ``T.floordiv`` of floats are built) as C's ``fmodf``, which Metal does
  not have (lowering/gpu_math.py): the stand-in poisons it as Metal's compiler refuses it.
* A scalar parameter called like a Metal reserved word (``device``, ``half``, ...) became a struct
  member of that name (invalid Metal), one called ``arg`` or ``A_ptr`` a member ``arg_1`` that the
  layout check refused, and ``threadIdx``/``blockIdx`` stopped TVM's generator with a bare check
  failure (lowering/msl.py).
"""

from __future__ import annotations

import importlib.util
import re

import pytest
import torch

import tilelang
from tilelang_core.errors import LoweringError
from tilelang_core.lowering.msl import is_reserved

from mps_standin import StandinRuntime, have_cxx

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not have_cxx(), reason="g++ is not installed")]

N = 128

#: (expression of x and y, torch reference)
MODULO_OPS = [
    ("x % y", torch.remainder),
    ("T.floormod(x, y)", torch.remainder),
    ("T.truncmod(x, y)", torch.fmod),
    ("x // y", lambda x, y: torch.div(x, y, rounding_mode="floor")),
]

MODULO_KERNEL = '''
import tilelang.language as T


@T.prim_func
def main(X: T.Tensor(({n},), "{dtype}"), Y: T.Tensor(({n},), "{dtype}"), Z: T.Tensor(({rows}, {n}), "{dtype}")):
    with T.Kernel(1, threads={n}) as bx:
        for i in T.Parallel({n}):
            x = X[i]
            y = Y[i]
{stores}
'''

NAMED_KERNEL = '''
import tilelang.language as T


@T.prim_func
def main(A: T.Tensor(({n},), "float32"), {name}: T.{dtype}, n2: T.int32):
    with T.Kernel(1, threads={n}) as bx:
        for i in T.Parallel({n}):
            A[i] = A[i] * T.Cast("float32", {name}) + T.Cast("float32", n2)
'''

SIZED_KERNEL = '''
import tilelang.language as T

{name} = T.dynamic("{name}")


@T.prim_func
def main(A: T.Tensor(({name},), "float32"), s: T.float32):
    with T.Kernel(T.ceildiv({name}, 64), threads=64) as bx:
        for i in T.Parallel(64):
            if bx * 64 + i < {name}:
                A[bx * 64 + i] = A[bx * 64 + i] * s
'''


def _module(tmp_path, name: str, text: str):
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _modulo_module(tmp_path, dtype: str, exprs: list[str]):
    stores = "\n".join(f"            Z[{j}, i] = {e}" for j, e in enumerate(exprs))
    return _module(tmp_path, f"metal_modulo_{dtype}_{len(exprs)}",
                   MODULO_KERNEL.format(n=N, dtype=dtype, rows=len(exprs), stores=stores))


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    return StandinRuntime(execute=True, build_dir=tmp_path_factory.mktemp("metal_names_standin"))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("expr", [e for e, _ in MODULO_OPS])
def test_float_remainders_are_metal_fmod_not_c_fmodf(tmp_path, expr, dtype):
    module = _modulo_module(tmp_path, dtype, [expr])
    source = tilelang.lower(module.main, target="metal").kernel_source
    assert "fmodf" not in source
    assert "fmod(" in source


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_float_remainders_match_torch_with_negative_operands_with_executing_standin(tmp_path, runtime, dtype):
    module = _modulo_module(tmp_path, dtype, [e for e, _ in MODULO_OPS])
    kernel = tilelang.compile(module.main, target="metal", execution_backend="metal").runner.with_runtime(runtime)
    torch_dtype = getattr(torch, dtype)
    x = ((torch.arange(N) - N // 2) * 0.375).to(torch_dtype)  # -24 .. 23.625, zero and exact multiples included
    y = torch.tensor([-2.5, -1.25, -0.75, 0.5, 1.5, 3.0, 2.25, -3.5]).repeat(N // 8).to(torch_dtype)
    z = torch.zeros((len(MODULO_OPS), N), dtype=torch_dtype)
    kernel(x, y, z)
    tolerance = {"float32": 1e-6, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]
    for row, (expr, ref) in enumerate(MODULO_OPS):
        want = ref(x.to(torch.float64), y.to(torch.float64)).to(torch_dtype).to(torch.float64)
        torch.testing.assert_close(z[row].to(torch.float64), want, rtol=tolerance, atol=tolerance,
                                   msg=lambda m, expr=expr: f"{expr} ({dtype}): {m}")


#: Scalar names Metal's compiler refuses as struct members (reserved words, types, the struct's
#: own name, C++ reserved identifiers) or that TVM's generator takes itself (``arg``, ``A_ptr``).
AWKWARD_NAMES = ["device", "kernel", "half", "constant", "thread", "threadgroup", "float", "uint", "float4",
                 "bfloat", "vertex", "fragment", "main_kernel_args_t", "__x", "arg", "A_ptr"]


def _check_struct(kernel, name: str) -> None:
    source = kernel.get_kernel_source()
    fields = [s.field for s in kernel.artifact.device_kernels[0].scalar_struct.slots]
    assert not any(is_reserved(f) or f == "main_kernel_args_t" for f in fields), fields
    if is_reserved(name) or name == "main_kernel_args_t":
        assert re.search(rf"\barg\.{name}\b", source) is None


@pytest.mark.parametrize("name", AWKWARD_NAMES)
def test_awkward_scalar_names_build_valid_metal_with_executing_standin(tmp_path, runtime, name):
    module = _module(tmp_path, f"metal_named_{name.strip('_')}", NAMED_KERNEL.format(n=N, name=name, dtype="float32"))
    built = tilelang.compile(module.main, target="metal", execution_backend="metal")
    _check_struct(built, name)
    assert sorted(a.name for a in built.artifact.device_kernels[0].args) == sorted(["A", name, "n2"])  # kept
    a = torch.randn(N)
    want = a * 1.5 + 3.0
    built.runner.with_runtime(runtime)(a, 1.5, 3)
    torch.testing.assert_close(a, want)


@pytest.mark.parametrize("name", ["half", "device"])
def test_awkward_16_bit_scalar_names_read_through_the_union_with_executing_standin(tmp_path, runtime, name):
    module = _module(tmp_path, f"metal_named16_{name}", NAMED_KERNEL.format(n=N, name=name, dtype="float16"))
    built = tilelang.compile(module.main, target="metal", execution_backend="metal")
    _check_struct(built, name)
    a = torch.randn(N)
    want = a * 2.5 - 4.0
    built.runner.with_runtime(runtime)(a, 2.5, -4)
    torch.testing.assert_close(a, want)


@pytest.mark.parametrize("name", ["thread", "device"])
def test_awkward_dynamic_size_names_build_valid_metal_with_executing_standin(tmp_path, runtime, name):
    module = _module(tmp_path, f"metal_sized_{name}", SIZED_KERNEL.format(name=name))
    built = tilelang.compile(module.main, target="metal", execution_backend="metal")
    _check_struct(built, name)
    a = torch.randn(100)
    want = a * -2.0
    built.runner.with_runtime(runtime)(a, -2.0)
    torch.testing.assert_close(a, want)


@pytest.mark.parametrize("name", ["threadIdx", "blockIdx"])
def test_thread_position_names_are_refused_by_name(tmp_path, name):
    module = _module(tmp_path, f"metal_named_{name}", NAMED_KERNEL.format(n=N, name=name, dtype="float32"))
    with pytest.raises(LoweringError, match=f"scalar parameter '{name}' cannot be passed to a Metal kernel: "
                                            f"'{name}' is a name TVM's Metal code generator uses .*rename it"):
        tilelang.compile(module.main, target="metal", execution_backend="metal")
    sized = _module(tmp_path, f"metal_sized_{name}", SIZED_KERNEL.format(name=name))
    with pytest.raises(LoweringError, match=f"dynamic size '{name}' cannot be passed to a Metal kernel"):
        tilelang.compile(sized.main, target="metal", execution_backend="metal")
