"""Differential test: every example kernel, compiled by every installed backend that can run its
target here, agrees with torch and with the other backends."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES_DIR = ROOT / "examples"
CPU_KINDS = ("c", "llvm")


def _examples():
    sys.path.insert(0, str(EXAMPLES_DIR))
    try:
        found = []
        for path in sorted(EXAMPLES_DIR.glob("*.py")):
            if path.name.startswith("_") or path.name == "run_all.py":
                continue
            spec = importlib.util.spec_from_file_location(f"examples_{path.stem}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            found.extend(module.EXAMPLES)
        return found
    finally:
        sys.path.remove(str(EXAMPLES_DIR))


def _runnable():
    from tilelang_core.backends import get_registry
    from tilelang_core.backends.selection import declared_kind

    registry = get_registry()
    pairs = []
    for record in registry.records():
        if record.status != "ok":
            continue
        for kind in CPU_KINDS:
            declared = declared_kind(record, kind)
            if declared and registry.probe(record, declared).available:
                pairs.append((record.name, kind))
    return pairs


EXAMPLES = _examples()
PAIRS = _runnable()


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_all_backends_agree_with_torch_and_each_other(example):
    import torch

    import tilelang

    if len(PAIRS) == 0:
        pytest.skip("no installed backend can run CPU kernels here")
    torch.manual_seed(0)
    inputs = example.inputs()
    expected = example.reference(*inputs)
    results = {}
    for backend, kind in PAIRS:
        kernel = tilelang.compile(example.build(), out_idx=example.out_idx, execution_backend=backend, target=kind)
        assert kernel.backend.name == backend
        results[(backend, kind)] = kernel(*inputs)
        torch.testing.assert_close(results[(backend, kind)], expected, rtol=example.rtol, atol=example.atol,
                                   msg=lambda m: f"{backend} on {kind}: {m}")
    first = next(iter(results.values()))
    for key, value in results.items():
        torch.testing.assert_close(value, first, rtol=example.rtol, atol=example.atol, msg=lambda m: f"{key}: {m}")
