"""Shared pieces of the cache / jit / export tests, plus checks of the pieces themselves.

Other test files load this one with ``runpy.run_path`` (tests are imported in importlib mode, so
they cannot import each other). It provides:

* ``PLUGIN_BODY``: hooks of a throwaway backend ``pyadd`` built with tilelang_core.testkit. Its
  build hook returns a Python callable (elementwise sum of the inputs, written to the outputs);
  its save hook writes a real "library" file and a JSON manifest, its load hook reads and checks
  them. Builds and loads are appended to the files named by ``TL_TEST_BUILD_LOG`` /
  ``TL_TEST_LOAD_LOG``; ``TL_TEST_BUILD_SLEEP`` makes builds slow (to overlap processes); a
  kernel whose name contains ``fail`` fails to build.
* ``install_pyadd(root, ...)``: write that distribution under ``root``.
* ``add_artifact(name, n)``: a hand-built artifact of ``C = A + B`` (until lowering exists).
* ``prim_func_source(name, n)``: TVMScript text of a real ``tvm.script.tirx`` prim_func.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tilelang_core.artifact import DeviceKernel, KernelArg, KernelArtifact, TensorParam
from tilelang_core.testkit import heavy_imports_of, plugin_source, spec_dict, subprocess_env, write_distribution

PLUGIN_BODY = '''
import hashlib
import json
import os
import time
from pathlib import Path

from tilelang_core.errors import ArtifactError, BuildError


def _log(var, text):
    path = os.environ.get(var)
    if path:
        with open(path, "a") as f:
            f.write(text + "\\n")


class Runner:
    """C[...] = sum of the inputs; allocates the out_idx outputs."""

    def __init__(self, artifact, options, library):
        self.artifact = artifact
        self.options = options
        self.library = library

    def __call__(self, *inputs, stream=None):
        import torch

        params = self.artifact.params
        outs = list(self.options.out_idx)
        n_in = len(params) - len(outs)
        if len(inputs) != n_in:
            raise TypeError(f"{self.artifact.name}() takes {n_in} tensor/scalar arguments, got {len(inputs)}")
        total = inputs[0].clone()
        for t in inputs[1:-1] if not outs else inputs[1:]:
            total += t
        if not outs:
            inputs[-1].copy_(total)
            return None
        results = [total.clone() for _ in outs]
        return results[0] if len(results) == 1 else results


@hookimpl
def tilelang_backend_build(artifact, options):
    if "fail" in artifact.name:
        raise BuildError(f"cannot build {artifact.name}: it is meant to fail")
    delay = float(os.environ.get("TL_TEST_BUILD_SLEEP", "0") or 0)
    if delay:
        time.sleep(delay)
    _log("TL_TEST_BUILD_LOG", f"{os.getpid()} {artifact.name}")
    library = ("LIBRARY:" + (artifact.device_source or artifact.name)).encode() * 64
    return Runner(artifact, options, library)


@hookimpl
def tilelang_backend_save(kernel, directory):
    (Path(directory) / "kernel.so").write_bytes(kernel.library)
    if os.environ.get("TL_TEST_SAVE_FAIL"):  # as a compiler run by the save step can fail
        raise BuildError("pyadd: the save step failed (TL_TEST_SAVE_FAIL)")
    manifest = {"library": "kernel.so", "sha256": hashlib.sha256(kernel.library).hexdigest()}
    (Path(directory) / "manifest.json").write_text(json.dumps(manifest))


@hookimpl
def tilelang_backend_load(artifact, directory, options):
    try:
        manifest = json.loads((Path(directory) / "manifest.json").read_text())
        library = (Path(directory) / manifest["library"]).read_bytes()
    except (OSError, ValueError, KeyError) as exc:
        raise ArtifactError(f"pyadd: cannot read saved kernel in {directory}: {exc}")
    if hashlib.sha256(library).hexdigest() != manifest["sha256"]:
        raise ArtifactError(f"pyadd: {directory}/kernel.so is corrupt")
    _log("TL_TEST_LOAD_LOG", f"{os.getpid()} {artifact.name}")
    return Runner(artifact, options, library)
'''

#: Same build hook, no save/load: kernels of this backend are cached in memory only.
MEMORY_ONLY_BODY = PLUGIN_BODY.split("@hookimpl\ndef tilelang_backend_save")[0]


def install_pyadd(root: Path, *, name: str = "pyadd", version: str = "1.0.0", save_load: bool = True) -> Path:
    """Write the throwaway backend distribution under ``root`` (priority 90 for target c)."""
    spec = spec_dict(name, {"c": {"priority": 90, "consumes": ["device_source"], "device_language": "c"}})
    body = PLUGIN_BODY if save_load else MEMORY_ONLY_BODY
    write_distribution(root, name, plugin_source(spec, body=body), version=version)
    return root


def add_artifact(name: str = "vadd", n: int = 16) -> KernelArtifact:
    """A hand-built artifact of ``C = A + B`` over ``n`` float32 values."""
    params = [TensorParam(name=p, dtype="float32", shape=[n], device="cpu") for p in ("A", "B", "C")]
    args = [KernelArg(name=p.name, kind="pointer", dtype="float32", param_index=i) for i, p in enumerate(params)]
    source = (
        f"#include <stdint.h>\nint32_t {name}(float* A, float* B, float* C) {{\n"
        f"  for (int i = 0; i < {n}; ++i) C[i] = A[i] + B[i];\n  return 0;\n}}\n"
    )
    return KernelArtifact(
        name=name,
        target="c",
        target_kind="c",
        params=params,
        device_kernels=[DeviceKernel(name=name, args=args, return_type="int32")],
        device_source=source,
        device_language="c",
    )


def prim_func_source(name: str = "vadd", n: int = 16, op: str = "+") -> str:
    """TVMScript source of a real prim_func ``C = A <op> B`` named ``name``."""
    return textwrap.dedent(
        f"""
        @T.prim_func
        def {name}(A: T.Buffer(({n},), "float32"), B: T.Buffer(({n},), "float32"), C: T.Buffer(({n},), "float32")):
            for i in range({n}):
                C[i] = A[i] {op} B[i]
        """
    )


_SOURCES_DIR: list[Path] = []


def make_prim_func(name: str = "vadd", n: int = 16, op: str = "+"):
    """A real ``tvm.script.tirx`` prim_func (imports TVM), parsed from a real source file."""
    import importlib.util
    import tempfile

    if not _SOURCES_DIR:
        import atexit
        import shutil

        _SOURCES_DIR.append(Path(tempfile.mkdtemp(prefix="tilelang-test-kernels-")))
        atexit.register(shutil.rmtree, _SOURCES_DIR[0], True)
    mod_name = f"k_{name}_{n}_{'add' if op == '+' else 'op%d' % ord(op)}"
    path = _SOURCES_DIR[0] / f"{mod_name}.py"
    path.write_text("from tvm.script import tirx as T\n" + prim_func_source(name, n, op))
    spec = importlib.util.spec_from_file_location(mod_name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def run_python(code: str, *roots: Path, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter that sees the distributions under ``roots``."""
    full = subprocess_env(*roots)
    full.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=full, timeout=timeout)


def read_log(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def cache_env(tmp_path: Path, monkeypatch):
    """Body of the ``env`` fixture of the cache tests (a generator: ``yield from`` it).

    pyadd (and the memory-only ``memonly``) installed, a private cache dir, build/load logs;
    yields a namespace with ``site``, ``cache_dir``, ``record``, ``tmp``, ``builds()``,
    ``loads()`` and ``builder(name)`` (a zero-argument build of ``add_artifact(name)``).
    """
    from tilelang_core.backends import get_registry
    from tilelang_core.jit.compile import build_kernel
    from tilelang_core.testkit import on_path

    site = tmp_path / "site"
    site.mkdir()
    install_pyadd(site)
    install_pyadd(site, name="memonly", save_load=False)
    cache_dir = tmp_path / "cache"
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(cache_dir))
    monkeypatch.setenv("TL_TEST_BUILD_LOG", str(tmp_path / "builds.log"))
    monkeypatch.setenv("TL_TEST_LOAD_LOG", str(tmp_path / "loads.log"))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    with on_path(site):
        record = get_registry().get("pyadd")
        assert record is not None and record.usable, record

        class NS:
            pass

        ns = NS()
        ns.site, ns.cache_dir, ns.record, ns.tmp = site, cache_dir, record, tmp_path
        ns.builds = lambda: read_log(tmp_path / "builds.log")
        ns.loads = lambda: read_log(tmp_path / "loads.log")
        ns.builder = lambda name="vadd", rec=record: (
            lambda: build_kernel(rec, rec.spec.targets["c"], add_artifact(name), -1, [], None, False, "c")
        )
        yield ns


# --- checks of the kit itself -------------------------------------------------------------------


def test_pyadd_plugin_imports_cheaply(tmp_path):
    install_pyadd(tmp_path)
    assert heavy_imports_of("tilelang_backend_pyadd.plugin", env=subprocess_env(tmp_path)) == []


def test_hand_built_artifact_round_trips_json():
    art = add_artifact("k", 8)
    assert KernelArtifact.from_json(art.to_json()) == art
    assert json.loads(art.to_json())["params"][0]["shape"] == [8]
    assert os.path.basename(__file__).startswith("test_cache")
