"""Source generated around the artifact's device source.

Every kernel library exports one function with a uniform signature, so the dispatcher can call
any kernel without libffi::

    int __tl_cy_call(value *values, const long long *symbols, void *stream, int device);

``values[i]`` holds parameter ``i`` (a data pointer, an integer or a double), ``symbols[j]`` the
value of symbol slot ``j`` of the call plan. For ``c`` the function is appended to the C source
and calls the entry function; for ``cuda`` it is a host launcher that computes grid, block and
dynamic shared memory from the symbols and launches each device kernel on ``stream``. Both end
with the identity constant of :mod:`.identity` (which kernel the library was built for).
"""

from __future__ import annotations

import json
from typing import Any

from tilelang_core.artifact import DeviceKernel, KernelArtifact
from tilelang_core.calling import STATUS_TEXTS
from tilelang_core.errors import BuildError

from . import identity
from .exprs import to_c
from .plan import ENTRY_SYMBOL, ERROR_STRING_SYMBOL


def _arg_texts(kernel: DeviceKernel, plan: dict[str, Any], *, cuda: bool) -> list[str]:
    params = plan["params"]
    symbols = plan["symbols"]
    out = []
    for a in kernel.args:
        if a.kind == "pointer":
            if a.param_index is None or params[a.param_index]["kind"] != "tensor":
                raise BuildError(f"device kernel '{kernel.name}': pointer argument '{a.name}' must name a tensor "
                                 f"parameter (param_index), got {a.param_index!r}")
            ref = f"__tl_cy_v[{a.param_index}].p"
            out.append(f"__tl_cy_ptr{{{ref}}}" if cuda else ref)
        elif a.symbol is not None:
            if a.symbol not in symbols:
                raise BuildError(f"device kernel '{kernel.name}': argument '{a.name}' passes symbol '{a.symbol}', "
                                 f"which no parameter binds")
            out.append(f"__tl_cy_s[{symbols.index(a.symbol)}]")
        elif a.param_index is not None and params[a.param_index]["kind"] == "scalar":
            field = "f" if params[a.param_index]["scalar_kind"] == "float" else "i"
            out.append(f"__tl_cy_v[{a.param_index}].{field}")
        else:
            raise BuildError(f"device kernel '{kernel.name}': scalar argument '{a.name}' must name a scalar "
                             f"parameter (param_index) or a symbol")
    return out


def c_source(artifact: KernelArtifact, plan: dict[str, Any]) -> str:
    """The artifact's C source followed by the uniform entry point calling ``device_kernels[0]``."""
    if not artifact.device_source:
        raise BuildError(f"kernel '{artifact.name}': the artifact has no device_source; the cython backend "
                         f"consumes 'device_source' (C for target 'c')")
    if len(artifact.device_kernels) != 1:
        raise BuildError(f"kernel '{artifact.name}': a 'c' artifact must have exactly one entry function in "
                         f"device_kernels, got {len(artifact.device_kernels)}")
    k = artifact.device_kernels[0]
    call = f"{k.name}({', '.join(_arg_texts(k, plan, cuda=False))})"
    rtype = (k.return_type or "int32").strip()
    body = f"{call};\n  return 0;" if rtype == "void" else f"return (int){call};"
    return (
        f"{artifact.device_source.rstrip()}\n\n"
        "/* ---- appended by tilelang-backend-cython: uniform entry point of the dispatcher ---- */\n"
        "typedef union { void *p; long long i; double f; } __tl_cy_value;\n"
        "#if defined(__GNUC__)\n__attribute__((visibility(\"default\")))\n#endif\n"
        f"int {ENTRY_SYMBOL}(__tl_cy_value *__tl_cy_v, const long long *__tl_cy_s, void *__tl_cy_stream, int __tl_cy_device) {{\n"
        "  (void)__tl_cy_v; (void)__tl_cy_s; (void)__tl_cy_stream; (void)__tl_cy_device;\n"
        f"  {body}\n"
        "}\n"
        + _status_texts_function()
        + identity.c_definition(identity.kernel_id(artifact, plan), cuda=False)
    )


def _status_texts_function() -> str:
    """``const char *__tl_cy_error_string(int code)``: the text of each status of a C entry point
    that ``tilelang_core.calling.STATUS_TEXTS`` explains, NULL for the others (the dispatcher then
    says "the kernel returned error code N")."""
    # the texts are printable ASCII: JSON's string literal is C's
    cases = "".join(f"    case {code}: return {json.dumps(text)};\n" for code, text in sorted(STATUS_TEXTS.items()))
    return (
        "#if defined(__GNUC__)\n__attribute__((visibility(\"default\")))\n#endif\n"
        f"const char *{ERROR_STRING_SYMBOL}(int code) {{\n"
        f"  switch (code) {{\n{cases}    default: return 0;\n  }}\n}}\n"
    )


_CUDA_PRELUDE = """
/* ---- appended by tilelang-backend-cython: host launcher ---- */
#include <cuda_runtime.h>
typedef union { void *p; long long i; double f; } __tl_cy_value;
struct __tl_cy_ptr {
  void *p;
  template <class T> operator T *() const { return static_cast<T *>(p); }
};
static inline long long __tl_cy_floordiv(long long a, long long b) {
  long long q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline long long __tl_cy_mod(long long a, long long b) {
  long long r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
static inline long long __tl_cy_min(long long a, long long b) { return a < b ? a : b; }
static inline long long __tl_cy_max(long long a, long long b) { return a > b ? a : b; }
#define __TL_CY_MAX_DEVICES 64
static inline void __tl_cy_restore(int prev, int dev) {
  if (prev != dev) cudaSetDevice(prev);
}
"""


def cuda_source(artifact: KernelArtifact, plan: dict[str, Any]) -> str:
    """The CUDA device source followed by an ``extern "C"`` host launcher (see module doc)."""
    if not artifact.device_source:
        raise BuildError(f"kernel '{artifact.name}': the artifact has no device_source (CUDA C)")
    if not artifact.device_kernels:
        raise BuildError(f"kernel '{artifact.name}': the artifact lists no device kernels to launch")
    symbols = plan["symbols"]

    def sym(name: str) -> str:
        if name not in symbols:
            raise BuildError(f"kernel '{artifact.name}': launch configuration uses symbol '{name}', which no "
                             f"parameter binds")
        return f"__tl_cy_s[{symbols.index(name)}]"

    state = []
    body = []
    for n, k in enumerate(artifact.device_kernels):
        if k.launch is None:
            raise BuildError(f"kernel '{artifact.name}': device kernel '{k.name}' has no launch configuration")
        g = [to_c(e, sym) for e in k.launch.grid]
        b = [to_c(e, sym) for e in k.launch.block]
        smem = to_c(k.launch.dynamic_shared_memory, sym)
        state.append(f"static long long __tl_cy_smem_{n}[__TL_CY_MAX_DEVICES];  /* dynamic smem allowed so far, per device */")
        args = ", ".join(_arg_texts(k, plan, cuda=True))
        body.append(
            f"  {{ /* {k.name} */\n"
            f"    long long gx = {g[0]}, gy = {g[1]}, gz = {g[2]};\n"
            f"    long long bx = {b[0]}, by = {b[1]}, bz = {b[2]};\n"
            f"    long long smem = {smem};\n"
            f"    if (gx > 0 && gy > 0 && gz > 0) {{\n"
            f"      if (smem > 48 * 1024 && smem > __tl_cy_smem_{n}[dev]) {{\n"
            f"        err = cudaFuncSetAttribute((const void *){k.name}, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);\n"
            f"        if (err != cudaSuccess) {{ __tl_cy_restore(prev, dev); return (int)err; }}\n"
            f"        __tl_cy_smem_{n}[dev] = smem;\n"
            f"      }}\n"
            f"      {k.name}<<<dim3((unsigned)gx, (unsigned)gy, (unsigned)gz), dim3((unsigned)bx, (unsigned)by, (unsigned)bz), (size_t)smem, st>>>({args});\n"
            f"      err = cudaGetLastError();\n"
            f"      if (err != cudaSuccess) {{ __tl_cy_restore(prev, dev); return (int)err; }}\n"
            f"    }}\n"
            f"  }}\n"
        )
    return (
        f"{artifact.device_source.rstrip()}\n"
        f"{_CUDA_PRELUDE}\n"
        + "\n".join(state)
        + "\n\n"
        f'extern "C" __attribute__((visibility("default"))) int {ENTRY_SYMBOL}('
        "__tl_cy_value *__tl_cy_v, const long long *__tl_cy_s, void *__tl_cy_stream, int __tl_cy_device) {\n"
        "  cudaStream_t st = (cudaStream_t)__tl_cy_stream;\n"
        "  cudaError_t err;\n"
        "  int dev = __tl_cy_device, prev = dev;\n"
        "  (void)__tl_cy_v; (void)__tl_cy_s;\n"
        "  if (dev < 0 || dev >= __TL_CY_MAX_DEVICES) return (int)cudaErrorInvalidDevice;\n"
        "  /* run on the tensors' device, as a device guard: switch only when needed, restore after */\n"
        "  err = cudaGetDevice(&prev);\n"
        "  if (err != cudaSuccess) return (int)err;\n"
        "  if (prev != dev && (err = cudaSetDevice(dev)) != cudaSuccess) return (int)err;\n"
        + "".join(body)
        + "  __tl_cy_restore(prev, dev);\n  return 0;\n}\n\n"
        f'extern "C" __attribute__((visibility("default"))) const char *{ERROR_STRING_SYMBOL}(int code) {{\n'
        "  return cudaGetErrorString((cudaError_t)code);\n}\n"
        + identity.c_definition(identity.kernel_id(artifact, plan), cuda=True)
    )
