"""Small local buffers of CPU runtime modules are stack arrays (lowering/stack_buffers.py).

TVM's ``LowerTVMBuiltin`` turned every non-``global`` CPU allocation into a
``TVMBackendAllocWorkspace``/``TVMBackendFreeWorkspace`` pair where it was declared: a kernel's
scalar variable, declared inside its element loop, called TVM's allocator once per element on the
tvm_ffi backend. The kernels here run on both backends and both CPU targets and are compared with
torch; the generated code of the runtime modules must not allocate their small buffers. Large
local buffers must not be stack arrays (lowering/workspaces.py, ``C_STACK_LIMIT_BYTES``).
"""

from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.lowering import lower
from tilelang_core.lowering.stack_buffers import RUNTIME_STACK_LIMIT_BYTES, stack_arrays

N = 4096
BLOCK = 256
BIG = RUNTIME_STACK_LIMIT_BYTES["llvm"] // 4 + 1  # float32 elements: one more than the stack limit allows


def _small_buffers():
    @T.prim_func
    def small(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(N // BLOCK, threads=BLOCK) as bx:
            acc = T.alloc_local((4,), T.float32)
            for i in T.Parallel(BLOCK):
                v = X[bx * BLOCK + i] * 2.0
                acc[0] = v + 1.0
                Y[bx * BLOCK + i] = acc[0] * v

    return small


def _big_buffer():
    @T.prim_func
    def big(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(N // BLOCK, threads=BLOCK) as bx:
            scratch = T.alloc_local((BIG,), T.float32)
            for i in T.serial(BLOCK):
                scratch[i] = X[bx * BLOCK + i] + 3.0
            for i in T.serial(BLOCK):
                Y[bx * BLOCK + i] = scratch[BLOCK - 1 - i]

    return big


def _runtime_code(func, target: str) -> str:
    module = lower(func, target=target, consumes=["runtime_module"]).tvm_modules
    return module.inspect_source("ll" if target == "llvm" else "")


@pytest.mark.parametrize("target", ["c", "llvm"])
def test_small_local_buffers_of_runtime_modules_are_not_allocated_by_tvm(target):
    code = _runtime_code(_small_buffers(), target)
    assert "TVMBackendAllocWorkspace" not in code


def _tiles():
    """An elementwise add through 32 x 32 float32 shared/fragment tiles (4 KiB each)."""
    @T.prim_func
    def tiled_add(A: T.Tensor((64, 64), T.float32), B: T.Tensor((64, 64), T.float32), C: T.Tensor((64, 64), T.float32)):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            a = T.alloc_shared((32, 32), T.float32)
            b = T.alloc_shared((32, 32), T.float32)
            c = T.alloc_fragment((32, 32), T.float32)
            T.copy(A[by * 32, bx * 32], a)
            T.copy(B[by * 32, bx * 32], b)
            for i, j in T.Parallel(32, 32):
                c[i, j] = a[i, j] + b[i, j]
            T.copy(c, C[by * 32, bx * 32])

    return tiled_add


def test_llvm_tiles_of_kilobytes_are_allocas_that_llvm_vectorizes():
    """On llvm a 4 KiB tile came from TVM's workspace pool, an opaque pointer: LLVM could not tell
    the tiles apart and kept the elementwise loop scalar (2048 x 2048 through such tiles on
    tvm_ffi/llvm: 27 ms; 10 ms with the tiles as allocas). Up to the C entry's 64 KiB they are
    allocas now."""
    code = _runtime_code(_tiles(), "llvm")
    assert "TVMBackendAllocWorkspace" not in code
    assert "fadd <8 x float>" in code or "fadd <16 x float>" in code or "fadd <4 x float>" in code
    kernel = tilelang.compile(_tiles(), target="llvm", execution_backend="tvm_ffi")
    a, b, c = torch.randn(64, 64), torch.randn(64, 64), torch.zeros(64, 64)
    kernel(a, b, c)
    assert torch.equal(c, a + b)


def test_a_buffer_over_the_stack_limit_still_comes_from_tvms_workspace_pool():
    # llvm: TVM's code generator; the runtime module of target c runs the C entry, whose locals
    # are stack arrays up to C_STACK_LIMIT_BYTES and heap buffers above (the next test)
    code = _runtime_code(_big_buffer(), "llvm")
    assert "TVMBackendAllocWorkspace" in code


LARGE_LOCAL = """
import sys, torch, tilelang, tilelang.language as T
N, BLOCK, BIG = 4096, 256, {big}
@T.prim_func
def large(X: T.Tensor((N,), T.float32), Y: T.Tensor((N,), T.float32)):
    with T.Kernel(N // BLOCK, threads=BLOCK) as bx:
        scratch = T.alloc_local((BIG,), T.float32)
        for i in T.serial(BLOCK):
            scratch[i * 1000] = X[bx * BLOCK + i] + 3.0
        for i in T.serial(BLOCK):
            Y[bx * BLOCK + i] = scratch[(BLOCK - 1 - i) * 1000]
k = tilelang.compile(large, target={target!r}, execution_backend={backend!r})
x = torch.randn(N); y = torch.zeros(N)
k(x, y)
assert torch.equal(y, (x + 3).view(-1, BLOCK).flip(1).reshape(-1))
print("heap" if "scratch_heap" in (k.get_kernel_source() or "") else "other")
"""


@pytest.mark.parametrize("backend,target", [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")])
def test_a_16_mb_local_buffer_runs_in_every_block(backend, target, tmp_path):
    # before: a stack array in the C entry, a segfault (stack overflow) on cython/c; run in a
    # fresh process so that a crash is a failed test, not a lost worker
    import subprocess
    import sys

    from tilelang_core.lowering.workspaces import C_STACK_LIMIT_BYTES

    assert 4 * 4_000_000 > C_STACK_LIMIT_BYTES
    proc = subprocess.run([sys.executable, "-c", LARGE_LOCAL.format(big=4_000_000, backend=backend, target=target)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    if target == "c":
        assert proc.stdout.split()[-1] == "heap"


@pytest.mark.parametrize("backend,target", [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")])
def test_kernels_with_local_buffers_match_torch(backend, target):
    x = torch.randn(N)
    small = tilelang.compile(_small_buffers(), target=target, execution_backend=backend)
    y = torch.zeros(N)
    small(x, y)
    torch.testing.assert_close(y, (x * 2 + 1) * (x * 2))
    big = tilelang.compile(_big_buffer(), target=target, execution_backend=backend)
    y = torch.zeros(N)
    big(x, y)
    torch.testing.assert_close(y, (x + 3).view(-1, BLOCK).flip(1).reshape(-1))


def test_stack_arrays_with_a_limit_moves_only_constant_sizes_under_it():
    from tvm import tirx

    small = tirx.decl_buffer([4], "float32", name="small", scope="local")
    big = tirx.decl_buffer([BIG], "float32", name="big", scope="local")
    n = tirx.Var("n", "int32")
    dynamic = tirx.decl_buffer([n], "float32", name="dynamic", scope="local")
    body = tirx.SeqStmt([
        tirx.AllocBuffer(b) for b in (small, big, dynamic)
    ] + [tirx.BufferStore(b, tirx.FloatImm("float32", 0.0), [0]) for b in (small, big, dynamic)])
    out = stack_arrays(body, RUNTIME_STACK_LIMIT_BYTES["llvm"])
    allocs = {str(s.buffer): s for s in out.seq if isinstance(s, tirx.AllocBuffer)}
    assert str(allocs["small"].buffer.ty.storage_scope) == "global"
    assert int(allocs["small"].annotations["disable_lower_builtin"]) == 1
    for name in ("big", "dynamic"):
        assert str(allocs[name].buffer.ty.storage_scope) == "local"
        assert "disable_lower_builtin" not in allocs[name].annotations
    stores = [s for s in out.seq if isinstance(s, tirx.BufferStore)]
    assert stores[0].buffer.same_as(allocs["small"].buffer)  # uses follow the moved buffer


def test_stack_arrays_stop_at_a_total():
    """Each tile under the 64 KiB limit was an alloca however many there were: twenty 60 KiB tiles
    made 1.2 MiB of stack and a segfault in a thread started with 512 KiB (found by a hunt). The
    tiles past STACK_TOTAL_BYTES stay in TVM's workspace pool."""
    from tvm import tirx

    from tilelang_core.lowering.stack_buffers import STACK_TOTAL_BYTES

    elements = 15000  # 60,000 bytes of float32 each
    tiles = [tirx.decl_buffer([elements], "float32", name=f"t{i}", scope="shared") for i in range(8)]
    body = tirx.SeqStmt([tirx.AllocBuffer(b) for b in tiles]
                        + [tirx.BufferStore(b, tirx.FloatImm("float32", 0.0), [0]) for b in tiles])
    out = stack_arrays(body, RUNTIME_STACK_LIMIT_BYTES["llvm"], STACK_TOTAL_BYTES)
    on_stack = [s for s in out.seq if isinstance(s, tirx.AllocBuffer) and "disable_lower_builtin" in s.annotations]
    assert len(on_stack) == STACK_TOTAL_BYTES // (elements * 4) == 4


def _many_tiles(count, folder, elements=15000):
    """``count`` shared tiles of 60,000 bytes each, chained: O = A + count - 1 (written out in a
    file: TVMScript reads a kernel's source)."""
    import importlib.util

    lines = [f"t{i} = T.alloc_shared(({elements},), 'float32')" for i in range(count)] + ["T.copy(A, t0)"]
    for t in range(1, count):
        lines += [f"for i in T.Parallel({elements}):", f"    t{t}[i] = t{t - 1}[i] + 1.0"]
    lines.append(f"T.copy(t{count - 1}, O)")
    body = "\n".join(" " * 8 + line for line in lines)
    path = folder / f"chained_{count}.py"
    path.write_text(f"""import tilelang.language as T


@T.prim_func
def chained(A: T.Tensor(({elements},), "float32"), O: T.Tensor(({elements},), "float32")):
    with T.Kernel(1, threads=32) as _:
{body}
""")
    spec = importlib.util.spec_from_file_location(f"chained_{count}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.chained


@pytest.mark.parametrize("backend,target", [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")])
def test_many_tiles_under_the_limit_do_not_overflow_a_small_thread_stack(backend, target, tmp_path):
    """Every tile under 64 KiB was a stack array, however many: 140 of 60 KiB segfaulted in the
    main thread, 20 in a thread started with 512 KiB of stack (C entry and, since b666724, llvm).
    Past 256 KiB together they come from the heap or TVM's pool
    (stack_buffers.STACK_TOTAL_BYTES). Run in a thread of 512 KiB here."""
    import threading

    kernel = tilelang.compile(_many_tiles(20, tmp_path), target=target, execution_backend=backend)
    a, o = torch.zeros(15000), torch.empty(15000)
    done = []
    previous = threading.stack_size(512 * 1024)
    try:
        thread = threading.Thread(target=lambda: done.append(kernel(a, o)))
        thread.start()
        thread.join()
    finally:
        threading.stack_size(previous)
    assert done and torch.equal(o, torch.full((15000,), 19.0))
