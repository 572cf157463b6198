"""Cache keys: what changes them, what must not (counters, renamed symbols, process history)."""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from tilelang_core.cache.key import (
    _normalize_counters,
    canonical_tir,
    compute_key,
    native_compiler_identity,
)
from tilelang_core import schema
from tilelang_core.capabilities import TargetCapability

KIT = runpy.run_path(str(Path(__file__).with_name("test_cache_kit.py")))
T = pytest.importorskip("tvm.script").tirx


def key(func, **over):
    args = dict(
        target="c",
        target_kind="c",
        target_host=None,
        backend_name="pyadd",
        backend_version="1.0.0",
        native_compiler="",
        pass_configs=None,
        compile_flags=[],
        out_idx=-1,
    )
    args.update(over)
    return compute_key(func, **args)


def test_key_is_stable_and_each_setting_changes_it():
    f = KIT["make_prim_func"]("vadd", 16)
    base = key(f)
    assert len(base) == 64 and key(KIT["make_prim_func"]("vadd", 16)) == base
    assert key(f, out_idx=2) == base  # -1 and 2 name the same parameter of 3
    assert key(f, out_idx=[2]) == base
    changed = {
        "target": key(f, target="llvm"),
        "host": key(f, target_host="llvm"),
        "backend": key(f, backend_name="cython"),
        "version": key(f, backend_version="1.0.1"),
        "compiler": key(f, native_compiler="gcc 13"),
        "pass_configs": key(f, pass_configs={"tl.disable_vectorize": True}),
        "flags": key(f, compile_flags=["-O0"]),
        "out_idx": key(f, out_idx=None),
        "shape": key(KIT["make_prim_func"]("vadd", 32)),
        "op": key(KIT["make_prim_func"]("vadd", 16, "*")),
        "name": key(KIT["make_prim_func"]("other", 16)),
    }
    assert base not in changed.values()
    assert len(set(changed.values())) == len(changed)


def test_counters_in_variable_names_do_not_leak_but_stay_distinct():
    text_a = "for i_3 in range(4):\n  for i_9 in range(4):\n    C[i_3] = A[i_9] + x_12"
    text_b = "for i_1 in range(4):\n  for i_2 in range(4):\n    C[i_1] = A[i_2] + x_5"
    text_swapped = "for i_1 in range(4):\n  for i_2 in range(4):\n    C[i_2] = A[i_1] + x_5"
    assert _normalize_counters(text_a, set()) == _normalize_counters(text_b, set())
    assert _normalize_counters(text_b, set()) != _normalize_counters(text_swapped, set())
    assert "A_1" in _normalize_counters("A_1[0] = B_2[0]", {"A_1"})  # parameter names are kept


def test_renamed_global_symbol_attribute_and_location_are_canonical():
    f = KIT["make_prim_func"]("vadd", 16)
    text = canonical_tir(f)
    assert "def vadd(" in text and "global_symbol" not in text and "# from" not in text
    moved = f.with_attr("tl.source_location", "/somewhere/else.py:99")
    assert canonical_tir(moved) == canonical_tir(f.with_attr("tl.source_location", "/here.py:1"))


def test_native_compiler_identity(monkeypatch, tmp_path):
    cap = schema.validate_python(
        TargetCapability,
        {"priority": 1, "consumes": ["device_source"], "native_compiler": {"program": "cc", "env": "CC"}}
    )
    monkeypatch.delenv("CC", raising=False)
    ident = native_compiler_identity(cap)
    assert ident and ident == native_compiler_identity(cap)
    fake = tmp_path / "mycc"
    fake.write_text("#!/bin/sh\necho 'mycc version 42'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CC", f"{fake} -O2")
    other = native_compiler_identity(cap)
    assert other != ident and "mycc version 42" in other and "-O2" in other
    monkeypatch.setenv("CC", "definitely-not-a-compiler-xyz")
    assert "not found" in native_compiler_identity(cap)
    declared = schema.validate_python(
        TargetCapability,
        {"priority": 1, "consumes": ["device_source"], "requires": {"executables": ["sh"]}}
    )
    assert "sh=" in native_compiler_identity(declared) and os.path.realpath("/bin/sh") in native_compiler_identity(declared)


CHILD = """
import json, runpy, sys
import tilelang
kit = runpy.run_path({kit!r})
for i, n in enumerate({others}):
    tilelang.compile(kit["make_prim_func"]("other%d" % i, n), out_idx=-1, execution_backend="pyadd", target="c")
k = tilelang.compile(kit["make_prim_func"]("shared", 16), out_idx=-1, execution_backend="pyadd", target="c")
print(json.dumps({{"key": k.cache_key}}))
"""


def test_same_key_in_two_processes_that_compiled_other_kernels_first(tmp_path):
    """Through tilelang.compile (real lowering) in two fresh processes running at once: each first
    compiles other kernels, then the shared one; equal keys mean the shared kernel is built once
    (the other process waits on the key's lock and loads it)."""
    pytest.importorskip("tilelang_core.lowering")
    site = tmp_path / "site"
    site.mkdir()
    KIT["install_pyadd"](site)
    env = {"TILELANG_CACHE_DIR": str(tmp_path / "cache"), "TL_TEST_BUILD_LOG": str(tmp_path / "builds.log")}
    kit = str(Path(__file__).with_name("test_cache_kit.py"))
    full_env = KIT["subprocess_env"](site)
    full_env.update(env)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD.format(kit=kit, others=others)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=full_env,
        )
        for others in ([8, 24, 40], [32])
    ]
    keys = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        keys.append(json.loads(out.strip().splitlines()[-1])["key"])
    assert keys[0] == keys[1]
    builds = [line.split()[1] for line in KIT["read_log"](tmp_path / "builds.log")]
    assert builds.count("shared") == 1, builds  # the second process loaded it from disk
