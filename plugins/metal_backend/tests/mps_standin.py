"""A stand-in for torch's MPS device, for machines without one (this project has no Mac).

:class:`StandinRuntime` is a :class:`tilelang_backend_metal.runtime.ShaderRuntime` whose
``compile_shader(source)`` *records* what it is given and returns a library whose kernels record
every call: the positional arguments (tensors, and the scalar struct as int64 words), ``threads``
and ``group_size``, exactly as ``torch.mps.compile_shader``'s kernels receive them. Plug it into a
kernel built by the real backend with ``kernel.runner.with_runtime(StandinRuntime(...))``.

With ``execute=True`` the stand-in also *runs* the kernels on CPU tensors: the Metal source is
compiled by g++ as C++ with a small header that stands in for ``<metal_stdlib>`` (address spaces
vanish, ``threadgroup`` arrays become storage shared by the threads of a threadgroup, one OpenMP
thread per Metal thread, ``threadgroup_barrier`` an OpenMP barrier, threadgroups one after the
other), and the recorded arguments are handed over as Metal would: buffer(i) is the tensor's data,
the scalar struct is the bytes of the words, and the thread positions are derived from ``threads``
and ``group_size`` the way ``dispatchThreads`` does. It checks the source compiles with every
union member it reads, the packing byte for byte (the C++ compiler lays out the same struct), and
the launch sizes; it says nothing about Metal's compiler or an Apple GPU's speed.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import torch

from tilelang_backend_metal.packing import ScalarPacker
from tilelang_backend_metal.source import KernelSignature, parse_kernels

CXX = os.environ.get("CXX", "g++")


def scratch_dir() -> Path:
    """Where the tests keep what they generate to reuse it (the executing stand-in's compiled
    libraries, generated kernel modules): ``$TILELANG_METAL_STANDIN_DIR``, which conftest.py points
    at a pytest temporary directory, else the system's temporary directory."""
    return Path(os.environ.get("TILELANG_METAL_STANDIN_DIR") or tempfile.gettempdir())


def have_cxx() -> bool:
    """Whether the C++ compiler the executing stand-in needs is installed."""
    return shutil.which(CXX) is not None


@dataclass
class RecordedCall:
    """One kernel launch as the library's kernel received it."""

    kernel: str
    args: list[Any]
    threads: list[int]
    group_size: list[int]

    @property
    def tensors(self) -> list[torch.Tensor]:
        return [a for a in self.args if isinstance(a, torch.Tensor)]

    @property
    def words(self) -> Optional[list[int]]:
        """The scalar struct as passed (a list of ints), or None."""
        return next((a for a in self.args if isinstance(a, list)), None)


@dataclass
class StandinRuntime:
    """Records (and with ``execute`` runs on CPU) what the metal backend asks of torch's MPS device."""

    device_type: str = "cpu"
    execute: bool = False
    unavailable: Optional[str] = None
    sources: list[str] = field(default_factory=list)
    calls: list[RecordedCall] = field(default_factory=list)
    build_dir: Optional[Path] = None

    def problem(self) -> Optional[str]:
        return self.unavailable

    def compile_shader(self, source: str) -> "StandinLibrary":
        self.sources.append(source)
        emulated = emulate(source, self.build_dir) if self.execute else None
        return StandinLibrary(self, source, emulated)


class StandinLibrary:
    """What ``torch.mps.compile_shader`` returns: its attributes are the source's kernels."""

    def __init__(self, runtime: StandinRuntime, source: str, emulated: Optional["EmulatedLibrary"]) -> None:
        self._runtime = runtime
        self._kernels = parse_kernels(source)
        self._emulated = emulated

    def __getattr__(self, name: str) -> "StandinKernel":
        if name.startswith("_") or name not in self._kernels:
            raise AttributeError(f"no kernel {name!r} in the library")
        return StandinKernel(self._runtime, name, self._emulated)

    def __dir__(self) -> list[str]:
        return list(self._kernels)


class StandinKernel:
    """One kernel of a :class:`StandinLibrary`, called like a ``torch.mps`` shader kernel."""

    max_threads_per_threadgroup = 1024

    def __init__(self, runtime: StandinRuntime, name: str, emulated: Optional["EmulatedLibrary"]) -> None:
        self._runtime, self.name, self._emulated = runtime, name, emulated

    def __call__(self, *args: Any, threads: Any = None, group_size: Any = None) -> None:
        self._runtime.calls.append(RecordedCall(self.name, list(args), list(threads), list(group_size)))
        if self._emulated is not None:
            self._emulated.run(self.name, args, threads, group_size)


# -- the executing part: Metal source as C++ on the CPU -----------------------------------------

_HEADER = r"""
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <omp.h>
typedef _Float16 half;
typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;
struct bfloat {
  uint16_t bits;
  bfloat() = default;
  bfloat(float f) { uint32_t u; memcpy(&u, &f, 4); bits = (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16); }
  operator float() const { uint32_t u = (uint32_t)bits << 16; float f; memcpy(&f, &u, 4); return f; }
};
struct uint2 { uint x, y; };
struct uint3 { uint x, y, z; };
template <class T> static inline T tl_pos(uint3 v);
template <> inline uint tl_pos<uint>(uint3 v) { return v.x; }
template <> inline uint2 tl_pos<uint2>(uint3 v) { return uint2{v.x, v.y}; }
template <> inline uint3 tl_pos<uint3>(uint3 v) { return v; }
enum class mem_flags { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4 };
static inline mem_flags operator|(mem_flags a, mem_flags b) { return (mem_flags)((int)a | (int)b); }
static inline void threadgroup_barrier(mem_flags) { _Pragma("omp barrier") }
template <class T, class U> static inline T as_type(U u) { T t; memcpy(&t, &u, sizeof(T)); return t; }
namespace metal {
template <class T> static inline T max(T a, T b) { return a > b ? a : b; }
template <class T> static inline T min(T a, T b) { return a < b ? a : b; }
template <class T> static inline T select(T a, T b, bool c) { return c ? b : a; }
template <class T> static inline T clamp(T x, T lo, T hi) { return x < lo ? lo : (x > hi ? hi : x); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline float min(float a, float b) { return fminf(a, b); }
// float versions come from math.h (C++ puts its overloads in the global namespace); half here
#define TL_UNARY(f, cf) static inline half f(half x) { return (half)cf((float)x); }
TL_UNARY(exp, expf) TL_UNARY(exp2, exp2f) TL_UNARY(log, logf) TL_UNARY(log2, log2f) TL_UNARY(sqrt, sqrtf)
TL_UNARY(fabs, fabsf) TL_UNARY(abs, fabsf) TL_UNARY(floor, floorf) TL_UNARY(ceil, ceilf) TL_UNARY(tanh, tanhf)
TL_UNARY(sin, sinf) TL_UNARY(cos, cosf) TL_UNARY(round, roundf) TL_UNARY(trunc, truncf)
TL_UNARY(log10, log10f) TL_UNARY(sinh, sinhf) TL_UNARY(cosh, coshf) TL_UNARY(tan, tanf) TL_UNARY(asin, asinf)
TL_UNARY(acos, acosf) TL_UNARY(atan, atanf) TL_UNARY(asinh, asinhf) TL_UNARY(acosh, acoshf) TL_UNARY(atanh, atanhf)
TL_UNARY(rint, rintf)
#define TL_BINARY(f, cf) static inline half f(half x, half y) { return (half)cf((float)x, (float)y); }
TL_BINARY(fmod, fmodf) TL_BINARY(pow, powf) TL_BINARY(atan2, atan2f) TL_BINARY(copysign, copysignf)
static inline half ldexp(half x, int k) { return (half)ldexpf((float)x, k); }
static inline float exp10(float x) { return powf(10.0f, x); }
static inline half exp10(half x) { return (half)powf(10.0f, (float)x); }
static inline float rsqrt(float x) { return 1.0f / sqrtf(x); }
static inline half rsqrt(half x) { return (half)(1.0f / sqrtf((float)x)); }
}
#define kernel static
#define device
#define constant
#define thread
#define threadgroup
"""

#: Names of the C library that the Metal Shading Language does not have (its math functions are
#: overloaded, without the ``f`` suffix; it has no log1p, hypot, nearbyint, erf, expm1, cbrt):
#: poisoned after the header, so a source using one fails here as it would in Metal's compiler.
NOT_IN_MSL = (
    [f"{f}f" for f in ("acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "ceil", "copysign", "cos",
                       "cosh", "exp", "exp2", "exp10", "fabs", "floor", "fmax", "fmin", "fmod", "ldexp", "log",
                       "log2", "log10", "pow", "rint", "round", "sin", "sinh", "sqrt", "tan", "tanh", "trunc")]
    + ["log1p", "log1pf", "hypot", "hypotf", "nearbyint", "nearbyintf", "erf", "erff", "expm1", "expm1f", "cbrt", "cbrtf"]
)
_HEADER += "#pragma GCC poison " + " ".join(NOT_IN_MSL) + "\n"

_POSITION = {
    "threadgroup_position_in_grid": "tg",
    "thread_position_in_threadgroup": "tid",
    "thread_position_in_grid": "uint3{tg.x * g0 + tid.x, tg.y * g1 + tid.y, tg.z * g2 + tid.z}",
    "threads_per_threadgroup": "uint3{g0, g1, g2}",
    "threadgroups_per_grid": "uint3{gx, gy, gz}",
    "threads_per_grid": "uint3{(uint)threads[0], (uint)threads[1], (uint)threads[2]}",
}
_HALF_LITERAL = re.compile(r"(?<![\w.])(\d+\.\d*(?:e[+-]?\d+)?|\d+e[+-]?\d+)h\b")
_SHARED_DECL = re.compile(r"^(\s*)threadgroup\s+", re.M)


def _launcher(sig: KernelSignature) -> str:
    args = []
    for p in sig.params:
        if p.attribute == "buffer":
            if p.ref == "&":
                args.append(f"*({p.type}*)buffers[{p.index}]")
            else:
                args.append(f"({p.type}*)buffers[{p.index}]")
        elif p.attribute == "thread_index_in_threadgroup":
            args.append("(uint)t")
        else:
            args.append(f"tl_pos<{p.type}>({_POSITION[p.attribute]})")
    return f"""
extern "C" int tl_run_{sig.name}(void** buffers, const long* threads, const long* group) {{
  omp_set_dynamic(0);
  uint g0 = group[0], g1 = group[1], g2 = group[2];
  if (threads[0] % g0 || threads[1] % g1 || threads[2] % g2) return -2;
  uint gx = threads[0] / g0, gy = threads[1] / g1, gz = threads[2] / g2;
  int ok = 1, team = g0 * g1 * g2;
  for (uint z = 0; z < gz; ++z) for (uint y = 0; y < gy; ++y) for (uint x = 0; x < gx; ++x) {{
    uint3 tg = {{x, y, z}};
    #pragma omp parallel num_threads(team)
    {{
      int t = omp_get_thread_num();
      if (omp_get_num_threads() != team) {{ ok = 0; }} else {{
        uint3 tid = {{(uint)(t % g0), (uint)((t / g0) % g1), (uint)(t / (g0 * g1))}};
        {sig.name}({", ".join(args)});
      }}
    }}
    if (!ok) return -1;
  }}
  return 0;
}}
"""


def cpp_of(source: str) -> str:
    """The C++ translation unit the executing stand-in compiles for a Metal source."""
    kernels = parse_kernels(source)
    body = source.replace("#include <metal_stdlib>", "")
    body = _HALF_LITERAL.sub(r"((half)\1f)", body)
    body = _SHARED_DECL.sub(r"\1static ", body)  # threadgroup arrays: one copy for the whole team
    return _HEADER + body + "".join(_launcher(sig) for sig in kernels.values())


_build_lock = threading.Lock()


def emulate(source: str, build_dir: Optional[Path] = None) -> "EmulatedLibrary":
    """Compile ``source`` for the CPU (cached by content); :raises AssertionError: g++ failed."""
    code = cpp_of(source)
    digest = hashlib.sha256(code.encode()).hexdigest()[:16]
    build_dir = Path(build_dir or scratch_dir()) / "metal-standin"
    build_dir.mkdir(parents=True, exist_ok=True)
    lib = build_dir / f"msl_{digest}.so"
    if not lib.exists():
        cpp = build_dir / f"msl_{digest}.{os.getpid()}.{threading.get_ident()}.cpp"
        cpp.write_text(code)
        tmp = lib.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        cmd = [CXX, "-std=c++17", "-O1", "-fopenmp", "-shared", "-fPIC", "-w", "-o", str(tmp), str(cpp)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stderr[-4000:]}\n--- source ---\n{code}"
            os.replace(tmp, lib)
        finally:
            cpp.unlink(missing_ok=True)
            tmp.unlink(missing_ok=True)
    return EmulatedLibrary(ctypes.CDLL(str(lib)), parse_kernels(source))


class EmulatedLibrary:
    """The compiled stand-in of one Metal library: ``run(kernel, args, threads, group_size)``."""

    def __init__(self, dll: Any, kernels: dict[str, KernelSignature]) -> None:
        self._dll = dll
        self._kernels = kernels

    def run(self, name: str, args: Any, threads: Any, group_size: Any) -> None:
        sig = self._kernels[name]
        buffers = sorted(sig.buffers)
        assert len(args) == len(buffers), f"{name}: {len(args)} arguments for buffers {buffers}"
        keep = []
        pointers = (ctypes.c_void_p * len(args))()
        for i, arg in enumerate(args):
            if isinstance(arg, torch.Tensor):
                assert arg.device.type == "cpu", "the executing stand-in runs CPU tensors"
                pointers[i] = arg.data_ptr()
            else:  # the scalar struct, as torch passes a list of ints: int64 words
                raw = ctypes.create_string_buffer(ScalarPacker.bytes_of(arg), len(arg) * 8)
                keep.append(raw)
                pointers[i] = ctypes.addressof(raw)
        t = (ctypes.c_long * 3)(*threads)
        g = (ctypes.c_long * 3)(*group_size)
        rc = getattr(self._dll, f"tl_run_{name}")(pointers, t, g)
        assert rc == 0, f"{name}: the stand-in could not run the launch (code {rc}: -1 no full threadgroup of " \
                        f"OpenMP threads, -2 threads not a multiple of group_size)"
