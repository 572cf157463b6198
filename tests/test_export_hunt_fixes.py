"""Exported kernels: what a hunt of ``kernel.export`` / ``tilelang.load`` found.

- ``trusted="no"`` (a string from a config file) skipped the ownership check: only a bool is taken;
- loading a missing path removed what a killed export left beside it (docs/jit.md: a load only reads);
- an ``artifact.json`` that is not UTF-8 (digests recomputed) raised a bare ``UnicodeDecodeError``;
- the GPU kit's run side imported ``gpu_kit.checks``, which the kit did not carry;
- metadata with ``"format_version": "1"`` or a size as a string was taken (pydantic's lax mode);
- ``tilelang.load(b"...")``, ``load(3)``, ``load("")`` gave pathlib's or no clear error;
- two export names with the same first 64 characters shared their side names: loading one that
  was missing put back the other's previous export, which a killed export had moved aside;
- ``overwrite=True`` removed, with the previous export, an empty folder someone had made in it.
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


def _vadd(n):
    @T.prim_func
    def vadd(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=64):
            for i in T.serial(n):
                C[i] = A[i] + B[i]

    return vadd


@pytest.mark.parametrize("backend", ["cython", "tvm_ffi", "ctypes"])
def test_an_export_replaced_while_it_is_loaded_gives_one_whole_kernel(tmp_path, monkeypatch, backend):
    """A load reads the export by path several times; another process's export replaced it in
    between and cython and ctypes ran one kernel's library with the other's call plan (the process
    aborted: "corrupted size vs. prev_size"). The load now reads it again."""
    import torch

    from tilelang_core.cache import entry as E

    pytest.importorskip(f"tilelang_backend_{backend.replace('_', '')}")
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    path, newer = tmp_path / "k", tmp_path / "newer"
    tilelang.compile(_vadd(64), out_idx=-1, execution_backend=backend, target="c").export(path)
    tilelang.compile(_vadd(4096), out_idx=-1, execution_backend=backend, target="c").export(newer)
    real, swaps = E.load_runner, []

    def replaced_before_the_backend_reads(directory, meta, artifact, record):
        if not swaps:  # the core has read and checked the old export; the backend reads the new one
            os.rename(path, tmp_path / "older")
            os.rename(newer, path)
            swaps.append(True)
        return real(directory, meta, artifact, record)

    monkeypatch.setattr(E, "load_runner", replaced_before_the_backend_reads)
    kernel = tilelang.load(path)
    n = int(kernel.artifact.params[0].shape[0])
    a, b = torch.randn(n), torch.randn(n)
    assert swaps and n == 4096 and torch.equal(kernel(a, b), a + b)


def test_a_tvm_ffi_load_without_tvm_names_both_ways_to_get_its_runtime(tmp_path, monkeypatch):
    """It said only "pip install apache-tvm"; $TILELANG_TVM_LIB_DIR (the GPU kit's way) works too."""
    import subprocess
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_missing_dependencies import blocked_env

    pytest.importorskip("tilelang_backend_tvmffi")
    import tvm

    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    path = tmp_path / "k"
    tilelang.compile(vadd, out_idx=-1, execution_backend="tvm_ffi", target="c").export(path)
    env = blocked_env(tmp_path, "tvm", tmp_path / "cache")
    code = ("import tilelang, torch\n"
            f"k = tilelang.load({str(path)!r})\n"
            "a = torch.ones(64)\n"
            "print('ran', k(a, a)[0].item())\n")
    refused = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert refused.returncode == 1 and "BackendUnavailableError" in refused.stderr, refused.stderr[-2000:]
    assert "install apache-tvm, or set TILELANG_TVM_LIB_DIR to a folder holding libtvm_runtime.so" in refused.stderr
    env["TILELANG_TVM_LIB_DIR"] = str(Path(tvm.__file__).parent / "lib")
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert ran.returncode == 0 and "ran 2.0" in ran.stdout, ran.stderr[-2000:]


@pytest.mark.parametrize("field", ["format_version", "size"])
def test_metadata_values_of_another_json_type_are_refused(exported, field):
    meta = json.loads((exported / "tilelang-kernel.json").read_text())
    if field == "format_version":
        meta["format_version"] = str(meta["format_version"])
    else:
        meta["files"]["artifact.json"]["size"] = str(meta["files"]["artifact.json"]["size"])
    (exported / "tilelang-kernel.json").write_text(json.dumps(meta))
    with pytest.raises(ArtifactError, match=rf"not valid kernel metadata: field '[a-z_.]*{field}': Input should be a "
                                            r"valid integer"):
        tilelang.load(exported)


@pytest.mark.parametrize("path, error, said", [
    (b"/tmp/k", TypeError, "path must be the exported kernel's folder, a str or os.PathLike .* got bytes"),
    (3, TypeError, "path must be the exported kernel's folder, a str or os.PathLike .* got int 3"),
    ("", ValueError, "path is empty"),
], ids=["bytes", "int", "empty"])
def test_load_names_a_path_of_the_wrong_kind(path, error, said):
    with pytest.raises(error, match=f"tilelang.load: {said}"):
        tilelang.load(path)


def test_a_load_puts_back_only_its_own_previous_export_when_long_names_share_a_start(exported, tmp_path):
    from tilelang_core.jit import export_swap

    stem = "k" * 64
    first, second = tmp_path / f"{stem}-first", tmp_path / f"{stem}-second"
    os.rename(exported, first)
    import subprocess
    import sys

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    aside = export_swap.side_name(first, "old")
    aside = aside.with_name(aside.name.replace(f"-{os.getpid()}-", f"-{dead.pid}-"))
    os.rename(first, aside)  # where an export killed between its two renames left it
    with pytest.raises(ArtifactError, match="is not an exported tilelang kernel"):
        tilelang.load(second)
    assert not second.exists() and aside.is_dir()
    with pytest.warns(UserWarning, match="the previous export was put back"):
        assert tilelang.load(first).name == "vadd"


def test_overwrite_refuses_an_export_holding_a_folder_someone_made(exported):
    (exported / "notes" / "empty").mkdir(parents=True)
    kernel = tilelang.load(exported)
    with pytest.raises(ArtifactError, match=r"it holds folders the export did not write \(notes, notes/empty\)"):
        kernel.export(exported, overwrite=True)
    assert (exported / "notes" / "empty").is_dir()
