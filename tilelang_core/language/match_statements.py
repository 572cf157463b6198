"""``match`` statements in a kernel body: an ``if``/``elif`` chain of their cases, as in TileLang.

``match op: case "add": ... case "mul" | "times": ... case _: ...`` chooses code by a Python value
when the kernel is parsed (TileLang 0.1.15 runs such kernels). TVMScript's source converter has no
``Match`` and stopped the whole kernel with "to_doc is not implemented for: Match", with no line.

:func:`install` registers a converter that writes the statement as the ``if`` chain Python's own
semantics give for these patterns, tested in order, the first match running:

* a literal or dotted-name value (``case 3:``, ``case "add":``, ``case Mode.FAST:``): ``subject ==
  value``; ``case None:`` / ``True`` / ``False``: ``subject is value``;
* ``case a | b:``: either; ``case _:``: always; a guard (``case "add" if n > 4:``): ``and`` it.

So a Python subject picks its case when the kernel is parsed (Python truthiness, as ``if`` on a
Python value), and a run-time subject (``match A[i]: case 0: ...``) becomes a branch the kernel
runs. The subject is evaluated again for each case tested: keep it free of side effects. Capture
patterns (``case x:``, ``case "a" as x:``), sequence, mapping and class patterns bind names or
take objects apart, which a kernel cannot do with run-time values: they are refused at the case's
line (:mod:`.raise_statements` emits the refusal).
"""

from __future__ import annotations

import ast
import copy
from typing import Optional

__all__ = ["install", "as_if_chain"]


def _refusal(case: ast.match_case, what: str) -> ast.stmt:
    from .raise_statements import refusal_marker

    text = (f"match: {what} is not supported in a kernel (a kernel's values cannot be bound or taken apart by "
            f"a pattern); use literal or dotted-name values (case 3:, case \"add\":, case Mode.FAST:), "
            f"alternatives (case 1 | 2:) and case _:, or an if/elif chain")
    stmt = ast.Raise(exc=ast.Constant(refusal_marker(text)), cause=None)
    return ast.copy_location(stmt, case.pattern)


def _test(subject: ast.expr, pattern: ast.pattern) -> Optional[ast.expr] | str:
    """The test of ``pattern`` on ``subject`` (None: always true), or the text of why it is refused."""
    if isinstance(pattern, ast.MatchValue):
        test = ast.Compare(left=copy.deepcopy(subject), ops=[ast.Eq()], comparators=[pattern.value])
    elif isinstance(pattern, ast.MatchSingleton):
        test = ast.Compare(left=copy.deepcopy(subject), ops=[ast.Is()], comparators=[ast.Constant(pattern.value)])
    elif isinstance(pattern, ast.MatchAs):
        if pattern.name is not None:
            return f"the capture pattern 'case {ast.unparse(pattern)}:'"
        return None  # case _:
    elif isinstance(pattern, ast.MatchOr):
        alternatives = []
        for alternative in pattern.patterns:
            test = _test(subject, alternative)
            if isinstance(test, str) or test is None:
                return test
            alternatives.append(test)
        test = ast.BoolOp(op=ast.Or(), values=alternatives)
    else:
        kind = {"MatchSequence": "a sequence pattern", "MatchMapping": "a mapping pattern",
                "MatchClass": "a class pattern", "MatchStar": "a star pattern"}.get(type(pattern).__name__, "this pattern")
        return f"{kind} ('case {ast.unparse(pattern)}:')"
    return ast.copy_location(test, pattern)


def as_if_chain(node: ast.Match) -> ast.stmt:
    """The ``if``/``elif`` statement that runs ``node``'s first matching case (``pass`` when it has none)."""
    chain: list[ast.stmt] = []  # the else-branch being filled: the statements after the last if
    top: Optional[ast.stmt] = None
    for case in node.cases:
        test = _test(node.subject, case.pattern)
        if isinstance(test, str):
            body: list[ast.stmt] = [_refusal(case, test)]
            test = None
        else:
            body = case.body
        if case.guard is not None:
            test = case.guard if test is None else ast.copy_location(
                ast.BoolOp(op=ast.And(), values=[test, case.guard]), case.pattern)
        stmt = ast.copy_location(ast.If(test=test if test is not None else ast.Constant(True), body=body, orelse=[]),
                                 case.pattern)
        if top is None:
            top = stmt
        else:
            chain.append(stmt)
        chain = stmt.orelse
        if test is None:  # an irrefutable case: later cases never run (Python refuses them; kept out)
            break
    if top is None:
        top = ast.Pass()
    ast.copy_location(top, node)
    return ast.fix_missing_locations(top)


def install() -> None:
    """Register the conversion of ``match`` for TVMScript's source converter (idempotent)."""
    from tvm.script.parser.core import doc

    def match_to_doc(node: ast.Match):
        return doc.to_doc(as_if_chain(node))

    doc.register_to_doc("Match")(match_to_doc)
