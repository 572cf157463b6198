"""Source spans on kernels (``tilelang.ir``), ``TILELANG_ENABLE_IR_SPAN`` and ``tilelang.errors.enrich_error``."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.ir import (
    get_buffer_span,
    get_stmt_span,
    make_span,
    set_buffer_span,
    set_stmt_span,
    span_coverage,
    span_to_location,
)
from tilelang_core.language.tvm_names import post_order_visit

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from source_lines import line_in_function  # noqa: E402


def _line_of(fn, text: str) -> int:
    return line_in_function(fn, text)


def _scale_kernel():
    @T.prim_func
    def scale(X: T.Tensor((64,), T.float32), Y: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64):
            tile = T.alloc_shared((64,), T.float32)
            T.copy(X, tile)
            for i in T.serial(64):
                Y[i] = tile[i] * 2.0

    return scale


def _statement_lines(func) -> dict[int, set[str]]:
    from tvm import tirx

    found: dict[int, set[str]] = {}

    def visit(node):
        if isinstance(node, tirx.Stmt):
            where = span_to_location(get_stmt_span(node))
            if where is not None:
                assert where[0] == __file__
                found.setdefault(where[1], set()).add(type(node).__name__)

    post_order_visit(func.body, visit)
    return found


def test_statements_and_buffers_carry_the_user_line():
    func = _scale_kernel()
    lines = _statement_lines(func)
    assert "For" in lines[_line_of(_scale_kernel, "for i in T.serial")]
    assert "BufferStore" in lines[_line_of(_scale_kernel, "Y[i] = tile[i]")]
    assert _line_of(_scale_kernel, "T.copy(X, tile)") in lines
    x = func.params[0]
    assert span_to_location(get_buffer_span(x)) == (__file__, _line_of(_scale_kernel, "def scale("))
    coverage = span_coverage(func)
    assert coverage["buffers"] == [3, 3]  # X, Y and the shared tile
    assert 0 < coverage["stmts"][0] <= coverage["stmts"][1]


def test_setters_round_trip_and_none_means_no_span():
    func = _scale_kernel()
    span = make_span("/somewhere/k.py", 7, 3)
    set_stmt_span(func.body, span)
    assert span_to_location(get_stmt_span(func.body)) == ("/somewhere/k.py", 7)
    set_buffer_span(func.params[1], span)
    assert span_to_location(get_buffer_span(func.params[1])) == ("/somewhere/k.py", 7)
    set_stmt_span(func.body, None)
    assert get_stmt_span(func.body) is None and span_to_location(None) is None
    with pytest.raises(ValueError, match="line must be a positive int"):
        make_span("k.py", 0)


def test_macro_statements_point_at_the_macro_body():
    @T.macro
    def double_into(src, dst, i):
        dst[i] = src[i] * 2.0

    @T.prim_func
    def kernel(X: T.Tensor((8,), T.float32), Y: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=8):
            for i in T.serial(8):
                double_into(X, Y, i)

    lines = _statement_lines(kernel)
    assert "BufferStore" in lines[_line_of(double_into, "dst[i] = src[i] * 2.0")]


def test_spans_switched_off_by_the_environment_and_ignored_by_equality(monkeypatch):
    from tvm.ir import assert_structural_equal

    with_spans = _scale_kernel()
    monkeypatch.setenv("TILELANG_ENABLE_IR_SPAN", "0")
    without = _scale_kernel()
    coverage = span_coverage(without)
    assert coverage["stmts"][0] == 0 and coverage["buffers"][0] == 0
    assert coverage["stmts"][1] == span_coverage(with_spans)["stmts"][1]
    assert_structural_equal(with_spans, without)
    assert "def scale" in without.script()


def test_eager_kernel_spans_name_the_users_file_and_lines():
    @tilelang.jit
    def add_one(X):
        X: T.Tensor((16,), T.float32)
        Y = T.empty((16,), T.float32)
        with T.Kernel(1, threads=16):
            for i in T.serial(16):
                Y[i] = X[i] + 1.0
        return Y

    func = add_one.get_tir()
    where = {p.name: span_to_location(get_buffer_span(p)) for p in func.params}
    assert where["X"] == (__file__, _line_of(add_one.func, "X: T.Tensor((16,)"))
    assert where["Y"] == (__file__, _line_of(add_one.func, "Y = T.empty("))
    assert _line_of(add_one.func, "Y[i] = X[i] + 1.0") in _statement_lines(func)
    x = torch.arange(16, dtype=torch.float32)
    torch.testing.assert_close(add_one(x), x + 1)  # spans change nothing in what runs


def test_enrich_error_adds_the_marked_source_line(tmp_path):
    from tilelang.errors import _MARKER_RE, enrich_error

    src = tmp_path / "my kernels" / "k.py"
    src.parent.mkdir()
    src.write_text("first = 1\nsecond = T.copy(A, B)\nthird = 3\n")
    exc = RuntimeError(f"copy failed\n  --> {src}:2:5")
    assert enrich_error(exc) is exc
    assert "second = T.copy(A, B)" in str(exc) and "first = 1" in str(exc)
    enrich_error(exc)
    assert str(exc).count("second = T.copy(A, B)") == 1  # not added twice
    plain = ValueError("no marker here")
    assert enrich_error(plain) is plain and str(plain) == "no marker here"
    missing = ValueError("  --> /no/such/file.py:3:1")
    assert str(enrich_error(missing)) == "  --> /no/such/file.py:3:1"
    m = _MARKER_RE.search("--> D:\\kernels\\k.py:12:4")
    assert (m.group("file"), m.group("line"), m.group("col")) == ("D:\\kernels\\k.py", "12", "4")


def test_ir_and_errors_modules_import_without_tvm():
    code = "import sys, tilelang.ir, tilelang.errors; print('tvm' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
