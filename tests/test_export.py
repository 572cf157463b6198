"""``kernel.export(path)`` / ``tilelang.load(path)``: round trips, fresh processes without TVM, errors."""

from __future__ import annotations

import hashlib
import json
import os
import runpy
import stat
from pathlib import Path

import pytest

import tilelang
from tilelang_core.backends import get_registry
from tilelang_core.errors import ArtifactError, BackendNotInstalledError, CacheError
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


@pytest.mark.parametrize("trusted", [False, True])
def test_load_of_a_link_loop_or_a_dangling_link_says_what_it_is(tmp_path, trusted):
    """A loop was a CacheError advising to trust its owner (and, trusted, a raw OSError)."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    with pytest.raises(ArtifactError, match=r"not an exported tilelang kernel: .*/a is a symbolic link in a loop"):
        tilelang.load(tmp_path / "a", trusted=trusted)
    with pytest.raises(ArtifactError, match=r"not an exported tilelang kernel: .*/dangling is a symbolic link to .*gone"
                                            r", which does not exist"):
        tilelang.load(tmp_path / "dangling", trusted=trusted)


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


# --- overwrite=True replaces only a previous export (#11 §1) ------------------------------------


def _leftovers(parent: Path, name: str) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith(f".{name}."))


def test_overwrite_refuses_a_folder_that_is_not_an_export(site, tmp_path):
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "main.py").write_text("print('my work')")
    with on_path(site):
        with pytest.raises(ArtifactError, match=rf"{project} with overwrite=True: it has no tilelang-kernel.json, so "
                                                r"it is not an exported kernel.*replaces only a previous export"):
            hand_kernel().export(project, overwrite=True)
    assert (project / "src" / "main.py").read_text() == "print('my work')"
    assert _leftovers(tmp_path, "project") == []


def test_overwrite_refuses_a_file_and_a_link_and_leaves_nothing_behind(site, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes")
    link = tmp_path / "link"
    link.symlink_to(notes)
    with on_path(site):
        with pytest.raises(ArtifactError, match=rf"{notes} with overwrite=True: it is a regular file, not an exported"):
            hand_kernel().export(notes, overwrite=True)
        with pytest.raises(ArtifactError, match=rf"{link} with overwrite=True: it is a symbolic link"):
            hand_kernel().export(link, overwrite=True)
    assert notes.read_text() == "my notes" and link.is_symlink()
    assert _leftovers(tmp_path, "notes.txt") == [] and _leftovers(tmp_path, "link") == []


def test_overwrite_refuses_an_export_holding_other_files(site, tmp_path):
    with on_path(site):
        path = hand_kernel().export(tmp_path / "k")
        (path / "README.md").write_text("my notes about this kernel")
        with pytest.raises(ArtifactError, match=r"it holds files the export did not write \(README.md\)"):
            hand_kernel().export(path, overwrite=True)
        assert (path / "README.md").exists()
        (path / "README.md").unlink()
        meta = json.loads((path / "tilelang-kernel.json").read_text())
        meta["kind"] = "cache"
        (path / "tilelang-kernel.json").write_text(json.dumps(meta))
        with pytest.raises(ArtifactError, match="describes a kernel cache entry, not an export"):
            hand_kernel().export(path, overwrite=True)


@pytest.mark.parametrize("swap", ["exchange", "renames"])
def test_overwrite_replaces_a_previous_export_and_survives_a_failure_half_way(site, tmp_path, monkeypatch, swap):
    from tilelang_core.jit import export as X

    if swap == "renames":  # a system without renameat2(RENAME_EXCHANGE)
        monkeypatch.setattr(X, "exchange", lambda a, b: False)
    with on_path(site):
        path = hand_kernel(name="first").export(tmp_path / "k")
        hand_kernel(name="second").export(path, overwrite=True)
        assert json.loads((path / "tilelang-kernel.json").read_text())["name"] == "second"
        assert _leftovers(tmp_path, "k") == []

        real_rename = os.rename

        def rename_failing_on_the_new_export(src, dst):
            if ".tmp-" in os.fspath(src):
                raise OSError(28, "No space left on device")
            return real_rename(src, dst)

        def exchange_failing(a, b):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(X.os, "rename", rename_failing_on_the_new_export)
        if swap == "exchange":
            monkeypatch.setattr(X, "exchange", exchange_failing)
        with pytest.raises(OSError, match="No space left"):
            hand_kernel(name="third").export(path, overwrite=True)
        monkeypatch.undo()
        assert json.loads((path / "tilelang-kernel.json").read_text())["name"] == "second"
        assert tilelang.load(path).name == "second"
        assert _leftovers(tmp_path, "k") == [], "no hidden .k.old-* or .k.tmp-* is left"


def _dead_pid() -> int:
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_previous_export_moved_aside_by_a_killed_process_is_put_back_by_load(site, tmp_path):
    with on_path(site):
        path = hand_kernel(name="first").export(tmp_path / "k")
        aside = tmp_path / f".k.old-{_dead_pid()}-0123abcd"
        os.rename(path, aside)  # where a kill between the two renames left it
        with pytest.warns(UserWarning, match="an export into it was interrupted; the previous export was put back"):
            assert tilelang.load(path).name == "first"
        assert _leftovers(tmp_path, "k") == []


def test_export_removes_what_killed_exports_left_and_keeps_what_running_ones_write(site, tmp_path):
    with on_path(site):
        path = hand_kernel(name="first").export(tmp_path / "k")
        dead, alive = _dead_pid(), os.getppid()
        for name in (f".k.tmp-{dead}-0123abcd", f".k.old-{dead}-4567abcd", f".k.tmp-{alive}-89abcdef"):
            (tmp_path / name).mkdir()
        (tmp_path / f".k.tmp-{dead}-aaaabbbb").write_text("a file of that name is not ours")
        hand_kernel(name="second").export(path, overwrite=True)
        assert tilelang.load(path).name == "second"
        assert _leftovers(tmp_path, "k") == sorted([f".k.tmp-{alive}-89abcdef", f".k.tmp-{dead}-aaaabbbb"])


# --- tilelang.load runs native code: who may have written it (#11 §2) ----------------------------


def test_load_refuses_an_export_others_can_write_unless_trusted(site, tmp_path):
    with on_path(site):
        path = hand_kernel().export(tmp_path / "k")
        for where, mode in ((path, 0o775), (path / "backend", 0o777), (path / "backend" / "kernel.so", 0o666)):
            original = stat.S_IMODE(where.stat().st_mode)
            os.chmod(where, mode)
            with pytest.raises(CacheError, match=rf"{where} is writable by other users.*tilelang.load runs the native "
                                                 r"code in it.*trusted=True"):
                tilelang.load(path)
            assert tilelang.load(path, trusted=True).name == "vadd"
            os.chmod(where, original)
        assert tilelang.load(path).name == "vadd"


def test_load_refuses_an_export_reached_through_a_folder_others_can_write(site, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    with on_path(site):
        path = hand_kernel().export(shared / "k")
        os.chmod(shared, 0o777)
        with pytest.raises(CacheError, match=r"reached through .*shared, which other users can write to.*trusted=True"):
            tilelang.load(path)
        assert tilelang.load(path, trusted=True).name == "vadd"


def test_load_refuses_unlisted_files_and_an_empty_file_list(site, tmp_path):
    with on_path(site):
        path = hand_kernel().export(tmp_path / "k")
        (path / "backend" / "other.so").write_bytes(b"\x7fELF")
        with pytest.raises(ArtifactError, match=r"holds files its metadata does not list \(backend/other.so\)"):
            tilelang.load(path)
        (path / "backend" / "other.so").unlink()
        meta = json.loads((path / "tilelang-kernel.json").read_text())
        meta["files"] = {}
        (path / "tilelang-kernel.json").write_text(json.dumps(meta))
        with pytest.raises(ArtifactError, match="does not list artifact.json"):
            tilelang.load(path)


LOAD_EXPECTING_ERROR = """
import tilelang
try:
    tilelang.load({path!r})
except Exception as exc:
    print(type(exc).__name__, exc)
else:
    print("loaded")
"""


def test_load_never_hashes_through_a_link_to_dev_zero(site, tmp_path):
    with on_path(site):
        path = hand_kernel().export(tmp_path / "k")
    lib = path / "backend" / "kernel.so"
    lib.unlink()
    lib.symlink_to("/dev/zero")
    meta = json.loads((path / "tilelang-kernel.json").read_text())
    meta["files"]["backend/kernel.so"] = {"size": 0, "sha256": hashlib.sha256(b"").hexdigest()}
    (path / "tilelang-kernel.json").write_text(json.dumps(meta))
    out = KIT["run_python"](LOAD_EXPECTING_ERROR.format(path=str(path)), site, timeout=90)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"ArtifactError {lib} is a symbolic link; a saved kernel holds plain files"), out.stdout


def test_load_of_a_fifo_metadata_file_does_not_hang(site, tmp_path):
    with on_path(site):
        path = hand_kernel().export(tmp_path / "k")
    (path / "tilelang-kernel.json").unlink()
    os.mkfifo(path / "tilelang-kernel.json")
    out = KIT["run_python"](LOAD_EXPECTING_ERROR.format(path=str(path)), site, timeout=90)
    assert out.returncode == 0, out.stderr
    assert "ArtifactError" in out.stdout and "is a FIFO, not a regular file" in out.stdout


def _rehash(path: Path) -> None:
    """What a tamperer does after editing files: record their new sizes and digests."""
    meta = json.loads((path / "tilelang-kernel.json").read_text())
    for rel in meta["files"]:
        data = (path / rel).read_bytes()
        meta["files"][rel] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (path / "tilelang-kernel.json").write_text(json.dumps(meta))


@pytest.mark.skipif(not _cython_available(), reason="tilelang-backend-cython is not installed/available")
def test_cython_refuses_a_tampered_call_plan_and_a_swapped_library(tmp_path):
    """Real lowering + the real cython backend: the core's digests are re-computed after each
    edit, so only the backend's own checks stand between the edit and an out-of-bounds write."""
    pytest.importorskip("tilelang_core.lowering")
    plus = tilelang.compile(KIT["make_prim_func"]("guard", 256), out_idx=-1, execution_backend="cython", target="c")
    minus = tilelang.compile(KIT["make_prim_func"]("guard", 256, "-"), out_idx=-1, execution_backend="cython",
                             target="c")
    path, other = plus.export(tmp_path / "plus"), minus.export(tmp_path / "minus")
    plan_file = path / "backend" / "cython_plan.json"
    original = plan_file.read_text()

    record = json.loads(original)
    assert record["plan"]["params"][2]["dims"] == [["static", 256]]
    record["plan"]["params"][2]["dims"] = [["static", 64]]  # the output would be allocated 64 elements
    plan_file.write_text(json.dumps(record))
    _rehash(path)
    with pytest.raises(ArtifactError, match=r"saved call plan does not match the artifact \(first difference at "
                                            r"plan.params\[2\].dims\[0\]\[1\]\)"):
        tilelang.load(path)

    artifact = json.loads((path / "artifact.json").read_text())  # now shrink the artifact to agree with the plan
    artifact["params"][2]["shape"] = [64]
    (path / "artifact.json").write_text(json.dumps(artifact))
    _rehash(path)
    with pytest.raises(ArtifactError, match=r"kernel.so was built for another kernel"):
        tilelang.load(path)

    plus.export(path, overwrite=True)
    (path / "backend" / "kernel.so").write_bytes((other / "backend" / "kernel.so").read_bytes())  # C = A - B
    _rehash(path)
    with pytest.raises(ArtifactError, match=r"kernel.so was built for another kernel .*not for kernel 'guard'"):
        tilelang.load(path)
    plus.export(path, overwrite=True)
    torch = pytest.importorskip("torch")
    a = torch.arange(256, dtype=torch.float32)
    assert torch.equal(tilelang.load(path)(a, a), a + a) and torch.equal(tilelang.load(other)(a, a), a - a)


@pytest.mark.skipif(not _cython_available(), reason="tilelang-backend-cython is not installed/available")
def test_cython_export_reloaded_after_overwrite_runs_the_new_kernel(tmp_path):
    """dlopen hands back a library already loaded under the same path: the second load must not
    run the first kernel's code."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("tilelang_core.lowering")
    path = tmp_path / "k"
    a = torch.arange(256, dtype=torch.float32)
    tilelang.compile(KIT["make_prim_func"]("again", 256), out_idx=-1, execution_backend="cython", target="c").export(path)
    assert torch.equal(tilelang.load(path)(a, a), a + a)
    tilelang.compile(KIT["make_prim_func"]("again", 256, "-"), out_idx=-1, execution_backend="cython",
                     target="c").export(path, overwrite=True)
    assert torch.equal(tilelang.load(path)(a, a), a - a)


def test_export_below_a_file_names_the_file(site, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    with on_path(site):
        with pytest.raises(NotADirectoryError, match=f"cannot export kernel 'vadd' to {notes}/sub/k: {notes} is a file, not a folder"):
            hand_kernel().export(notes / "sub" / "k")
    assert notes.read_text() == "mine" and sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "site"]
