"""The ``tilelang`` command line (also ``python -m tilelang``).

Exit codes: 0 when all is well, 1 when an installed backend is broken or incompatible (or a
command failed), 2 on usage errors. A backend that is unavailable here (a missing dependency, no
device) is not a failure. Plugins are loaded with their output sent to stderr and bounded in time
(``TILELANG_PLUGIN_TIMEOUT``), so ``--json`` output stays parseable and a hanging plugin is
listed as broken.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from typing import Any, Optional, Sequence


def one_line(text: Any) -> str:
    """``text`` for a one-line listing: line breaks and tabs become spaces, other control characters
    (an escape sequence that would clear the terminal, a carriage return) are shown escaped."""
    import unicodedata

    out = []
    for ch in str(text).replace("\r\n", "\n"):
        if ch in "\n\t\v\f\u2028\u2029":
            out.append(" ")
        elif ch == "\r":
            out.append("\\r")
        elif unicodedata.category(ch) == "Cc":
            out.append(ch.encode("unicode_escape").decode("ascii"))
        else:
            out.append(ch)
    return "".join(out)


def _backend_rows(registry) -> list[dict]:
    from . import schema

    rows = []
    for record in registry.records():
        row = {
            "name": record.name,
            "distribution": record.distribution,
            "version": record.version,
            "status": record.status,
            "reason": record.reason,
            "description": record.spec.description if record.spec else "",
            "deprecated": schema.to_python(record.spec.deprecated) if record.spec and record.spec.deprecated else None,
            "supersedes": list(record.spec.supersedes) if record.spec else [],
            "targets": {},
            "warnings": list(record.warnings),
        }
        if record.spec is not None and record.status == "ok":
            for kind, cap in record.spec.targets.items():
                availability = registry.probe(record, kind)
                row["targets"][kind] = {
                    "priority": cap.priority,
                    "available": availability.available,
                    "can_build": availability.can_build,
                    "reason": availability.reason,
                }
            row["status"], row["reason"] = record.status, record.reason  # a probe may break it
        rows.append(row)
    return rows


def _print_backends(rows: list[dict]) -> None:
    if not rows:
        print("no execution backends installed (pip install tilelang-backend-<name>)")
        return
    for row in rows:
        release = " ".join(str(p) for p in (row["distribution"], row["version"]) if p) or "unknown distribution"
        head = one_line(f"{row['name']}  ({release})")
        if row["status"] != "ok":
            print(f"{head}  {row['status'].upper()}: {one_line(row['reason'])}")
            continue
        print(f"{head}  {one_line(row['description'])}")
        for warning in row["warnings"]:
            print(f"    WARNING: {one_line(warning)}")
        if row["deprecated"]:
            dep = row["deprecated"]
            repl = f", use {dep['replacement']}" if dep.get("replacement") else ""
            if dep.get("replacement") and dep["replacement"] not in {r["name"] for r in rows}:
                repl += " (not installed)"
            print(one_line(f"    DEPRECATED since {dep['since']}{repl}. {dep.get('message') or ''}".rstrip()))
        if row["supersedes"]:
            print(f"    supersedes: {', '.join(row['supersedes'])}")
        for kind, t in row["targets"].items():
            if t["available"]:
                state = "available"
            elif t.get("can_build"):
                state = f"build only (kernels can be built and exported, not run): {one_line(t['reason'])}"
            else:
                state = f"unavailable: {one_line(t['reason'])}"
            print(f"    {kind:<8} priority {t['priority']:<4} {state}")


def _plugin_output_to_stderr():
    """A context in which what plugins print goes to stderr, at the file-descriptor level.

    Before, only ``sys.stdout`` was swapped while plugin code ran (backends/isolation.py), so a
    probe that ran ``subprocess.run(["cc", "--version"])`` or an import that did ``os.write(1, ...)``
    put its text on stdout ahead of ``tilelang backends --json``, and the JSON could not be parsed.
    Now descriptor 1 points at stderr while plugins load and probe, as in ``backends check --json``.
    """
    from .backends.isolation import output_to_stderr

    return output_to_stderr()


def _cmd_backends(args: argparse.Namespace) -> int:
    from .backends import get_registry

    with _plugin_output_to_stderr():
        registry = get_registry()
        rows = _backend_rows(registry)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        _print_backends(rows)
    return 1 if any(r["status"] in ("broken", "incompatible") for r in rows) else 0


def _cmd_explain(args: argparse.Namespace) -> int:
    from .backends import explain_selection, get_registry

    kind = _target_kind(args.target)
    if kind is None and args.target.strip() == "auto":
        return 2  # _auto_target_kind said why
    if kind is None:
        print(f"tilelang: error: --target {args.target!r} is not a TVM target (a kind such as c, llvm, cuda, metal, "
              f"rocm, or a target string such as 'cuda -arch=sm_90')", file=sys.stderr)
        return 2
    with _plugin_output_to_stderr():
        candidates = explain_selection(kind, get_registry())
    chosen = candidates[0].name if candidates and candidates[0].verdict == "chosen" else None
    if getattr(args, "json", False):
        print(json.dumps({"target": args.target, "kind": kind, "chosen": chosen, "candidates": [c.to_dict() for c in candidates]}, indent=2))
    else:
        means = f" (here: {kind!r})" if args.target.strip() == "auto" else ""
        print(f"target {args.target!r}{means}: " + (f"auto selects {chosen!r}" if chosen else "no available backend"))
        width = max([12, *(len(one_line(c.name)) for c in candidates)])  # a long name shifted the columns
        for c in candidates:
            prio = f"priority {c.priority}" if c.priority is not None else "-"
            print(f"  {one_line(c.name):<{width}} {c.verdict:<12} {prio:<13} {one_line(c.reason)}")
    broken = any(c.verdict in ("broken", "incompatible") for c in candidates)
    return 1 if broken else 0


def _target_kind(text: str) -> Optional[str]:
    """The target kind of ``text`` (``"cuda -arch=sm_90"`` -> ``"cuda"``), or None when TVM knows no such target.

    ``"auto"`` is resolved as ``tilelang.compile`` resolves it (``TILELANG_DEFAULT_TARGET``, else
    the device torch sees, else ``c``); before, ``--target auto`` was refused as "not a TVM target".
    """
    if text.strip() == "auto":
        return _auto_target_kind()
    try:
        from tvm.target import Target

        from .lowering.target import parse_target_string

        return str(Target(parse_target_string(text)).kind.name)
    except Exception:  # noqa: BLE001 - TVM's error for an unknown kind; the caller says what is wrong
        return None


def _auto_target_kind() -> Optional[str]:
    """The kind ``target="auto"`` means here, or None (after saying why on stderr) when
    ``TILELANG_DEFAULT_TARGET`` cannot be understood."""
    from .errors import TargetError
    from .lowering.target import resolve_target

    try:
        return str(resolve_target("auto").kind.name)
    except TargetError as exc:
        print(f"tilelang: error: {exc}", file=sys.stderr)
        return None


def _cmd_schema(args: argparse.Namespace) -> int:
    from .capabilities import backend_spec_json_schema

    print(json.dumps(backend_spec_json_schema(), indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``tilelang`` command."""
    parser = argparse.ArgumentParser(
        prog="tilelang", description="TileLang-Core command line",
        epilog="exit status: 0 when all is well; 1 when an installed backend is broken or incompatible "
               "(`tilelang backends` lists it with the reason) or a command failed; 2 on usage errors. "
               "A backend that is only unavailable here (a missing dependency, no device) is not a failure.")
    sub = parser.add_subparsers(dest="command", required=True)

    backends = sub.add_parser(
        "backends", help="list installed execution backends",
        epilog="exit status: 1 when an installed backend is broken or incompatible (its row says why), else 0.")
    backends.add_argument("--json", action="store_true", help="machine-readable output")
    backends.set_defaults(func=_cmd_backends)
    bsub = backends.add_subparsers(dest="backends_command")
    explain = bsub.add_parser("explain", help="show how 'auto' picks a backend for a target")
    explain.add_argument("--target", required=True, help="TVM target kind, e.g. c, llvm, cuda")
    explain.add_argument("--json", action="store_true", default=argparse.SUPPRESS,  # keeps `backends --json explain`
                         help="machine-readable output")
    explain.set_defaults(func=_cmd_explain)
    schema = bsub.add_parser("schema", help="print the JSON schema of backend capability declarations")
    schema.set_defaults(func=_cmd_schema)
    from .conformance.cli import add_backend_kit_commands

    add_backend_kit_commands(bsub)  # check, new: the backend author's kit

    try:
        from .cache.cli import add_cache_commands
    except ImportError:  # the cache arrives with the kernel-cache issue
        pass
    else:
        add_cache_commands(sub)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``tilelang`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from .errors import TileLangError

    try:
        code = int(args.func(args))
        sys.stdout.flush()  # a pipe closed early shows here, not at the interpreter's exit
    except BrokenPipeError:  # output piped into a pager or `head` that closed early
        return _stdout_closed()
    except (TileLangError, OSError) as exc:  # OSError: a path that cannot be written or read
        print(f"tilelang: error: {exc}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt:  # Ctrl-C: one line, the shell's status for SIGINT
        print("\ntilelang: interrupted", file=sys.stderr)
        return 130
    return code


#: Exit status when the reader of stdout went away: the shell's status for death by SIGPIPE (128 + 13).
BROKEN_PIPE_EXIT = 141


def _stdout_closed() -> int:
    """The reader of stdout closed it early (``tilelang ... | head -1``): exit quietly.

    Before, ``BrokenPipeError`` (an ``OSError``) was caught by the general ``OSError`` branch, so
    the command printed ``tilelang: error: [Errno 32] Broken pipe`` and exited 1; and a pipe that
    closed at the final flush made the interpreter print "Exception ignored ... BrokenPipeError"
    and exit 120. Now stdout is pointed at ``/dev/null`` (so the interpreter's last flush cannot
    fail again), nothing is printed, and the status is :data:`BROKEN_PIPE_EXIT` (141, what a shell
    reports for a program ended by SIGPIPE, as ``cat`` or ``grep`` would be).
    """
    with contextlib.suppress(Exception):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return BROKEN_PIPE_EXIT


def console_main() -> int:
    """The ``tilelang`` console script and ``python -m tilelang``: :func:`main`, then the exit."""
    code = main()
    _exit_past_hung_plugins(code)
    return code


def _exit_past_hung_plugins(code: int) -> None:
    """End the process now when a plugin's loading code is still running in a thread that timed
    out: shutting the interpreter down under it can abort the process (backends/isolation.py)."""
    from .backends.isolation import hung_plugin_threads

    if hung_plugin_threads():
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(console_main())
