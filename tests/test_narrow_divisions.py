"""int8/int16 divisions and remainders of MIN by -1 give C's (and torch's) wrapped values on every
CPU path: on llvm they were trapping 8/16-bit divisions and stopped the process with SIGFPE
(lowering/narrow_divisions.py). Each case runs in a subprocess, so a regression fails the test
instead of ending the test run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_pairs import PATHS, path_id  # noqa: E402

SCRIPT = r"""
import json, sys
import torch, tilelang, tilelang.language as T
dtype, backend, target = sys.argv[1:4]
OPS = {"floordiv": lambda a, b: a // b, "floormod": lambda a, b: a % b,
       "truncdiv": T.truncdiv, "truncmod": T.truncmod}
out = {}
for name, op in OPS.items():
    for vectorized in (False, True):
        @T.prim_func
        def main(A: T.Tensor((4,), dtype), B: T.Tensor((4,), dtype), O: T.Tensor((4,), dtype)):
            with T.Kernel(1, threads=1) as bx:
                if vectorized:
                    for i in T.vectorized(4):
                        O[i] = op(A[i], B[i])
                else:
                    for i in T.serial(4):
                        O[i] = op(A[i], B[i])
        low = torch.iinfo(getattr(torch, dtype)).min
        a = torch.tensor([low, 7, -7, low], dtype=getattr(torch, dtype))
        b = torch.tensor([-1, -2, 2, 3], dtype=getattr(torch, dtype))
        o = torch.zeros(4, dtype=getattr(torch, dtype))
        tilelang.compile(main, target=target, execution_backend=backend)(a, b, o)
        out[f"{name}{'-vectorized' if vectorized else ''}"] = o.tolist()
print(json.dumps(out))
"""


def wrap(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def expected(name: str, bits: int) -> list:
    low = -(1 << (bits - 1))
    pairs = [(low, -1), (7, -2), (-7, 2), (low, 3)]
    trunc = [abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1) for a, b in pairs]
    values = {"floordiv": [a // b for a, b in pairs], "floormod": [a % b for a, b in pairs],
              "truncdiv": trunc, "truncmod": [a - b * q for (a, b), q in zip(pairs, trunc)]}[name]
    return [wrap(v, bits) for v in values]


@pytest.mark.parametrize("path", PATHS, ids=path_id)
@pytest.mark.parametrize("dtype,bits", [("int8", 8), ("int16", 16)])
def test_min_by_minus_one_wraps_on_every_path(path, dtype, bits):
    done = subprocess.run([sys.executable, "-c", SCRIPT, dtype, *path], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "TILELANG_DISABLE_CACHE": "1"})
    assert done.returncode == 0, f"{path} {dtype}: exit {done.returncode}\n{done.stderr[-2000:]}"
    got = json.loads(done.stdout.strip().splitlines()[-1])
    for key, values in got.items():
        assert values == expected(key.split("-")[0], bits), f"{path} {dtype} {key}: {values}"
