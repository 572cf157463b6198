"""``tilelang backends check NAME`` and ``tilelang backends new NAME``: the backend author's commands."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
from typing import Any, Union

from ..backends.isolation import output_to_stderr


def add_backend_kit_commands(backends_subparsers: Any) -> None:
    """Add ``check`` and ``new`` under ``tilelang backends``."""
    check = backends_subparsers.add_parser("check", help="run the conformance suite against an installed backend")
    check.add_argument("name", help="the backend's name (as `tilelang backends` lists it)")
    check.add_argument("--target", action="append", default=[], metavar="KIND",
                       help="only this declared target kind (repeatable; default: every declared one)")
    check.add_argument("--check", action="append", default=[], metavar="TEXT",
                       help="only the checks whose name contains TEXT, e.g. 'error:' or 'c:kernel' (repeatable)")
    check.add_argument("--json", action="store_true", default=argparse.SUPPRESS,  # keeps `backends --json check`
                       help="machine-readable output: one object per check (what the backend's hooks print goes "
                            "to stderr)")
    check.set_defaults(func=_cmd_check)
    new = backends_subparsers.add_parser("new", help="write a new backend plugin distribution to start from")
    new.add_argument("name", help="the backend's name: a lowercase identifier, e.g. mybackend")
    new.add_argument("--path", default=".", help="directory to create the distribution in (default: .)")
    new.set_defaults(func=_cmd_new)


def _unique(items: list[str]) -> list[str]:
    """``items`` without repeats, in order: before, ``--target c --target c`` (or a repeated
    ``--check``) ran each check twice ("2 passed" for one check)."""
    return list(dict.fromkeys(items))


def _cmd_check(args: argparse.Namespace) -> int:
    """Run the suite; a backend that is not installed, or a target it does not declare, is a
    usage error (exit status 2; before, 1, as if the backend had failed a check)."""
    from ..errors import BackendNotInstalledError, BackendTargetUnsupportedError
    from .suite import Suite

    args.target, args.check = _unique(args.target), _unique(args.check)
    try:
        suite = Suite(args.name, args.target or None, args.check or None)
    except (BackendNotInstalledError, BackendTargetUnsupportedError) as exc:
        print(f"tilelang: error: {exc}", file=sys.stderr)
        return 2
    with suite:
        return _run_check(args, suite)


def _run_check(args: argparse.Namespace, suite: Any) -> int:
    from ..cli import one_line

    as_json = getattr(args, "json", False)
    quiet = output_to_stderr() if as_json else contextlib.nullcontext()
    with quiet:
        header = f"conformance of {suite.name} ({suite.record.distribution} {suite.record.version})"
        if not as_json:
            print(header, flush=True)
        results = []
        unavailable: dict[str, list] = {}  # target -> [reason, number of checks skipped for it]
        for result in suite.run():
            results.append(result)
            if as_json:
                continue
            gone = unavailable.get(result.target or "")
            if gone and result.status == "skip" and result.reason == gone[0]:
                gone[1] += 1
                continue
            if result.status == "skip" and result.check.endswith(":probe"):
                unavailable[result.target] = [result.reason, 1]
                print(f"SKIP  {result.target}:*  {one_line(result.reason)}", flush=True)
                continue
            reason = f"  {one_line(result.reason)}" if result.reason else ""
            print(f"{result.status.upper():<5} {result.check}{reason}", flush=True)
    if args.check and not results:
        print(f"tilelang: error: no check of {args.name} matches --check {' '.join(args.check)!r}; checks are named like "
              f"'c:error:dtype' (all of them: tilelang backends check {args.name} --json)", file=sys.stderr)
        return 2
    counts = {s: sum(r.status == s for r in results) for s in ("pass", "fail", "skip")}
    if as_json:
        print(json.dumps({"backend": args.name, "counts": counts, "results": [r.to_dict() for r in results]}, indent=1))
    else:
        for target, (reason, count) in unavailable.items():
            print(f"  ({count} checks of target {target!r} skipped: it cannot run here)")
        print(f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped")
    return 1 if counts["fail"] else 0


def _cmd_new(args: argparse.Namespace) -> int:
    """Write the distribution; a name that cannot be used is a usage error (exit status 2; before,
    1, as for a folder in the way, which still is: the command failed)."""
    from ..scaffold import ScaffoldError, check_name, write_backend

    try:
        check_name(args.name)
    except ScaffoldError as exc:
        print(f"tilelang: error: {exc}", file=sys.stderr)
        return 2
    project = write_backend(args.name, args.path)
    print(f"wrote {project}")
    from ..backends import get_registry

    if get_registry().get(args.name) is not None:
        print(f"note: a backend named {args.name!r} is installed already, from another distribution; while both are "
              f"installed, both are listed as broken (two distributions claim one name): rename this one before "
              f"installing it")
    print(f"next: pip install {pip_path(project)} && tilelang backends check {args.name}")
    return 0


def pip_path(project: Union[str, os.PathLike]) -> str:
    """``project`` as a ``pip install`` argument that pip reads as a local folder.

    pip takes an argument without a path separator (``tilelang-backend-mine``) for a package name
    to download from the index, so a relative path gets a leading ``./``; the result is quoted
    for the shell.
    """
    text = os.fspath(project)
    if not os.path.isabs(text) and not text.startswith((os.curdir + os.sep, os.pardir + os.sep)):
        text = os.path.join(os.curdir, text)
    return shlex.quote(text)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(0)
