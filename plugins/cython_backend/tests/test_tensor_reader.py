"""The dispatcher's two tensor readers: the optional ``_torch_reader`` (torch's C++ API, the
default when built) and DLPack (``TILELANG_CYTHON_TENSOR_READER=dlpack``, and for every tensor the
fast reader leaves). Every call below must end the same way under both: same result, or same
exception type and message."""

from __future__ import annotations

import time

import pytest
import torch

import kernels as K
from tilelang_backend_cython import _dispatch
from tilelang_backend_cython.backend import TENSOR_READER_ENV as ENV


def fast_reader_built() -> bool:
    try:
        from tilelang_backend_cython import _torch_reader  # noqa: F401
    except ImportError:
        return False
    return True


needs_fast_reader = pytest.mark.skipif(not fast_reader_built(), reason="the optional _torch_reader module is not built "
                                       "(torch was not importable when the plugin was built)")


def build_both(art, monkeypatch, **options):
    """(kernel reading through the fast reader, kernel reading through DLPack only)."""
    monkeypatch.delenv(ENV, raising=False)
    fast = K.build(art, **options)
    monkeypatch.setenv(ENV, "dlpack")
    slow = K.build(art, **options)
    monkeypatch.delenv(ENV)
    assert slow.tensor_reader == "dlpack"
    return fast, slow


def outcome(kernel, make_args):
    """('ok', outputs and written arguments) or (exception type, message)."""
    args = make_args()
    try:
        result = kernel(*args)
    except Exception as exc:  # noqa: BLE001 - compared, not handled
        return type(exc), str(exc)
    outs = [] if result is None else (result if isinstance(result, list) else [result])
    return "ok", [t.detach().clone() for t in outs] + [a.detach().clone() for a in args if isinstance(a, torch.Tensor)
                                                        and a.layout == torch.strided and a.device.type == "cpu"]


def same(a, b) -> bool:
    if a[0] != "ok" or b[0] != "ok":
        return a == b
    return len(a[1]) == len(b[1]) and all(torch.equal(x, y) for x, y in zip(a[1], b[1]))


def r(*shape, dtype=torch.float32):
    g = torch.Generator().manual_seed(sum(shape) + 7)
    return torch.randn(*shape, generator=g).to(dtype)


def z(n):
    g = torch.Generator().manual_seed(n + 11)
    return torch.randn(n, dtype=torch.complex64, generator=g)


class Sub(torch.Tensor):
    pass


def inference(*shape):
    with torch.inference_mode():
        return r(*shape)


VADD = [
    ("good", lambda: (r(16), r(16), torch.zeros(16))),
    ("offset views", lambda: (r(40)[8:24], r(40)[3:19], torch.zeros(20)[2:18])),
    ("wrong dtype", lambda: (r(16), r(16, dtype=torch.float64), torch.zeros(16))),
    ("int dtype", lambda: (r(16), r(16, dtype=torch.int32), torch.zeros(16))),
    ("quantized", lambda: (r(16), torch.quantize_per_tensor(r(16), 0.1, 0, torch.quint8), torch.zeros(16))),
    ("float8", lambda: (r(16), torch.zeros(16, dtype=torch.float8_e4m3fn), torch.zeros(16))),
    ("wrong shape", lambda: (r(16), r(15), torch.zeros(16))),
    ("wrong ndim", lambda: (r(16), r(4, 4), torch.zeros(16))),
    ("0-d", lambda: (r(16), torch.tensor(1.0), torch.zeros(16))),
    ("strided", lambda: (r(32)[::2], r(16), torch.zeros(16))),
    ("stride 0", lambda: (r(16), r(1).expand(16), torch.zeros(16))),
    ("meta", lambda: (r(16), torch.zeros(16, device="meta"), torch.zeros(16))),
    ("sparse", lambda: (r(16), r(16).to_sparse(), torch.zeros(16))),
    ("not a tensor", lambda: (r(16), 3, torch.zeros(16))),
    ("overlap", lambda: (lambda c: (r(16), c, c))(torch.zeros(16))),
    ("requires_grad", lambda: (r(16).requires_grad_(), r(16), torch.zeros(16))),
    ("parameter and subclass", lambda: (torch.nn.Parameter(r(16)), r(16).as_subclass(Sub), torch.zeros(16))),
    ("inference tensors", lambda: (inference(16), inference(16), torch.zeros(16))),
    ("too few", lambda: (r(16), r(16))),
]

MM = [
    ("good", lambda: (r(5, 3), r(3, 4), torch.zeros(5, 4))),
    ("symbol clash", lambda: (r(5, 3), r(2, 4), torch.zeros(5, 4))),
    ("transposed", lambda: (r(5, 3), r(4, 3).t(), torch.zeros(5, 4))),
    ("size-1 dims, odd strides", lambda: (r(1, 3), r(3, 4), torch.zeros(8).as_strided((1, 4), (99, 1)))),
    ("0-size", lambda: (r(0, 3), r(3, 4), torch.zeros(0, 4))),
    ("0-size K", lambda: (r(5, 0), r(0, 4), torch.ones(5, 4))),
    ("0-size view past the end", lambda: (r(8)[8:].view(0, 1), r(1, 4), torch.zeros(0, 4))),
]

COLMAJOR = [
    ("good", lambda: (torch.zeros(4, 6).t(),)),
    ("row-major", lambda: (torch.zeros(6, 4),)),
    ("size-1", lambda: (torch.zeros(4, 1).t(),)),
    ("size-1 odd stride", lambda: (torch.zeros(4, 9).as_strided((1, 4), (7, 1)),)),
]

COMPLEX = [
    ("good", lambda: (z(4),)),
    ("conjugate view", lambda: (z(4).conj(),)),
    ("wrong complex dtype", lambda: (z(4).to(torch.complex128),)),
]

PAD2 = [
    ("good", lambda: (r(5),)),
    ("0-size", lambda: (r(0),)),
    ("negative view of 1 element", lambda: (z(1).conj().imag,)),
]

CASES = [
    ("vadd", K.vadd_static, {}, VADD),
    ("mm", K.matmul_blocked, {}, MM),
    ("colmajor", K.colmajor, {}, COLMAJOR),
    ("ccopy", K.complex_copy, {"out_idx": [1]}, COMPLEX),
    ("pad2", K.pad2, {"out_idx": [1]}, PAD2),
]


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning")
@pytest.mark.parametrize("name,factory,options,calls", CASES, ids=[c[0] for c in CASES])
def test_both_readers_end_every_call_the_same_way(name, factory, options, calls, monkeypatch):
    fast, slow = build_both(factory(), monkeypatch, **options)
    for label, make_args in calls:
        a, b = outcome(fast, make_args), outcome(slow, make_args)
        assert same(a, b), f"{name}: {label}: fast reader {a!r}, DLPack {b!r}"


def test_both_readers_compute_the_same_sums(monkeypatch):
    fast, slow = build_both(K.vadd_static(), monkeypatch)
    a, b = r(40)[8:24], r(40)[3:19]
    for k in (fast, slow):
        c = torch.zeros(20)
        k(a, b, c[2:18])
        assert torch.equal(c[2:18], a + b) and not c[:2].any() and not c[18:].any()


def test_the_fast_reader_refuses_a_contiguous_negative_view(monkeypatch):
    """A negative view remade with as_strided (or torch._neg_view) has compact strides, so no stride
    check sees it: the fast reader looks at torch's negative bit itself and refuses it with the fix,
    where reading it as stored would give the kernel the un-negated values."""
    fast, _ = build_both(K.vadd_static(), monkeypatch)
    assert fast.tensor_reader == "torch"
    z = torch.complex(r(16), r(16))
    imag = z.conj().imag  # the negated imaginary parts, stride 2
    remade = imag.as_strided((16,), (1,))  # compact strides, negative bit kept
    assert remade.is_neg() and remade.is_contiguous()
    for lazy in (remade, torch._neg_view(r(16))):
        c = torch.zeros(16)
        with pytest.raises(ValueError, match=r"argument 'A' \(#0\): expected a tensor with its data "
                                             r"materialized, got a lazy negative view; call \.resolve_neg\(\)"):
            fast(lazy, r(16), c)
        assert not c.any()
        fast(lazy.resolve_neg(), r(16), c)
        assert torch.equal(c, lazy + r(16))


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning")
def test_a_quantized_tensor_is_refused_naming_its_dtype_as_the_other_backends_do(monkeypatch):
    """Before, both readers said "cannot read the tensor through DLPack: ..." (torch's DLPack
    export has no quantized dtypes), where tvm_ffi and ctypes name the dtype."""
    q = torch.quantize_per_tensor(r(16), 0.1, 0, torch.quint8)
    for kernel in build_both(K.vadd_static(), monkeypatch):
        with pytest.raises(ValueError, match=r"argument 'B' \(#1\): expected dtype float32, got quint8$"):
            kernel(r(16), q, torch.zeros(16))


def test_a_negative_view_of_stride_2_gets_each_readers_fix(monkeypatch):
    """`z.conj().imag` as it comes: the fast reader names the negative bit, DLPack the stride 2
    (its fix, .contiguous(), materializes the negation too)."""
    fast, slow = build_both(K.pad2(), monkeypatch, out_idx=[1])
    imag = z(5).conj().imag
    with pytest.raises(ValueError, match=r"got a lazy negative view; call \.resolve_neg\(\)"):
        fast(imag)
    with pytest.raises(ValueError, match=r"expected a contiguous tensor, got strides \(2,\); call \.contiguous\(\)"):
        slow(imag)
    assert torch.equal(fast(imag.contiguous()), slow(imag.resolve_neg()))


@pytest.mark.skipif(not hasattr(torch, "_lazy_clone"), reason="this torch has no copy-on-write clones")
def test_a_written_copy_on_write_clone_is_copied_first(monkeypatch):
    """Both readers ask torch for the tensor's mutable data: a lazy clone gets its own copy before
    the kernel writes it, and the tensor it was cloned from stays as it was."""
    for kernel in build_both(K.vadd_static(), monkeypatch):
        origin = torch.zeros(16)
        clone = torch._lazy_clone(origin)
        kernel(torch.ones(16), torch.ones(16), clone)
        assert torch.equal(clone, torch.full((16,), 2.0)) and torch.equal(origin, torch.zeros(16))


def test_reader_env_selects_dlpack_and_refuses_other_values(monkeypatch):
    monkeypatch.setenv(ENV, "dlpack")
    assert K.build(K.vadd_static()).tensor_reader == "dlpack"
    monkeypatch.setenv(ENV, "fast")
    with pytest.raises(ValueError, match=f"{ENV}: expected 'auto' or 'dlpack' \\(or unset\\), got 'fast'"):
        K.build(K.vadd_static())


@needs_fast_reader
def test_fast_reader_is_chosen_when_built(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert _dispatch.tensor_reader() == "torch"
    assert K.build(K.vadd_static()).tensor_reader == "torch"


def sum_kernel(n_tensors: int):
    names = [f"in{i}" for i in range(n_tensors - 1)] + ["out"]
    ins = ", ".join(f"float *in{i}" for i in range(n_tensors - 1))
    total = " + ".join(f"in{i}[i]" for i in range(n_tensors - 1))
    src = (f"#include <stdint.h>\nint32_t sum{n_tensors}({ins}, float *out) {{\n"
           f"  for (int32_t i = 0; i < 16; ++i) out[i] = {total};\n  return 0;\n}}\n")
    return K.artifact(f"sum{n_tensors}", [K.read_only(n, [16]) for n in names[:-1]] + [K.tensor("out", [16])],
                      [K.ptr(n, i) for i, n in enumerate(names)], src)


def best_ns_per_call(kernel, args, number=2000, repeat=7):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            kernel(*args)
        best = min(best, (time.perf_counter() - t0) / number)
    return best * 1e9


@needs_fast_reader
def test_fast_reader_cuts_the_per_tensor_cost(monkeypatch):
    """16 tensors: about 400 ns a call with the fast reader against about 950 through DLPack (the
    DLPack read alone is about 50 ns a tensor); asked here: at most 80% of the DLPack call."""
    fast, slow = build_both(sum_kernel(16), monkeypatch)
    args = [r(16) for _ in range(16)]
    fast(*args)
    slow(*args)
    t_fast = min(best_ns_per_call(fast, args) for _ in range(2))
    t_slow = min(best_ns_per_call(slow, args) for _ in range(2))
    assert t_fast < 0.8 * t_slow, f"fast reader {t_fast:.0f} ns a call, DLPack {t_slow:.0f} ns"


def test_a_bad_reader_setting_is_a_setting_error_that_breaks_nothing(tmp_path, monkeypatch):
    """A typo in the variable was a plain ValueError from the backend's hooks: the build hook's
    took the cython backend for broken for the rest of the process ("a bug in
    tilelang-backend-cython"), and the load hook's removed a good kernel from the cache."""
    import tilelang
    import tilelang.language as T
    from tilelang_core.errors import SettingError

    @T.prim_func
    def plus_one(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1) as _:
            for i in T.Parallel(16):
                B[i] = A[i] + 1.0

    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    monkeypatch.delenv(ENV, raising=False)
    a = torch.arange(16, dtype=torch.float32)
    tilelang.compile(plus_one, out_idx=-1, target="c", execution_backend="cython")
    from tilelang_core.jit import compile as compile_module

    for entries in (1, 0):  # from the disk cache (the load hook), then with none (the build hook)
        compile_module.clear_memory()
        tilelang.cache.get_cache().memory.clear()
        monkeypatch.setenv(ENV, "dlpak")
        with pytest.raises(SettingError, match=f"{ENV}: expected 'auto' or 'dlpack' \\(or unset\\), got 'dlpak'"):
            tilelang.compile(plus_one, out_idx=-1, target="c", execution_backend="cython")
        assert tilelang.cache.info()["entries"] == entries  # a saved kernel is still there
        monkeypatch.delenv(ENV)
        kernel = tilelang.compile(plus_one, out_idx=-1, target="c", execution_backend="cython")
        assert torch.equal(kernel(a), a + 1)  # the backend still works
        tilelang.cache.clear()
        compile_module.clear_memory()
