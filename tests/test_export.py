"""``kernel.export(path)`` / ``tilelang.load(path)``: round trips, fresh processes without TVM, errors."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest

import tilelang
from tilelang_core.backends import get_registry
from tilelang_core.errors import ArtifactError, BackendNotInstalledError
from tilelang_core.jit.compile import build_kernel
from tilelang_core.testkit import on_path

KIT = runpy.run_path(str(Path(__file__).with_name("test_cache_kit.py")))


def hand_kernel(backend="pyadd", name="vadd"):
    """A kernel built by ``backend`` from a hand-written artifact (no lowering, no TVM)."""
    record = get_registry().get(backend)
    return build_kernel(record, record.spec.targets["c"], KIT["add_artifact"](name), -1, ["-O2"], None, False, "c")


@pytest.fixture
def site(tmp_path):
    root = tmp_path / "site"
    root.mkdir()
    KIT["install_pyadd"](root)
    KIT["install_pyadd"](root, name="memonly", save_load=False)
    return root


LOAD_IN_FRESH_PROCESS = """
import gc, json, sys
import tilelang, torch
k = tilelang.load({path!r})
a = torch.arange(16, dtype=torch.float32)
out = k(a, a)
print(json.dumps({{"ok": bool(torch.equal(out, a + a)), "name": k.name, "backend": list(k.backend),
                  "flags": k.options.compile_flags, "out_idx": k.out_idx,
                  "tvm": sorted(m for m in sys.modules if m.split(".")[0] in ("tvm", "tvm_ffi")),
                  "pydantic": sorted(m for m in sys.modules if m.split(".")[0] == "pydantic"),
                  "gc_enabled": gc.isenabled()}}))
"""


def test_export_then_load_in_a_fresh_process_without_tvm(site, tmp_path):
    with on_path(site):
        path = hand_kernel().export(tmp_path / "exported")
    meta = json.loads((path / "tilelang-kernel.json").read_text())
    assert meta["kind"] == "export" and meta["backend"]["name"] == "pyadd" and meta["backend"]["version"] == "1.0.0"
    assert meta["core_version"] == tilelang.__version__
    assert sorted(p.name for p in path.iterdir()) == ["artifact.json", "backend", "tilelang-kernel.json"]
    out = KIT["run_python"](LOAD_IN_FRESH_PROCESS.format(path=str(path)), site)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {
        "ok": True,
        "name": "vadd",
        "backend": ["pyadd", "1.0.0"],
        "flags": ["-O2"],
        "out_idx": [2],
        "tvm": [],
        "pydantic": [],  # validated by pydantic-core from the schema snapshot: no pydantic import
        "gc_enabled": True,  # paused while loading, and enabled again
    }


def test_load_leaves_the_garbage_collector_as_it_found_it(site, tmp_path):
    import gc

    with on_path(site):
        path = hand_kernel().export(tmp_path / "k")
        gc.disable()
        try:
            tilelang.load(path)
            assert not gc.isenabled()  # a caller's choice is kept
        finally:
            gc.enable()
        tilelang.load(path)
        assert gc.isenabled()
        with pytest.raises(ArtifactError):
            tilelang.load(tmp_path / "nothing-here")
        assert gc.isenabled()  # and after a failed load too


def test_load_in_process_and_export_again(site, tmp_path):
    torch = pytest.importorskip("torch")
    with on_path(site):
        path = hand_kernel().export(tmp_path / "k1")
        k = tilelang.load(path)
        a = torch.ones(16)
        assert torch.equal(k(a, a), a + a)
        k.export(tmp_path / "k2")  # a loaded kernel can be exported again
        assert torch.equal(tilelang.load(tmp_path / "k2")(a, a), a + a)
        with pytest.raises(FileExistsError, match="overwrite=True"):
            k.export(path)
        k.export(path, overwrite=True)
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".k1")]


def test_load_with_missing_plugin_says_what_to_install(site, tmp_path):
    with on_path(site):
        path = hand_kernel().export(tmp_path / "exported")
    with pytest.raises(BackendNotInstalledError, match=r"'pyadd'.*not installed.*pip install tilelang-backend-pyadd==1\.0\.0"):
        tilelang.load(path)


def test_load_with_other_backend_version_is_refused(site, tmp_path):
    with on_path(site):
        path = hand_kernel().export(tmp_path / "exported")
    newer = tmp_path / "newer"
    newer.mkdir()
    KIT["install_pyadd"](newer, version="2.0.0")
    with on_path(newer):
        with pytest.raises(ArtifactError, match=r"exported by tilelang-backend-pyadd 1\.0\.0, but .* 2\.0\.0 is installed"):
            tilelang.load(path)


def test_load_refuses_corrupt_or_foreign_directories(site, tmp_path):
    with on_path(site):
        path = hand_kernel().export(tmp_path / "exported")
        lib = path / "backend" / "kernel.so"
        lib.write_bytes(lib.read_bytes()[:10])
        with pytest.raises(ArtifactError, match="truncated"):
            tilelang.load(path)
        (lib).unlink()
        with pytest.raises(ArtifactError, match="incomplete"):
            tilelang.load(path)
        (path / "tilelang-kernel.json").write_text("{not json")
        with pytest.raises(ArtifactError, match="not valid kernel metadata"):
            tilelang.load(path)
        with pytest.raises(ArtifactError, match="not an exported tilelang kernel"):
            tilelang.load(tmp_path)


def test_export_needs_save_and_load_hooks(site, tmp_path):
    with on_path(site):
        with pytest.raises(ArtifactError, match="'memonly' cannot export kernels"):
            hand_kernel("memonly").export(tmp_path / "nope")
    assert not (tmp_path / "nope").exists()


def _cython_available() -> bool:
    record = get_registry().get("cython")
    return record is not None and record.usable and get_registry().probe(record, "c").available


@pytest.mark.skipif(not _cython_available(), reason="tilelang-backend-cython is not installed/available")
def test_cython_export_load_round_trip_without_tvm(tmp_path):
    """Real lowering + the real cython backend; the loading process must not import TVM."""
    pytest.importorskip("tilelang_core.lowering")
    path = tmp_path / "cy"
    k = tilelang.compile(KIT["make_prim_func"]("cyexp", 16), out_idx=-1, execution_backend="cython", target="c")
    k.export(path)
    out = KIT["run_python"](LOAD_IN_FRESH_PROCESS.format(path=str(path)))
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["ok"] and result["backend"][0] == "cython" and result["tvm"] == [] and result["pydantic"] == []
