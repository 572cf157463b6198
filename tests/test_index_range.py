"""Index range (issue 11 §3): the generated code's 32-bit index arithmetic is never fed a tensor it
cannot address. Static sizes that need it get 64-bit indices; tensors with dynamic shapes record
the limit (``TensorParam.index_limit``) and every backend refuses larger arguments and outputs at
call time, before allocating or launching anything.

The calls run in a subprocess whose address space is capped (``RLIMIT_AS``) a little above what it
already uses: no check here allocates gigabytes (inputs are stride-0 views, outputs are refused
first), and a regression that tried would fail there instead of exhausting the machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import tilelang_core.language as T
from tilelang_core.errors import PassConfigError
from tilelang_core.lowering import lower
from tilelang_core.lowering.signature import INDEX_LIMIT_32

COLS = 65536


def add_one(M, N=COLS):
    @T.prim_func
    def add1(X: T.Tensor((M, N), "int8"), Y: T.Tensor((M, N), "int8")):
        with T.Kernel(M, threads=128) as bx:
            for j in T.Parallel(N):
                Y[bx, j] = X[bx, j] + T.int8(1)

    return add1


def _flat_index_lines(src: str) -> list[str]:
    return [line.strip() for line in src.splitlines() if "j)" in line and " = (" in line and "bx" in line]


def test_static_sizes_choose_the_index_width():
    """(32769, 65536) int8 has 2**31 + 65536 elements: 64-bit flat indices; (16, 65536) keeps 32."""
    big = lower(add_one(32769), target="c")
    assert all(p.index_limit is None for p in big.params)
    assert any(line.startswith("int64_t") for line in _flat_index_lines(big.device_source)), big.device_source
    small = lower(add_one(16), target="c")
    lines = _flat_index_lines(small.device_source)
    assert lines and all(line.startswith("int32_t") for line in lines), small.device_source
    cuda = lower(add_one(32769), target="cuda").device_source
    assert "(((int64_t)" in cuda and "* (int64_t)65536" in cuda


def test_dynamic_shapes_record_the_limit_and_64_bits_lift_it():
    art = lower(add_one(T.dynamic("m")), target="c")
    assert [p.index_limit for p in art.params] == [INDEX_LIMIT_32, INDEX_LIMIT_32]
    assert INDEX_LIMIT_32 == 2**31 - 2**20
    wide = lower(add_one(T.dynamic("m")), target="c", pass_configs={"tl.config_index_bitwidth": 64})
    assert [p.index_limit for p in wide.params] == [None, None]
    assert any(line.startswith("int64_t") for line in _flat_index_lines(wide.device_source))
    for bad in (16, True, "64"):
        with pytest.raises(PassConfigError, match="tl.config_index_bitwidth.*must be 32 or 64"):
            lower(add_one(T.dynamic("m")), target="c", pass_configs={"tl.config_index_bitwidth": bad})


CHECKS = textwrap.dedent('''
    import json, resource, sys
    import torch
    import tilelang
    import tilelang.language as T

    def add_one(M, N=65536):
        @T.prim_func
        def add1(X: T.Tensor((M, N), "int8"), Y: T.Tensor((M, N), "int8")):
            with T.Kernel(M, threads=128) as bx:
                for j in T.Parallel(N):
                    Y[bx, j] = X[bx, j] + T.int8(1)
        return add1

    def broadcast_rows(M, N=65536):
        @T.prim_func
        def rows(S: T.Tensor((M,), "int8"), Y: T.Tensor((M, N), "int8")):
            with T.Kernel(M, threads=128) as bx:
                for j in T.Parallel(N):
                    Y[bx, j] = S[bx]
        return rows

    backend, target = sys.argv[1], sys.argv[2]
    compile = lambda f, **kw: tilelang.compile(f, out_idx=-1, target=target, execution_backend=backend, **kw)
    add1, rows = compile(add_one(T.dynamic("m"))), compile(broadcast_rows(T.dynamic("m")))
    wide = compile(add_one(T.dynamic("m")), pass_configs={"tl.config_index_bitwidth": 64})
    x = torch.randint(-100, 100, (3, 65536), dtype=torch.int8)
    ok = [torch.equal(add1(x), x + 1), torch.equal(wide(x), x + 1), torch.equal(rows(x[:, 0].contiguous()), x[:, :1].expand(3, 65536))]
    used = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (used + (1 << 30), resource.RLIM_INFINITY))  # no 2 GB tensor fits
    errors = {}
    big_view = torch.zeros(1, 65536, dtype=torch.int8).expand(32769, 65536)  # 2**31 + 65536 elements, 64 KiB
    for label, call in (("input", lambda: add1(big_view)), ("output", lambda: rows(torch.zeros(32769, dtype=torch.int8)))):
        try:
            call()
            errors[label] = None
        except Exception as exc:
            errors[label] = [type(exc).__name__, str(exc)]
    print(json.dumps({"ok": ok, "errors": errors}))
''')


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status for RLIMIT_AS")
@pytest.mark.parametrize("backend,target", [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")])
def test_too_large_arguments_and_outputs_are_refused_at_call_time(tmp_path, backend, target):
    """The issue's (m, 65536) int8 kernel with m = 32769: cython segfaulted and tvm_ffi/llvm grew to
    23 GB. Now: ValueError naming the parameter, the symbol and the limit; 64-bit indices on request."""
    script = tmp_path / "checks.py"
    script.write_text(CHECKS)
    proc = subprocess.run([sys.executable, str(script), backend, target], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if "not installed" in proc.stderr:
        pytest.skip(proc.stderr)
    assert out["ok"] == [True, True, True]
    hint = "compile it with pass_configs={'tl.config_index_bitwidth': 64}"
    assert out["errors"]["input"] == [
        "ValueError",
        f"add1() argument 'X' (#0): 2147549184 elements ('m' = 32769) exceed this kernel's 32-bit index limit "
        f"of {INDEX_LIMIT_32}; {hint}",
    ]
    assert out["errors"]["output"] == [
        "ValueError",
        f"rows(): output 'Y' would have 2147549184 elements ('m' = 32769), over this kernel's 32-bit index "
        f"limit of {INDEX_LIMIT_32}; {hint}",
    ]
