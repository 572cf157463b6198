"""Source snippets for error messages that point at a kernel line (``--> file:line:col``).

TVMScript's diagnostics, and errors that follow their format, mark the place of the error
with a line ``--> path:line:column``. :func:`enrich_error` adds the source line there (and
its neighbours) to such an exception's message when the message does not already show it, so
that an error raised far from the kernel still shows the user's code.
"""

from __future__ import annotations

import linecache
import re
from typing import Optional

__all__ = ["MARKER_RE", "enrich_error", "source_snippet"]

#: A location marker: ``--> file:line`` or ``--> file:line:col``. The file may contain spaces
#: and a Windows drive colon (``C:\\work\\k.py``): it is everything up to the last ``:line``.
MARKER_RE = re.compile(r"-->\s*(?P<file>.+?):(?P<line>\d+)(?::(?P<col>\d+))?[ \t]*$", re.MULTILINE)


def source_snippet(file: str, line: int, context: int = 1) -> Optional[str]:
    """Lines ``line - context`` .. ``line + context`` of ``file``, numbered, the marked one with ``>``.

    ``None`` when the file cannot be read or has no such line.
    """
    lines = linecache.getlines(file)
    if not (1 <= line <= len(lines)):
        return None
    first, last = max(1, line - context), min(len(lines), line + context)
    width = len(str(last))
    rows = []
    for number in range(first, last + 1):
        mark = ">" if number == line else " "
        rows.append(f"  {mark} {number:>{width}} | {lines[number - 1].rstrip()}")
    return "\n".join(rows)


def enrich_error(exc: BaseException) -> BaseException:
    """Append the source at the exception's first ``--> file:line`` marker to its message; returns ``exc``.

    The exception is changed in place (its ``args``); one without a marker, or whose marked
    line cannot be read, or that already shows that line, is returned unchanged.
    """
    message = str(exc)
    match = MARKER_RE.search(message)
    if match is None:
        return exc
    file, line = match.group("file"), int(match.group("line"))
    snippet = source_snippet(file, line)
    if snippet is None:
        return exc
    wanted = linecache.getline(file, line).strip()
    if wanted and wanted in message:
        return exc
    exc.args = (f"{message}\n{snippet}",) + tuple(exc.args[1:])
    return exc
