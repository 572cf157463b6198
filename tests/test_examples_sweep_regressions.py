"""Regressions found by running upstream TileLang's examples, adapted to the CPU, through this package.

Each test is a small kernel written for this suite that failed before its fix (the example it
was reduced from is named in the test's docstring), checked against torch on the CPU paths.
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import tilelang
import tilelang.language as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from backend_pairs import CYTHON_C, PATHS, TVMFFI_C, compile_on, path_id  # noqa: E402


# -- the autotuner on an eager-style @tilelang.jit function ---------------------------------------


@tilelang.autotune(configs=[{"block": 8}, {"block": 16}], warmup=1, rep=2)
@tilelang.jit(target="c")
def _row_max(x, block):
    """Row maxima of ``x`` in the eager style (the body is the kernel)."""
    M, N = T.const("M, N")
    x: T.Tensor([M, N], T.float32)
    out = T.empty([M], T.float32)
    with T.Kernel(T.ceildiv(M, block), threads=block) as bx:
        tile = T.alloc_fragment([block, N], T.float32)
        best = T.alloc_fragment([block], T.float32)
        T.copy(x[bx * block, 0], tile)
        T.reduce_max(tile, best, dim=1)
        T.copy(best, out[bx * block])
    return out


def test_autotune_of_an_eager_jit_function_given_and_tuned():
    """examples/topk: ``@tilelang.autotune`` over an eager ``@tilelang.jit`` function called the
    function's body directly, outside any prim_func ('No builder in current scope' from TVM)."""
    x = torch.randn(40, 12)
    given = _row_max(x, block=16)  # a config value given: compiled directly, not tuned
    torch.testing.assert_close(given, x.max(dim=1).values)
    tuned = _row_max(x)  # tuned over both configs
    torch.testing.assert_close(tuned, x.max(dim=1).values)


def test_autotuned_eager_function_compiles_with_its_constants_by_name():
    """examples/blocksparse_gemm: ``f.compile(M=..., N=..., block_M=...)`` of an autotuned eager
    function names its ``T.const`` values, as the eager ``compile`` does; the autotuner bound the
    call to the signature alone ("got an unexpected keyword argument 'M'")."""
    x = torch.randn(24, 12)
    given = _row_max.compile(M=24, N=12, block=8)  # a config given: compiled directly
    torch.testing.assert_close(given(x), x.max(dim=1).values)
    tuned = _row_max.compile(M=24, N=12)  # tuned for these constants
    torch.testing.assert_close(tuned(x), x.max(dim=1).values)
    other = _row_max.compile(M=40, N=12)  # other constants: another tuning key, another kernel
    assert other is not tuned
    x = torch.randn(40, 12)
    torch.testing.assert_close(other(x), x.max(dim=1).values)


# -- workspace helpers of several C functions in one source ---------------------------------------


def _two_kernels_with_large_locals(n: int = 16384):
    """Two ``T.Kernel`` blocks, each with a float32 local of 64 KiB (heap workspaces in C)."""

    @T.prim_func
    def k(A: T.Tensor((2, n), "float32"), B: T.Tensor((2, n), "float32")):
        with T.Kernel(2) as bx:
            tmp = T.alloc_fragment((n,), "float32")
            T.copy(A[bx, 0:n], tmp)
            for i in T.Parallel(n):
                B[bx, i] = tmp[i] * 2.0
        with T.Kernel(2) as bx:
            tmp2 = T.alloc_fragment((n,), "float32")
            T.copy(B[bx, 0:n], tmp2)
            for i in T.Parallel(n):
                B[bx, i] = tmp2[i] + 1.0

    return k


@pytest.mark.parametrize("path", [CYTHON_C, TVMFFI_C], ids=path_id)
def test_two_kernels_with_heap_locals_compile(path):
    """examples/fusedmoe: each C function imported the workspace helpers, so a source with two
    block loops defined ``tl_workspace_alloc_float32`` twice (a C compile error)."""
    kernel = compile_on(_two_kernels_with_large_locals(), path)
    a = torch.randn(2, 16384)
    b = torch.zeros(2, 16384)
    kernel(a, b)
    torch.testing.assert_close(b, a * 2.0 + 1.0)


# -- T.Tensor(shape, dtype, A.data): a view of another tensor's memory ----------------------------


def _flat_view():
    @T.prim_func
    def k(A: T.Tensor((4, 6), "float32"), B: T.Tensor((24,), "float32")):
        with T.Kernel(1) as _:
            flat = T.Tensor((24,), "float32", A.data)
            for i in T.Parallel(24):
                B[i] = flat[i] * 3.0 + T.float32(i)

    return k


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_tensor_view_of_parameter_data(path):
    """examples/convolution: ``T.Tensor(shape, dtype, A.data)`` passed ``A.data`` as strides (a
    TVM type error); TileLang's third positional argument is the buffer's data."""
    kernel = compile_on(_flat_view(), path)
    a = torch.randn(4, 6)
    b = torch.zeros(24)
    kernel(a, b)
    torch.testing.assert_close(b, a.reshape(-1) * 3.0 + torch.arange(24, dtype=torch.float32))


# -- T.alloc_fragment(shape, dtype, scope) ---------------------------------------------------------


def _fragment_with_scope():
    @T.prim_func
    def k(A: T.Tensor((32,), "int32"), B: T.Tensor((4,), "int32")):
        with T.Kernel(4, threads=8) as bx:
            start = T.alloc_fragment((1,), T.int32, "local")
            start[0] = bx * 8
            acc = T.alloc_fragment((1,), T.int32, "local")
            acc[0] = 0
            for i in T.serial(8):
                acc[0] = acc[0] + A[start[0] + i]
            B[bx] = acc[0]

    return k


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_alloc_fragment_takes_a_scope(path):
    """examples/gemm_streamk: ``T.alloc_fragment((1,), T.int32, "local")`` was a TypeError (no
    third parameter); as in TileLang it allocates a tile of that scope."""
    func = _fragment_with_scope()
    scopes = []
    tvm_ffi = pytest.importorskip("tvm_ffi")
    from tvm import tirx

    tvm_ffi.structural_walk(func.body, ((tirx.AllocBuffer,), lambda s: scopes.append(str(s.buffer.ty.storage_scope))))
    assert scopes.count("local") == 2
    kernel = compile_on(func, path)
    a = torch.randint(-50, 50, (32,), dtype=torch.int32)
    b = torch.zeros(4, dtype=torch.int32)
    kernel(a, b)
    torch.testing.assert_close(b, a.reshape(4, 8).sum(dim=1, dtype=torch.int32))


def test_alloc_fragment_scope_must_be_a_string():
    with pytest.raises(Exception, match="scope must be a string"):

        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1) as _:
                t = T.alloc_fragment((4,), T.float32, 3)
                T.copy(A, t)


# -- T.fill / T.clear of one element ---------------------------------------------------------------


def _fill_one_element():
    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), B: T.Tensor((2, 8), "float32")):
        with T.Kernel(2) as bx:
            s = T.alloc_shared((8,), "float32")
            T.copy(A, s)
            T.fill(s[bx + 1], -7.0)
            T.clear(s[5])
            T.copy(s, B[bx, 0:8])

    return k


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_fill_and_clear_of_one_element(path):
    """examples/deepseek_v32 (topk_selector): ``T.fill(count[0], 0)`` was refused ('must be a
    buffer or a region'); as in TileLang, one element is a one-element region."""
    kernel = compile_on(_fill_one_element(), path)
    a = torch.randn(8)
    b = torch.zeros(2, 8)
    kernel(a, b)
    expected = a.repeat(2, 1)
    expected[0, 1] = -7.0
    expected[1, 2] = -7.0
    expected[:, 5] = 0.0
    torch.testing.assert_close(b, expected)


# -- T.Parallel stores past the edge of a tensor --------------------------------------------------


def _edge_tile_store(m: int, n: int, block: int = 8):
    """Each block writes a whole ``block x block`` tile with an element loop, also past ``n``."""

    @T.prim_func
    def k(A: T.Tensor((m, n), "float32"), C: T.Tensor((m, n), "float32")):
        with T.Kernel(T.ceildiv(n, block), T.ceildiv(m, block)) as (bx, by):
            acc = T.alloc_fragment((block, block), "float32")
            T.copy(A[by * block, bx * block], acc)
            for i, j in T.Parallel(block, block):
                C[by * block + i, bx * block + j] = acc[i, j] * 2.0

    return k


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_parallel_store_past_the_edge_is_skipped(path):
    """examples/grouped_gemm: ``C[m0 + i, n0 + j] = acc[i, j]`` in a T.Parallel over a tile that
    crosses C's edge wrote past C (heap corruption: 'malloc_consolidate(): invalid chunk size');
    as in TileLang, stores outside the tensor are skipped."""
    kernel = compile_on(_edge_tile_store(12, 13), path)
    a = torch.randn(12, 13)
    # C is a view into a larger tensor: a store past its edge would land in the canaries
    storage = torch.full((12 * 13 + 64,), 123.0)
    c = storage[:12 * 13].view(12, 13)
    kernel(a, c)
    torch.testing.assert_close(c, a * 2.0)
    assert torch.all(storage[12 * 13:] == 123.0)


def _lines_before_stores(source: str) -> list:
    lines = [line.strip() for line in source.splitlines()]
    return [lines[k - 1] for k, line in enumerate(lines) if line.startswith("C_ptr[")]


def test_parallel_store_guard_disappears_when_tiles_divide():
    """The store is guarded where a tile crosses the edge, and the guard costs nothing where the
    tiles divide the tensor (the simplifier drops it). Where it crosses, the loop nest is versioned:
    the tiles inside run a copy without the guard (lowering/access_guards.py)."""
    divides = _lines_before_stores(compile_on(_edge_tile_store(16, 16), CYTHON_C).get_kernel_source())
    crosses = _lines_before_stores(compile_on(_edge_tile_store(16, 13), CYTHON_C).get_kernel_source())
    assert len(divides) == 1 and not divides[0].startswith("if (")
    assert len(crosses) == 2 and sum(line.startswith("if (") for line in crosses) == 1, crosses


# -- 8-bit floats on CPU targets --------------------------------------------------------------------


def _fp8_scale():
    @T.prim_func
    def k(A: T.Tensor((16,), "float8_e4m3fn"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1) as _:
            for i in T.Parallel(16):
                B[i] = T.cast(A[i], "float32") * 2.0

    return k


@pytest.mark.parametrize("target", ["c", "llvm"])
def test_float8_kernels_are_refused_on_cpu_naming_the_tensor(target):
    """examples/gemm_fp8, deepseek_v4: an FP8 kernel on a CPU target stopped in TVM's code
    generators ('Cannot convert type float8_e4m3fn to C type' on c, a 'Check failed' on llvm)."""
    from tilelang_core.errors import TargetFeatureError

    with pytest.raises(TargetFeatureError, match=r"test_examples_sweep_regressions\.py:\d+: kernel 'k' uses "
                       r"float8_e4m3fn \(tensor parameter 'A'\), which CPU targets \(c, llvm\) cannot compile"):
        tilelang.lower(_fp8_scale(), target=target)


def test_datatype_from_tilelang():
    """examples/dequantize_gemm (gemv fp16 x int4): ``from tilelang import DataType`` (upstream
    re-exports TVM's) was an ImportError."""
    from tilelang import DataType

    assert DataType("float16").bits == 16
    assert DataType("int4").bits == 4


# -- T.reinterpret in TileLang's argument order ----------------------------------------------------


def _bits():
    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "int32"), C: T.Tensor((8,), "int32"),
          D: T.Tensor((8,), "float32")):
        with T.Kernel(1) as _:
            for i in T.Parallel(8):
                B[i] = T.reinterpret(A[i], T.int32)  # TileLang's order
                C[i] = T.reinterpret("int32", A[i])  # TVMScript's order
                D[i] = T.reinterpret(B[i] ^ T.int32(-2147483648), dtype=T.float32)  # flip the sign bit

    return k


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_reinterpret_takes_either_argument_order(path):
    """examples/deepseek_v32 (topk_selector): ``T.reinterpret(x, T.uint32)`` (TileLang's order) was
    a TVM type error ('Expected ir.Expr but got DataType')."""
    kernel = compile_on(_bits(), path)
    a = torch.randn(8)
    b, c, d = torch.zeros(8, dtype=torch.int32), torch.zeros(8, dtype=torch.int32), torch.zeros(8)
    kernel(a, b, c, d)
    assert torch.equal(b, a.view(torch.int32)) and torch.equal(c, a.view(torch.int32))
    torch.testing.assert_close(d, -a)


def test_reinterpret_needs_one_value_and_one_dtype():
    from tilelang_core.language.reinterpret import reinterpret

    with pytest.raises(TypeError, match=r"T\.reinterpret\(value, dtype\): expected one value and one dtype"):
        reinterpret("int32", "float32")


# -- GPU thread bindings in CPU kernels --------------------------------------------------------------


def _thread_bound():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _:
            for tx in T.thread_binding(0, 64, thread="threadIdx.x"):
                B[tx] = A[tx] * 2.0

    return k


@pytest.mark.parametrize("target", ["c", "llvm"])
def test_thread_binding_on_cpu_is_refused_at_its_line(target):
    """examples/dequantize_gemm (gemv fp16 x int4): a ``T.thread_binding`` loop in a kernel lowered
    for a CPU target stopped in TVM's code generator with a bare 'not implemented'."""
    from tilelang_core.errors import LoweringError

    with pytest.raises(LoweringError, match=r"test_examples_sweep_regressions\.py:\d+: T\.thread_binding loop 'tx' "
                       r"is bound to the GPU index 'threadIdx\.x', which CPU targets \(c, llvm\) do not have"):
        tilelang.lower(_thread_bound(), target=target)


# -- an eager function's prologue with an if -------------------------------------------------------


@tilelang.jit(target="c")
def _scaled_copy(x, scale=None, block: int = 16):
    """Eager style with Python ``if`` statements before the parameter annotations."""
    if scale is None:
        scale = 0.5
    else:
        scale = scale * 2.0
    assert block % 8 == 0, "block must be a multiple of 8"
    N = T.const("N")
    x: T.Tensor([N], T.float32)
    y = T.empty([N], T.float32)
    with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
        for i in T.Parallel(block):
            y[bx * block + i] = x[bx * block + i] * scale
    return y


def test_eager_prologue_may_hold_if_statements():
    """examples/deepseek_v32 (sparse_mla_fwd_pipelined): ``if sm_scale is None: ...`` before the
    annotations ended the prologue, then 'annotate parameter 'Q' before the kernel body starts'."""
    x = torch.randn(40)
    torch.testing.assert_close(_scaled_copy(x), x * 0.5)
    torch.testing.assert_close(_scaled_copy(x, 3.0), x * 6.0)


def test_tilelang_math_helpers():
    """examples/deepseek_v32, deepseek_mla, ...: ``tilelang.math.next_power_of_2`` was an AttributeError."""
    import tilelang.math as tmath

    assert [tmath.next_power_of_2(x) for x in (0, 1, 2, 3, 48, 64, 65)] == [1, 1, 2, 4, 64, 64, 128]
    assert tilelang.math.cdiv(10, 4) == 3 and tilelang.math.cdiv(8, 4) == 2
    with pytest.raises(TypeError):
        tmath.next_power_of_2(2.5)


# -- several dynamic dimensions in one T.dynamic ------------------------------------------------------


def _rows_times_two():
    m, n = T.dynamic("m, n")

    @T.prim_func
    def k(A: T.Tensor((m, n), "float32"), B: T.Tensor((m, n), "float32")):
        with T.Kernel(T.ceildiv(m, 4)) as bx:
            for i, j in T.Parallel(4, n):
                if bx * 4 + i < m:
                    B[bx * 4 + i, j] = A[bx * 4 + i, j] * 2.0

    return k


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_dynamic_takes_several_names(path):
    """examples/deepseek_v32 (sparse_mla_fwd_pipelined): ``T.dynamic("batch, seq_len, seq_len_kv")``
    was refused ('name must be a Python identifier'); as in TileLang it gives one symbol per name."""
    kernel = compile_on(_rows_times_two(), path)
    for shape in ((5, 3), (9, 7)):
        a = torch.randn(*shape)
        b = torch.zeros(*shape)
        kernel(a, b)
        torch.testing.assert_close(b, a * 2.0)
    with pytest.raises(ValueError, match="must be a Python identifier"):
        T.dynamic("m, 2n")
