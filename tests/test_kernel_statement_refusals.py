"""``del B[1]`` in a kernel body is refused at its line (language/python_statements.py).

Before, ``del B[1]`` (or ``del obj.attr``) was ignored: the kernel was built as if the statement
were not there.
"""

from __future__ import annotations

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
