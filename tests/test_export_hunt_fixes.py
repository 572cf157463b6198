"""Exported kernels: what a hunt of ``kernel.export`` / ``tilelang.load`` found.

- ``trusted="no"`` (a string from a config file) skipped the ownership check: only a bool is taken;
- loading a missing path removed what a killed export left beside it (docs/jit.md: a load only reads);
- an ``artifact.json`` that is not UTF-8 (digests recomputed) raised a bare ``UnicodeDecodeError``;
- the GPU kit's run side imported ``gpu_kit.checks``, which the kit did not carry.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from pathlib import Path

import pytest

import tilelang
import tilelang.language as T
from tilelang_core.errors import ArtifactError


@T.prim_func
def vadd(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32"), C: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=64):
        for i in T.Parallel(64):
            C[i] = A[i] + B[i]


@pytest.fixture
def exported(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    path = tmp_path / "k"
    tilelang.compile(vadd, out_idx=-1, execution_backend="cython", target="c").export(path)
    return path


@pytest.mark.parametrize("value", ["no", "False", 0, None])
def test_trusted_must_be_a_bool(exported, value):
    os.chmod(exported / "tilelang-kernel.json", 0o666)  # refused unless trusted
    with pytest.raises(TypeError, match=rf"tilelang.load: trusted must be True or False, got {value!r}"):
        tilelang.load(exported, trusted=value)
    with pytest.raises(Exception, match="writable by"):
        tilelang.load(exported, trusted=False)


def test_loading_a_missing_path_leaves_a_killed_exports_work_folder(tmp_path):
    left = tmp_path / ".k.tmp-999999-abcdef12"  # export's work folder; pid 999999 does not run
    (left / "backend").mkdir(parents=True)
    (left / "backend" / "kernel.so").write_text("half-written")
    with pytest.raises(ArtifactError, match="is not an exported tilelang kernel"):
        tilelang.load(tmp_path / "k")
    assert (left / "backend" / "kernel.so").read_text() == "half-written"


def test_an_artifact_that_is_not_text_is_an_artifact_error(exported):
    data = b"\xff{}"
    (exported / "artifact.json").write_bytes(data)
    meta = json.loads((exported / "tilelang-kernel.json").read_text())
    meta["files"]["artifact.json"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (exported / "tilelang-kernel.json").write_text(json.dumps(meta))
    with pytest.raises(ArtifactError, match=r"artifact.json is not a kernel artifact \(not UTF-8 text"):
        tilelang.load(exported)


def test_the_gpu_kit_carries_every_module_its_run_side_imports():
    kit = Path(__file__).resolve().parent.parent / "scripts" / "gpu_kit"
    namespace: dict = {}
    exec(compile((kit / "__init__.py").read_text(), "__init__.py", "exec"), namespace)
    carried = set(namespace["RUN_SIDE_MODULES"])
    imported = set()
    for name in carried:
        for node in ast.walk(ast.parse((kit / name).read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "gpu_kit":
                imported |= {f"{alias.name}.py" for alias in node.names if (kit / f"{alias.name}.py").exists()}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gpu_kit."):
                imported.add(node.module.split(".", 1)[1] + ".py")
            elif isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                imported.add(f"{node.module}.py")
    assert imported - carried == set(), f"the run side imports modules the kit does not carry: {imported - carried}"
