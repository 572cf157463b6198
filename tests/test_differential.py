"""Differential test: every example kernel and every runnable kernel of the language tests,
compiled by every installed backend that can run its target here, agrees with torch and with the
other backends."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tilelang_core.errors import BackendCapabilityError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from private_modules import load_private  # noqa: E402

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


def _test_module(name):
    return load_private(name, f"differential_{name}")


def _language_cases():
    """(name, build, inputs, out_idx, check) for the language tests' kernels that run on a CPU."""
    import torch

    import tilelang.language as T

    low, lang = _test_module("test_lowering"), _test_module("test_language")
    x8x32 = torch.randn(8, 32)

    def same(expected):
        return lambda result, inputs: torch.testing.assert_close(result, expected(*inputs))

    return [
        ("lowering.vector_add[n=777]", lambda: low.vector_add(T.dynamic("n")),
         lambda: (torch.randn(777), torch.randn(777)), -1, same(torch.add)),
        ("lowering.matmul[40x24x8]", lambda: low.matmul(40, 24, 8),
         lambda: (torch.randn(40, 8), torch.randn(8, 24)), -1,
         lambda r, i: torch.testing.assert_close(r, i[0] @ i[1], rtol=1e-4, atol=1e-4)),
        ("lowering.scaled[scalar alpha]", lambda: low.scaled(T.dynamic("n")),
         lambda: (torch.randn(100), 2.5), 1, same(lambda x, alpha: x * alpha)),
        ("lowering.strided_rows[strides (32, 1)]", lambda: low.strided_rows(8, 16),
         lambda: (x8x32[:, :16],), 1, same(lambda a: a.clone())),
        ("lowering.output_shape_expression[n+1]", low.output_shape_expression,
         lambda: (torch.randn(50),), 1,
         lambda r, i: (r.shape == (51,)) and torch.testing.assert_close(r[:50], i[0]) or None),
        ("lowering.strided_dynamic[in place]", low._strided_dynamic,
         lambda: (torch.arange(70, dtype=torch.float32),), None,
         lambda r, i: torch.testing.assert_close(i[0], torch.arange(70, dtype=torch.float32) * 2)),
        ("language.grid2d[fp16 16x24]", lambda: lang.grid2d(16, 24),
         lambda: (torch.randn(16, 24).half(),), 1, same(lambda a: a.clone())),
    ]


EXAMPLES = _examples()
PAIRS = _runnable()
LANGUAGE_CASES = _language_cases()


@pytest.mark.parametrize("case", LANGUAGE_CASES, ids=[c[0] for c in LANGUAGE_CASES])
def test_language_test_kernels_on_every_backend(case):
    import tilelang

    name, build, inputs_fn, out_idx, check = case
    if not PAIRS:
        pytest.skip("no installed backend can run CPU kernels here")
    import torch

    outputs = {}
    for backend, kind in PAIRS:
        torch.manual_seed(0)  # the same inputs for every backend
        inputs = inputs_fn()
        try:
            kernel = tilelang.compile(build(), out_idx=out_idx, execution_backend=backend, target=kind)
        except BackendCapabilityError:
            continue  # a dtype the backend does not declare (ctypes: no float16)
        result = kernel(*inputs)
        check(result, inputs)
        outputs[(backend, kind)] = result if result is not None else inputs[0]
    assert outputs, f"no backend declares what {name} needs"
    first = next(iter(outputs.values()))
    for key, value in outputs.items():
        if name.startswith("lowering.output_shape_expression"):
            value, first_ = value[:-1], first[:-1]  # the last element is never written
        else:
            first_ = first
        torch.testing.assert_close(value, first_, rtol=1e-4, atol=1e-4, msg=lambda m: f"{key} disagrees: {m}")


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
