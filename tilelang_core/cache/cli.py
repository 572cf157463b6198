"""``tilelang cache info``, ``tilelang cache clear`` and ``tilelang cache prune``.

Exit status: 0 when all is well; 1 when the cache directory cannot be one (a file, a link in a
loop or to nothing) or something could not be removed (each such path is named on stderr, with why).
"""

from __future__ import annotations

import argparse
import json


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover


def _cmd_info(args: argparse.Namespace) -> int:
    from ..cli import one_line
    from . import info

    data = _info_or_unusable(info)
    data.setdefault("not_private", _not_private())
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    state = " (disabled by TILELANG_DISABLE_CACHE)" if data["disabled"] else ""
    print(f"location: {one_line(data['location'])}{state}")
    for problem in ("not_a_cache", "not_private"):
        if data.get(problem):
            print(f"warning:  {one_line(data[problem])}")
    for problem in data.get("problems", []):  # kernels/, tmp/ or locks/ unusable
        print(f"warning:  {one_line(problem)}")
    print(f"entries:  {data['entries']}")
    print(f"size:     {_human(data['bytes'])}")
    for name, row in sorted(data["backends"].items()):
        print(f"  {name:<24} {row['entries']:>6} entries  {_human(row['bytes']):>10}{_row_note(name, row)}")
    junk = data.get("junk", [])
    if junk:
        print(f"junk:     {len(junk)} item{'s' if len(junk) != 1 else ''} the cache did not make "
              f"(`tilelang cache clear` unlinks links, keeps files and folders)")
        for item in junk:
            print(f"  {one_line(item['path'])} ({item['kind']})")
    return 0


def _info_or_unusable(info) -> dict:
    """``info()``, or, when the cache directory's path cannot even be looked at (a name too long for
    the system), the report of an empty cache whose ``not_a_cache`` says why.

    Before, ``tilelang cache info`` ended with a raw ``[Errno 36] File name too long`` there; now
    it shows the location and the problem as a warning, like for a path that is a file.
    """
    from . import cache_dir
    from .location import cache_disabled
    from .ownership import not_a_directory

    try:
        return info()
    except OSError:
        reason = not_a_directory(cache_dir())
        if reason is None:
            raise
    return {"location": str(cache_dir()), "exists": False, "not_a_cache": reason, "disabled": cache_disabled(),
            "entries": 0, "bytes": 0, "backends": {}, "memory_entries": 0, "junk": [], "problems": []}


def _not_private() -> "str | None":
    """Why the cache directory is refused as one others could write to or redirect (what ``clear``,
    ``prune`` and compiling raise as a CacheError, e.g. "chmod 700 ..."), else None.

    Before, ``tilelang cache info`` said nothing about a world-writable cache folder that every
    other command refuses; now it shows the same problem as a warning.
    """
    from ..errors import CacheError
    from . import cache_dir
    from .location import check_private

    directory = cache_dir()
    try:
        if not directory.is_dir():
            return None
        check_private(directory)
    except CacheError as exc:
        return str(exc)
    except OSError:  # a file, a name too long, ...: not_a_cache says so
        return None
    return None


def _row_note(name: str, row: dict) -> str:
    """What ``tilelang cache info`` says after a backend's row: source compiled at load, a backend
    not installed (or of another version), entries another tilelang-core wrote, corrupt entries."""
    note = ""
    if row.get("compiled_at_load"):
        note = f"  ({row['compiled_at_load']} saved as source: compiled again when loaded)"
    if row.get("other_core"):
        return note + ("  (not corrupt: another tilelang-core wrote them and may load them, this one never does; "
                       "`tilelang cache prune` removes them only when unused for --days)")
    if name == "(unreadable)":
        return note + "  (corrupt: never loaded; `tilelang cache prune` removes them)"
    version = name.rsplit(" ", 1)[-1]
    if row.get("installed") is None:
        note += "  (not installed: never loaded; `tilelang cache prune` removes them)"
    elif row.get("installed") != version:
        note += f"  (version {row['installed']} is installed: never loaded; `tilelang cache prune` removes them)"
    return note


def _unusable(directory) -> bool:
    """Print why ``directory`` cannot be the cache (it is a file, or a link in a loop or to nothing)
    to stderr; whether it cannot."""
    import sys

    from ..cli import one_line
    from .ownership import not_a_directory

    reason = not_a_directory(directory)
    if reason is not None:
        print(f"error: {one_line(reason)}", file=sys.stderr)
    return reason is not None


def _failed(report: dict, command: str) -> int:
    """Print to stderr what ``report`` says could not be removed; the exit status (1 if anything)."""
    import sys

    from ..cli import one_line

    failed = report.get("failed", [])
    for item in failed:
        print(f"error: {one_line(item['error'])}", file=sys.stderr)
    if failed:
        print(f"error: {len(failed)} item{'s' if len(failed) != 1 else ''} could not be removed (above): make "
              f"the folders named writable (`chattr -i` if they are immutable, a read-write mount) and run "
              f"`tilelang cache {command}` again", file=sys.stderr)
    return 1 if failed else 0


def _cmd_clear(args: argparse.Namespace) -> int:
    from ..cli import one_line
    from . import cache_dir, clear_report

    if _unusable(cache_dir()):
        return 1
    report = clear_report()
    removed = report["entries"]
    print(f"removed {removed} cached kernel{'s' if removed != 1 else ''} from {one_line(cache_dir())}")
    tuned = report.get("tuning_records", 0)
    if tuned:
        print(f"removed {tuned} stored autotuning result{'s' if tuned != 1 else ''}")
    for path in report["removed_junk"]:
        print(f"  unlinked {one_line(path)} (not made by the cache; not followed)")
    for path in report["kept"]:
        print(f"  kept {one_line(path)} (the cache did not make it)")
    for item in report.get("in_use", []):
        print(f"  kept {one_line(item['path'])} ({item['why']})")
    return _failed(report, "clear")


def _cmd_prune(args: argparse.Namespace) -> int:
    from ..cli import one_line
    from . import cache_dir, prune_report

    if _unusable(cache_dir()):
        return 1
    report = prune_report(args.days)
    total = sum(report[why] for why in ("unused", "not_installed", "unreadable"))
    print(f"removed {total} cached kernel{'s' if total != 1 else ''} from {one_line(cache_dir())}: {report['unused']} "
          f"not used in {args.days:g} days, {report['not_installed']} of a backend not installed (or of another "
          f"version), {report['unreadable']} unreadable")
    kept = report.get("other_core_kept", 0)
    if kept:
        print(f"kept {kept} cached kernel{'s' if kept != 1 else ''} of another tilelang-core (used in the last "
              f"{args.days:g} days)")
    return _failed(report, "prune")


def _days(text: str) -> float:
    from ..env_numbers import number_in_range

    try:
        return number_in_range(text, name="--days", unit="days", zero_allowed=True, maximum=None,
                               remedy="pass such a number, for example --days 30 (the default)")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_cache_commands(subparsers: "argparse._SubParsersAction") -> None:
    """Register ``tilelang cache info [--json]``, ``tilelang cache clear`` and ``tilelang cache prune [--days N]``."""
    cache = subparsers.add_parser("cache", help="inspect or clear the kernel cache")
    csub = cache.add_subparsers(dest="cache_command", required=True)
    info = csub.add_parser("info", help="location, number of entries, size per backend")
    info.add_argument("--json", action="store_true", help="machine-readable output")
    info.set_defaults(func=_cmd_info)
    clear = csub.add_parser("clear", help="remove every cached kernel")
    clear.set_defaults(func=_cmd_clear)
    prune = csub.add_parser("prune", help="remove cached kernels not used lately or of backends not installed")
    prune.add_argument("--days", type=_days, default=30.0, metavar="N",
                       help="remove entries neither saved nor loaded in the last N days (default 30)")
    prune.set_defaults(func=_cmd_prune)
