"""A kernel's scalars keep their own name in C and CUDA source (lowering/local_names.py).

TVM 0.27 names every buffer's storage ``<name>_ptr``, so ``tmp = T.alloc_var(...)`` printed as
``half tmp_ptr[1]; tmp_ptr[0] = ...``, and TileLang users' source checks (``"tmp[0] =" in code``)
failed. One-element arrays now print as ``tmp[1]``/``tmp[0]`` unless the name is taken (another
identifier of the source, a keyword, a header macro): then TVM's name stays, and the kernel still
builds and computes the same values.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.lowering import lower
from tilelang_core.lowering.local_names import scalars_by_kernel_name

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402

NVCC = os.environ.get("TILELANG_NVCC") or shutil.which("nvcc") or (
    "/usr/local/bin/nvcc" if os.path.exists("/usr/local/bin/nvcc") else None)


def add_scalar(N, block, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            tmp = T.alloc_var(dtype)
            tmp = 2
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] + tmp
    return main


def taken_names(N, block):
    """Scalars named like a C keyword, a header macro, a loop variable of T.copy (``v``) and an
    upper-case (macro-style) name: none of them may be renamed."""
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            S = T.alloc_shared((block,), "float32")
            double = T.alloc_var("float32")
            errno = T.alloc_var("float32")
            v = T.alloc_var("float32")
            NAN = T.alloc_var("float32")
            double = 1
            errno = 2
            v = 3
            NAN = 4
            T.copy(A[bx * block], S)
            for i in T.Parallel(block):
                B[bx * block + i] = S[i] * double + errno + v + NAN
    return main


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_an_alloc_var_is_printed_under_its_name_and_runs(backend, target):
    kernel = tilelang.compile(add_scalar(256, 64), out_idx=[1], target=target, execution_backend=backend)
    a = torch.randn(256)
    torch.testing.assert_close(kernel(a), a + 2)
    if target == "c":
        source = kernel.get_kernel_source()
        assert "float tmp[1];" in source and "tmp[0] = " in source and "tmp_ptr" not in source, source


def test_the_cuda_source_prints_an_alloc_var_under_its_name():
    source = lower(add_scalar(256, 64), target="cuda").device_source
    assert "float tmp[1];" in source and "tmp[0] = " in source and "tmp_ptr" not in source, source


def test_a_cuda_runtime_module_builds_the_same_names():
    """tvm_ffi's CUDA kernels are TVM runtime modules, whose source TVM generates again: the same
    fixes apply to it (through TVM's CUDA post-processing hook)."""
    kernel = tilelang.compile(add_scalar(256, 64), out_idx=[1], target="cuda", execution_backend="tvm_ffi")
    source = kernel.get_kernel_source()
    assert "float tmp[1];" in source and "tmp[0] = " in source and "tmp_ptr" not in source, source


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_taken_names_keep_their_suffix_and_the_kernel_is_right(backend, target):
    kernel = tilelang.compile(taken_names(128, 64), out_idx=[1], target=target, execution_backend=backend)
    a = torch.randn(128)
    torch.testing.assert_close(kernel(a), a * 1 + 2 + 3 + 4)
    if target == "c":
        source = kernel.get_kernel_source()
        for name in ("double", "errno", "v", "NAN"):
            assert re.search(rf"(?<!\w){name}\[", source) is None, (name, source)
        assert "double_ptr[0]" in source and "errno_ptr[0]" in source, source


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
def test_taken_names_in_cuda_compile_with_nvcc(tmp_path):
    source = lower(taken_names(128, 64), target="cuda").device_source
    for name in ("double", "errno", "NAN"):
        assert re.search(rf"(?<!\w){name}\[", source) is None, (name, source)
    (tmp_path / "k.cu").write_text("#include <cerrno>\n#include <cmath>\n" + source)
    done = subprocess.run([NVCC, "-c", "-arch=sm_80", "-o", str(tmp_path / "k.o"), str(tmp_path / "k.cu")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.parametrize(
    "source, expected",
    [
        ("float x_ptr[1];\nx_ptr[0] = 1;", "float x[1];\nx[0] = 1;"),
        ("  alignas(64) half t_ptr[1];\n  f(&(t_ptr[0]));", "  alignas(64) half t[1];\n  f(&(t[0]));"),
        ("__shared__ alignas(16) float s_ptr[1];", "__shared__ alignas(16) float s[1];"),
        # member names do not take a name: threadIdx.x
        ("int x_ptr[1];\nx_ptr[0] = threadIdx.x + p->x;", "int x[1];\nx[0] = threadIdx.x + p->x;"),
        # arrays of more than one element are left alone
        ("float a_ptr[2];\nfloat a_ptr_1[1];", "float a_ptr[2];\nfloat a_1[1];"),
        # the name is taken: by a variable, a comment word, a keyword, a macro-style name
        ("int x_ptr[1];\nint x = 0;", "int x_ptr[1];\nint x = 0;"),
        # TVM's second x (x_ptr_1) becomes x_1, unless a buffer x_1 wants that name too
        ("int x_ptr[1];\nint x_ptr_1[1];", "int x[1];\nint x_1[1];"),
        ("int x_ptr_1[1];\nint x_1_ptr[1];", "int x_ptr_1[1];\nint x_1_ptr[1];"),
        ("int a_ptr_ptr[1];", "int a_ptr[1];"),
        ("int n_ptr[1]; // n blocks", "int n_ptr[1]; // n blocks"),
        ("int int_ptr[1];", "int int_ptr[1];"),
        ("int stdout_ptr[1];", "int stdout_ptr[1];"),
        ("int EOF_ptr[1];", "int EOF_ptr[1];"),
        ("int _x_ptr[1];", "int _x_ptr[1];"),
    ],
)
def test_the_rename_rules(source, expected):
    assert scalars_by_kernel_name(source) == expected
