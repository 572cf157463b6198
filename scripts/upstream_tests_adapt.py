"""The mechanical CUDA-to-CPU rewrite that scripts/upstream_tests.py applies to upstream's test files.

The rules are the ones docs/compatibility.md states under "How this is measured": CUDA tensors become
CPU tensors, ``target="cuda"`` becomes ``"c"``, the ``requires_cuda*`` decorators are dropped (the
line is left empty, so line numbers in tracebacks still match the upstream file), and harmless
``torch.cuda`` calls become their CPU equivalents or nothing. The remaining rule, running each test
inside ``with tvm.target.Target("c")``, is not a text change: the harness's conftest
(upstream_tests_conftest.py) does it with an autouse fixture.

Nothing here knows about particular tests: a rule applies wherever its pattern occurs.
"""

from __future__ import annotations

import re

#: (pattern, replacement, what it does). Applied in order to the whole file text.
RULES: list[tuple[re.Pattern, str, str]] = [
    # --- decorators ----------------------------------------------------------------------------
    (re.compile(r"^[ \t]*@(?:tilelang\.testing\.)?requires_cuda\w*(?:\([^()\n]*\))?[ \t]*$", re.M), "",
     "drop @requires_cuda* decorators"),
    # --- tensors -------------------------------------------------------------------------------
    (re.compile(r"""\bdevice(\s*=\s*)(["'])cuda(?::\d+)?\2"""), r'device\1"cpu"', 'device="cuda" -> "cpu"'),
    (re.compile(r"""\btorch\.device\(\s*(["'])cuda(?::\d+)?\1"""), 'torch.device("cpu"',
     'torch.device("cuda") -> "cpu"'),
    (re.compile(r"""\.to\(\s*(["'])cuda(?::\d+)?\1"""), '.to("cpu"', '.to("cuda") -> .to("cpu")'),
    (re.compile(r"\.cuda\(\)"), ".cpu()", ".cuda() -> .cpu()"),
    # --- targets -------------------------------------------------------------------------------
    (re.compile(r"""\btarget(\s*=\s*)(["'])cuda(?:\s[^"'\n]*)?\2"""), r'target\1"c"', 'target="cuda" -> "c"'),
    (re.compile(r"""\bTarget\(\s*(["'])cuda(?:\s[^"'\n]*)?\1"""), 'Target("c"', 'Target("cuda") -> Target("c")'),
    # --- harmless torch.cuda calls --------------------------------------------------------------
    (re.compile(r"\btorch\.cuda\.(?:synchronize|empty_cache)\b"), "(lambda *_a, **_k: None)",
     "torch.cuda.synchronize/empty_cache -> no-op"),
    (re.compile(r"\btorch\.cuda\.manual_seed(?:_all)?\b"), "torch.manual_seed",
     "torch.cuda.manual_seed -> torch.manual_seed"),
]


def adapt_source(text: str) -> tuple[str, int]:
    """Return ``text`` with every rule in :data:`RULES` applied, and how many replacements were made.

    ``text`` is the source of one upstream test file. A file with no CUDA-specific text comes back
    unchanged with a count of 0 (it still runs under the ``Target("c")`` fixture in the adapted tree).
    """
    total = 0
    for pattern, replacement, _what in RULES:
        text, count = pattern.subn(replacement, text)
        total += count
    return text, total


def rules_fingerprint() -> str:
    """A string that changes whenever a rule changes; part of the upstream results' cache key."""
    return "\n".join(f"{p.pattern}\t{p.flags}\t{r}" for p, r, _ in RULES)
