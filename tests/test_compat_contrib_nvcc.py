"""``tilelang.contrib.nvcc``: the nvcc command it builds, its time limit and its argument checks.

nvcc itself is not installed on the CI machine: the tests that run it use a stand-in process
(``subprocess.Popen`` replaced), and say so in their names.
"""

from __future__ import annotations

import subprocess

import pytest

from tilelang.contrib import nvcc
from tilelang_core.errors import BuildError, SettingError, TargetError


class _StandinNvcc:
    """A stand-in for the nvcc process: writes the output file, or never finishes."""

    def __init__(self, cmd, hang=False):
        self.cmd, self.hang, self.killed, self.returncode = cmd, hang, False, 0

    def communicate(self, timeout=None):
        if self.hang and not self.killed:
            raise subprocess.TimeoutExpired(self.cmd, timeout)
        if not self.hang:
            with open(self.cmd[self.cmd.index("-o") + 1], "wb") as f:
                f.write(b"PTX-BYTES")
        return b"", None

    def kill(self):
        self.killed = True


@pytest.fixture
def standin(monkeypatch):
    made = []

    def popen(cmd, **kwargs):
        made.append(_StandinNvcc(cmd, hang=monkeypatch_hang[0]))
        return made[-1]

    monkeypatch_hang = [False]
    monkeypatch.setattr(nvcc, "get_nvcc_compiler", lambda: "/opt/cuda/bin/nvcc")
    monkeypatch.setattr(nvcc.subprocess, "Popen", popen)
    return made, monkeypatch_hang


def test_compile_cuda_with_standin_nvcc_builds_the_command_and_returns_the_output(standin, monkeypatch):
    made, _ = standin
    monkeypatch.delenv("TILELANG_COMPILE_TIMEOUT_SECONDS", raising=False)
    out = nvcc.compile_cuda("__global__ void k() {}", target_format="ptx", arch="sm_90", options=["-lineinfo"])
    assert out == bytearray(b"PTX-BYTES")
    cmd = made[0].cmd
    assert cmd[:3] == ["/opt/cuda/bin/nvcc", "--ptx", "-O3"] and "-arch=sm_90" in cmd and "-lineinfo" in cmd


def test_compile_cuda_with_standin_nvcc_kills_it_at_the_time_limit(standin, monkeypatch):
    made, hang = standin
    hang[0] = True
    monkeypatch.setenv("TILELANG_COMPILE_TIMEOUT_SECONDS", "0.5")
    with pytest.raises(BuildError, match=r"timed out after 0.5 seconds") as info:
        nvcc.compile_cuda("__global__ void slow() {}", target_format="cubin", arch=["-gencode", "arch=compute_80,code=sm_80"])
    assert made[0].killed
    text = str(info.value)
    assert "Command:" in text and "--cubin" in text and "Source:\n__global__ void slow() {}" in text


def test_compile_cuda_rejects_an_unknown_output_format():
    with pytest.raises(ValueError, match="target_format must be one of"):
        nvcc.compile_cuda("", target_format="exe")


def test_timeout_setting_parser(monkeypatch):
    for text, expected in (("", None), ("0", None), ("2.5", 2.5)):
        monkeypatch.setenv("TILELANG_COMPILE_TIMEOUT_SECONDS", text)
        assert nvcc._get_compile_timeout_seconds() == expected
    for bad in ("soon", "-1", "nan", "inf", "1e300"):
        monkeypatch.setenv("TILELANG_COMPILE_TIMEOUT_SECONDS", bad)
        with pytest.raises(SettingError, match="TILELANG_COMPILE_TIMEOUT_SECONDS"):
            nvcc._get_compile_timeout_seconds()


def test_target_code_list_and_arch_helpers():
    assert nvcc.get_target_code_list(None) == []
    assert nvcc.get_target_code_list(("sm_90", "sm_100a")) == ["sm_90", "sm_100a"]
    for bad in ("sm_90", [], ["sm90"], ["compute_90"], ["sm_90", ""]):
        with pytest.raises(TargetError, match="CUDA target code"):
            nvcc.get_target_code_list(bad)
    assert nvcc.get_target_arch("12.0") == "120"
    from tilelang import tvm

    assert nvcc.get_target_compute_version(tvm.target.Target({"kind": "cuda", "arch": "sm_86"})) == "8.6"
    # DeepSeek's TileKernels: major, _ = nvcc.parse_compute_version(nvcc.get_target_compute_version())
    assert nvcc.parse_compute_version("8.6") == (8, 6) and nvcc.parse_compute_version("10.0") == (10, 0)
    with pytest.raises(ValueError, match="expected a compute version such as '8.6', got '86'"):
        nvcc.parse_compute_version("86")
