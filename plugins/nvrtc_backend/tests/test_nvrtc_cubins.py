"""Every CUDA example and tile-operator kernel builds to a cubin for sm_80 and sm_90 here (no GPU).

Each cubin is checked with binutils' ``readelf`` (independent of the backend's own ELF reader):
an ELF for the NVIDIA CUDA machine, of the right SM, with a function symbol per device kernel,
and per kernel a parameter constant bank as large as the launch plan's arguments. The backend's
reader must agree (parameter sizes from ``EIATTR_KPARAM_INFO``). Each kernel is exported too.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

import nvrtc_kernels
import tilelang

READELF = shutil.which("readelf")
needs_readelf = pytest.mark.skipif(READELF is None, reason="readelf (binutils) is not installed")

#: Where the kernel parameters start in constant bank 0 (the driver's part comes first).
PARAM_BANK_BASE = {"sm_80": 0x160, "sm_90": 0x210}

KERNELS = nvrtc_kernels.all_kernels()


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")


def _readelf(path, *flags) -> str:
    return subprocess.run([READELF, *flags, "-W", str(path)], capture_output=True, text=True, check=True).stdout


def check_cubin(kernel, arch: str, tmp_path) -> None:
    from tilelang_backend_nvrtc.cubin import read_cubin

    runner = kernel.runner
    path = tmp_path / "kernel.cubin"
    path.write_bytes(runner.cubin)
    header = _readelf(path, "-h")
    assert re.search(r"Machine:\s+NVIDIA CUDA architecture", header), header
    flags = int(re.search(r"Flags:\s+0x([0-9a-f]+)", header).group(1), 16)
    assert (flags >> 8) & 0xFF == int(arch[3:]), header
    symbols = {line.split()[-1]: line.split()[3] for line in _readelf(path, "-s").splitlines()
               if re.match(r"\s*\d+:", line) and len(line.split()) >= 8}
    sections = {}
    for line in _readelf(path, "-S").splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)", line)
        if m:
            sections[m.group(1)] = int(m.group(2), 16)
    info = read_cubin(runner.cubin)
    assert info.sm == int(arch[3:])
    assert [k["name"] for k in runner.plan["kernels"]] == [k.name for k in kernel.artifact.device_kernels]
    for planned in runner.plan["kernels"]:
        name = planned["name"]
        assert symbols.get(name) == "FUNC", f"{name} is not a function symbol of the cubin: {symbols}"
        sizes = [a["bytes"] for a in planned["args"]]
        assert sections[f".nv.constant0.{name}"] - PARAM_BANK_BASE[arch] == sum(sizes)  # readelf's view
        assert info.kernels[name].param_sizes == sizes  # the backend's reader agrees
        assert info.kernels[name].param_bytes == sum(sizes)


def _build(func, out_idx, arch):
    return tilelang.compile(func, out_idx=out_idx, execution_backend="nvrtc", target=f"cuda -arch={arch}")


@needs_readelf
def test_vector_add_builds_to_a_checked_cubin_and_exports(tmp_path):
    name, func, out_idx = nvrtc_kernels.examples()[0]
    kernel = _build(func, out_idx, "sm_90")
    check_cubin(kernel, "sm_90", tmp_path)
    kernel.export(tmp_path / "exported")
    assert (tmp_path / "exported" / "backend" / "nvrtc_plan.json").is_file()


@pytest.mark.slow
@needs_readelf
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name, func, out_idx", KERNELS, ids=[k[0] for k in KERNELS])
def test_every_cuda_kernel_builds_to_a_cubin(name, func, out_idx, arch, tmp_path):
    kernel = _build(func, out_idx, arch)
    assert kernel.artifact.arch == arch and kernel.runner.plan["arch"] == arch
    check_cubin(kernel, arch, tmp_path)
    kernel.export(tmp_path / "exported")
    assert (tmp_path / "exported" / "backend" / "kernel.cubin").read_bytes() == kernel.runner.cubin
