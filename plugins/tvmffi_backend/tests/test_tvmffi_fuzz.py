"""Thousands of random (mostly wrong) calls: each either succeeds with the right result or raises
TypeError/ValueError naming the kernel; none crashes the interpreter (run in a subprocess)."""

from __future__ import annotations

import pytest
from _tvmffi_helpers import run_python

FUZZ = r"""
import random, sys
import numpy as np
import torch
sys.path.insert(0, {tests_dir!r})
from _tvmffi_helpers import build
from tilelang_backend_tvmffi.testing import sum_kernel

random.seed(1234)
torch.manual_seed(0)
kernels = [
    ("sum3", sum_kernel(3), [("t", (16,))] * 3, lambda a: a[0] + a[1], 2),
    ("scale_add", build("scale_add"), [("t", ("n", 4)), ("t", ("n", 4)), ("t", ("n", 4)), ("f", None)],
     lambda a: a[0] + a[3] * a[1], 2),
    ("scale_add", build("scale_add", out_idx=[2]), [("t", ("n", 4)), ("t", ("n", 4)), ("f", None)],
     lambda a: a[0] + a[2] * a[1], None),
    ("pad1", build("pad1", out_idx=[1]), [("t", ("n",))], lambda a: torch.nn.functional.pad(a[0], (1, 1)), None),
]

def good(kind, shape, n):
    if kind == "f":
        return random.choice([1.5, 2, -0.25])
    dims = [n if d == "n" else d for d in shape]
    return torch.randn(*dims)

def mutate(kind, shape, n):
    choice = random.randrange(14)
    if kind == "f":
        return random.choice(["x", None, torch.tensor(1.0), [1.0], object()])
    dims = [n if d == "n" else d for d in shape]
    t = torch.randn(*dims)
    return [
        lambda: t.half(), lambda: t.double(), lambda: t.to(torch.int32),
        lambda: t.unsqueeze(0), lambda: t.reshape(-1)[:1] if t.dim() > 1 else t.reshape(1, -1),
        lambda: torch.randn(*[d + 1 for d in dims]),
        lambda: torch.randn(*[d * 2 for d in dims])[tuple(slice(None, None, 2) for _ in dims)],
        lambda: torch.randn(t.numel() + 1)[1:].view(*dims),          # misaligned but valid
        lambda: torch.empty(*dims, device="meta"),
        lambda: t.numpy(), lambda: None, lambda: 3, lambda: "s", lambda: torch.tensor(2.0),
    ][choice]()

ok = bad = 0
for it in range({iterations}):
    name, k, sig, ref, out_pos = random.choice(kernels)
    n = random.choice([1, 2, 5, 33])
    args = [good(kind, shape, n) for kind, shape in sig]
    for i in range(len(args)):
        if random.random() < 0.3:
            args[i] = mutate(sig[i][0], sig[i][1], n)
    if random.random() < 0.1:
        args = args[:-1] if random.random() < 0.5 else args + [torch.randn(3)]
    try:
        result = k(*args)
    except (TypeError, ValueError) as exc:
        msg = str(exc)
        assert msg.startswith(name + "()"), msg
        bad += 1
        continue
    expected = ref(args)
    got = args[out_pos] if out_pos is not None else result
    torch.testing.assert_close(got, expected)
    ok += 1
print("FUZZ", ok, bad)
"""


@pytest.mark.slow
def test_random_calls_never_crash():
    import os

    code = FUZZ.format(tests_dir=os.path.dirname(os.path.abspath(__file__)), iterations=3000)
    proc = run_python(code, timeout=600)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    ok, bad = map(int, proc.stdout.strip().splitlines()[-1].split()[1:])
    assert ok > 200 and bad > 500
