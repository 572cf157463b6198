"""Meta-tests: every hook is documented (where declared and in docs/) and exercised by a test; the user
docs' code blocks, language names, module names and environment variables agree with the code."""

from __future__ import annotations

import ast
import builtins
import importlib
import re
import runpy
import symtable
from pathlib import Path
from typing import Optional

import pytest

ROOT = Path(__file__).resolve().parent.parent
GEN = runpy.run_path(str(ROOT / "scripts" / "gen_docs.py"))
HOOKS = GEN["hook_names"]()


def test_there_are_hooks():
    assert {"tilelang_backend_spec", "tilelang_backend_probe", "tilelang_backend_build",
            "tilelang_backend_save", "tilelang_backend_load"} <= set(HOOKS)


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_has_docstring_with_params_and_when_called(hook):
    from tilelang_core import hookspecs

    doc = getattr(hookspecs, hook).__doc__ or ""
    assert len(doc.split()) >= 25, f"{hook} is not documented where it is declared"
    assert "Called" in doc or "Used by" in doc, f"{hook}'s docstring does not say when the core calls it"


def test_generated_docs_are_current():
    assert (ROOT / "docs" / "hooks.md").read_text() == GEN["hooks_markdown"](), "run scripts/gen_docs.py"
    assert (ROOT / "docs" / "capabilities.md").read_text() == GEN["capabilities_markdown"](), "run scripts/gen_docs.py"
    assert (ROOT / "docs" / "backend-conventions.md").read_text() == GEN["conventions_markdown"](), "run scripts/gen_docs.py"


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_is_exercised_by_some_test(hook):
    test_files = list((ROOT / "tests").glob("test_*.py")) + list((ROOT / "plugins").glob("*/tests/test_*.py"))
    users = [f for f in test_files if f.name != Path(__file__).name and hook in f.read_text()]
    assert users, f"no test mentions {hook}"


# --- The user-facing docs against the code: README.md and docs/*.md ---------------------------------

USER_DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Written by scripts/gen_docs.py from the code (checked above); their blocks are signatures.
GENERATED_DOCS = {"hooks.md", "capabilities.md", "backend-conventions.md"}
_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
#: A table row or paragraph line that says a name is absent (docs/compatibility.md, docs/testing.md);
#: compared in lower case. Names with a wildcard (``T.reduce_*``) are not checked.
_ABSENT = ("not provided", "not yet")


def _python_blocks():
    for path in USER_DOCS:
        text = path.read_text()
        for match in _PYTHON_BLOCK.finditer(text):
            yield path, text[: match.start()].count("\n") + 2, match.group(1)


def _defined_and_used(code: str) -> tuple[set, set]:
    """Names a code block binds at module level, and names it reads from module level."""
    top = symtable.symtable(code, "<doc block>", "exec")
    defined = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}
    used: set = set()

    def walk(table):
        for symbol in table.get_symbols():
            if symbol.is_referenced() and (table is top or symbol.is_global()):
                used.add(symbol.get_name())
        for child in table.get_children():
            walk(child)

    walk(top)
    return defined, used


def test_python_blocks_parse_and_define_every_name_they_use():
    """A user copies a block and runs it: it must parse, and every name it reads must come from the
    block itself, an earlier block of the same page, or Python's builtins (blocks of a page run in
    order, like a notebook). Catches examples that call an undefined ``func`` or forget ``import torch``."""
    problems, checked, known, page = [], 0, set(), None
    for path, line, code in _python_blocks():
        if path != page:
            page, known = path, set(dir(builtins))
        try:
            ast.parse(code)
        except SyntaxError as exc:
            problems.append(f"{path.name}:{line + (exc.lineno or 1) - 1}: does not parse: {exc.msg}")
            continue
        checked += 1
        if path.name in GENERATED_DOCS:
            continue
        defined, used = _defined_and_used(code)
        missing = sorted(used - defined - known)
        if missing:
            problems.append(f"{path.name}:{line}: uses {', '.join(missing)}, defined by no earlier block of the page")
        known |= defined
    assert checked >= 20, f"only {checked} python blocks found in README.md and docs/"
    assert not problems, "\n".join(problems)


def _doc_lines():
    for path in USER_DOCS:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if not any(word in line.lower() for word in _ABSENT):
                yield path, number, line


def test_documented_language_names_exist():
    """Every ``T.name`` the docs use (outside a line saying it is not provided) is in ``tilelang.language``."""
    import tilelang.language as T

    seen, problems = set(), []
    for path, number, line in _doc_lines():
        for match in re.finditer(r"(?<![\w.])T\.([A-Za-z_]\w*)(?![\w*])", line):
            seen.add(match.group(1))
            if not hasattr(T, match.group(1)):
                problems.append(f"{path.name}:{number}: T.{match.group(1)} is not in tilelang.language")
    assert len(seen) >= 150, f"only {len(seen)} T.* names found in the docs"
    assert not problems, "\n".join(problems)


def _resolve(dotted: str) -> Optional[str]:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            try:
                obj = getattr(obj, part)
            except AttributeError:
                return f"{'.'.join(parts[:cut])} has no attribute {part!r}"
            except Exception as exc:  # noqa: BLE001 - a lazy attribute that fails is what this test reports
                return f"reading {part!r} raised {type(exc).__name__}: {exc}"
        return None
    return "no such module"


def test_documented_tilelang_names_resolve():
    """Every dotted ``tilelang.x.y`` / ``tilelang_core.x.y`` name in the docs (outside a line saying it is
    not provided) imports or is an attribute: ``tilelang.Profiler`` and ``tilelang.transform.PassContext``
    were documented as provided and raised."""
    seen, problems = set(), []
    for path, number, line in _doc_lines():
        for match in re.finditer(r"(?<![\w./-])((?:tilelang|tilelang_core)(?:\.[A-Za-z_]\w*)+)(?!\.(?:py|md|json)\b)", line):
            seen.add(match.group(1))
            why = _resolve(match.group(1))
            if why:
                problems.append(f"{path.name}:{number}: {match.group(1)}: {why}")
    assert len(seen) >= 60, f"only {len(seen)} dotted names found in the docs"
    assert not problems, "\n".join(problems)


#: ``TILELANG_*`` strings in the code that are not environment variables.
NOT_ENV_VARS = {"TILELANG_PLUGIN_API"}  # the plugin module attribute (docs/hooks.md)


def _env_vars_in_code() -> set:
    sources = [*(ROOT / "tilelang_core").rglob("*.py"), *(ROOT / "tilelang").rglob("*.py"),
               *(ROOT / "plugins").glob("*/tilelang_backend_*/**/*.py"), *(ROOT / "scripts").glob("*.sh")]
    found = set()
    for source in sources:
        found |= set(re.findall(r"[\"'$]\{?(TILELANG_[A-Z0-9_]+)", source.read_text()))
    return found - NOT_ENV_VARS


def test_environment_variables_table_matches_the_code():
    """README.md's table lists exactly the ``TILELANG_*`` variables the core, the bundled backends and the
    scripts read, and every variable any doc mentions is one of them (none renamed or removed)."""
    in_code = _env_vars_in_code()
    readme = (ROOT / "README.md").read_text()
    assert "## Environment variables" in readme, "README.md has no 'Environment variables' section"
    table = set(re.findall(r"^\| `(TILELANG_[A-Z0-9_]+)` \|", readme.split("## Environment variables")[1], re.M))
    assert len(in_code) >= 10 and table, (in_code, table)
    assert table == in_code, f"README's table lacks {sorted(in_code - table)}, lists unread {sorted(table - in_code)}"
    docs = [*USER_DOCS, *(ROOT / "plugins").glob("*/README.md")]
    mentioned = {v for doc in docs for v in re.findall(r"\bTILELANG_[A-Z0-9_]+\b", doc.read_text())}
    assert mentioned - NOT_ENV_VARS <= in_code, f"documented but read by nothing: {sorted(mentioned - NOT_ENV_VARS - in_code)}"


def _broken_table_rows(text: str) -> list[int]:
    """Line numbers of table rows (``| a | b |``) outside a table: a row that follows neither a
    row nor what ends a block (a blank line, a heading, an HTML comment), or a table whose first row has no ``| --- |`` separator under it. Both
    are printed as paragraph text with literal bars."""
    lines = text.splitlines()
    broken, in_code = [], False
    for n, line in enumerate(lines):
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("|"):
            continue
        previous = lines[n - 1] if n else ""
        if previous.startswith("|"):
            continue
        separator = lines[n + 1] if n + 1 < len(lines) else ""
        block_start = not previous.strip() or previous.startswith("#") or previous.rstrip().endswith("-->")
        if not block_start or not re.fullmatch(r"\|(\s*:?-{3,}:?\s*\|)+", separator.strip()):
            broken.append(n + 1)
    return broken


@pytest.mark.parametrize("doc", USER_DOCS, ids=lambda p: p.name)
def test_tables_render_as_tables(doc):
    """A paragraph put between two rows of a table (docs/tile-operators.md had one) cut the rows after
    it off the table: they rendered as text with literal bars."""
    assert _broken_table_rows(doc.read_text()) == [], f"{doc.name}: table rows outside a table (line numbers)"
