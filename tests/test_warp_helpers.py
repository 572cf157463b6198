"""Warp/thread-index helpers and explicit barriers: ``T.get_lane_idx``, ``T.get_warp_idx``,
``T.get_warp_idx_sync``, ``T.get_warp_group_idx``, ``T.shuffle_elect``, ``T.warp_reduce_*``,
``T.sync_warp``, ``T.sync_threads``, ``T.sync_grid``.

CPU targets: the GPU-only ones are refused at their line; the barriers do nothing and a kernel
with them runs on the three CPU paths against torch. CUDA: the source holds the expected code
and compiles with ``nvcc -c``; the indices, elections, barriers and warp reductions run on the
emulated GPU of tests/test_tileops_cuda.py (one block = one OpenMP team; here also a warp
shuffle made of team barriers), checked thread by thread against the references the GPU check
kit uses. ``gpu``-marked tests run the kernels on a device (skipped without one).
"""

from __future__ import annotations

import pathlib
import re
import sys

import pytest
import torch

import tilelang.language as T
from tilelang_core.errors import LoweringError
from tilelang_core.language.tileops._common import OperandTypeError
from tilelang_core.lowering import lower

_HERE = pathlib.Path(__file__).resolve().parent
_THIS = pathlib.Path(__file__).resolve()
sys.path.insert(0, str(_HERE))
from private_modules import load_private  # noqa: E402
from backend_pairs import compile_on  # noqa: E402
from source_lines import marked_line  # noqa: E402

W = load_private("warp_kernels", "warp_helpers_warp_kernels")
CU = load_private("test_tileops_cuda", "warp_helpers_test_tileops_cuda")  # nvcc lookup and translation units, the GPU emulator (a private copy)


def _line_of(marker: str) -> int:
    return marked_line(_THIS, marker)


# -- CPU targets: GPU-only helpers refused, barriers do nothing --------------------------------

_GPU_ONLY = {
    "get_lane_idx": lambda f, i: T.get_lane_idx(),
    "get_warp_idx": lambda f, i: T.get_warp_idx(64),
    "get_warp_idx_sync": lambda f, i: T.get_warp_idx_sync(),
    "get_warp_group_idx": lambda f, i: T.get_warp_group_idx(32, 2),
    "shuffle_elect": lambda f, i: T.shuffle_elect(64),
    "warp_reduce_sum": lambda f, i: T.warp_reduce_sum(f),
    "warp_reduce_max": lambda f, i: T.warp_reduce_max(f),
    "warp_reduce_min": lambda f, i: T.warp_reduce_min(i),
    "warp_reduce_bitand": lambda f, i: T.warp_reduce_bitand(i),
    "warp_reduce_bitor": lambda f, i: T.warp_reduce_bitor(i),
}


def _one(helper):
    @T.prim_func
    def one_helper(F: T.Tensor((64,), "float32"), I: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=64) as _:
            for i in T.Parallel(64):
                I[i] = T.cast(helper(F[i], I[i]), "int32")  # <gpu-only>

    return one_helper


@pytest.mark.parametrize("name,target", [(n, "c") for n in _GPU_ONLY]
                         + [("get_lane_idx", "llvm"), ("warp_reduce_bitor", "llvm")])
def test_gpu_only_helpers_are_refused_on_cpu_at_their_line(name, target):
    with pytest.raises(LoweringError) as info:
        lower(_one(_GPU_ONLY[name]), target=target, consumes=["device_source" if target == "c" else "runtime_module"])
    text = str(info.value)
    assert text.startswith(f"{_THIS}:{_line_of('gpu-only')}: "), text
    assert f"T.{name} is a GPU intrinsic" in text and f"CPU targets ({target})" in text, text
    assert "Lower this kernel for cuda" in text, text
    # the same kernel lowers for cuda
    lower(_one(_GPU_ONLY[name]), target="cuda")


def _compile(func, backend, target):
    return compile_on(func, (backend, target))


@pytest.mark.parametrize("backend,target,dynamic", [("cython", "c", True), ("tvm_ffi", "c", False),
                                                    ("tvm_ffi", "llvm", True)],
                         ids=["cython-c-dynamic", "tvm_ffi-c-static", "tvm_ffi-llvm-dynamic"])
def test_barriers_do_nothing_on_cpu_and_the_kernel_runs(backend, target, dynamic):
    """T.sync_threads(), T.sync_warp() and a named barrier in a GPU-style kernel: on CPU targets a
    block runs as one thread, so they are dropped and the shared-memory exchange is still right."""
    n = 200
    art = lower(W.barriers(n, dynamic=dynamic), target="c")
    for needle in ("__syncthreads", "__syncwarp", "bar.sync", "tl_named_barrier", "tl.math"):
        assert needle not in art.device_source, needle
    kernel = _compile(W.barriers(n, dynamic=dynamic), backend, target)
    a = torch.randn(n)
    b = torch.full((n,), float("nan"))
    kernel(a, b)
    torch.testing.assert_close(b, W.barriers_reference(a), rtol=0, atol=0)
    if dynamic:  # another size through the same kernel
        a2 = torch.randn(70)
        b2 = torch.full((70,), float("nan"))
        kernel(a2, b2)
        torch.testing.assert_close(b2, W.barriers_reference(a2), rtol=0, atol=0)


@pytest.mark.parametrize("backend,target", [("cython", "c"), ("tvm_ffi", "c"), ("tvm_ffi", "llvm")])
def test_tvms_own_storage_sync_written_in_a_kernel_does_nothing_on_cpu(backend, target):
    """``T.tvm_storage_sync("shared")`` (TVM's name of ``__syncthreads()``, written by hand in
    KernelBench solutions) is dropped on CPU targets as ``T.sync_threads()`` is; TVM's LLVM code
    generator stopped on it with "not implemented", at the kernel's ``def``."""

    @T.prim_func
    def reverse(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            s = T.alloc_shared((64,), "float32")
            T.copy(A, s)
            T.tvm_storage_sync("shared")
            for i in T.Parallel(64):
                B[i] = s[63 - i]

    a = torch.arange(64, dtype=torch.float32)
    b = torch.empty(64)
    _compile(reverse, backend, target)(a, b)
    assert torch.equal(b, a.flip(0))


@pytest.mark.parametrize("target", ["c", "cuda"])
def test_sync_grid_is_refused_at_its_line_on_every_target(target):
    @T.prim_func
    def grid_barrier(A: T.Tensor((256,), "float32")):
        with T.Kernel(4, threads=64) as bx:
            for i in T.Parallel(64):
                A[bx * 64 + i] = A[bx * 64 + i] + 1
            T.sync_grid()  # <sync-grid>
            for i in T.Parallel(64):
                A[bx * 64 + i] = A[(3 - bx) * 64 + i]

    with pytest.raises(LoweringError) as info:
        lower(grid_barrier, target=target)
    text = str(info.value)
    assert text.startswith(f"{_THIS}:{_line_of('sync-grid')}: T.sync_grid()"), text
    assert "cooperative kernel launch" in text and "no backend here" in text and "no target lowers it" in text, text
    assert "Split the kernel in two" in text, text


# -- argument errors -------------------------------------------------------------------------


def _definition_error(build, marker, error=LoweringError) -> str:
    with pytest.raises(error) as info:
        build()
    text = str(info.value)
    assert type(info.value).__module__.startswith("tilelang_core."), repr(info.value)
    assert text.startswith(f"{_THIS}:{_line_of(marker)}: "), text
    return text


def _kernel_with(make):
    """A kernel whose one statement stores ``make(tx, f)``."""

    def build():
        @T.prim_func
        def bad(F: T.Tensor((64,), "float32"), I: T.Tensor((64,), "int32")):
            with T.Kernel(1, threads=64) as _:
                tx = T.get_thread_binding()
                I[tx] = T.cast(make(tx, F[tx]), "int32")  # <bad-arg>

    return build


@pytest.mark.parametrize("make,error,needles", [
    (lambda tx, f: T.get_lane_idx(0), LoweringError, ["T.get_lane_idx(0)", "warp_size must be a positive integer, got 0"]),
    (lambda tx, f: T.get_warp_idx(-32), LoweringError, ["warp_size must be a positive integer, got -32"]),
    (lambda tx, f: T.get_warp_idx_sync(True), OperandTypeError, ["T.get_warp_idx_sync", "got True"]),
    (lambda tx, f: T.get_lane_idx(f), OperandTypeError, ["T.get_lane_idx", "integer expression, got float32"]),
    (lambda tx, f: T.get_warp_group_idx(None, 2), LoweringError,
     ["T.get_warp_group_idx", "warps_per_group needs warp_size as well"]),
    (lambda tx, f: T.get_warp_group_idx(32, 0), LoweringError, ["warps_per_group must be a positive integer, got 0"]),
    (lambda tx, f: T.shuffle_elect(-1), LoweringError, ["T.shuffle_elect(-1)", "non-negative integer", "got -1"]),
    (lambda tx, f: T.shuffle_elect(tx), LoweringError, ["T.shuffle_elect", "known when the kernel is defined"]),
    (lambda tx, f: T.warp_reduce_bitand(f), OperandTypeError, ["T.warp_reduce_bitand needs a scalar integer", "got float32"]),
    (lambda tx, f: T.warp_reduce_bitor(f > 0), OperandTypeError, ["T.warp_reduce_bitor", "got bool"]),
    (lambda tx, f: T.warp_reduce_sum(f > 0), OperandTypeError, ["T.warp_reduce_sum needs a scalar integer or float", "got bool"]),
], ids=["lane-0", "warp-negative", "warp-sync-bool", "lane-float", "group-no-warp-size", "group-0",
        "elect-negative", "elect-expression", "bitand-float", "bitor-bool", "sum-bool"])
def test_index_and_reduction_argument_errors(make, error, needles):
    text = _definition_error(_kernel_with(make), "bad-arg", error)
    for needle in needles:
        assert needle in text, (needle, text)


def _barrier_with(make):
    def build():
        @T.prim_func
        def bad_barrier(I: T.Tensor((64,), "int32")):
            with T.Kernel(1, threads=64) as _:
                tx = T.get_thread_binding()
                make(tx)  # <bad-barrier>
                I[tx] = tx

    return build


@pytest.mark.parametrize("make,error,needles", [
    (lambda tx: T.sync_threads(16), LoweringError, ["T.sync_threads(16)", "between 0 and 15", "got 16"]),
    (lambda tx: T.sync_threads(1, 100), LoweringError, ["T.sync_threads(1, 100)", "multiple of 32", "got 100"]),
    (lambda tx: T.sync_threads(1, 0), LoweringError, ["multiple of 32", "got 0"]),
    (lambda tx: T.sync_threads(arrive_count=64), LoweringError, ["arrive_count needs a barrier_id"]),
    (lambda tx: T.sync_threads(1.5), OperandTypeError, ["barrier_id must be an integer, got float"]),
    (lambda tx: T.sync_warp(T.float32(1)), OperandTypeError, ["T.sync_warp", "mask must be an integer, got float32"]),
], ids=["id-16", "count-100", "count-0", "count-without-id", "id-float", "mask-float"])
def test_barrier_argument_errors(make, error, needles):
    text = _definition_error(_barrier_with(make), "bad-barrier", error)
    for needle in needles:
        assert needle in text, (needle, text)


def test_barrier_arguments_may_be_expressions():
    """A barrier id and count computed in the kernel are passed on as they are (unchecked)."""

    @T.prim_func
    def computed(I: T.Tensor((256,), "int32")):
        with T.Kernel(1, threads=256) as _:
            tx = T.get_thread_binding()
            T.sync_threads(tx // 64 + 1, 64)
            T.sync_threads(1)
            T.sync_warp(T.cast(tx, "uint32") | T.uint32(0xFFFF))
            I[tx] = tx

    src = lower(computed, target="cuda").device_source
    assert re.search(r"tl_named_barrier_sync\(\(\(tx\[0\] >> 6\) \+ 1\), 64\);", src), src
    assert "tl_named_barrier_sync_all(1);" in src and "__syncwarp(" in src


# -- CUDA source, ThreadSync, nvcc -------------------------------------------------------------

_REDUCE_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                  "float16", "bfloat16", "float32", "float64")


@pytest.fixture(scope="module")
def cuda_sources():
    arts = {"indices": lower(W.warp_indices(2), target="cuda"),
            "barriers": lower(W.barriers(200, dynamic=True), target="cuda")}
    for dtype in _REDUCE_DTYPES:
        arts[f"reduce_{dtype}"] = lower(W.warp_reduce(dtype), target="cuda")
    return arts


def test_cuda_source_of_the_helpers(cuda_sources):
    src = cuda_sources["indices"].device_source
    body = src[src.index('extern "C" __global__'):]
    # indices from tid = x + 16*y + 64*z, simplified by TVM with the thread extents (16, 4, 2)
    assert "I_ptr[(g[0] * 10)] = (((((int)threadIdx.y) & 1) * 16) + ((int)threadIdx.x));" in body, body
    assert "I_ptr[((g[0] * 10) + 4)] = 0;" in body  # 128 threads: all in warp group 0
    assert "/ ((((int)blockIdx.x) * 8) + 8))" in body  # warp size given by an expression
    assert body.count("__syncthreads()") == 1 and "tl_named_barrier_sync(1, 128);" in body
    assert "tl_named_barrier_sync_all(2);" in body and "__syncwarp((uint)4294967295);" in body
    assert 'asm volatile("bar.sync %0, %1;"' in src and 'asm volatile("bar.sync %0;"' in src
    for dtype in _REDUCE_DTYPES:
        src = cuda_sources[f"reduce_{dtype}"].device_source
        ops = ("sum", "max", "min", "bitand", "bitor") if dtype.startswith(("int", "uint")) else ("sum", "max", "min")
        for op in ops:
            assert f"tl_warp_reduce_{op}_{dtype}(" in src[src.index('extern "C" __global__'):], (dtype, op)
        assert "__shfl_xor_sync(0xffffffffu, x, m, 32)" in src
    f32 = cuda_sources["reduce_float32"].device_source
    assert "x = fmaxf(x, y);" in f32 and "x = fminf(x, y);" in f32
    assert "float x = __half2float(v);" in cuda_sources["reduce_float16"].device_source
    assert "return __float2bfloat16_rn(x);" in cuda_sources["reduce_bfloat16"].device_source
    assert "int x = (int)v;" in cuda_sources["reduce_int8"].device_source  # shuffled as int, wraps on return


def _body(func):
    src = lower(func, target="cuda").device_source
    return src[src.index('extern "C" __global__'):]


def _exchange(barrier):
    """Thread t writes shared[t], ``barrier(t)``, then reads shared[63 - t]: a barrier is needed."""

    @T.prim_func
    def exchange(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _:
            s = T.alloc_shared((64,), "float32")
            tx = T.get_thread_binding()
            s[tx] = A[tx]
            barrier(tx)
            A[tx] = s[63 - tx]

    return exchange


def test_explicit_barriers_and_tvm_barrier_insertion():
    """TVM's ThreadSync inserts a __syncthreads() where the exchange needs one; an explicit
    T.sync_threads() (plain or named) counts as that barrier, so none is added next to it."""
    none = _body(_exchange(lambda tx: T.evaluate(0)))
    assert none.count("__syncthreads()") == 1  # TVM's own
    explicit = _body(_exchange(lambda tx: T.sync_threads()))
    assert explicit.count("__syncthreads()") == 1
    named = _body(_exchange(lambda tx: T.sync_threads(3, 64)))
    assert named.count("__syncthreads()") == 0 and named.count("tl_named_barrier_sync(3, 64);") == 1
    warp_only = _body(_exchange(lambda tx: T.sync_warp()))  # not a block barrier: TVM still adds one
    assert warp_only.count("__syncthreads()") == 1 and "__syncwarp(" in warp_only
    # no barrier ends up inside a branch: every barrier line is at the kernel body's indentation
    for body in (explicit, named, warp_only):
        for line in body.splitlines():
            if "sync" in line and "(" in line and not line.startswith("extern"):
                assert line.startswith("  ") and not line.startswith("   "), line


@pytest.mark.parametrize("target", ["cuda", "c"])
def test_barriers_and_warp_reductions_in_a_guarded_parallel_loop(target):
    """On GPU, T.Parallel(100) over 64 threads guards its body (``if flat < 100``): a barrier or a
    warp reduction there would not be reached by every thread, so it is refused; T.Parallel(128)
    needs no guard and is fine. On CPU the barriers do nothing and the first kernel lowers."""

    def make(extent, which):
        @T.prim_func
        def in_parallel(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=64) as _:
                for i in T.Parallel(extent):
                    A[i] = A[i] + 1
                    which(A, i)  # <in-parallel>

        return in_parallel

    barrier = lambda A, i: T.sync_threads()  # noqa: E731
    if target == "c":
        assert "__syncthreads" not in lower(make(100, barrier), target="c").device_source
        return
    with pytest.raises(LoweringError) as info:
        lower(make(100, barrier), target="cuda")
    text = str(info.value)
    assert text.startswith(f"{_THIS}:{_line_of('in-parallel')}: T.sync_threads inside a T.Parallel loop of 100 "
                           "iterations over 64 threads"), text
    assert "every thread of the block" in text and "Call it outside the T.Parallel loop" in text
    reduce = lambda A, i: T.evaluate(T.warp_reduce_sum(A[i]))  # noqa: E731
    with pytest.raises(LoweringError, match=r"T\.warp_reduce_sum inside a T\.Parallel loop.*every lane of the warp"):
        lower(make(100, reduce), target="cuda")
    assert "__syncthreads()" in _body(make(128, barrier))
    assert "tl_warp_reduce_sum_float32(" in lower(make(128, reduce), target="cuda").device_source


def test_full_warp_operations_need_whole_warps():
    """A warp reduction or a full-mask T.sync_warp names all 32 lanes: refused in a block whose
    thread count is not a multiple of 32 (its last warp is partial); a mask of the lanes that
    exist is fine."""

    def make(threads, which):
        @T.prim_func
        def partial(A: T.Tensor((64,), "int32")):
            with T.Kernel(1, threads=threads) as _:
                tx = T.get_thread_binding()
                which(A, tx)  # <partial-warp>

        return partial

    with pytest.raises(LoweringError) as info:
        lower(make(48, lambda A, tx: T.evaluate(T.warp_reduce_max(A[tx]))), target="cuda")
    text = str(info.value)
    assert text.startswith(f"{_THIS}:{_line_of('partial-warp')}: T.warp_reduce_max works on whole warps"), text
    assert "has 48 threads per block, so its last warp has only 16" in text and "multiple of 32 threads" in text
    with pytest.raises(LoweringError, match="T.sync_warp works on whole warps.*a T.sync_warp mask of the lanes"):
        lower(make(16, lambda A, tx: T.sync_warp()), target="cuda")
    assert "__syncwarp((uint)65535);" in _body(make(16, lambda A, tx: T.sync_warp(0xFFFF)))
    assert "tl_warp_reduce_max_int32(" in lower(make(64, lambda A, tx: T.evaluate(T.warp_reduce_max(A[tx]))),
                                                target="cuda").device_source


@pytest.mark.parametrize(
    "name, call, needs",
    [
        ("syncthreads_or", lambda A, i: T.syncthreads_or(A[i] > 0), "every thread of the block"),
        ("syncthreads_count", lambda A, i: T.syncthreads_count(A[i] > 0), "every thread of the block"),
        ("shfl_xor", lambda A, i: T.shfl_xor(A[i], 1), "every lane of the warp"),
        ("shfl_sync", lambda A, i: T.shfl_sync(A[i], 0), "every lane of the warp"),
        ("any_sync", lambda A, i: T.any_sync(A[i] > 0), "every lane of the warp"),
        ("ballot_sync", lambda A, i: T.cast(T.ballot_sync(A[i] > 0), "float32"), "every lane of the warp"),
    ],
)
def test_block_votes_and_full_mask_shuffles_in_a_guarded_parallel_loop(name, call, needs):
    """The older votes and shuffles get the same refusal as the barriers and warp reductions: in
    T.Parallel(100) over 64 threads the guard keeps threads 36..63 of the second pass away, so a
    block vote would hang and a full-mask shuffle or vote would name lanes that never arrive.
    A partial mask is the kernel's own promise and lowers; so does a loop that covers every thread."""

    def make(extent, which):
        @T.prim_func
        def guarded(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=64) as _:
                for i in T.Parallel(extent):
                    A[i] = which(A, i)  # <guarded-vote>

        return guarded

    with pytest.raises(LoweringError) as info:
        lower(make(100, call), target="cuda")
    text = str(info.value)
    assert text.startswith(f"{_THIS}:{_line_of('guarded-vote')}: T.{name} inside a T.Parallel loop of 100 iterations "
                           "over 64 threads"), text
    assert needs in text and "Call it outside the T.Parallel loop" in text
    assert ("pass a mask of the lanes that take part" in text) == name.startswith(("shfl", "any", "ballot"))
    assert "__" in lower(make(128, call), target="cuda").device_source
    half_mask = lower(make(100, lambda A, i: T.shfl_xor(A[i], 1, mask=0xFFFF)), target="cuda").device_source
    assert "__shfl_xor_sync((uint)65535" in half_mask or "__shfl_xor_sync(65535" in half_mask, half_mask


def test_full_mask_shuffles_need_whole_warps():
    """A shuffle or vote with the full (default) mask in a block of 48 threads names lanes 16..31
    of the second warp, which do not exist: refused; with a mask of the lanes that exist it lowers."""

    def make(which):
        @T.prim_func
        def partial(A: T.Tensor((64,), "int32")):
            with T.Kernel(1, threads=48) as _:
                tx = T.get_thread_binding()
                A[tx] = which(A, tx)  # <partial-shuffle>

        return partial

    with pytest.raises(LoweringError) as info:
        lower(make(lambda A, tx: T.shfl_down(A[tx], 1)), target="cuda")
    text = str(info.value)
    assert text.startswith(f"{_THIS}:{_line_of('partial-shuffle')}: T.shfl_down works on whole warps"), text
    assert "a T.shfl_down mask of the lanes that exist" in text
    with pytest.raises(LoweringError, match="T.all_sync works on whole warps"):
        lower(make(lambda A, tx: T.all_sync(A[tx] > 0)), target="cuda")
    assert "__shfl_down_sync(" in lower(make(lambda A, tx: T.shfl_down(A[tx], 1, mask=0xFFFF)), target="cuda").device_source


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_cuda_sources_compile_with_nvcc(cuda_sources, tmp_path):
    """Every helper of every dtype, the barriers and the indices, compiled for sm_80."""
    CU.compile_translation_units(cuda_sources, tmp_path, suppress="177,550")


# -- the emulated GPU ------------------------------------------------------------------------

#: The emulator's stand-ins for what these kernels use beyond tests/test_tileops_cuda.py's header:
#: the helpers are compiled as ordinary functions; a warp shuffle is two team barriers around an
#: exchange through a team-shared array (every thread of the block calls it together, as a
#: full-mask shuffle requires); __syncwarp and the named barriers are team barriers (the kernels
#: here reach them with every thread of the block, and their named barriers count the whole block).
_EMU_EXTRA = r"""
#define __device__
#define __forceinline__ inline
#define TL_INTRINSIC_TL_NAMED_BARRIER_SYNC
#define __syncwarp(mask) _Pragma("omp barrier")
static inline void tl_named_barrier_sync(int id, int count) { (void)id; (void)count; _Pragma("omp barrier") }
static inline void tl_named_barrier_sync_all(int id) { (void)id; _Pragma("omp barrier") }
template <class T> static inline T __shfl_xor_sync(unsigned int mask, T v, int lane_mask, int width) {
  static T slot[1024];
  int t = omp_get_thread_num();
  slot[t] = v;
  _Pragma("omp barrier")
  T r = slot[t ^ lane_mask];
  _Pragma("omp barrier")
  return r;
}
"""


def _emulated(art, build_dir):
    """``art``'s kernel on the emulated GPU, with its helpers (they lie before TVM's preamble,
    which the emulator leaves out)."""
    from tilelang_core.lowering.atomics import CUDA_HELPERS_BEGIN, CUDA_HELPERS_END

    src = art.device_source
    helpers = src[src.index(CUDA_HELPERS_BEGIN):src.index(CUDA_HELPERS_END)] if CUDA_HELPERS_BEGIN in src else ""
    base = CU._EMU_HEADER
    CU._EMU_HEADER = base + _EMU_EXTRA + helpers + "\n"
    try:
        return CU._emulated(art, build_dir)
    finally:
        CU._EMU_HEADER = base


def _kit_case(case_id):
    """The GPU check kit's case ``case_id`` and its inputs (seeded as on the GPU machine)."""
    root = _HERE.parent / "scripts"
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from gpu_kit import tensors
    from gpu_kit.compat_cases import compat_cases

    case = next(c for c in compat_cases() if c.id == case_id)
    return case, tensors.call_arguments(case.params)


@CU.emulator
def test_emulated_indices_elections_and_barriers_match_the_kit_reference(cuda_sources, tmp_path):
    """Lane/warp/group indices with 3-D thread blocks, elections, and values exchanged through
    shared memory across T.sync_threads(), named barriers and T.sync_warp(), thread by thread."""
    case, args = _kit_case("compat.warp_indices")
    assert case.expected_fn.__name__ == "warp_indices_reference"  # tests/warp_kernels.py's, as loaded by the kit
    run = _emulated(cuda_sources["indices"], tmp_path)
    a, out = args["A"], args["I"]
    run(a, out)
    want = case.expected_fn(a)
    assert torch.equal(out, want), (out - want).abs().nonzero()[:8]
    b = torch.full((200,), float("nan"))
    x = torch.randn(200)
    _emulated(cuda_sources["barriers"], tmp_path)(x, b)
    torch.testing.assert_close(b, W.barriers_reference(x), rtol=0, atol=0)


@CU.emulator
@pytest.mark.parametrize("dtype", ["int32", "float32", "int8", "uint64", "float64"])
def test_emulated_warp_reductions(cuda_sources, tmp_path, dtype):
    """The warp-reduction helpers run (shuffles emulated): every lane gets its own warp's result;
    integer sums wrap; float max/min ignore a NaN lane, the sum does not."""
    case, args = _kit_case(f"compat.warp_reduce_{dtype}")
    x, out = args["X"], args["O"]
    run = _emulated(cuda_sources[f"reduce_{dtype}"], tmp_path)
    run(x, out)
    want = case.expected_fn(x)
    tol = 1e-5 if dtype == "float32" else (1e-12 if dtype == "float64" else 0)
    if dtype == "uint64":
        out, want = out.double(), want.double()
    torch.testing.assert_close(out, want, rtol=tol, atol=tol, equal_nan=True)
    assert not torch.equal(out[0], out[32])  # two warps, two results
    if dtype == "float32":  # the kit's input has a NaN in lane 5 of warp 0
        assert torch.isnan(x[5]) and torch.isnan(out[:32, 0]).all() and not torch.isnan(out[:, 1:]).any()


# -- on a device -----------------------------------------------------------------------------


@pytest.mark.gpu
@CU.requires_gpu
def test_gpu_warp_helpers_and_barriers():
    import tilelang_core

    a = torch.randint(-1000, 1000, (256,), dtype=torch.int32, device="cuda")
    out = torch.zeros(256, W.INDEX_COLUMNS, dtype=torch.int32, device="cuda")
    tilelang_core.compile(W.warp_indices(2), target="cuda")(a, out)
    assert torch.equal(out.cpu(), W.warp_indices_reference(a.cpu()))
    for dtype in ("int32", "float32", "float16", "int64"):
        x = (torch.randn(64) * 10).to(getattr(torch, dtype)).cuda()
        o = torch.zeros(64, 5 if dtype.startswith("int") else 3, dtype=x.dtype, device="cuda")
        tilelang_core.compile(W.warp_reduce(dtype), target="cuda")(x, o)
        tol = {"float16": 2e-3, "float32": 1e-5}.get(dtype, 0)
        torch.testing.assert_close(o.cpu(), W.warp_reduce_reference(x.cpu()), rtol=tol, atol=tol)
