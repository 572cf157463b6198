"""``del B[1]`` and ``with open(...)`` in a kernel body are refused at their line (language/python_statements.py).

Before, ``del B[1]`` (or ``del obj.attr``) was ignored: the kernel was built as if the statement
were not there. ``with open("f") as fh:`` ran ``open`` while the kernel was parsed and stopped with
"[Errno 2] No such file or directory: 'f'" or, for a file that exists (or one that ``"w"`` had
just created or emptied), "Do not know how to bind type: <class '_io.TextIOWrapper'> in with
statement"; any Python context manager's ``as`` value gave the latter.
"""

from __future__ import annotations

import contextlib
import pathlib
import sys

import pytest
import tvm

import tilelang.language as T

_THIS = pathlib.Path(__file__).resolve()
sys.path.insert(0, str(_THIS.parent))
from source_lines import marked_line  # noqa: E402


def _diagnostic(build, marker: str) -> str:
    """The message of the diagnostic raised while defining a kernel, checked to point at ``marker``'s line."""
    with pytest.raises(tvm.error.DiagnosticError) as info:
        build()
    text = str(info.value)
    assert f"{_THIS}:{marked_line(_THIS, marker)}" in text, text
    return text


def test_del_of_an_element_or_attribute_is_refused():
    def element():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                B[0] = A[0]
                del B[1]  # <del-element>

    text = _diagnostic(element, "del-element")
    assert "del B[1] is not supported in a kernel" in text and "B[1] = 0" in text and "'del name'" in text, text

    def in_a_tuple():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                x = A[0]
                del x, A.shape  # <del-attribute>

    text = _diagnostic(in_a_tuple, "del-attribute")
    assert "del A.shape is not supported in a kernel" in text and "attribute" in text, text


def test_with_open_is_refused_before_the_file_is_opened(tmp_path):
    path = tmp_path / "written.txt"

    def write():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                with open(path, "w") as fh:  # <with-open>
                    A[0] = 1.0

    text = _diagnostic(write, "with-open")
    assert "with open(path, \"w\"): a kernel cannot read or write files" in text, text
    assert "read the file before defining the kernel" in text, text
    assert not path.exists()  # refused before open() ran


def test_with_a_python_context_manager_as_a_name_says_what_it_gave():
    def python_value():
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1) as _:
                with contextlib.nullcontext(5) as n:  # <with-python>
                    A[0] = 1.0

    text = _diagnostic(python_value, "with-python")
    assert "with ... as n: the with statement gave a Python int, not a kernel scope" in text, text
    assert "Do not know how to bind" not in text, text
