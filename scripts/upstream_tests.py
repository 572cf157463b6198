#!/usr/bin/env python3
"""Measure TileLang-Core against upstream TileLang's own tests (a developer tool; not part of CI).

Upstream's tests in ``testing/python/{cpu,llvm,language,jit,kernel,issue}`` (or the folders named
with ``--folders``) are run twice on this CPU-only machine with upstream's own installed
``tilelang``, to find the tests that pass there (the denominator), then with TileLang-Core. Nothing
of upstream is copied into this repository: the test files are read from an upstream checkout and
written, at run time, into two trees under ``--out``:

- ``trees/unchanged``: the files as they are;
- ``trees/adapted``: the files after the mechanical CUDA-to-CPU rewrite of docs/compatibility.md
  ("How this is measured"; the rules are in scripts/upstream_tests_adapt.py), each test running
  inside ``with tvm.target.Target("c")``.

A test that passes unchanged upstream counts in its unchanged form, otherwise in its adapted form
if that passes upstream; tests that pass in neither form are not counted. Each test has a timeout
(``--timeout``; scripts/upstream_tests_conftest.py is the plugin that enforces it and records
results). Upstream's results are cached per test file (``--cache-dir``), keyed by the file's text,
the rewrite rules, the plugin and upstream's ``tilelang``/``torch`` versions, so a later run only
reruns TileLang-Core.

Needs (none of it is in CI):

1. an upstream checkout with ``testing/python`` and ``examples`` (a few tests import upstream's
   ``examples`` package; the trees link it), e.g. a ``--no-checkout`` clone of tile-ai/tilelang with
   ``git sparse-checkout set --no-cone /testing/python/ /examples/`` and ``git checkout <tag>``;
2. a Python for upstream: ``python -m venv V && V/bin/pip install tilelang==<release> torch==<version>
   pytest pytest-xdist``, with torch's CPU wheel (the release should match the checkout's tests);
3. a Python for TileLang-Core with ``pytest`` and ``pytest-xdist`` (the project venv). Choose the
   source tree it imports with ``--ours-tree`` (prepended to ``PYTHONPATH``, after any
   ``--ours-pythonpath``), or pass as ``--ours-python`` a wrapper script that sets ``PYTHONPATH``.

Run::

    python scripts/upstream_tests.py --upstream-src UPSTREAM --upstream-python V/bin/python \\
        --ours-python .venv/bin/python --ours-tree . --out /tmp/upstream-run

    # one folder or a few files only (upstream's results are cached per file either way):
    python scripts/upstream_tests.py ... --folders cpu language --files '*atomic*'

    # recount from the last run's results in --out without running anything of ours again:
    python scripts/upstream_tests.py ... --reuse-ours

It prints, per folder, "passed here / passing upstream", and writes to ``--out``:
``summary.txt``/``summary.json`` (the counts, the upstream commit, the tree tested),
``failing.txt`` (one line per counted test that does not pass here: nodeid, form, status, message),
``ours-adapted.json``/``ours-unchanged.json``/``upstream.json`` (every test's status) and ``logs/``.
"raw adapted" is the number of adapted tests passing here, whether or not they pass upstream.
The pytest runs are ``nice``d and use ``-n 2`` (pytest-xdist) unless told otherwise; upstream's two
runs take about half an hour on two cores, TileLang-Core's about fifteen minutes.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from upstream_tests_adapt import adapt_source, rules_fingerprint  # noqa: E402

FOLDERS = ("cpu", "llvm", "language", "jit", "kernel", "issue")
TESTS = "testing/python"
CONFTEST = HERE / "upstream_tests_conftest.py"
#: Bumped when the way results are produced changes without the rules or the plugin changing.
HARNESS_VERSION = "1"


# --- the trees ---------------------------------------------------------------------------------------

def find_test_files(src: Path, folders, patterns) -> list[str]:
    """Test files (``cpu/test_x.py``, relative to ``testing/python``) in ``folders`` of the checkout
    ``src``, narrowed to those matching one of the ``patterns`` (fnmatch on that relative path or the
    file name) when any are given."""
    found = []
    for folder in folders:
        base = src / TESTS / folder
        if not base.is_dir():
            raise SystemExit(f"--upstream-src: {base} is not a folder; expected an upstream checkout "
                             f"with {TESTS}/{folder}")
        for path in sorted(base.rglob("test_*.py")):
            rel = path.relative_to(src / TESTS).as_posix()
            if not patterns or any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(path.name, p) for p in patterns):
                found.append(rel)
    return found


def build_tree(dest: Path, src: Path, folders, adapted: bool) -> None:
    """Write ``folders`` of upstream's tests under ``dest/testing/python`` (adapted or as they are),
    with the harness's conftest and pytest.ini at ``dest`` and upstream's ``examples`` linked there."""
    if dest.exists():
        shutil.rmtree(dest)
    for folder in folders:
        for path in sorted((src / TESTS / folder).rglob("*")):
            if path.is_dir() or "__pycache__" in path.parts:
                continue
            out = dest / TESTS / path.relative_to(src / TESTS)
            out.parent.mkdir(parents=True, exist_ok=True)
            if adapted and path.suffix == ".py":
                out.write_text(adapt_source(path.read_text())[0])
            else:
                shutil.copyfile(path, out)
    shutil.copyfile(CONFTEST, dest / "conftest.py")
    (dest / "pytest.ini").write_text("[pytest]\naddopts =\n")
    if (src / "examples").is_dir():
        (dest / "examples").symlink_to((src / "examples").resolve(), target_is_directory=True)


# --- running pytest ---------------------------------------------------------------------------------

def run_pytest(python: str, tree: Path, files, *, env: dict, name: str, out: Path, args,
               target: str | None = None, select=None) -> dict:
    """Run ``files`` of ``tree`` with ``python -m pytest`` and return ``{nodeid: (status, message)}``
    (nodeids relative to ``testing/python``; collection errors under the file's path)."""
    results = out / f"{name}.jsonl"
    results.unlink(missing_ok=True)
    env = dict(env, UPSTREAM_TESTS_RESULTS=str(results), UPSTREAM_TESTS_TIMEOUT=str(args.timeout),
               PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1")
    env.pop("UPSTREAM_TESTS_TARGET", None)
    env.pop("UPSTREAM_TESTS_SELECT", None)
    if target:
        env["UPSTREAM_TESTS_TARGET"] = target
    if select is not None:
        chosen = out / f"{name}.select"
        chosen.write_text("".join(f"{TESTS}/{nodeid}\n" for nodeid in sorted(select)))
        env["UPSTREAM_TESTS_SELECT"] = str(chosen)
        files = sorted({nodeid.split("::")[0] for nodeid in select})
    if not files:
        return {}
    cmd = ["nice", "-n", str(args.nice), python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           "-p", "no:randomly", "-n", str(args.jobs), "--max-worker-restart=100000",
           "--continue-on-collection-errors", *[f"{TESTS}/{f}" for f in files]]
    (out / "logs").mkdir(exist_ok=True)
    log = out / "logs" / f"{name}.log"
    started = time.monotonic()
    print(f"[{time.strftime('%H:%M:%S')}] {name}: {len(files)} files ({python})", flush=True)
    with open(log, "w") as sink:
        sink.write(" ".join(cmd) + "\n\n")
        sink.flush()
        run = subprocess.run(cmd, cwd=tree, env=env, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    print(f"[{time.strftime('%H:%M:%S')}] {name}: done in {time.monotonic() - started:.0f} s, log {log}", flush=True)
    if run.returncode == PYTEST_INTERNAL_ERROR:
        print(f"[{time.strftime('%H:%M:%S')}] {name}: pytest stopped with an internal error, so the tests after "
              f"it did not run (see the log); these results are incomplete", flush=True)
        return IncompleteResults(read_results(results))
    return read_results(results)


#: pytest's exit status when it stopped on an internal error (``pytest.ExitCode.INTERNAL_ERROR``).
PYTEST_INTERNAL_ERROR = 3


class IncompleteResults(dict):
    """The results of a pytest run that stopped early: counted, never cached."""


#: When a test has several reports, the worst decides: a timeout over a failure over a skip over a pass.
_RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3, "timeout": 4}


def read_results(path: Path) -> dict:
    """Fold the plugin's JSON lines into one ``(status, message)`` per nodeid."""
    merged: dict = {}
    if not path.exists():
        return merged
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        nodeid = record["nodeid"]
        nodeid = nodeid[len(TESTS) + 1:] if nodeid.startswith(TESTS + "/") else nodeid
        status = record["outcome"]
        if status == "failed" and record["when"] in ("setup", "teardown"):
            status = "error" if record["when"] == "setup" else "failed"
        old = merged.get(nodeid)
        if old is None or _RANK[status] > _RANK[old[0]]:
            merged[nodeid] = (status, record.get("message", ""))
    return merged


# --- upstream results, cached per file ---------------------------------------------------------------

def probe_python(python: str, env: dict, code: str, failure: str) -> str:
    """The last line ``code`` prints when ``python -c code`` runs outside any checkout; exits with
    ``failure`` and the end of its stderr when it fails."""
    done = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          cwd=os.path.abspath(os.sep))
    if done.returncode != 0:
        raise SystemExit(f"{failure}:\n{done.stderr[-2000:]}")
    return done.stdout.strip().splitlines()[-1]


def python_identity(python: str, env: dict) -> str:
    """``tilelang`` and ``torch`` versions and where ``tilelang`` is, as ``python`` sees them."""
    return probe_python(python, env, "import tilelang, torch; print(tilelang.__version__, torch.__version__, "
                        "tilelang.__file__)", f"{python} cannot import tilelang and torch")


def file_cache_key(src: Path, rel: str, identity: str, timeout: float) -> str:
    digest = hashlib.sha256()
    for part in (HARNESS_VERSION, rel, (src / TESTS / rel).read_text(), rules_fingerprint(),
                 CONFTEST.read_text(), identity, f"{timeout:g}"):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()[:24]


def upstream_results(src: Path, files, trees: dict, env: dict, identity: str, cache: Path, out: Path, args) -> dict:
    """``{"unchanged": {...}, "adapted": {...}}`` upstream's results for ``files``: cached ones from
    ``cache``, the others run now (both forms) and cached."""
    cache.mkdir(parents=True, exist_ok=True)
    keys = {rel: file_cache_key(src, rel, identity, args.timeout) for rel in files}
    merged: dict = {"unchanged": {}, "adapted": {}}
    missing = []
    for rel, key in keys.items():
        entry = cache / f"{key}.json"
        if entry.exists() and not args.refresh_upstream:
            data = json.loads(entry.read_text())
            for form in merged:
                merged[form].update({k: tuple(v) for k, v in data[form].items()})
        else:
            missing.append(rel)
    print(f"upstream: {len(files) - len(missing)} files cached, {len(missing)} to run", flush=True)
    if missing:
        fresh = {form: run_pytest(args.upstream_python, trees[form], missing, env=env, name=f"upstream-{form}",
                                  out=out, args=args, target="c" if form == "adapted" else None)
                 for form in ("unchanged", "adapted")}
        complete = not any(isinstance(results, IncompleteResults) for results in fresh.values())
        for rel in missing:
            data = {form: {k: v for k, v in fresh[form].items() if k == rel or k.startswith(rel + "::")}
                    for form in fresh}
            if complete:
                (cache / f"{keys[rel]}.json").write_text(json.dumps(data, indent=0))
            for form in merged:
                merged[form].update(data[form])
    return merged


# --- counting ---------------------------------------------------------------------------------------

def denominator(upstream: dict) -> dict:
    """``{nodeid: form}`` for every test passing upstream, preferring the unchanged form."""
    counted = {k: "adapted" for k, (status, _) in upstream["adapted"].items() if status == "passed" and "::" in k}
    counted.update({k: "unchanged" for k, (status, _) in upstream["unchanged"].items()
                    if status == "passed" and "::" in k})
    return counted


def status_here(nodeid: str, results: dict) -> tuple:
    """This test's ``(status, message)`` in ``results``; a test that was not collected takes its
    file's collection error."""
    if nodeid in results:
        return results[nodeid]
    rel = nodeid.split("::")[0]
    if rel in results:
        status, message = results[rel]
        raised = [line[1:].strip() for line in message.splitlines() if line.startswith("E ")]
        return "error", f"collection error: {' '.join(raised) or message}"
    return "not run", "not collected here"


def folder_of(nodeid: str) -> str:
    return nodeid.split("/")[0]


def tree_identity(python: str, env: dict) -> str:
    """Which ``tilelang`` the Python for TileLang-Core imports, with its git commit where it has one."""
    root = probe_python(python, env, "import tilelang, os; "
                        "print(os.path.dirname(os.path.dirname(os.path.realpath(tilelang.__file__))))",
                        f"--ours-python {python} cannot import tilelang")
    head = subprocess.run(["git", "-C", root, "log", "-1", "--format=%h %s"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True)
    commit = head.stdout.strip()[:100] if head.returncode == 0 else "no git commit"
    return f"{root} at {commit}{' (with uncommitted changes)' if dirty.stdout.strip() else ''}"


def upstream_commit(src: Path) -> str:
    done = subprocess.run(["git", "-C", str(src), "log", "-1", "--format=%H %ad %s", "--date=short"],
                          capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else "unknown (not a git checkout)"


def write_report(out: Path, counted: dict, ours_adapted: dict, ours_unchanged: dict, files, folders,
                 header: list) -> list:
    """Count, per folder, the tests passing here among those passing upstream; write ``failing.txt``,
    ``summary.txt`` and ``summary.json`` to ``out`` and return the summary's lines."""
    selected = set(files)
    ours_adapted = {k: v for k, v in ours_adapted.items() if k.split("::")[0] in selected}
    per_folder = {folder: [0, 0] for folder in folders}
    failing = []
    for nodeid, form in sorted(counted.items()):
        status, message = status_here(nodeid, ours_unchanged if form == "unchanged" else ours_adapted)
        per_folder[folder_of(nodeid)][1] += 1
        if status == "passed":
            per_folder[folder_of(nodeid)][0] += 1
        else:
            failing.append(f"{nodeid}\t{form}\t{status}\t{' '.join(message.split())[:400]}")
    raw = sum(1 for k, (status, _) in ours_adapted.items() if status == "passed" and "::" in k)
    passed, total = sum(p for p, _ in per_folder.values()), sum(t for _, t in per_folder.values())
    lines = [*header, "", "folder     passed here / passing upstream"]
    lines += [f"{folder:10s} {p}/{t}" for folder, (p, t) in per_folder.items()]
    lines += [f"{'total':10s} {passed}/{total}",
              f"raw adapted passing here: {raw} (of {sum(1 for k in ours_adapted if '::' in k)} adapted tests run)",
              f"failing list: {out / 'failing.txt'}"]
    (out / "failing.txt").write_text("".join(line + "\n" for line in failing))
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    (out / "summary.json").write_text(json.dumps({
        "header": header, "folders": {folder: {"passed": p, "upstream": t} for folder, (p, t) in per_folder.items()},
        "total": {"passed": passed, "upstream": total}, "raw_adapted_passing": raw}, indent=1))
    return lines


def clean_environ() -> dict:
    """This process's environment without ``PYTHONPATH`` (each side sets its own) and the plugin's variables."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("UPSTREAM_TESTS_")}


def run_ours(files, trees: dict, counted: dict, out: Path, args) -> tuple:
    """Run TileLang-Core on every adapted test and on the tests counted in their unchanged form;
    return which tree was tested and both runs' results (also written to ``out``)."""
    path = [*args.ours_pythonpath, *([str(args.ours_tree.resolve())] if args.ours_tree else [])]
    ours_env = dict(clean_environ(), TILELANG_CACHE_DIR=str(out / "kernel-cache" / "ours"))
    if path:
        ours_env["PYTHONPATH"] = os.pathsep.join(path)
    tested = tree_identity(args.ours_python, ours_env)
    print(f"ours: {tested}", flush=True)
    ours_adapted = run_pytest(args.ours_python, trees["adapted"], files, env=ours_env, name="ours-adapted",
                              out=out, args=args, target="c")
    unchanged_ids = {k for k, form in counted.items() if form == "unchanged"}
    ours_unchanged = run_pytest(args.ours_python, trees["unchanged"], [], env=ours_env, name="ours-unchanged",
                                out=out, args=args, select=unchanged_ids)
    (out / "ours-adapted.json").write_text(json.dumps(ours_adapted, indent=0))
    (out / "ours-unchanged.json").write_text(json.dumps(ours_unchanged, indent=0))
    return tested, ours_adapted, ours_unchanged


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream-src", type=Path, required=True, help="upstream checkout (has testing/python)")
    parser.add_argument("--upstream-python", required=True, help="Python with upstream's tilelang installed")
    parser.add_argument("--ours-python", help="Python for TileLang-Core (or a wrapper that sets PYTHONPATH)")
    parser.add_argument("--ours-tree", type=Path, help="TileLang-Core source tree to test (prepended to PYTHONPATH)")
    parser.add_argument("--ours-pythonpath", action="append", default=[],
                        help="extra PYTHONPATH entry for TileLang-Core, before --ours-tree (repeatable)")
    parser.add_argument("--out", type=Path, required=True, help="folder for trees, logs and results")
    parser.add_argument("--folders", nargs="+", default=list(FOLDERS),
                        help=f"folders of {TESTS} to run (default: {' '.join(FOLDERS)}); others, such as math "
                             f"or autotune, are measured the same way")
    parser.add_argument("--files", action="append", default=[],
                        help="only test files matching this pattern, e.g. '*atomic*' or 'cpu/*' (repeatable)")
    parser.add_argument("-n", "--jobs", type=int, default=2, help="pytest-xdist workers (default 2)")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per test (default 120)")
    parser.add_argument("--nice", type=int, default=10, help="niceness of the pytest runs (default 10)")
    parser.add_argument("--cache-dir", type=Path,
                        help="upstream results cache (default UPSTREAM_SRC/.upstream-tests-cache)")
    parser.add_argument("--refresh-upstream", action="store_true", help="rerun upstream even where cached")
    parser.add_argument("--upstream-only", action="store_true", help="only compute (and cache) upstream's results")
    parser.add_argument("--reuse-ours", action="store_true",
                        help="do not rerun TileLang-Core: recount from the ours-*.json a previous run left in --out")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs: expected at least 1 (the per-test timeout relies on pytest-xdist workers)")
    if not (args.upstream_only or args.reuse_ours or args.ours_python):
        parser.error("--ours-python is required unless --upstream-only or --reuse-ours is given")

    src = args.upstream_src.resolve()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    files = find_test_files(src, args.folders, args.files)
    if not files:
        parser.error(f"--files {args.files}: no test file in {args.folders} matches")
    trees = {"unchanged": out / "trees" / "unchanged", "adapted": out / "trees" / "adapted"}
    for form, tree in trees.items():
        build_tree(tree, src, args.folders, adapted=form == "adapted")

    up_env = dict(clean_environ(), TILELANG_CACHE_DIR=str(out / "kernel-cache" / "upstream"))
    identity = python_identity(args.upstream_python, up_env)
    upstream = upstream_results(src, files, trees, up_env, identity, args.cache_dir or src / ".upstream-tests-cache",
                                out, args)
    (out / "upstream.json").write_text(json.dumps(upstream, indent=0))
    counted = denominator(upstream)
    if args.upstream_only:
        print(f"upstream: {len(counted)} tests pass ({identity})")
        return 0

    if args.reuse_ours:
        ours_adapted, ours_unchanged = (json.loads((out / f"ours-{form}.json").read_text())
                                        for form in ("adapted", "unchanged"))
        previous = out / "summary.json"
        header = json.loads(previous.read_text()).get("header", []) if previous.exists() else []
        tested = next((line[len("tested: "):] for line in header if line.startswith("tested: ")), "unknown")
    else:
        tested, ours_adapted, ours_unchanged = run_ours(files, trees, counted, out, args)

    lines = write_report(out, counted, ours_adapted, ours_unchanged, files, args.folders, header=[
        f"upstream tests: {src} at {upstream_commit(src)}",
        f"upstream python: {args.upstream_python} ({identity})",
        f"tested: {tested}",
        f"files: {len(files)} in {' '.join(args.folders)}{' matching ' + ' '.join(args.files) if args.files else ''}"])
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
