"""``i = i + 1`` (or ``i += 1``) on a loop variable in the loop's body: the name stands for the new
value after it.

TVMScript stopped such an assignment with "Variable i already defined in current scope". Python
and TileLang rebind the name for the rest of the iteration (the next iteration takes its value from
the loop again). :func:`install` wraps TVMScript's ``tirx`` assignment visitor: when the target is a
single name bound to the variable of an enclosing loop, the assignment may shadow it, and TVMScript
binds the value to a new variable of that name for the statements after it. Every other
assignment keeps its handling (a name bound outside a loop and reassigned in it accumulates).
"""

from __future__ import annotations

from typing import Any

from .tirx_visitors import assign_hook, wrap_visitor

__all__ = ["LoopRebindingWarning", "install"]


def _enclosing_loop_vars() -> list:
    """The variables of the loops the IR builder is inside now (none outside a kernel)."""
    from tvm.script.ir_builder import IRBuilder
    from tvm.tirx.script.builder import frame

    if not IRBuilder.is_in_scope():
        return []
    found = []
    for each in IRBuilder.current().frames:
        if isinstance(each, frame.ForFrame):
            found.extend(each.vars)
    return found


def _names_a_loop_var(table: Any, name: str) -> bool:
    """Whether the newest binding of ``name`` in the variable ``table`` is an enclosing loop's variable."""
    import tvm

    value = table.name2value[name][-1]
    if not isinstance(value, tvm.runtime.Object):  # a Python value bound to the name
        return False
    return any(value.same_as(var) for var in _enclosing_loop_vars())


def _is_loop_var(parser: Any, name: str) -> bool:
    """Whether ``name`` is bound in the current scope of ``parser``'s variable table (where TVMScript
    refuses to bind it again) to an enclosing loop's variable."""
    table = parser.var_table
    # most assignments: nothing to look up
    return table.contains_in_current_frame(name) and _names_a_loop_var(table, name)


class LoopRebindingWarning(UserWarning):
    """A loop variable assigned inside an ``if`` or an inner loop of its loop's body: the new value
    lasts until the end of that block (TVMScript's scoping), not as in Python."""


def _warn_if_nested(parser: Any, target: Any) -> None:
    """Warn for each name of the assignment ``target`` (a name, or a tuple of names) that is an
    enclosing loop's variable bound outside the current block: the assignment binds a new variable
    of that block, and after it the name is the loop's value again (``if c: i += 4`` then ``B[i]``:
    Python's ``i`` is the new one)."""
    from tvm.script.parser.core import doc

    table = parser.var_table
    for node in [target] if isinstance(target, doc.Name) else getattr(target, "elts", []):
        if not isinstance(node, doc.Name):
            continue
        name = node.id
        if table.contains_in_current_frame(name) or not table.name2value.get(name):
            continue
        if _names_a_loop_var(table, name):
            from ..warning_location import warn
            from .tileops._common import location

            warn(f"{location()}: {name} is the variable of an enclosing loop; assigned inside an if or an inner loop, "
                 f"its new value lasts until the end of that block, and after it {name} is the loop's value again "
                 f"(in Python the new value would stay): assign a new name (j = {name} + ...) and use it",
                 LoopRebindingWarning)


def _rebinding(previous: Any, parser: Any, node: Any, target: Any) -> Any:
    """Visit the assignment ``node`` with ``previous``; when its one ``target`` is a name bound to a
    loop variable in this block, the assignment may shadow it (only this statement's target)."""
    from tvm.script.parser.core import doc

    if not isinstance(target, doc.Name) or not _is_loop_var(parser, target.id):
        return previous(parser, node)
    with assign_hook(parser, target, lambda bound: bound.update(allow_shadowing=True)):
        return previous(parser, node)


def _visit_assign(previous: Any, self: Any, node: Any) -> Any:
    for target in node.targets:  # i = ..., and i, q = ... (tuple targets)
        _warn_if_nested(self, target)
    return _rebinding(previous, self, node, node.targets[0] if len(node.targets) == 1 else None)


def _visit_aug_assign(previous: Any, self: Any, node: Any) -> Any:
    _warn_if_nested(self, node.target)
    return _rebinding(previous, self, node, node.target)  # i += 4 is i = i + 4


def _visit_ann_assign(previous: Any, self: Any, node: Any) -> Any:
    _warn_if_nested(self, node.target)  # i: T.int32 = i + 4
    return previous(self, node)


def install() -> None:
    """Wrap TVMScript's ``tirx`` assignment visitors (``=`` and ``+=`` & co.) with loop-variable
    rebinding (idempotent)."""
    wrap_visitor("Assign", _visit_assign)
    wrap_visitor("AugAssign", _visit_aug_assign)
    wrap_visitor("AnnAssign", _visit_ann_assign)
