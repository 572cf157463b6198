"""``T.device_assert`` markers, lowered for each code path.

The language emits ``call_extern("int32", "tl.device_assert", cond, text)`` statements
(:mod:`tilelang_core.language.tileops.debug`). :func:`lower_device_asserts` replaces each one:

* ``"status"`` (the C entry point of ``device_source`` on CPU targets): ``if (!cond) return
  S;``, where ``S`` is the assertion's own status (:func:`assertion_status`: -3 for the first
  assertion of the kernel, -4 for the second, ...). The function that
  ``DeviceKernel.assert_message`` names (:func:`assert_message_source`) maps a status to its
  assertion's text. Nothing is stored anywhere: two threads whose calls fail at the same time
  each get their own text. Inside a parallel block loop the return ends that block's range and
  the entry returns the status of the first block range that failed once the loop is done.
* ``"runtime"`` (TVM runtime modules on CPU targets): a TIR ``AssertStmt``, which TVM's host code
  turns into a raised error carrying the text.
* ``"cuda"``: ``if (!cond) { printf("%s\\n", text); __trap(); }``, CUDA's own ``assert``
  behaviour (the launch fails; the context is lost).
* ``"drop"`` (Metal, which cannot stop a kernel, and ROCm): the statement is removed.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

from ..calling import DEVICE_ASSERT_FAILED, assertion_status  # the statuses of failed checks
from ..language.tileops.debug import DEVICE_ASSERT_CALL
from .atomics import checked_map
from .markers import marker_args

__all__ = ["DEVICE_ASSERT_FAILED", "FORMS", "assert_message_source", "assertion_status", "has_device_asserts",
           "lower_device_asserts"]

#: The ways :func:`lower_device_asserts` lowers a marker.
FORMS = ("status", "runtime", "cuda", "drop")


def _marker(stmt: Any):
    """``[cond, text]`` of a ``T.device_assert`` marker statement, else None."""
    return marker_args(stmt, DEVICE_ASSERT_CALL, 2)


def has_device_asserts(func: tirx.PrimFunc) -> bool:
    """Whether ``func`` holds a ``T.device_assert`` marker."""
    found = []

    def on_evaluate(stmt: Any) -> Any:
        if _marker(stmt) is not None:
            found.append(stmt)
        return stmt

    checked_map(func.body, [(tirx.Evaluate, on_evaluate)])
    return bool(found)


def c_string(text: str) -> str:
    """``text`` as a C string literal (printable ASCII as is, every other byte in octal)."""
    out = []
    for byte in text.encode("utf-8"):
        ch = chr(byte)
        out.append(ch if 32 <= byte < 127 and ch not in '"\\?' else f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def lower_device_asserts(func: tirx.PrimFunc, form: str) -> tuple[tirx.PrimFunc, list[str], str]:
    """``func`` with every ``T.device_assert`` marker lowered in ``form`` (one of :data:`FORMS`),
    the texts of the lowered assertions in order (the ``status`` and ``cuda`` forms; assertion
    ``k`` returns :func:`assertion_status` ``(k)`` in the ``status`` form) and the CUDA definitions
    the lowered statements call ("" when they call none).

    TVM's CUDA code generator cannot pass strings to functions, so each assertion of the ``cuda``
    form calls a function of its own (``tl_device_assert_<k>()``), which prints its text and traps.
    """
    if form not in FORMS:
        raise ValueError(f"lower_device_asserts: form must be one of {', '.join(FORMS)}, got {form!r}")
    texts: list[str] = []

    def on_evaluate(stmt: Any) -> Any:
        marker = _marker(stmt)
        if marker is None:
            return stmt
        cond, text = marker
        if form == "runtime":
            return tirx.AssertStmt(cond, tvm.ir.StringImm("RuntimeError"), [text])  # TVM 0.27: (condition, kind, parts)
        if form == "drop":
            return tirx.Evaluate(tirx.IntImm("int32", 0))
        texts.append(text.value)
        if form == "status":
            return tirx.IfThenElse(tirx.Not(cond), tirx.Return(tirx.IntImm("int32", assertion_status(len(texts) - 1))),
                                   None)
        call = tirx.Evaluate(tirx.call_extern("int32", f"tl_device_assert_{len(texts) - 1}"))
        return tirx.IfThenElse(tirx.Not(cond), call, None)

    body = checked_map(func.body, [(tirx.Evaluate, on_evaluate)])
    if body.same_as(func.body):
        return func, [], ""
    return func.with_body(body), texts, _cuda_definitions(texts) if form == "cuda" else ""


def _cuda_definitions(texts: list[str]) -> str:
    head = ("\n/* tilelang T.device_assert: print the text and trap, as CUDA's assert */\n"
            "#ifndef __CUDACC_RTC__\n#include <cstdio>\n#endif\n")
    return head + "".join(
        f"__device__ __noinline__ int tl_device_assert_{k}(void) {{\n"
        f'  printf("%s\\n", {c_string(text)});\n  __trap();\n  return 0;\n}}\n'
        for k, text in enumerate(texts)
    )


def assert_message_source(function: str, texts: list[str]) -> str:
    """The exported ``const char *function(int32_t status)`` of the ``status`` form: the text of
    the assertion whose status is ``status`` (:func:`assertion_status`), NULL for any other
    status. ``texts`` are :func:`lower_device_asserts`' texts, in order."""
    cases = "".join(f"    case {assertion_status(k)}: return {c_string(text)};\n" for k, text in enumerate(texts))
    return (
        "\n/* tilelang T.device_assert: the text of the assertion whose status the entry returned */\n"
        f'__attribute__((visibility("default"))) const char *{function}(int32_t status) {{\n'
        f"  switch (status) {{\n{cases}    default: return 0;\n  }}\n}}\n"
    )
