"""What the cache key must see besides the kernel's TIR text: the prim_func a mutable IRModule holds
now, the CPU a CPU kernel is built for, and the headers its source includes (with the compilers'
include paths). Each case returned a stale kernel, or rebuilt on every run, before (a helper's hunt).
"""

from __future__ import annotations

import pathlib
import sys
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
import tilelang_core.lowering as lowering
from tilelang_core import devices
from tilelang_core.cache.includes import MAX_FILES, included_files
from tilelang_core.cache.key import compute_key
from tilelang_core.cache.store import get_cache

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import PATHS, cpu_pairs, path_id  # noqa: E402


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A cache directory of the test's own."""
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "cache"


@pytest.fixture
def builds(monkeypatch):
    """How many kernels were lowered (each build lowers once; a cache hit does not)."""
    count = [0]
    original = lowering.lower

    def counting(*args, **kwargs):
        count[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(lowering, "lower", counting)
    return count


def scale_by(factor):
    @T.prim_func
    def main(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=8) as bx:
            for i in T.Parallel(8):
                B[i] = A[i] * factor

    return main


def with_header(include_line):
    @T.prim_func
    def kernel(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        T.import_source(include_line)
        with T.Kernel(1, threads=8) as bx:
            for i in T.Parallel(8):
                B[i] = T.call_extern("float32", "myscale", A[i])

    return kernel


def key_of(func, target="c", flags=(), kind="c"):
    return compute_key(func, target=target, target_kind=kind, target_host=None, backend_name="b", backend_version="1",
                       native_compiler="", pass_configs=None, compile_flags=list(flags), out_idx=-1)


def write_scale(path, factor):
    path.write_text(f"static inline float myscale(float x) {{ return x * {factor}f; }}\n")


# -- 1. an IRModule changed in place -------------------------------------------------------------

@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_an_irmodule_changed_in_place_is_compiled_again(cache_dir, path):
    """The fast path keyed an IRModule by id(module): after ``mod["main"] = other`` the same module
    object got the kernel of the function it held before."""
    import tvm

    backend, target = path
    mod = tvm.IRModule({"main": scale_by(2.0)})
    try:
        first = tilelang.compile(mod, out_idx=-1, target=target, execution_backend=backend)
    except Exception as exc:  # noqa: BLE001 - backend missing here
        pytest.skip(f"{backend} cannot build for {target} here: {exc}")
    assert first(torch.ones(8))[0].item() == 2.0
    mod["main"] = scale_by(3.0)
    second = tilelang.compile(mod, out_idx=-1, target=target, execution_backend=backend)
    assert second(torch.ones(8))[0].item() == 3.0
    assert tilelang.compile(mod, out_idx=-1, target=target, execution_backend=backend) is second  # fast hit


# -- 2. machines with other CPUs sharing one cache directory --------------------------------------

def test_cpu_targets_are_keyed_by_the_instruction_set_and_gpu_targets_are_not(monkeypatch):
    func = scale_by(2.0)
    kinds = {"c": "c", '{"kind":"llvm","keys":["cpu"]}': "llvm", "cuda -arch=sm_90": "cuda"}
    here = {t: key_of(func, t, kind=k) for t, k in kinds.items()}
    monkeypatch.setattr(devices, "instruction_set_id", lambda: "0123456789abcdef")
    elsewhere = {t: key_of(func, t, kind=k) for t, k in kinds.items()}
    assert elsewhere["c"] != here["c"]
    assert elsewhere['{"kind":"llvm","keys":["cpu"]}'] != here['{"kind":"llvm","keys":["cpu"]}']
    assert elsewhere["cuda -arch=sm_90"] == here["cuda -arch=sm_90"]


@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_machines_with_other_cpus_keep_their_own_entries_in_a_shared_cache(cache_dir, builds, monkeypatch,
                                                                            backend, target):
    """The CPU was not in the key: each machine found the other's entry, refused it (built for
    another CPU), removed it and rebuilt, on every run."""
    real = devices.instruction_set_id()

    def compile_as(cpu):
        monkeypatch.setattr(devices, "instruction_set_id", lambda: cpu)
        get_cache().memory.clear()  # as a new process on that machine: only the disk is shared
        with warnings.catch_warnings():
            warnings.simplefilter("error", tilelang.cache.CacheWarning)  # no entry refused and removed
            kernel = tilelang.compile(scale_by(2.0), out_idx=-1, target=target, execution_backend=backend)
        assert kernel(torch.ones(8))[0].item() == 2.0
        return kernel.cache_key

    key_a = compile_as(real)
    key_b = compile_as("0123456789abcdef")
    assert key_a != key_b and builds[0] == 2
    assert compile_as(real) == key_a and compile_as("0123456789abcdef") == key_b
    assert builds[0] == 2  # both entries stayed: loaded from disk, not rebuilt
    assert len(list((cache_dir / "kernels").glob("*/*"))) == 2


# -- 3. headers the kernel's source includes ------------------------------------------------------

def test_an_edited_header_included_by_absolute_path_gives_a_new_kernel(cache_dir, builds, tmp_path):
    """The header's content was not in the key: after it was edited, a new process (here: a new
    prim_func object with an empty memory layer) got the kernel built with the old header."""
    header = tmp_path / "myhdr.h"
    write_scale(header, 2.0)
    line = f'#include "{header}"'
    first = tilelang.compile(with_header(line), out_idx=-1, target="c")
    assert first(torch.ones(8))[0].item() == 2.0
    write_scale(header, 3.0)
    get_cache().memory.clear()
    second = tilelang.compile(with_header(line), out_idx=-1, target="c")
    assert second(torch.ones(8))[0].item() == 3.0
    assert second.cache_key != first.cache_key and builds[0] == 2
    write_scale(header, 2.0)  # back to the first content: the first entry again, from disk
    get_cache().memory.clear()
    assert tilelang.compile(with_header(line), out_idx=-1, target="c").cache_key == first.cache_key
    assert builds[0] == 2


def test_a_header_found_through_cpath_is_in_the_key(cache_dir, builds, tmp_path, monkeypatch):
    """CPATH chose which "myhdr.h" the compiler included, but neither CPATH nor the header was in
    the key: the kernel built with one directory's header came back for the other."""
    for name, factor in (("A", 2.0), ("B", 3.0)):
        (tmp_path / name).mkdir()
        write_scale(tmp_path / name / "myhdr.h", factor)
    got = []
    for name in ("A", "B"):
        monkeypatch.setenv("CPATH", str(tmp_path / name))
        kernel = tilelang.compile(with_header('#include "myhdr.h"'), out_idx=-1, target="c")
        got.append(kernel(torch.ones(8))[0].item())
    assert got == [2.0, 3.0] and builds[0] == 2


def test_included_files_follow_flags_environment_and_nested_quoted_includes(tmp_path, monkeypatch):
    for name in ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH"):
        monkeypatch.delenv(name, raising=False)
    inc, sub = tmp_path / "inc", tmp_path / "inc" / "sub"
    sub.mkdir(parents=True)
    (inc / "top.h").write_text('#include "sub/inner.h"\n#include <stdio.h>\n')
    (sub / "inner.h").write_text('#include "inner.h"\n#define X 1\n')  # includes itself: visited once
    func = with_header("#include <top.h>")
    assert key_of(func) == key_of(func)  # not found anywhere: nothing read, a stable key
    with_flag = key_of(func, flags=["-I", str(inc)])
    files = included_files(func, "include", ["-I", str(inc)])
    assert [f.split(" ")[0] for f in files] == [str(inc / "sub" / "inner.h"), str(inc / "top.h")]
    (sub / "inner.h").write_text('#include "inner.h"\n#define X 2\n')
    assert key_of(func, flags=["-I", str(inc)]) != with_flag  # a nested header's edit changes the key
    monkeypatch.setenv("C_INCLUDE_PATH", str(inc))
    assert [f.split(" ")[0] for f in included_files(func, "include", [])] == [str(sub / "inner.h"), str(inc / "top.h")]
    assert MAX_FILES >= 2


def test_include_path_variables_are_in_the_key_and_kernels_without_includes_read_no_file(monkeypatch):
    func = scale_by(2.0)
    monkeypatch.delenv("LIBRARY_PATH", raising=False)
    base = key_of(func)
    monkeypatch.setenv("LIBRARY_PATH", "/opt/mylibs")
    assert key_of(func) != base

    def no_reads(*args, **kwargs):
        raise AssertionError("a kernel without includes must not touch the file system for its key")

    monkeypatch.setattr("tilelang_core.cache.includes._read", no_reads)
    monkeypatch.setattr("tilelang_core.cache.includes._candidates", no_reads)
    key_of(func, flags=["-I/usr/include"])
