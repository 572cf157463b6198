"""Two declarations for backends whose kernels run on one platform and build on every one, and whose
saved kernels are source compiled again at load: ``build_platforms`` and ``compiles_at_load``."""

from __future__ import annotations

import sys

import pytest

import tilelang
import tilelang.language as T
from tilelang_core.backends import get_registry
from tilelang_core.testkit import isolated, plugin_source, spec_dict, write_distribution

ELSEWHERE = "win32" if sys.platform != "win32" else "linux"

HOOKS = """
from pathlib import Path

class Kernel:
    def __call__(self, *args, **kwargs):
        return None

@hookimpl
def tilelang_backend_build(artifact, options):
    return Kernel()

@hookimpl
def tilelang_backend_save(kernel, directory):
    (Path(directory) / "kernel.src").write_text("source, compiled when loaded")

@hookimpl
def tilelang_backend_load(artifact, directory, options):
    return Kernel()
"""


def add_one(N):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=1) as bx:
            for i in T.serial(N):
                B[i] = A[i] + 1.0

    return main


@pytest.fixture
def site(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    root = tmp_path / "site"
    root.mkdir()
    with isolated(root):
        yield root


def install(site, name, cap, probe=None):
    target = {"c": {"priority": 5, "consumes": ["device_source"], "device_language": "c", **cap}}
    write_distribution(site, name, plugin_source(spec_dict(name, target), probe=probe, body=HOOKS))
    get_registry().refresh()
    return get_registry().get(name)


def test_runs_elsewhere_builds_here_is_at_most_build_only(site):
    registry = get_registry()
    record = install(site, "elsewhere", {"platforms": [ELSEWHERE], "build_platforms": "all"})
    answer = registry.probe(record, "c")
    assert answer.build_only and answer.reason == f"{ELSEWHERE} only (this is {sys.platform})"
    kernel = tilelang.compile(add_one(4), out_idx=-1, execution_backend="elsewhere", target="c")
    assert kernel.cannot_run == answer.reason


def test_a_probe_saying_yes_off_platform_is_capped_and_its_reason_kept(site):
    registry = get_registry()
    record = install(site, "eager", {"platforms": [ELSEWHERE], "build_platforms": "all"},
                     probe={"available": True, "reason": ""})
    assert registry.probe(record, "c").build_only
    record = install(site, "says", {"platforms": [ELSEWHERE], "build_platforms": [sys.platform]},
                     probe={"available": False, "can_build": True, "reason": "macOS only"})
    answer = registry.probe(record, "c")
    assert answer.build_only and answer.reason == "macOS only"


def test_without_build_platforms_another_platform_is_unavailable(site):
    record = install(site, "strict", {"platforms": [ELSEWHERE]}, probe={"available": True})
    answer = get_registry().probe(record, "c")
    assert not answer.available and not answer.can_build
    assert answer.reason == f"{ELSEWHERE} only (this is {sys.platform})"
    record = install(site, "narrow", {"platforms": [ELSEWHERE], "build_platforms": [ELSEWHERE]})
    assert not get_registry().probe(record, "c").can_build


def test_entries_of_a_backend_whose_load_compiles_say_so(site, tmp_path, monkeypatch):
    monkeypatch.delenv("TILELANG_DISABLE_CACHE")
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    install(site, "shader", {"compiles_at_load": True})
    install(site, "binary", {})
    kernel = tilelang.compile(add_one(4), out_idx=-1, execution_backend="shader", target="c")
    tilelang.compile(add_one(4), out_idx=-1, execution_backend="binary", target="c")
    rows = tilelang.cache.info()["backends"]
    assert rows["shader 1.0.0"]["compiled_at_load"] == 1 and rows["binary 1.0.0"]["compiled_at_load"] == 0
    from tilelang_core.cache.entry import read_meta

    exported = kernel.export(tmp_path / "exported")
    assert read_meta(exported).compiled_at_load is True


def test_a_dtype_the_backend_does_not_declare_is_refused_before_lowering(site, monkeypatch):
    """Metal has no float64: a kernel with a float64 parameter gets the backend's refusal, not the
    code generator's "Cannot convert type float64 to Metal type" (and auto can try the next backend)."""
    import tilelang_core.lowering as lowering
    from tilelang_core.errors import BackendCapabilityError

    install(site, "narrowtypes", {"dtypes": ["float32", "int32"]})
    lowered = []
    real = lowering.lower
    monkeypatch.setattr(lowering, "lower", lambda *a, **k: lowered.append(1) or real(*a, **k))
    N = 8

    @T.prim_func
    def scale(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), s: T.float64):
        with T.Kernel(1, threads=1) as bx:
            for i in T.serial(N):
                B[i] = A[i] * T.Cast("float32", s)

    with pytest.raises(BackendCapabilityError) as info:
        tilelang.compile(scale, out_idx=[1], execution_backend="narrowtypes", target="c")
    assert str(info.value) == (
        "parameter 's' of kernel 'scale' is a float64 scalar, which execution backend 'narrowtypes' does not "
        "support for target 'c' (it supports: float32, int32)"
    )
    assert lowered == []
    tilelang.compile(add_one(4), out_idx=-1, execution_backend="narrowtypes", target="c")
    assert lowered == [1]
