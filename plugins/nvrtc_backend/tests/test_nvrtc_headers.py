"""The stand-in libcu++ headers change nothing but compile time.

The backend compiles with its own small ``<cuda/std/cstdint>`` and ``<cuda/std/type_traits>``
(see compiler.py). These tests compile the same sources with the real libcu++ headers
(``nvidia-cuda-cccl``) and compare:

- the machine code (``.text.<kernel>`` bytes), the shared memory, the parameter layout and the
  parameter bank of every example and tile-operator kernel, for sm_80 and sm_90, between the
  backend's own cubin of each kernel and the same kernel built with the real headers;
- every type and trait the stand-ins define, checked with ``static_assert`` under both.
"""

from __future__ import annotations

import re

import pytest

import nvrtc_kernels

ARCHS = ["sm_80", "sm_90"]

TRAITS_CHECK = r"""
#include <cuda/std/cstdint>
#include <cuda/std/type_traits>
using namespace cuda::std;
static_assert(sizeof(int8_t) == 1 && sizeof(int16_t) == 2 && sizeof(int32_t) == 4 && sizeof(int64_t) == 8, "");
static_assert(sizeof(uint8_t) == 1 && sizeof(uint16_t) == 2 && sizeof(uint32_t) == 4 && sizeof(uint64_t) == 8, "");
static_assert(is_same<int64_t, long long>::value && is_same<uint64_t, unsigned long long>::value, "");
static_assert(is_same<int32_t, int>::value && is_same<int8_t, signed char>::value, "");
static_assert(is_same_v<int, int> && !is_same_v<int, unsigned> && !is_same_v<int, const int>, "");
static_assert(is_integral<bool>::value && is_integral<char>::value && is_integral<const long>::value, "");
static_assert(is_integral<unsigned long long>::value && is_integral<volatile short>::value, "");
static_assert(!is_integral<float>::value && !is_integral<int*>::value && !is_integral<void>::value, "");
static_assert(is_floating_point<float>::value && is_floating_point<const double>::value, "");
static_assert(is_floating_point<long double>::value && !is_floating_point<int>::value, "");
static_assert(is_signed<int>::value && is_signed<float>::value && is_signed<signed char>::value, "");
static_assert(!is_signed<unsigned>::value && !is_signed<bool>::value && !is_signed<int*>::value, "");
static_assert(is_unsigned<unsigned>::value && is_unsigned<bool>::value && !is_unsigned<int>::value, "");
static_assert(!is_unsigned<float>::value && !is_unsigned<int*>::value, "");
static_assert(is_same<enable_if<true, int>::type, int>::value, "");
static_assert(is_same<conditional<true, int, float>::type, int>::value, "");
static_assert(is_same<conditional<false, int, float>::type, float>::value, "");
template <class T, class = typename enable_if<is_integral<T>::value>::type> __device__ int pick(T) { return 1; }
__device__ int pick(float) { return 2; }
extern "C" __global__ void traits_kernel(int* out) { out[0] = pick(3) + pick(1.0f); }
"""


def _compile(source: str, arch: str, real: bool) -> bytes:
    from tilelang_backend_nvrtc.arch import Arch
    from tilelang_backend_nvrtc.compiler import _run_nvrtc, nvrtc_options

    image, _ = _run_nvrtc(source.encode(), "check", nvrtc_options(Arch.parse(arch), real_headers=real))
    return image


def _kernel_facts(image: bytes, name: str) -> dict:
    from tilelang_backend_nvrtc.cubin import read_cubin, section_bytes

    info = read_cubin(image)
    return {
        "text": section_bytes(image, info, f".text.{name}"),
        "shared": info.sections[f".nv.shared.{name}"].size if f".nv.shared.{name}" in info.sections else 0,
        "param_bank": info.sections[f".nv.constant0.{name}"].size,
        "params": (info.kernels[name].param_sizes, info.kernels[name].param_offsets),
    }


def _needs_real_headers():
    from tilelang_backend_nvrtc.toolchain import toolchain

    if toolchain().cccl_include is None:
        pytest.skip("the real libcu++ headers (nvidia-cuda-cccl) are not installed")


def test_stand_in_traits_agree_with_the_real_headers():
    _needs_real_headers()
    for real in (False, True):
        assert _compile(TRAITS_CHECK, "sm_90", real)[:4] == b"\x7fELF"


def _one_translation_unit(artifacts: dict) -> tuple[str, dict]:
    """All device sources in one file, each kernel renamed ``<kernel>__<n>``; returns the text and
    ``{(test name, kernel): renamed}``. The longest preamble (the one with the most helpers) is kept once,
    with every preamble's ``#include`` and the atomic/intrinsic helper blocks in front."""
    from tilelang_core.lowering.atomics import CUDA_HELPERS_BEGIN, CUDA_HELPERS_END

    preambles, bodies, names, helpers = [], [], {}, []
    for n, (label, art) in enumerate(artifacts.items()):
        src = art.device_source
        while CUDA_HELPERS_BEGIN in src:  # atomic/intrinsic helpers, each behind its own guard: all kept
            start, end = src.index(CUDA_HELPERS_BEGIN), src.index(CUDA_HELPERS_END) + len(CUDA_HELPERS_END)
            helpers.append(src[start:end] + "\n")
            src = src[:start] + src[end:]
        cut = src.index('extern "C" __global__')
        preambles.append(src[:cut])
        body = src[cut:]
        for kernel in art.device_kernels:
            renamed = f"{kernel.name}__{n}"
            body = re.sub(r"\b" + re.escape(kernel.name) + r"\b", renamed, body)
            names[(label, kernel.name)] = renamed
        bodies.append(body)
    includes = sorted({line for p in preambles for line in p.splitlines() if line.startswith("#include <")})
    return "".join(helpers) + "\n".join(includes) + "\n" + max(preambles, key=len) + "\n".join(bodies), names


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHS)
def test_machine_code_is_identical_to_a_build_with_the_real_headers(arch, monkeypatch):
    """The backend's cubin of each kernel against all kernels built in one file with real libcu++."""
    _needs_real_headers()
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    import tilelang

    kernels = {}
    for label, func, out_idx in nvrtc_kernels.all_kernels():
        kernels[label] = tilelang.compile(func, out_idx=out_idx, execution_backend="nvrtc", target=f"cuda -arch={arch}")
    assert all(k.runner.plan["headers"] == "standin" for k in kernels.values())
    source, names = _one_translation_unit({label: k.artifact for label, k in kernels.items()})
    real = _compile(source, arch, real=True)
    standin = _compile(source, arch, real=False)
    compared = 0
    for (label, name), renamed in names.items():
        own = _kernel_facts(kernels[label].runner.cubin, name)
        with_real = _kernel_facts(real, renamed)
        assert own["text"], f"{label}: empty .text.{name}"
        assert own == with_real, f"{label}: kernel {name} differs from the build with the real libcu++ headers"
        assert _kernel_facts(standin, renamed) == with_real
        compared += 1
    assert compared == len(names) >= len(kernels)
