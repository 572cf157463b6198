"""TileLang's argument order and keyword names on the kernel-language functions.

A kernel written for TileLang passes some arguments by position: ``T.gemm(A_s, B_s, C_f, False,
True, T.GemmWarpPolicy.FullRow)``, ``T.alloc_shared((64, 32), T.float16, "shared.dyn")``,
``T.reduce_max(x, m, 1, True, 2)``. Where our order differed, such a kernel either stopped with
a message about another parameter or, worse, ran with the argument in another role (the warp
policy, a truthy enum, became ``clear_accum`` and the product lost the accumulator's values).
These tests run such calls against torch on the three CPU paths, check the CUDA sources with
``nvcc -c`` and the emulated GPU, and pin the positional order of every function listed in
:data:`TILELANG_POSITIONAL`.
"""

from __future__ import annotations

import inspect
import pathlib
import re
import sys
from typing import Optional

import pytest
import torch

import tilelang.language as T
from tilelang_core.errors import LoweringError
from tilelang_core.lowering import lower

_HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
from private_modules import load_private  # noqa: E402
from backend_pairs import PATHS, compile_on, path_id  # noqa: E402

CU = load_private("test_tileops_cuda")  # nvcc lookup, one-translation-unit merge, the GPU emulator

#: Leading positional parameters of TileLang 0.1.15's functions (names and order), which kernels
#: written for TileLang rely on. Our functions may take more parameters after these.
TILELANG_POSITIONAL = {
    "gemm": ["A", "B", "C", "transpose_A", "transpose_B", "policy", "clear_accum"],
    "reduce_sum": ["buffer", "out", "dim", "clear", "batch", "annotations"],
    "reduce_max": ["buffer", "out", "dim", "clear", "batch", "nan_propagate", "annotations"],
    "reduce_min": ["buffer", "out", "dim", "clear", "batch", "nan_propagate", "annotations"],
    "reduce_absmax": ["buffer", "out", "dim", "clear", "batch", "nan_propagate", "annotations"],
    "reduce_abssum": ["buffer", "out", "dim", "batch", "annotations"],
    "reduce_bitand": ["buffer", "out", "dim", "clear", "batch", "annotations"],
    "reduce_bitor": ["buffer", "out", "dim", "clear", "batch", "annotations"],
    "reduce_bitxor": ["buffer", "out", "dim", "clear", "batch", "annotations"],
    "alloc_shared": ["shape", "dtype", "scope"],
    "alloc_buffer": ["shape", "dtype", "scope", "annotations"],
    "alloc_local": ["shape", "dtype", "scope"],
    "alloc_fragment": ["shape", "dtype", "scope"],
    "round": ["x", "rounding_mode"],
    "align_up": ["x", "y"],
    "ceildiv": ["lhs", "rhs"],
    "cdiv": ["lhs", "rhs"],
    "transpose": ["src", "dst", "annotations"],
    "Persistent": ["domain", "wave_size", "index", "group_size", "num_stages"],
    "Pipelined": ["start", "stop", "num_stages", "order", "stage", "annotations"],
    "Unroll": ["start", "stop", "step"],
    "unroll": ["start", "stop", "step"],
    "async_copy": ["src", "dst"],
    "ptx_wait_group": ["num"],
    "annotate_safe_value": ["safe_value_map"],
    "annotate_pass_configs": ["configs"],
}

#: Keyword-only options of TileLang 0.1.15 that kernels pass by name.
TILELANG_KEYWORDS = {
    "Parallel": ["coalesced_width", "loop_layout", "prefer_async", "annotations"],
    "Persistent": ["annotations"],
    "Unroll": ["explicit", "unroll_factor", "annotations"],
    "unroll": ["explicit", "unroll_factor", "annotations"],
    "async_copy": ["coalesced_width", "annotations", "loop_layout"],
    "gemm": ["annotations"],
    "reduce_abssum": ["clear"],
}


@pytest.mark.parametrize("name", sorted(TILELANG_POSITIONAL))
def test_positional_parameters_follow_tilelang(name):
    params = [p for p in inspect.signature(getattr(T, name)).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    expected = TILELANG_POSITIONAL[name]
    assert [p.name for p in params[: len(expected)]] == expected


@pytest.mark.parametrize("name", sorted(TILELANG_KEYWORDS))
def test_tilelang_keywords_are_accepted(name):
    params = inspect.signature(getattr(T, name)).parameters
    assert set(TILELANG_KEYWORDS[name]) <= set(params), sorted(set(TILELANG_KEYWORDS[name]) - set(params))


def gemm_positional(M: int, N: int, K: int, a_scope: str = "shared.dyn"):
    """``C = C0 + A @ B`` with the policy given by position, and a second product into ``D``
    whose first K step clears it (``clear_accum=ko == 0``). ``A``'s tile has scope ``a_scope``
    (TileLang's default ``shared.dyn`` is dynamic shared memory on CUDA, which the emulated GPU
    does not provide)."""

    @T.prim_func
    def kernel(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32"),
               D: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=32):
            A_s = T.alloc_shared((M, 8), "float32", a_scope)
            B_s = T.alloc_shared((8, N), "float32", "shared")
            C_f = T.alloc_fragment((M, N), "float32")
            D_f = T.alloc_fragment((M, N), "float32")
            T.copy(C, C_f)
            T.copy(D, D_f)
            for ko in T.serial(K // 8):
                T.copy(A[0, ko * 8], A_s)
                T.copy(B[ko * 8, 0], B_s)
                T.gemm(A_s, B_s, C_f, False, False, T.GemmWarpPolicy.FullRow)
                T.gemm(A_s, B_s, D_f, False, False, T.GemmWarpPolicy.Square, ko == 0)
            T.copy(C_f, C)
            T.copy(D_f, D)

    return kernel


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_gemm_policy_by_position_keeps_the_accumulator(path):
    """The sixth argument is the warp policy (it used to be clear_accum here, so FullRow cleared C)."""
    kernel = compile_on(gemm_positional(16, 8, 24), path)
    a, b = torch.randn(16, 24), torch.randn(24, 8)
    c, d = torch.randn(16, 8), torch.randn(16, 8)
    want_c = c + a @ b
    kernel(a, b, c, d)
    torch.testing.assert_close(c, want_c, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(d, a @ b, rtol=1e-4, atol=1e-4)  # cleared at ko == 0 only


def refused(tmp_path: pathlib.Path, body: str, message: str, params: str = 'A: T.Tensor((8,), "float32")',
            error: type = Exception, kernel: str = "with T.Kernel(1, threads=32):", at: Optional[int] = None) -> str:
    """Define a kernel from source (so that errors name a real file and line): ``params``, then
    ``kernel`` opening a block whose statements are ``body``; assert that defining it raises
    ``error`` matching ``message``, and return the message. A ``LoweringError`` must name the line
    of the ``at``-th line of ``body`` (1-based; default the last one)."""
    import importlib.util

    lines = [line for line in body.splitlines() if line.strip()]
    text = "import tilelang.language as T\n\n@T.prim_func\n" f"def kernel({params}):\n    {kernel}\n"
    text += "".join(f"        {line}\n" for line in lines) if lines else "        A[0] = 1.0\n"
    module = tmp_path / "refused_kernel.py"
    module.write_text(text)
    spec = importlib.util.spec_from_file_location(f"_refused_{abs(hash(str(module)))}", module)
    with pytest.raises(error, match=message) as info:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    if isinstance(info.value, LoweringError):
        where = 5 + (at or len(lines))
        assert f"{module}:{where}" in str(info.value), str(info.value)
    return str(info.value)


_TILES = "As = T.alloc_shared((8, 8), 'float32')\nBs = T.alloc_shared((8, 8), 'float32')\nCf = T.alloc_fragment((8, 8), 'float32')\n"


@pytest.mark.parametrize(
    "call, message",
    [
        ("T.gemm(As, Bs, Cf, False, False, True)", r"policy must be a T.GemmWarpPolicy .*got True.*clear_accum= by keyword"),
        ("T.gemm(As, Bs, Cf, policy=7)", r"policy must be one of Square, FullRow, FullCol, got 7"),
        ("T.gemm(As, Bs, Cf, clear_accum=T.GemmWarpPolicy.FullRow)", r"clear_accum must be a bool or a boolean expression"),
        ("T.gemm(As, Bs, Cf, mbar=As)", r"mbar= \(a Blackwell TCGEN5MMA barrier\) is not supported"),
    ],
)
def test_gemm_options_of_the_wrong_kind_are_refused(call, message, tmp_path):
    assert "T.gemm(As, Bs, Cf)" in refused(tmp_path, _TILES + call, message, error=LoweringError)


def reductions_positional(rows: int, M: int, N: int, dynamic: bool):
    """Row max with ``batch`` by position, abssum with ``batch`` as its fourth argument, keyword
    names ``buffer=``/``out=``, and ``nan_propagate`` by keyword."""
    rows = T.dynamic("rows") if dynamic else rows

    @T.prim_func
    def kernel(X: T.Tensor((rows, N), "float32"), Mx: T.Tensor((rows,), "float32"), Ab: T.Tensor((rows,), "float32"),
               Nn: T.Tensor((rows,), "float32"), Sm: T.Tensor((rows,), "float32")):
        with T.Kernel(T.ceildiv(rows, M), threads=32) as bx:
            x = T.alloc_fragment((M, N), "float32")
            mx = T.alloc_fragment((M,), "float32")
            ab = T.alloc_fragment((M,), "float32")
            nn = T.alloc_fragment((M,), "float32")
            sm = T.alloc_fragment((M,), "float32")
            T.copy(X[bx * M, 0], x)
            T.reduce_max(x, mx, 1, True, 2)
            T.reduce_abssum(x, ab, 1, 4)
            T.reduce_min(x, nn, 1, True, 1, True)
            T.reduce_sum(buffer=x, out=sm, dim=1)
            T.copy(mx, Mx[bx * M])
            T.copy(ab, Ab[bx * M])
            T.copy(nn, Nn[bx * M])
            T.copy(sm, Sm[bx * M])

    return kernel


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_reductions_take_tilelang_positions_and_names(path, dynamic):
    kernel = compile_on(reductions_positional(16, 8, 12, dynamic), path)
    x = torch.randn(16, 12)
    x[3, 5] = float("nan")
    outs = [torch.zeros(16) for _ in range(4)]
    kernel(x, *outs)
    mx, ab, nn, sm = outs
    clean = x.nan_to_num(nan=-float("inf"))
    torch.testing.assert_close(mx, clean.max(1).values)
    torch.testing.assert_close(ab, x.abs().sum(1), rtol=1e-5, atol=1e-5, equal_nan=True)
    assert torch.isnan(nn[3]) and torch.equal(torch.cat([nn[:3], nn[4:]]), torch.cat([x[:3], x[4:]]).min(1).values)
    assert torch.isnan(sm[3])


@pytest.mark.parametrize(
    "call, message",
    [
        ("T.reduce_sum(S, D, 1, 2)", r"T.reduce_sum\(S, D\): clear must be True or False, got 2"),
        ("T.reduce_max(S, D, 1, True, 1, 3)", r"nan_propagate must be True or False, got 3"),
        ("T.reduce_sum(S, D, 1, True, 1, [1])", r"annotations must be a dict or None, got list"),
    ],
)
def test_reduction_options_of_the_wrong_kind_are_refused(call, message, tmp_path):
    tiles = "S = T.alloc_fragment((8, 8), 'float32')\nD = T.alloc_fragment((8,), 'float32')\n"
    refused(tmp_path, tiles + call, message, error=LoweringError)


def scopes_and_hints(N: int, dynamic: bool):
    """Tiles allocated with the scope by position, loops with TileLang's hints, ``T.round``'s
    two modes, ``T.transpose`` with annotations and ``T.unroll`` with an unroll factor."""
    n = T.dynamic("n") if dynamic else N

    @T.prim_func
    def kernel(A: T.Tensor((n, 8), "float32"), Even: T.Tensor((n, 8), "float32"), Away: T.Tensor((n, 8), "float32"),
               Tr: T.Tensor((n, 8, 8), "float32"), Acc: T.Tensor((n,), "float32")):
        with T.Kernel(n, threads=64) as bx:
            s = T.alloc_shared((8, 8), "float32", "shared.dyn")
            t = T.alloc_shared((8, 8), "float32", "shared")
            r = T.alloc_local((8,), "float32", "local")
            for i, j in T.Parallel(8, 8, coalesced_width=4, prefer_async=False, annotations={"note": 1}):
                s[i, j] = A[bx, j] * (i + 1)
            T.transpose(s, t, annotations={"note": 2})
            T.copy(t, Tr[bx, 0:8, 0:8])
            for j in T.Parallel(8, loop_layout=None):
                Even[bx, j] = T.round(A[bx, j])
                Away[bx, j] = T.round(A[bx, j], "ties-away-from-zero")
            for j in T.unroll(8, unroll_factor=4):
                r[j] = A[bx, j]
            acc = T.alloc_var("float32")
            acc = 0.0
            for j in T.Unroll(0, 8, 1, unroll_factor=2, annotations={"note": 3}):
                acc = acc + r[j]
            Acc[bx] = acc

    return kernel


def _round_away(x: torch.Tensor) -> torch.Tensor:
    whole = x.trunc()
    return torch.where((x - whole).abs() >= 0.5, whole + x.sign(), whole)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_scopes_by_position_loop_hints_and_rounding_modes(path, dynamic, capfd):
    kernel = compile_on(scopes_and_hints(5, dynamic), path)
    a = torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, 3.7, -3.2]).repeat(5, 1) * torch.arange(1, 6)[:, None]
    even, away, tr, acc = torch.empty(5, 8), torch.empty(5, 8), torch.empty(5, 8, 8), torch.empty(5)
    kernel(a, even, away, tr, acc)
    assert torch.equal(even, torch.round(a))
    assert torch.equal(away, _round_away(a))
    assert torch.equal(tr, (a[:, None, :] * torch.arange(1, 9, dtype=torch.float32)[None, :, None]).transpose(1, 2))
    torch.testing.assert_close(acc, a.sum(1))
    # The unroll factor keeps a loop and says nothing on stderr (a pragma_ annotation made TVM's
    # LLVM code generator warn "Unknown pragma").
    assert "pragma" not in capfd.readouterr().err


def round_kernel(dtype: str):
    """Both rounding modes of ``T.round`` over 12 elements of ``dtype``."""

    @T.prim_func
    def kernel(A: T.Tensor((12,), dtype), Even: T.Tensor((12,), dtype), Away: T.Tensor((12,), dtype)):
        with T.Kernel(1, threads=16):
            for i in T.Parallel(12):
                Even[i] = T.round(A[i], "ties-to-even")
                Away[i] = T.round(A[i], rounding_mode="ties-away-from-zero")

    return kernel


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_round_modes_in_narrow_and_wide_floats(dtype):
    kernel = round_kernel(dtype)
    values = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.25, 3.75, 1024.5, float("inf"), -float("inf"), float("nan")]
    a = torch.tensor(values, dtype=getattr(torch, dtype))
    for path in PATHS:
        even, away = torch.empty_like(a), torch.empty_like(a)
        compile_on(kernel, path)(a, even, away)
        assert torch.equal(even.nan_to_num(7), torch.round(a).nan_to_num(7)), path
        assert torch.equal(away.nan_to_num(7), _round_away(a).nan_to_num(7)), path


def alloc_buffer_positional():
    """``T.alloc_buffer`` with the scope third (it was TVMScript's data pointer there) and
    TVMScript's options by keyword."""

    @T.prim_func
    def kernel(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=16):
            S = T.alloc_buffer((16,), "float32", "shared", {"note": 1})
            L = T.alloc_buffer([16], T.float32, scope="local", align=16)
            for i in T.Parallel(16):
                S[i] = A[15 - i]
            T.copy(S, L)
            T.copy(L, B)

    return kernel


@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_alloc_buffer_takes_the_scope_third(path):
    a, b = torch.randn(16), torch.zeros(16)
    compile_on(alloc_buffer_positional(), path)(a, b)
    assert torch.equal(b, a.flip(0))
    assert "__shared__" in lower(alloc_buffer_positional(), target="cuda").device_source


def test_unroll_factor_keeps_the_loop_in_the_c_source():
    source = lower(scopes_and_hints(5, False), target="c").kernel_source
    assert re.search(r"for \(int32_t j\w* = 0; j\w* < 8; \+\+j\w*\) \{\n\s+r_ptr\[j\w*\] = ", source), source


def prelude_kernel():
    """``T.Kernel(prelude=...)`` defines a C function the body calls."""

    @T.prim_func
    def kernel(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=8, prelude="static float tl_twice_plus_one(float x) { return 2.0f * x + 1.0f; }",
                      cluster_dims=1):
            for i in T.serial(8):
                B[i] = T.call_extern("float32", "tl_twice_plus_one", A[i])

    return kernel


@pytest.mark.parametrize("path", PATHS[:2], ids=path_id)
def test_kernel_prelude_is_placed_before_the_kernel(path):
    a, b = torch.randn(8), torch.empty(8)
    compile_on(prelude_kernel(), path)(a, b)
    torch.testing.assert_close(b, 2 * a + 1)


@pytest.mark.parametrize(
    "call, message",
    [
        ("T.Kernel(1, threads=8, cluster_dims=2)", r"cluster_dims=2: thread block clusters .* not supported"),
        ("T.Kernel(1, threads=8, cluster_dims=(2, 1, 1))", r"cluster_dims=\(2, 1, 1\)"),
        ("T.Kernel(1, threads=8, prelude=3)", r"prelude must be a str"),
    ],
)
def test_kernel_options_that_cannot_be_honoured_are_refused(call, message, tmp_path):
    refused(tmp_path, "", message, kernel=f"with {call}:")


@pytest.mark.parametrize(
    "line, message, at",
    [
        ('S = T.alloc_shared((8,), "float32", "global")', r"T.alloc_shared\(shape, dtype, scope\): scope must be one of 'shared', 'shared.dyn', got 'global'", 1),
        ('S = T.alloc_local((8,), "float32", "shared")', r"T.alloc_local\(shape, dtype, scope\): scope must be one of 'local'", 1),
        ("for i in T.Parallel(8, coalesced_width=0):\n            A[i] = 0.0", r"coalesced_width=\): an int >= 1 or None, got 0", 1),
        ("for i in T.Parallel(8, annotations=[1]):\n            A[i] = 0.0", r"annotations=\): a dict or None, got list", 1),
        ("for i in T.unroll(8, unroll_factor=0):\n            A[i] = 0.0", r"unroll_factor must be an int >= 1, got 0", 1),
        ("for i in T.unroll(8, explicit=True, unroll_factor=2):\n            A[i] = 0.0", r"explicit=True .* cannot be combined", 1),
        ("for i in T.Pipelined(8, 2, annotations=1):\n            A[i] = 0.0", r"T.Pipelined: annotations must be a dict or None", 1),
        ('for i in T.Parallel(8):\n            A[i] = T.round(A[i], "up")', r"rounding_mode must be one of 'ties-to-even', 'ties-away-from-zero', got 'up'", 2),
        ("T.ptx_wait_group(-1)", r"T.ptx_wait_group\(-1\): num must be an int >= 0", 1),
        ("T.ptx_wait_group(1.5)", r"num must be an int >= 0", 1),
    ],
)
def test_hints_of_the_wrong_kind_are_refused(line, message, at, tmp_path):
    refused(tmp_path, line, message, kernel="with T.Kernel(1, threads=8):", at=at)


def async_copy_gemm(M: int, N: int, K: int, bm: int, bn: int, bk: int, dynamic: bool, b_scope: str = "shared.dyn"):
    """A tiled GEMM whose operands reach shared memory with ``T.async_copy`` and TileLang's
    commit/wait statements (the wait count is a kernel scalar in one of the two); ``B``'s tile
    has scope ``b_scope`` (see :func:`gemm_positional`)."""
    m = T.dynamic("m") if dynamic else M

    @T.prim_func
    def kernel(A: T.Tensor((m, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((m, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(m, bm), threads=64) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float32")
            B_s = T.alloc_shared((bk, bn), "float32", b_scope)
            C_f = T.alloc_fragment((bm, bn), "float32")
            pending = T.alloc_var("int32")
            pending = 0
            T.clear(C_f)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.async_copy(A[by * bm, ko * bk], A_s)
                T.async_copy(B[ko * bk:(ko + 1) * bk, bx * bn:(bx + 1) * bn], B_s, annotations={"note": 1})
                T.ptx_commit_group()
                T.ptx_wait_group(pending)
                T.ptx_wait_group(0)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * bm, bx * bn])

    return kernel


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("path", PATHS, ids=path_id)
def test_async_copy_gemm_matches_torch(path, dynamic):
    """Ragged edges included: parts of a tile outside A or B read 0, as with T.copy."""
    kernel = compile_on(async_copy_gemm(40, 24, 36, 16, 16, 8, dynamic), path)
    a, b = torch.randn(40, 36), torch.randn(36, 24)
    c = torch.full((40, 24), float("nan"))
    kernel(a, b, c)
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)


def test_async_copy_is_global_to_shared_only(tmp_path):
    tiles = "S0 = T.alloc_shared((8,), 'float32')\nS1 = T.alloc_shared((8,), 'float32')\n"
    refused(tmp_path, tiles + "T.async_copy(S0, S1)",
            r"T\.async_copy only supports global->shared/shared\.dyn copies, got shared 'S0' -> shared 'S1'; use T\.copy",
            error=LoweringError)


@pytest.fixture(scope="module")
def cuda_artifacts():
    return {
        "async_gemm": lower(async_copy_gemm(40, 24, 36, 16, 16, 8, True), target="cuda"),
        "async_gemm_static_smem": lower(async_copy_gemm(40, 24, 36, 16, 16, 8, True, "shared"), target="cuda"),
        "positional_gemm": lower(gemm_positional(16, 8, 24, "shared"), target="cuda"),
        "hints": lower(scopes_and_hints(5, True), target="cuda"),
        **{f"round_{dtype}": lower(round_kernel(dtype), target="cuda") for dtype in ("float16", "bfloat16", "float64")},
    }


def test_cuda_sources_put_the_tiles_in_shared_memory(cuda_artifacts):
    """``shared`` is a static ``__shared__`` array; ``shared.dyn`` dynamic shared memory, whose
    size the launch configuration carries."""
    art = cuda_artifacts["async_gemm"]
    source = art.device_source
    assert re.search(r"__shared__ .*float A_s_ptr\[128\]", source), source
    assert re.search(r"extern __shared__ .*float B_s_ptr\[\]", source), source
    assert art.device_kernels[0].launch.dynamic_shared_memory == 128 * 4
    assert "__syncthreads()" in source
    assert "nearbyintf(" in cuda_artifacts["hints"].device_source and "truncf(" in cuda_artifacts["hints"].device_source
    assert "htrunc(" in cuda_artifacts["round_bfloat16"].device_source


@pytest.mark.skipif(CU.NVCC is None, reason="nvcc is not installed")
def test_cuda_sources_compile_with_nvcc(cuda_artifacts, tmp_path):
    CU.compile_translation_units(cuda_artifacts, tmp_path)


@CU.emulator
def test_emulated_gpu_async_copy_and_positional_gemm(cuda_artifacts, tmp_path):
    """Many threads of a block fill the shared tiles, wait, and multiply (emulated GPU)."""
    run = CU._emulated(cuda_artifacts["async_gemm_static_smem"], tmp_path)
    a, b = torch.randn(40, 36), torch.randn(36, 24)
    c = torch.full((40, 24), float("nan"))
    run(a, b, c)
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)
    run = CU._emulated(cuda_artifacts["positional_gemm"], tmp_path)
    a, b, c, d = torch.randn(16, 24), torch.randn(24, 8), torch.randn(16, 8), torch.randn(16, 8)
    want_c = c + a @ b
    run(a, b, c, d)
    torch.testing.assert_close(c, want_c, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(d, a @ b, rtol=1e-4, atol=1e-4)


def test_keyword_names_follow_tilelang():
    import tilelang

    assert T.align_up(x=10, y=8) == 16
    assert T.ceildiv(lhs=10, rhs=4) == 3 and T.cdiv(lhs=9, rhs=3) == 3
    assert tilelang.cdiv(a=10, b=4) == 3  # upstream's tilelang.cdiv(a, b), the same as tilelang.math's
    n = T.dynamic("n")
    assert str(tilelang.cdiv(n, 128)) == str(T.ceildiv(n, 128))
    assert tilelang.next_power_of_2(48) == 64  # upstream's tilelang re-exports its math helpers
