"""The C compiler invocation: flags, $CC, no OpenMP runtime, compile errors."""

from __future__ import annotations

import os
import stat

import pytest
import torch
from tilelang_core.errors import BuildError

import kernels as K


@pytest.fixture
def logging_cc(tmp_path, monkeypatch):
    """$CC pointing at a wrapper around cc that records each command line."""
    log = tmp_path / "cc.log"
    wrapper = tmp_path / "cc-wrapper"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec cc "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("CC", str(wrapper))
    return log


def _kernel_lines(log):
    return [line for line in log.read_text().splitlines() if "simd.c" not in line]


def test_default_flags_link_no_openmp_runtime(logging_cc):
    """Kernels never link an OpenMP runtime (parallel block loops run on the dispatcher's pool,
    see test_cpu_parallel.py); the simd pragmas are honoured with -fopenmp-simd."""
    art = K.vadd_static()
    art.device_source += "\n/* default flags */\n"
    K.build(art)
    (line,) = _kernel_lines(logging_cc)
    for flag in ("-O3", "-march=native", "-fPIC", "-shared", "-fopenmp-simd", "-DTL_OPENMP_SIMD"):
        assert flag in line.split()
    assert "-fopenmp" not in line.split()


def test_disable_parallel_blocks_builds_and_runs(logging_cc):
    art = K.vadd_static()
    art.device_source += "\n/* serial blocks */\n"
    k = K.build(art, pass_configs={"tl.disable_parallel_blocks": True}, out_idx=[2])
    (line,) = _kernel_lines(logging_cc)
    assert "-fopenmp" not in line.split()
    a = torch.randn(16)
    torch.testing.assert_close(k(a, a), 2 * a)


def test_compile_flags_are_appended_last(logging_cc):
    src = """
#include <stdint.h>
int32_t flagged(float *A) {
#ifdef TL_TEST_VALUE
  A[0] = TL_TEST_VALUE;
#endif
  return 0;
}
"""
    art = K.artifact("flagged", [K.tensor("A", [1])], [K.ptr("A", 0)], src)
    k = K.build(art, compile_flags=["-DTL_TEST_VALUE=42.0f", "-O1"])
    (line,) = _kernel_lines(logging_cc)
    args = line.split()
    assert args.index("-O1") > args.index("-O3")
    a = torch.zeros(1)
    k(a)
    assert a.item() == 42.0


def test_compile_error_carries_command_output_and_source():
    art = K.artifact("broken", [K.tensor("A", [4])], [K.ptr("A", 0)],
                     "#include <stdint.h>\nint32_t broken(float *A) { return this is not C; }\n")
    with pytest.raises(BuildError) as info:
        K.build(art)
    err = info.value
    msg = str(err)
    assert "compiling kernel 'broken' (target c) failed" in msg
    assert "command: " in msg and "-O3" in msg and "-shared" in msg
    assert "error" in msg.lower()  # the compiler's own output
    assert os.path.exists(err.source) and err.source in msg
    assert "return this is not C" in open(err.source).read()
    assert err.command[0] and "-o" in err.command
    assert err.output and err.output in msg
    assert isinstance(err, RuntimeError)


def test_missing_compiler_is_a_build_error(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/tilelang-cc")
    art = K.vadd_static()
    art.device_source += "\n/* missing cc */\n"
    with pytest.raises(BuildError, match=r"cannot run the compiler .*\n.*command: /nonexistent/tilelang-cc"):
        K.build(art)


def test_unsupported_dtype_and_bad_out_idx():
    from tilelang_core.errors import OutIdxError

    with pytest.raises(BuildError, match="handle"):
        K.build(K.artifact("h", [K.tensor("A", [4], dtype="handle")], [K.ptr("A", 0)], "int h(void*a){return 0;}"))
    with pytest.raises(OutIdxError, match="scalar parameter 'alpha'"):
        K.build(K.axpy(), out_idx=[2])


def _logging_wrapper(directory, log, name="cc"):
    directory.mkdir(exist_ok=True)
    wrapper = directory / name
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec /usr/bin/env -i PATH=/usr/bin:/bin cc "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    return wrapper


def _compiles(log):
    return [line for line in log.read_text().splitlines() if "simd.c" not in line] if log.exists() else []


def test_a_compiler_put_first_on_path_builds_again(tmp_path, monkeypatch):
    """The memo of libraries built in this process handed back what the previous ``cc`` built
    after another ``cc`` came first on PATH (and the kernel cache then saved it under the new
    compiler's key)."""
    from tilelang_backend_cython.compiler import compile_c

    monkeypatch.delenv("CC", raising=False)
    source = "int tl_memo_path(void) { return 1; }\n"
    compile_c("memo_path", source).release()
    log = tmp_path / "cc.log"
    _logging_wrapper(tmp_path / "bin", log)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    compile_c("memo_path", source).release()
    assert len(_compiles(log)) == 1


def test_a_source_including_its_own_file_is_built_each_time(tmp_path, monkeypatch, logging_cc):
    """``#include "..."`` (``T.import_source``): the file may have changed between two builds
    of the same text, so such a source is not taken from the memo."""
    from tilelang_backend_cython.compiler import compile_c

    header = tmp_path / "tl_memo.h"
    header.write_text("#define TL_MEMO 2\n")
    source = f'#include "{header}"\nint tl_memo_inc(void) {{ return TL_MEMO; }}\n'
    compile_c("memo_inc", source).release()
    header.write_text("#define TL_MEMO 3\n")
    compile_c("memo_inc", source).release()
    assert len(_kernel_lines(logging_cc)) == 2


@pytest.mark.parametrize("form", ["angle", "no space"])
def test_an_edited_header_included_otherwise_builds_again(tmp_path, monkeypatch, logging_cc, form):
    """``#include <h>`` found through ``-I``, and ``#include"h"`` without a space: the memo's
    first key only skipped ``#include "`` and handed back the library of the old header (which
    the kernel cache then saved under the new header's key)."""
    from tilelang_backend_cython.compiler import compile_c

    header = tmp_path / "tl_memo_form.h"
    header.write_text("#define TL_MEMO 2\n")
    line = "#include <tl_memo_form.h>" if form == "angle" else f'#include"{header}"'
    source = f"{line}\nint tl_memo_form(void) {{ return TL_MEMO; }}\n"
    flags = [f"-I{tmp_path}"]
    compile_c("memo_form", source, compile_flags=flags).release()
    compile_c("memo_form", source, compile_flags=flags).release()  # the same header: from the memo
    header.write_text("#define TL_MEMO 3\n")
    compile_c("memo_form", source, compile_flags=flags).release()
    assert len(_kernel_lines(logging_cc)) == 2


def test_another_include_search_path_builds_again(tmp_path, monkeypatch, logging_cc):
    from tilelang_backend_cython.compiler import compile_c

    for value in (2, 3):
        (tmp_path / str(value)).mkdir()
        (tmp_path / str(value) / "tl_memo_path.h").write_text(f"#define TL_MEMO {value}\n")
    source = "#include <tl_memo_path.h>\nint tl_memo_cpath(void) { return TL_MEMO; }\n"
    monkeypatch.setenv("CPATH", str(tmp_path / "2"))
    compile_c("memo_cpath", source).release()
    monkeypatch.setenv("CPATH", str(tmp_path / "3"))
    compile_c("memo_cpath", source).release()
    assert len(_kernel_lines(logging_cc)) == 2


def test_the_memo_keeps_the_newest_libraries_only(monkeypatch):
    from tilelang_backend_cython import compiler

    monkeypatch.setattr(compiler, "MEMO_SIZE", 2)
    for n in range(4):
        compiler.compile_c("memo_size", f"int tl_memo_size_{n}(void) {{ return {n}; }}\n").release()
    assert len(compiler._built) <= 2
