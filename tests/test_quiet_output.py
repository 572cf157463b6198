"""Quiet set-up and lowering: SPDX license strings (no setuptools deprecation banners) and no TVM
warnings when lowering for CUDA on a machine without a GPU."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_pyproject_uses_an_spdx_license_string():
    for pyproject in [ROOT / "pyproject.toml", *sorted(ROOT.glob("plugins/*/pyproject.toml"))]:
        data = tomllib.loads(pyproject.read_text())
        assert isinstance(data["project"]["license"], str), f"{pyproject}: use license = \"Apache-2.0\""
        assert any(r.startswith("setuptools>=77") for r in data["build-system"]["requires"]), pyproject


def test_lowering_for_cuda_without_a_gpu_prints_nothing():
    code = (
        "from tilelang_core.conformance import kernels\n"
        "from tilelang_core.lowering import lower\n"
        "for t in ('cuda', 'cuda -arch=sm_90'):\n"
        "    for consumes in (['device_source'], ['runtime_module']):\n"
        "        a = lower(kernels.vadd_dyn(), target=t, consumes=consumes)\n"
        "print(a.target)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "cuda -arch=sm_90"
    assert proc.stderr.strip() == "", proc.stderr[-3000:]
