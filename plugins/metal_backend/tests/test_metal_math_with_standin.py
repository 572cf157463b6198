"""TVM's math functions in Metal kernels, against torch, on the executing stand-in (mps_standin.py).

TVM 0.27's Metal generator printed the C library's names for 12 functions (``tanf``, ``atan2f``,
``log1pf``, ... even in float32 kernels) and ``nearbyint``, none of which the Metal Shading
Language has, and lowered 12 float16 functions not at all (lowering/gpu_math.py). Each kernel here
applies every function to one tensor; the stand-in compiles its Metal source as C++ with those C
names poisoned (as Metal's compiler would refuse them) and runs it. It does not check Metal's own
compiler or an Apple GPU's precision: the ``mps``-marked tests run on a Mac.
"""

from __future__ import annotations

import sys

import pytest

import tilelang

import metal_kernels as MK
from mps_standin import StandinRuntime, emulate, have_cxx

sys.path.insert(0, str(MK.ROOT / "tests"))
from math_kernels import FLOAT_OPS, check_float_ops, kernel_module  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not have_cxx(), reason="g++ is not installed")]


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    return StandinRuntime(execute=True, build_dir=tmp_path_factory.mktemp("metal_math_standin"))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_every_math_function_matches_torch_with_executing_standin(tmp_path, runtime, dtype):
    module = kernel_module(tmp_path, f"metal_math_{dtype}", [e for e, _ in FLOAT_OPS])
    kernel = tilelang.compile(module.make(len(FLOAT_OPS), dtype), target="metal", execution_backend="metal")
    check_float_ops(kernel.runner.with_runtime(runtime), FLOAT_OPS, dtype, "metal stand-in")


def test_the_standin_refuses_c_library_names_metal_lacks(tmp_path):
    module = kernel_module(tmp_path, "metal_tan", ["T.tan(x)"])
    source = tilelang.lower(module.make(1, "float32"), target="metal").kernel_source
    assert " tan(" in source
    emulate(source, tmp_path)
    with pytest.raises(AssertionError, match="poisoned"):
        emulate(source.replace(" tan(", " tanf("), tmp_path)
