"""One lock around the core's Python AST construction (kernel parsing).

CPython 3.11 keeps the AST constructor's recursion depth in interpreter-wide state. Two threads
building ASTs at the same time (two ``@tilelang.jit`` specializations compiling in parallel, each
parsing its kernel with TVMScript) can make one of them fail with ``SystemError: AST constructor
recursion depth mismatch`` (CPython gh-106905). TVMScript's parser is not meant to run in two
threads at once either. Every place of the core that parses Python source holds :data:`AST_LOCK`;
it is re-entrant because parsing a kernel parses its macros and nested functions.
"""

from __future__ import annotations

import os
import threading
from typing import Any

#: Held while the core parses Python source (``ast.parse``, TVMScript's parser).
AST_LOCK = threading.RLock()  # a fork child gets it unlocked (_reinit_lock_in_child)


def _reinit_lock_in_child() -> None:
    """``os.register_at_fork`` hook: :data:`AST_LOCK` unlocked again in a child made by ``os.fork()``
    (another thread of the parent may have held it at the fork; the child has only the forking
    thread, so nothing would ever release it there)."""
    if not AST_LOCK._is_owned():  # held by the forking thread itself: it releases it as usual
        AST_LOCK._at_fork_reinit()  # the same object: other modules imported it by name


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_reinit_lock_in_child)


class _LockedAst:
    """The :mod:`ast` module as TVMScript's parser modules see it: ``parse`` holds :data:`AST_LOCK`."""

    def __init__(self, module: Any) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)

    def parse(self, *args: Any, **kwargs: Any) -> Any:
        with AST_LOCK:
            return self._module.parse(*args, **kwargs)


#: TVMScript's modules that call ``ast.parse`` through their module-level ``ast`` (TVM 0.27).
_TVMSCRIPT_MODULES = (
    "tvm.script.parser.core.doc",
    "tvm.script.parser.core.parser",
    "tvm.tirx.script.parser.parser",
    "tvm.tirx.script.parser.entry",
)
#: ``(module, function)`` of TVMScript that import :mod:`ast` locally and parse: wrapped whole.
_TVMSCRIPT_FUNCTIONS = (("tvm.script.parser.core.utils", "_collect_annotation_names"),)


def _locked(function: Any) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        with AST_LOCK:
            return function(*args, **kwargs)

    call.__wrapped__ = function  # type: ignore[attr-defined]
    call.__name__ = getattr(function, "__name__", "call")
    call.__doc__ = getattr(function, "__doc__", None)
    return call


def lock_tvmscript_parsing() -> None:
    """Make TVMScript's own parsing hold :data:`AST_LOCK` too.

    A kernel factory may use TVM's ``T.prim_func`` (``tvm.script.tirx``) directly; two threads
    specialising ``@tilelang.jit`` functions then parsed at once outside the lock and failed with
    CPython's ``SystemError`` now and then. Only those modules' name ``ast`` is replaced (by a
    proxy whose ``parse`` takes the lock); the :mod:`ast` module itself is untouched.
    """
    import ast
    import importlib

    for name in _TVMSCRIPT_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:  # another TVM layout: nothing to lock
            continue
        if getattr(module, "ast", None) is ast:
            module.ast = _LockedAst(ast)
    for name, attribute in _TVMSCRIPT_FUNCTIONS:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        function = getattr(module, attribute, None)
        if function is not None and not hasattr(function, "__wrapped__"):
            setattr(module, attribute, _locked(function))
