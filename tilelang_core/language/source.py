"""Finding a kernel's source where Python keeps none (``python -c``, the prompt, stdin).

TVMScript parses a kernel from its *source text* (``inspect.getsource``). Python keeps no source
for code given with ``python -c "..."``, typed at the interactive prompt, or read from standard
input; ``inspect`` then fails with a bare ``OSError: could not get source code``.
:func:`ensure_source` recovers the text where the process still has it and puts it into
``linecache`` under the code's file name, which is where ``inspect`` (and so TVMScript) looks:

- ``python -c CODE``: ``CODE`` is still in ``sys.orig_argv``;
- the interactive prompt: readline's history holds the lines typed;
- ``python < file.py`` (standard input is a regular file): the file is read again.

A pipe (``cat k.py | python -``, a shell heredoc) is consumed by Python before the program
runs; for that, and any other case with nothing to recover, :func:`ensure_source` raises a
:class:`~tilelang_core.errors.KernelDefinitionError` that says where kernels can be defined.
"""

from __future__ import annotations

import linecache
import os
import re
import stat
import sys
from typing import Any, Callable, Optional

from ..errors import KernelDefinitionError

__all__ = ["ensure_source"]


def ensure_source(fn: Any, what: str = "kernel") -> None:
    """Make ``inspect.getsource(fn)`` work, or raise a clear error.

    :param fn: a Python function (a kernel body, a ``T.macro``, an ``@tilelang.jit`` function).
    :param what: how the error names ``fn`` (``"kernel"``, ``"macro"``).
    :raises KernelDefinitionError: the source is not available anywhere in this process.
    """
    code = getattr(fn, "__code__", None)
    if code is None:
        return
    filename = code.co_filename
    name = getattr(fn, "__name__", code.co_name)
    lines = linecache.getlines(filename)
    if lines and _defines(lines, code.co_firstlineno, name):
        return
    if not (filename.startswith("<") and filename.endswith(">")):
        return  # a real file that inspect reads (or reports on) itself
    for recover in _RECOVERERS.get(filename, ()):
        text = recover(code, name)
        if text is not None:
            recovered = text.splitlines(keepends=True)
            if recovered and not recovered[-1].endswith("\n"):
                recovered[-1] += "\n"
            linecache.cache[filename] = (len(text), None, recovered, filename)
            return
    raise KernelDefinitionError(_where_message(what, name, filename))


def _defines(lines: list[str], first_line: int, name: str) -> bool:
    """Whether ``lines`` has, from line ``first_line`` on, the decorators and ``def name``."""
    pattern = re.compile(rf"^\s*(async\s+)?def\s+{re.escape(name)}\s*[(\[]")
    index = first_line - 1
    while 0 <= index < len(lines):
        text = lines[index]
        if pattern.match(text):
            return True
        stripped = text.strip()
        if not (stripped.startswith("@") or stripped == "" or stripped.startswith("#") or _continues(lines, index)):
            return False
        index += 1
    return False


def _continues(lines: list[str], index: int) -> bool:
    """Whether line ``index`` is inside a decorator call spread over several lines."""
    depth = 0
    for text in lines[: index + 1]:
        depth += text.count("(") - text.count(")")
    return depth > 0


# -- where the text can come from ----------------------------------------------------------


def _from_command_line(code: Any, name: str) -> Optional[str]:
    """``python -c CODE``: the text is the argument after ``-c`` of the interpreter."""
    argv = getattr(sys, "orig_argv", None)
    if not argv or sys.argv[:1] != ["-c"] or "-c" not in argv:
        return None
    index = argv.index("-c")
    if index + 1 >= len(argv):
        return None
    text = argv[index + 1]
    return text if _defines(text.splitlines(keepends=True), code.co_firstlineno, name) else None


def _from_stdin_file(code: Any, name: str) -> Optional[str]:
    """``python < file.py``: standard input is a regular file that can be read again."""
    if hasattr(sys, "ps1"):
        return None
    try:
        info = os.fstat(0)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_size > 64 * 1024 * 1024:
        return None
    try:
        data = os.pread(0, info.st_size, 0)
    except OSError:
        return None
    text = data.decode("utf-8", errors="replace")
    return text if _defines(text.splitlines(keepends=True), code.co_firstlineno, name) else None


def _from_prompt_history(code: Any, name: str) -> Optional[str]:
    """The interactive prompt: the statement that defined ``name``, from readline's history.

    Each statement typed at the prompt is compiled on its own, its first line being line 1, so
    the text is that statement: its first line has no indentation, the following lines do.
    """
    if not hasattr(sys, "ps1"):
        return None
    readline = sys.modules.get("readline")
    if readline is None:
        return None
    try:
        history = [readline.get_history_item(i) or "" for i in range(1, readline.get_current_history_length() + 1)]
    except Exception:  # noqa: BLE001 - no usable history: nothing to recover
        return None
    def top_level(line: str) -> bool:
        return bool(line.strip()) and not line[:1].isspace()

    # a statement starts at an unindented line, unless that line follows a decorator line
    starts = [
        i for i, line in enumerate(history) if top_level(line) and not (i and history[i - 1].startswith("@"))
    ]
    for start in reversed(starts):
        block = [history[start]]
        for line in history[start + 1 :]:
            if top_level(line) and not _is_clause(line) and not block[-1].startswith("@"):
                break
            block.append(line)
        lines = [line + "\n" for line in block]
        if _defines(lines, code.co_firstlineno, name):
            return "".join(lines)
    return None


def _is_clause(line: str) -> bool:
    return bool(re.match(r"(else|elif|except|finally)\b", line))


_RECOVERERS: dict[str, tuple[Callable[[Any, str], Optional[str]], ...]] = {
    "<string>": (_from_command_line,),
    "<stdin>": (_from_prompt_history, _from_stdin_file),
}


def _where_message(what: str, name: str, filename: str) -> str:
    if filename == "<stdin>":
        origin = "code read from standard input through a pipe (for example a shell heredoc)"
    elif filename == "<string>":
        origin = "a string compiled with exec()/compile()"
    else:
        origin = f"code without a source file ({filename})"
    return (
        f"{what} {name!r} is defined in {origin}, for which Python keeps no source text; kernels are parsed "
        "from their source, so define them in a .py file (a module or a script run as 'python file.py' or "
        "'python < file.py'), with 'python -c', at the interactive prompt, or in a notebook cell"
    )
