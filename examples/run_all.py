"""The main job: compile every example kernel with every installed backend that can run it here.

For each example (``examples/*.py`` exposing ``EXAMPLES``) and each installed execution backend,
for each CPU target kind the backend declares and can run on this machine, compile the kernel,
run it on torch tensors, check the result against torch, and print the check and the time.
Exits 1 if any result is wrong or any compile fails.
"""

from __future__ import annotations

import importlib.util
import sys
import time
import traceback
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
CPU_KINDS = ("c", "llvm")


def load_examples():
    for path in sorted(HERE.glob("*.py")):
        if path.name == Path(__file__).name or path.name.startswith("_"):
            continue
        spec = importlib.util.spec_from_file_location(f"examples_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield from getattr(module, "EXAMPLES", [])


def runnable_pairs():
    from tilelang_core.backends import get_registry
    from tilelang_core.backends.selection import declared_kind

    registry = get_registry()
    for record in registry.records():
        if record.status != "ok":
            print(f"skip backend {record.name}: {record.status}: {record.reason}")
            continue
        for kind in CPU_KINDS:
            declared = declared_kind(record, kind)
            if declared is None:
                continue
            availability = registry.probe(record, declared)
            if availability.available:
                yield record.name, kind
            else:
                print(f"skip backend {record.name} on {kind}: {availability.reason}")


def time_call(fn, args, repeat=20):
    fn(*args)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    import torch

    import tilelang

    examples = list(load_examples())
    pairs = list(runnable_pairs())
    if not pairs:
        print("no installed backend can run CPU kernels here (see: tilelang backends)")
        return 1
    failures = 0
    notes: dict[str, None] = {}  # warnings from compiling (a retired backend's deprecation), once each, at the end
    print(f"{'example':<28} {'backend':<10} {'target':<6} {'check':<6} {'kernel':>10} {'torch':>10}")
    for example in examples:
        for backend, kind in pairs:
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    kernel = tilelang.compile(example.build(), out_idx=example.out_idx, execution_backend=backend,
                                              target=kind)
                notes.update((f"{w.category.__name__}: {w.message}", None) for w in caught)
                inputs = example.inputs()
                result = kernel(*inputs)
                expected = example.reference(*inputs)
                ok = torch.allclose(result, expected, rtol=example.rtol, atol=example.atol)
                t_kernel = time_call(kernel, inputs)
                t_torch = time_call(example.reference, inputs)
                print(f"{example.name:<28} {backend:<10} {kind:<6} {'ok' if ok else 'WRONG':<6} "
                      f"{t_kernel * 1e6:>8.1f}us {t_torch * 1e6:>8.1f}us")
                failures += not ok
            except Exception:  # noqa: BLE001 - report every failure, keep going
                failures += 1
                print(f"{example.name:<28} {backend:<10} {kind:<6} FAILED")
                traceback.print_exc()
    for note in notes:
        print(f"note: {note}")
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
