"""A compiled kernel pickles as its export and is loaded again where it is unpickled
(tilelang_core/jit/pickling.py); ``@tilelang.jit`` and ``@tilelang.autotune`` functions pickle by
reference; copying a kernel gives the kernel itself."""

from __future__ import annotations

import copy
import multiprocessing
import os
import pickle
import runpy
import shutil
import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang_core.language as T
from tilelang_core.errors import ArtifactError, CacheError
from tilelang_core.jit import export, pickling
from tilelang_core.testkit import on_path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402

KIT = runpy.run_path(str(Path(__file__).with_name("test_cache_kit.py")))


def scale(n):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), s: T.float32):
        with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:
            for i in T.Parallel(32):
                if bx * 32 + i < n:
                    B[bx * 32 + i] = A[bx * 32 + i] * s

    return main


def run_scale(kernel):
    """What the kernel gives for 100 elements (called in a spawned worker too)."""
    a = torch.arange(100, dtype=torch.float32)
    return kernel(a, 3.0).tolist()


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_a_pickled_kernel_runs_where_it_is_unpickled(backend, target):
    kernel = tilelang.compile(scale(T.dynamic("n")), out_idx=[1], target=target, execution_backend=backend)
    again = pickle.loads(pickle.dumps(kernel))
    assert again is not kernel and again.backend == kernel.backend and again.out_idx == [1]
    assert again.cache_key == kernel.cache_key and again.get_kernel_source() == kernel.get_kernel_source()
    want = (torch.arange(100, dtype=torch.float32) * 3.0).tolist()
    assert run_scale(again) == want
    a = torch.arange(7, dtype=torch.float32)  # the dynamic size still binds after loading
    assert torch.equal(again(a, -1.0), -a)


def test_a_kernel_reaches_a_spawned_worker_without_compiling_there():
    kernel = tilelang.compile(scale(T.dynamic("n")), out_idx=[1], target="c", execution_backend="cython")
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        assert pool.map(run_scale, [kernel]) == [run_scale(kernel)]


def test_unpickling_leaves_no_directory_behind(monkeypatch):
    kernel = tilelang.compile(scale(64), out_idx=[1], target="c", execution_backend="cython")
    made = []
    real_load = export.load

    def load_and_look(path, **kw):
        assert oct(Path(path).parent.stat().st_mode & 0o777) == "0o700"  # a private directory
        made.append(Path(path).parent)
        return real_load(path, **kw)

    monkeypatch.setattr("tilelang_core.jit.export.load", load_and_look)
    again = pickle.loads(pickle.dumps(kernel))
    assert len(made) == 1 and made[0].name.startswith("tilelang-unpickle-") and not made[0].exists()
    assert torch.equal(again(torch.ones(64), 3.0), torch.full((64,), 3.0))  # runs with its directory gone


def test_a_tampered_pickle_is_refused_and_writes_nothing_outside():
    kernel = tilelang.compile(scale(64), out_idx=[1], target="c", execution_backend="cython")
    files = pickling.kernel_files(kernel)
    assert "tilelang-kernel.json" in files and "artifact.json" in files
    changed = dict(files)
    name = next(n for n in files if n.startswith("backend/"))
    changed[name] = changed[name][:-1] + bytes([changed[name][-1] ^ 1])
    with pytest.raises(ArtifactError):
        pickling.kernel_from_files(changed, {})
    escape = dict(files, **{"../escaped": b"x"})
    with pytest.raises(ArtifactError, match=r"file name '\.\./escaped' leaves its export"):
        pickling.kernel_from_files(escape, {})
    assert not (Path(pickling.tempfile.gettempdir()) / "escaped").exists()
    with pytest.raises(ArtifactError, match="does not hold an export's files"):
        pickling.kernel_from_files({"artifact.json": "text, not bytes"}, {})
    assert not [d for d in os.listdir(pickling.tempfile.gettempdir()) if d.startswith("tilelang-unpickle-")]


def test_a_backend_without_save_hooks_says_its_kernels_cannot_be_pickled(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    KIT["install_pyadd"](site, name="memonly", save_load=False)
    with on_path(site):
        from tilelang_core.backends import get_registry
        from tilelang_core.jit.compile import build_kernel

        record = get_registry().get("memonly")
        kernel = build_kernel(record, record.spec.targets["c"], KIT["add_artifact"]("vadd"), -1, ["-O2"], None,
                              False, "c")
        with pytest.raises(ArtifactError, match="'memonly' cannot export kernels: it does not implement the "
                                                "tilelang_backend_save and tilelang_backend_load hooks"):
            pickle.dumps(kernel)


def test_copying_a_kernel_gives_the_kernel_itself():
    kernel = tilelang.compile(scale(64), out_idx=[1], target="c", execution_backend="cython")
    assert copy.copy(kernel) is kernel and copy.deepcopy(kernel) is kernel
    holder = {"kernels": [kernel]}
    assert copy.deepcopy(holder)["kernels"][0] is kernel


def test_decorated_functions_pickle_by_reference(tmp_path, monkeypatch):
    (tmp_path / "pickled_kernels.py").write_text(
        "import tilelang, tilelang.language as T\n"
        "@tilelang.jit(out_idx=[1], target='c')\n"
        "def double(n):\n"
        "    @T.prim_func\n"
        "    def f(A: T.Tensor((n,), 'float32'), B: T.Tensor((n,), 'float32')):\n"
        "        with T.Kernel(1, threads=1) as bx:\n"
        "            for i in T.serial(n):\n"
        "                B[i] = A[i] * 2\n"
        "    return f\n"
        "@tilelang.autotune(configs=[{'k': 2}, {'k': 3}])\n"
        "@tilelang.jit(out_idx=[1], target='c')\n"
        "def tuned(n, k=2):\n"
        "    return double.func(n)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "pickled_kernels", raising=False)
    import pickled_kernels

    for decorated in (pickled_kernels.double, pickled_kernels.tuned):
        assert pickle.loads(pickle.dumps(decorated)) is decorated
    assert torch.equal(pickle.loads(pickle.dumps(pickled_kernels.double))(4)(torch.ones(4)), torch.full((4,), 2.0))


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_an_unpickled_kernel_pickles_and_exports_again(backend, target, tmp_path):
    kernel = tilelang.compile(scale(T.dynamic("n")), out_idx=[1], target=target, execution_backend=backend)
    twice = pickle.loads(pickle.dumps(pickle.loads(pickle.dumps(kernel))))  # a worker passing it on
    want = (torch.arange(100, dtype=torch.float32) * 3.0).tolist()
    assert run_scale(twice) == want
    exported = twice.export(tmp_path / "again")
    assert run_scale(tilelang.load(exported)) == want


@pytest.mark.parametrize("backend", ["cython", "tvm_ffi"])
def test_a_kernel_whose_directory_was_removed_says_so_when_saved(backend, tmp_path):
    kernel = tilelang.compile(scale(64), out_idx=[1], target="c", execution_backend=backend)
    loaded = tilelang.load(kernel.export(tmp_path / "first"))
    shutil.rmtree(tmp_path / "first")  # as a cache entry that was evicted
    with pytest.raises(ArtifactError, match=r"the library it was loaded from, .*first.*, is gone \(its cache entry or "
                                            r"export was removed\); compile the kernel again to save it"):
        pickle.dumps(loaded)
    assert torch.equal(loaded(torch.ones(64), 2.0), torch.full((64,), 2.0))  # it still runs


def test_unpickling_refuses_a_temporary_directory_others_can_write(tmp_path, monkeypatch):
    kernel = tilelang.compile(scale(64), out_idx=[1], target="c", execution_backend="cython")
    data = pickle.dumps(kernel)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o2775)  # group-writable, no sticky bit
    monkeypatch.setattr(pickling.tempfile, "tempdir", str(shared))
    with pytest.raises(CacheError, match=rf"the temporary directory {shared} is not private .* set TMPDIR to a "
                                         r"directory only you can write to"):
        pickle.loads(data)
    assert list(shared.iterdir()) == []


def test_malformed_pickles_are_artifact_errors():
    kernel = tilelang.compile(scale(64), out_idx=[1], target="c", execution_backend="cython")
    files = pickling.kernel_files(kernel)
    for bad in ({**files, "backend": b"x"}, {**files, "a\x00b": b"x"}, {**files, "x" * 300: b"x"}):
        with pytest.raises(ArtifactError, match="cannot unpickle a tilelang kernel: its file .* cannot be written"):
            pickling.kernel_from_files(bad, {})
    for state in ([], {"cache_key": 5}):
        with pytest.raises(ArtifactError, match="the pickle's state is not a kernel's"):
            pickling.kernel_from_files(files, state)


def _mappings() -> int:
    with open("/proc/self/maps") as maps:
        return sum(1 for _ in maps)


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs Linux's /proc/self/maps")
@pytest.mark.parametrize("backend", ["cython", "ctypes"])
def test_a_freed_unpickled_kernel_unloads_its_library(backend):
    """Every unpickle (and tilelang.load) maps a new copy of the kernel's library; it stayed mapped
    after the kernel was freed (5 mappings and ~25 KB each, for the life of the process, until
    dlopen failed at the system's map limit). tvm_ffi's libraries are TVM's to unload (docs)."""
    import gc

    kernel = tilelang.compile(scale(64), out_idx=[1], target="c", execution_backend=backend)
    a = torch.arange(64, dtype=torch.float32)
    for _ in range(3):  # warm-up: what the first loads map once
        assert torch.equal(pickle.loads(pickle.dumps(kernel))(a, 2.0), a * 2)
    gc.collect()
    before = _mappings()
    for _ in range(40):
        again = pickle.loads(pickle.dumps(kernel))
        assert torch.equal(again(a, 2.0), a * 2)
        del again
    gc.collect()
    assert _mappings() - before < 20, f"{_mappings() - before} more mappings after 40 unpickles (5 each before)"
