"""One lock around the core's Python AST construction (kernel parsing).

CPython 3.11 keeps the AST constructor's recursion depth in interpreter-wide state. Two threads
building ASTs at the same time (two ``@tilelang.jit`` specializations compiling in parallel, each
parsing its kernel with TVMScript) can make one of them fail with ``SystemError: AST constructor
recursion depth mismatch`` (CPython gh-106905). TVMScript's parser is not meant to run in two
threads at once either. Every place of the core that parses Python source holds :data:`AST_LOCK`;
it is re-entrant because parsing a kernel parses its macros and nested functions.
"""

from __future__ import annotations

import threading

#: Held while the core parses Python source (``ast.parse``, TVMScript's parser).
AST_LOCK = threading.RLock()
