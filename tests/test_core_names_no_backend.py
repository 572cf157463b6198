"""The core never names a concrete backend: everything goes through declarations and hooks."""

from __future__ import annotations

import re
from pathlib import Path

CORE = Path(__file__).resolve().parent.parent / "tilelang_core"
BACKEND_NAMES = {"cython", "tvm_ffi", "tvmffi", "nvrtc", "ctypes", "torch_cpp", "dlpack_backend"}


def _installed_names() -> set[str]:
    from tilelang_core.backends import get_registry

    return set(get_registry().names())


def _vocabulary() -> set[str]:
    """Words the core uses for targets and devices, which a backend may share as its name (``metal``)."""
    from tilelang_core.capabilities import KNOWN_TARGET_KINDS
    from tilelang_core.devices import TORCH_DEVICE_TYPES

    return set(KNOWN_TARGET_KINDS) | set(TORCH_DEVICE_TYPES) | set(TORCH_DEVICE_TYPES.values())


def offending(line: str, names: set[str], shared: set[str]) -> bool:
    """Whether ``line`` names one of the backends ``names``.

    A quoted name is an offence, unless the name is also a target kind or device family
    (``shared``): then only a use as a backend is (compared with or assigned to something called
    ``*backend*`` or ``.name``, or looked up with ``get(...)``), and a quoted use as a target is fine.
    """
    if "not backend names" in line:  # a Python module that shares a backend's name
        return False
    if re.search(r"tilelang_backend_(%s)\b" % "|".join(map(re.escape, names)), line):
        return True
    own = sorted(names - shared)
    if own and re.search(r"""(['"])(%s)\1""" % "|".join(map(re.escape, own)), line):
        return True
    both = sorted(names & shared)
    if both:
        quoted = r"""(?P<q>['"])(%s)(?P=q)""" % "|".join(map(re.escape, both))
        as_backend = (
            r"(backend\w*|\.name)\s*(==|!=|=|\bin\b|\bis\b)\s*[\(\[\{]?\s*" + quoted,
            quoted + r"\s*(==|!=|\bin\b)\s*\w*backend",
            r"\bget\(\s*" + quoted,
        )
        return any(re.search(p, line, re.IGNORECASE) for p in as_backend)
    return False


def test_no_backend_name_in_core_code():
    names = BACKEND_NAMES | _installed_names()
    shared = _vocabulary()
    offenders = []
    for path in CORE.rglob("*.py"):
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if offending(line, names, shared):
                offenders.append(f"{path.relative_to(CORE.parent)}:{lineno}: {line.strip()}")
    assert offenders == [], "the core names a concrete backend:\n" + "\n".join(offenders)


def test_the_check_catches_a_backend_that_shares_a_target_name():
    names, shared = {"cython", "metal"}, _vocabulary()
    assert "metal" in shared
    for bad in (
        'if backend == "metal":',
        "if record.name == 'metal':",
        "execution_backend='metal'",
        'registry.get("metal")',
        'if "metal" in backends:',
        "import tilelang_backend_metal",
        'if backend == "cython":',
        'x = "cython"',
    ):
        assert offending(bad, names, shared), bad
    for fine in (
        'if kind == "metal":',
        'TORCH_DEVICE_TYPES = {"metal": "mps"}',
        'GPU_KINDS = ("cuda", "metal")',
        'return "metal"',
    ):
        assert not offending(fine, names, shared), fine
