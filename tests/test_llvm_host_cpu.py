"""CPU kernels on target ``llvm`` are compiled for this machine's CPU, without fused multiply-adds
(``codegen.host_cpu_llvm_target``).

Before, TVM's default ``llvm`` target was the baseline x86-64 instruction set: 128-bit SSE2
vectors only, while target ``c`` kernels get ``-march=native``. The examples' 512^3 matmul took
12.0 ms on tvm_ffi/llvm and 6.6 ms on tvm_ffi/c; now 6.7 ms (bench/cpu_backends.py). LLVM fuses
``a * b + c`` into one rounding wherever the CPU has FMA, which target ``c`` and torch do not do,
so FMA stays off (on an AVX-512 CPU that also leaves 256-bit vectors). A saved ``llvm`` kernel
records the instruction set it was built for, as a ``c`` one does.
"""

from __future__ import annotations

import json

import pytest
import torch
import tvm
from tvm.target import codegen as llvm_codegen

import tilelang
import tilelang.language as T
import tilelang_core
from tilelang_core.errors import ArtifactError
from tilelang_core.lowering.codegen import host_cpu_llvm_target

CPU = llvm_codegen.llvm_get_system_cpu()


def test_the_bare_llvm_target_gets_this_cpu_without_fma():
    target = host_cpu_llvm_target(tvm.target.Target("llvm"))
    if CPU in ("", "generic"):
        pytest.skip(f"LLVM names no CPU for this machine ({CPU!r})")
    assert str(target.attrs["mcpu"]) == CPU
    assert "-fma" in [str(a) for a in target.attrs["mattr"]]
    assert str(target.host.attrs["mcpu"]) == CPU  # CPU kernels are compiled as host code


def test_a_chosen_cpu_or_another_machine_is_kept():
    chosen = tvm.target.Target({"kind": "llvm", "mcpu": "x86-64"})
    assert host_cpu_llvm_target(chosen).same_as(chosen)
    arm = tvm.target.Target({"kind": "llvm", "mtriple": "aarch64-linux-gnu"})
    assert host_cpu_llvm_target(arm).same_as(arm)
    cuda = tvm.target.Target("cuda")
    assert host_cpu_llvm_target(cuda).same_as(cuda)


def _axpb(n):
    @T.prim_func
    def axpb(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32"),
             D: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 256)) as bx:
            for i in T.Parallel(256):
                if bx * 256 + i < n:
                    D[bx * 256 + i] = A[bx * 256 + i] * B[bx * 256 + i] + C[bx * 256 + i]

    return axpb


def test_llvm_kernels_run_on_this_cpu_and_round_a_times_b_plus_c_twice():
    if CPU in ("", "generic"):
        pytest.skip(f"LLVM names no CPU for this machine ({CPU!r})")
    func = _axpb(4099)
    art = tilelang_core.lower(func, target="llvm", consumes=["runtime_module"])
    assert f'"target-cpu"="{CPU}"' in art.runtime_source
    asm = art.tvm_modules.inspect_source("asm")
    assert "vfmadd" not in asm and "vfmsub" not in asm  # TVM's llvm.fmuladd stays a multiply and an add
    k = tilelang.compile(func, target="llvm", execution_backend="tvm_ffi")
    a, b, c = (torch.randn(4099) for _ in range(3))
    d = torch.empty(4099)
    k(a, b, c, d)
    assert torch.equal(d, a * b + c)  # torch rounds the product, then the sum


def test_a_saved_llvm_kernel_is_refused_on_a_stand_in_for_another_cpu(tmp_path, monkeypatch):
    k = tilelang.compile(_axpb(1000), target="llvm", execution_backend="tvm_ffi")
    path = k.export(tmp_path / "exported")
    (plan,) = list(path.rglob("tvmffi_plan.json"))
    from tilelang_core import devices

    assert json.loads(plan.read_text())["cpu"] == devices.instruction_set_id()
    a, b, c = (torch.randn(1000) for _ in range(3))
    d = torch.empty(1000)
    tilelang.load(path)(a, b, c, d)
    assert torch.equal(d, a * b + c)
    # another CPU cannot exist here: its instruction set is a stand-in
    monkeypatch.setattr(devices, "instruction_set_id", lambda: "0" * 16)
    with pytest.raises(ArtifactError, match="built for another CPU"):
        tilelang.load(path)
