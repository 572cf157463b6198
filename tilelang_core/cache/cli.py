"""``tilelang cache info`` and ``tilelang cache clear``."""

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
    from . import info

    data = info()
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    state = " (disabled by TILELANG_DISABLE_CACHE)" if data["disabled"] else ""
    print(f"location: {data['location']}{state}")
    if data.get("not_a_cache"):
        print(f"warning:  {data['not_a_cache']}")
    print(f"entries:  {data['entries']}")
    print(f"size:     {_human(data['bytes'])}")
    for name, row in sorted(data["backends"].items()):
        note = ""
        if row.get("compiled_at_load"):
            note = f"  ({row['compiled_at_load']} saved as source: compiled again when loaded)"
        version = name.rsplit(" ", 1)[-1]
        if name != "(unreadable)" and row.get("installed") is None:
            note += "  (not installed: never loaded; `tilelang cache prune` removes them)"
        elif name != "(unreadable)" and row.get("installed") != version:
            note += f"  (version {row['installed']} is installed: never loaded; `tilelang cache prune` removes them)"
        print(f"  {name:<24} {row['entries']:>6} entries  {_human(row['bytes']):>10}{note}")
    junk = data.get("junk", [])
    if junk:
        print(f"junk:     {len(junk)} item{'s' if len(junk) != 1 else ''} the cache did not make "
              f"(`tilelang cache clear` unlinks files and links, keeps folders)")
        for item in junk:
            print(f"  {item['path']} ({item['kind']})")
    return 0


def _unusable(directory) -> bool:
    """Print why ``directory`` cannot be the cache (it is a file) to stderr; whether it cannot."""
    import sys

    from .ownership import not_a_directory

    reason = not_a_directory(directory)
    if reason is not None:
        print(f"error: {reason}", file=sys.stderr)
    return reason is not None


def _cmd_clear(args: argparse.Namespace) -> int:
    from . import cache_dir, clear_report

    if _unusable(cache_dir()):
        return 1
    report = clear_report()
    removed = report["entries"]
    print(f"removed {removed} cached kernel{'s' if removed != 1 else ''} from {cache_dir()}")
    tuned = report.get("tuning_records", 0)
    if tuned:
        print(f"removed {tuned} stored autotuning result{'s' if tuned != 1 else ''}")
    for path in report["removed_junk"]:
        print(f"  unlinked {path} (not made by the cache; not followed)")
    for path in report["kept"]:
        print(f"  kept {path} (the cache did not make it)")
    return 0


def _cmd_prune(args: argparse.Namespace) -> int:
    from . import cache_dir, prune

    if _unusable(cache_dir()):
        return 1
    counts = prune(args.days)
    total = sum(counts.values())
    print(f"removed {total} cached kernel{'s' if total != 1 else ''} from {cache_dir()}: {counts['unused']} not used "
          f"in {args.days:g} days, {counts['not_installed']} of a backend not installed (or of another version), "
          f"{counts['unreadable']} unreadable")
    return 0


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
