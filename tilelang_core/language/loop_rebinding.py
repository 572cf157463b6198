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


def _is_loop_var(parser: Any, name: str) -> bool:
    """Whether ``name`` is bound in the current scope of ``parser``'s variable table (where TVMScript
    refuses to bind it again) to an enclosing loop's variable."""
    import tvm

    table = parser.var_table
    if not table.contains_in_current_frame(name):  # most assignments: nothing to look up
        return False
    value = table.name2value[name][-1]
    if not isinstance(value, tvm.runtime.Object):  # a Python value bound to the name
        return False
    return any(value.same_as(var) for var in _enclosing_loop_vars())


class LoopRebindingWarning(UserWarning):
    """A loop variable assigned inside an ``if`` or an inner loop of its loop's body: the new value
    lasts until the end of that block (TVMScript's scoping), not as in Python."""


def _warn_if_nested(parser: Any, name: str) -> None:
    """Warn when ``name`` is an enclosing loop's variable bound outside the current block: the
    assignment binds a new variable of that block, and after it ``name`` is the loop's value again
    (``if c: i += 4`` then ``B[i]``: Python's ``i`` is the new one)."""
    import tvm

    table = parser.var_table
    if table.contains_in_current_frame(name) or not table.name2value.get(name):
        return
    value = table.name2value[name][-1]
    if isinstance(value, tvm.runtime.Object) and any(value.same_as(var) for var in _enclosing_loop_vars()):
        from ..warning_location import warn
        from .tileops._common import location

        warn(f"{location()}: {name} is the variable of an enclosing loop; assigned inside an if or an inner loop, "
             f"its new value lasts until the end of that block, and after it {name} is the loop's value again (in "
             f"Python the new value would stay): assign a new name (j = {name} + ...) and use it", LoopRebindingWarning)


def _visit_assign(previous: Any, self: Any, node: Any) -> Any:
    from tvm.script.parser.core import doc

    targets = node.targets
    for target in targets:  # i = ..., and i, q = ... (tuple targets)
        for name in ([target] if isinstance(target, doc.Name) else getattr(target, "elts", [])):
            if isinstance(name, doc.Name):
                _warn_if_nested(self, name.id)
    if len(targets) != 1 or not isinstance(targets[0], doc.Name) or not _is_loop_var(self, targets[0].id):
        return previous(self, node)
    with assign_hook(self, targets[0], lambda bound: bound.update(allow_shadowing=True)):
        return previous(self, node)  # only this statement's target may shadow


def _visit_aug_assign(previous: Any, self: Any, node: Any) -> Any:
    from tvm.script.parser.core import doc

    if isinstance(node.target, doc.Name):
        _warn_if_nested(self, node.target.id)
    if not isinstance(node.target, doc.Name) or not _is_loop_var(self, node.target.id):
        return previous(self, node)
    with assign_hook(self, node.target, lambda bound: bound.update(allow_shadowing=True)):
        return previous(self, node)  # i += 4 is i = i + 4


def _visit_ann_assign(previous: Any, self: Any, node: Any) -> Any:
    from tvm.script.parser.core import doc

    if isinstance(node.target, doc.Name):
        _warn_if_nested(self, node.target.id)  # i: T.int32 = i + 4
    return previous(self, node)


def install() -> None:
    """Wrap TVMScript's ``tirx`` assignment visitors (``=`` and ``+=`` & co.) with loop-variable
    rebinding (idempotent)."""
    wrap_visitor("Assign", _visit_assign)
    wrap_visitor("AugAssign", _visit_aug_assign)
    wrap_visitor("AnnAssign", _visit_ann_assign)
