"""Line numbers of source lines, for tests that check the ``file:line`` an error message names.

Three ways to find the line a kernel statement is on, so that a test keeps working when lines
above it move:

- :func:`marked_line`: the one line ending with a ``# <marker>`` comment;
- :func:`line_containing`: the first line containing a text (lines that look it up are skipped);
- :func:`line_in_function`: the first line of a function's source containing a text.

:func:`message_at` checks the `file:line: ` prefix of an error against a marked line.
"""

from __future__ import annotations

import inspect
import pathlib
from typing import Callable, Union

PathLike = Union[str, pathlib.Path]

#: A line containing one of these is a lookup of a line, not the line looked up.
_LOOKUPS = ("_line_of(", "marked_line(", "line_containing(", "line_in_function(")


def _lines(path: PathLike) -> list[str]:
    return pathlib.Path(path).read_text().splitlines()


def marked_line(path: PathLike, marker: str) -> int:
    """The 1-based number of the only line of ``path`` that ends with ``# <marker>``."""
    hits = [n for n, text in enumerate(_lines(path), start=1) if text.rstrip().endswith(f"# <{marker}>")]
    assert len(hits) == 1, f"{len(hits)} lines of {path} end with '# <{marker}>'"
    return hits[0]


def line_containing(path: PathLike, text: str) -> int:
    """The 1-based number of the first line of ``path`` containing ``text``, skipping the lines
    that look a line up (``_line_of("...")`` and the functions of this module)."""
    for number, line in enumerate(_lines(path), start=1):
        if text in line and not any(lookup in line for lookup in _LOOKUPS):
            return number
    raise AssertionError(f"no line of {path} contains {text!r}")


def line_in_function(fn: Callable, text: str, *, at_end: bool = False) -> int:
    """The 1-based line number (in its file) of the first line of ``fn``'s source that contains
    ``text``, or, with ``at_end=True``, that ends with it."""
    lines, first = inspect.getsourcelines(fn)
    for offset, line in enumerate(lines):
        if (line.rstrip().endswith(text) if at_end else text in line):
            return first + offset
    raise AssertionError(f"no line of {fn.__qualname__} contains {text!r}")


def message_at(path: PathLike, marker: str, build: Callable[[], object], error: type = Exception,
               raised: type = Exception) -> str:
    """The message of the error that ``build()`` raises, without its ``file:line: `` prefix, after
    checking that the error is a ``raised`` that is also an ``error`` and that the prefix names
    the line of ``path`` marked ``# <marker>``."""
    import pytest

    with pytest.raises(raised) as info:
        build()
    assert isinstance(info.value, error), repr(info.value)
    text = str(info.value)
    prefix = f"{pathlib.Path(path).resolve()}:{marked_line(path, marker)}: "
    assert text.startswith(prefix), text
    return text[len(prefix):]
