"""`tilelang.compile` against a recording backend from the test kit: what the core hands to the
backend (artifact, options) and what it returns to the caller."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

import tilelang
import tilelang.language as T
from tilelang_core.backends import get_registry
from tilelang_core.errors import (
    BackendCapabilityError,
    KernelDefinitionError,
    OutIdxError,
    PassConfigError,
)
from tilelang_core.testkit import on_path, plugin_source, spec_dict, write_distribution

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from vector_add import vector_add  # noqa: E402

RECORDING = """
BUILT = []

@hookimpl
def tilelang_backend_build(artifact, options):
    BUILT.append((artifact, options))
    def run(*args, **kwargs):
        return ("ran", args, kwargs)
    return run
"""


@pytest.fixture
def recorder(tmp_path):
    """A 'recorder' backend (c and llvm, device_source) plus a float32-only, static-only 'picky' one."""
    root = tmp_path / "site"
    write_distribution(root, "recorder", plugin_source(spec_dict("recorder", {
        "c": {"priority": 1000, "consumes": ["device_source"], "device_language": "c"},
        "llvm": {"priority": 1000, "consumes": ["runtime_module"]},
    }), body=RECORDING))
    write_distribution(root, "picky", plugin_source(spec_dict("picky", {
        "c": {"priority": 0, "consumes": ["device_source"], "dtypes": ["float16"], "dynamic_shapes": False,
              "allocates_outputs": False},
    }), body=RECORDING))
    with on_path(root):
        yield importlib.import_module("tilelang_backend_recorder.plugin")


def test_compile_hands_artifact_and_options_and_returns_a_direct_kernel(recorder, monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    kernel = tilelang.compile(vector_add(T.dynamic("n")), out_idx=-1, target="c", compile_flags="-O1 -g",
                              execution_backend="recorder")
    artifact, options = recorder.BUILT[-1]
    assert artifact.target_kind == "c" and artifact.device_language == "c"
    assert "main_kernel" in artifact.device_source and artifact.host_source is None
    assert artifact.tvm_modules is None  # the backend consumes device source only
    assert [p.name for p in artifact.params] == ["A", "B", "C"]
    assert options.out_idx == [2] and options.compile_flags == ["-O1", "-g"]
    assert kernel.backend.name == "recorder" and kernel.out_idx == [2] and kernel.target.startswith("c")
    assert kernel.get_kernel_source() == artifact.device_source
    assert kernel.artifact.symbols[0].param_index == 0  # n bound from input A
    assert kernel(1, 2, stream=3) == ("ran", (1, 2), {"stream": 3})
    assert type(kernel).__call__ is not tilelang.JITKernel.__call__  # no Python frame of the core per call


def test_auto_selects_highest_priority_and_lowers_what_it_consumes(recorder, monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    kernel = tilelang.compile(vector_add(64), target="llvm")
    assert kernel.backend.name == "recorder"
    artifact, _ = recorder.BUILT[-1]
    assert artifact.tvm_modules is not None and artifact.device_source is None


def test_not_a_prim_func():
    with pytest.raises(KernelDefinitionError, match="expects a prim_func.*got function.*decorate it"):
        tilelang.compile(vector_add, target="c")


def test_out_idx_errors(recorder, monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    with pytest.raises(OutIdxError, match="out of range"):
        tilelang.compile(vector_add(64), out_idx=3, target="c", execution_backend="recorder")
    with pytest.raises(OutIdxError, match="more than once"):
        tilelang.compile(vector_add(64), out_idx=[2, -1], target="c", execution_backend="recorder")


def test_output_with_symbol_no_input_binds(recorder, monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    n = T.dynamic("n")

    @T.prim_func
    def fill(A: T.Tensor((4,), "float32"), Out: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=1) as bx:
            for i in T.serial(n):
                Out[i] = A[0]

    with pytest.raises(OutIdxError, match="'Out'.*symbol 'n'.*no input binds it"):
        tilelang.compile(fill, out_idx=1, target="c", execution_backend="recorder")


def test_output_before_the_input_that_binds_its_symbol(recorder, monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    n = T.dynamic("n")

    @T.prim_func
    def double(Out: T.Tensor((2 * n,), "float32"), X: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=1) as bx:
            for i in T.serial(n):
                Out[2 * i] = X[i]
                Out[2 * i + 1] = X[i]

    kernel = tilelang.compile(double, out_idx=0, target="c", execution_backend="recorder")
    assert [(s.name, s.param_index, s.dim) for s in kernel.artifact.symbols] == [("n", 1, 0)]


def test_capabilities_the_backend_does_not_declare(recorder, monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    with pytest.raises(BackendCapabilityError, match="does not allocate outputs"):
        tilelang.compile(vector_add(64, dtype="float16"), out_idx=-1, target="c", execution_backend="picky")
    with pytest.raises(BackendCapabilityError, match="dynamic dimensions"):
        tilelang.compile(vector_add(T.dynamic("n"), dtype="float16"), target="c", execution_backend="picky")
    with pytest.raises(BackendCapabilityError, match="'A'.*float32 tensor.*supports: float16"):
        tilelang.compile(vector_add(64), target="c", execution_backend="picky")


def test_unknown_pass_config_lists_known_ones(recorder, monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    with pytest.raises(PassConfigError, match="tl.disable_vectorize"):
        tilelang.compile(vector_add(64), target="c", execution_backend="recorder", pass_configs={"tl.warp_speed": True})


def test_compile_flags_type_error():
    with pytest.raises(TypeError, match="compile_flags"):
        tilelang.compile(vector_add(64), target="c", compile_flags=3)
