"""``T.pdl_trigger()`` / ``T.pdl_sync()`` (:mod:`tilelang_core.language.tileops.pdl`) per target.

**CUDA** (:func:`lower_gpu_statement`, from ``lower_gpu_intrinsics``): calls of two helpers in
the kernel's prelude (:func:`cuda_helper`), ``tl_pdl_trigger()`` (PTX
``griddepcontrol.launch_dependents``, what ``cudaTriggerProgrammaticLaunchCompletion()`` does)
and ``tl_pdl_sync()`` (``griddepcontrol.wait``, what ``cudaGridDependencySynchronize()`` does).
The instructions exist from sm_90 on; the helpers hold them under ``__CUDA_ARCH__ >= 900`` and
are empty below (and in nvcc's host pass). That is the right meaning there: without PDL a
kernel starts after the previous one in its stream has finished, so the wait is satisfied and
the trigger has nobody to start early. The asm is ``volatile`` with a ``memory`` clobber, so the
compiler keeps memory accesses on their side of it. PTX rather than the runtime functions: no
header is needed, with nvcc or NVRTC.

A device kernel that calls ``tl_pdl_sync`` (:func:`PdlSyncKernels`, right before the source is
printed) loses ``tirx.noalias``: no ``__restrict__`` on its pointer parameters, which would let
the compiler treat the inputs as unchanging during the kernel (reading them before the wait, or
through the non-coherent read-only cache); its ``T.__ldg`` loads become plain loads for the same
reason (the read-only cache is not coherent with the previous kernel's writes).

**CPU** (:func:`lower_cpu_statement`): nothing. CPU kernel launches are serialized, so the
previous kernel has finished (the wait is satisfied) and there is nothing to start early.

Used as a value (``x = T.pdl_sync()``) they are a ``LoweringError`` on every target.

The backends launch kernels with plain launches (no ``cudaLaunchAttributeProgrammaticStream
Serialization``), so kernels do not overlap yet; the intrinsics are correct either way.
"""

from __future__ import annotations

from typing import Any, Optional

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import LoweringError
from ..language.tileops.pdl import MARKERS, SYNC, TRIGGER
from .markers import extern_name

#: Names of the CUDA helpers (prelude text from :func:`cuda_helper`).
HELPERS = {TRIGGER: "tl_pdl_trigger", SYNC: "tl_pdl_sync"}
_PTX = {TRIGGER: "griddepcontrol.launch_dependents;", SYNC: "griddepcontrol.wait;"}
_NOALIAS = "tirx.noalias"


def refuse_as_value(m: Any) -> None:
    """A PDL marker used as a value (``x = T.pdl_sync()``): they are statements."""
    if m.name in MARKERS:
        raise LoweringError(f"{m.loc}: T.{m.name}() is a statement of its own (it returns nothing)")


def lower_gpu_statement(m: Any, used: set) -> Optional[Any]:
    """The CUDA statement of a PDL marker statement ``m`` (a helper call), else None."""
    if m.name not in MARKERS:
        return None
    used.add(HELPERS[m.name])
    return tirx.Evaluate(tirx.call_extern("int32", HELPERS[m.name]))


def cuda_helper(name: str) -> Optional[str]:
    """CUDA text of helper ``name`` (``tl_pdl_trigger`` or ``tl_pdl_sync``), else None."""
    for marker, helper in HELPERS.items():
        if helper == name:
            return (
                f"__device__ __forceinline__ void {name}() {{\n"
                "#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)\n"
                f'  asm volatile("{_PTX[marker]}" : : : "memory");\n'
                "#endif  /* before sm_90 kernels in a stream never overlap: nothing to do */\n"
                "}\n"
            )
    return None


def lower_cpu_statement(m: Any) -> Optional[Any]:
    """The CPU statement of a PDL marker statement ``m`` (nothing: launches are serialized), else None."""
    if m.name not in MARKERS:
        return None
    return tirx.Evaluate(tirx.IntImm("int32", 0))


def _calls_sync(body: Any) -> bool:
    found = []

    def on_call(call):
        if extern_name(call) == HELPERS[SYNC]:
            found.append(call)
        return call

    tvm_ffi.structural_map(body, [(tvm.ir.Call, on_call)])
    return bool(found)


def _plain_load(call: Any) -> Any:
    """``__ldg(&x)`` -> ``x`` (any other call unchanged)."""
    if extern_name(call) != "__ldg" or len(call.args) != 2:
        return call
    address = call.args[1]
    if getattr(getattr(address, "op", None), "name", "") != "tirx.address_of" or not isinstance(address.args[0], tvm.ir.TensorLoad):
        return call
    return address.args[0]


def PdlSyncKernels() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """Device functions that call ``tl_pdl_sync``: no ``__restrict__`` parameters (``tirx.noalias``
    off) and plain loads instead of ``__ldg``. Other functions are left as they are."""

    def transform(func, mod, ctx):  # noqa: ARG001
        if not _calls_sync(func.body):
            return func
        func = func.with_body(tvm_ffi.structural_map(func.body, [(tvm.ir.Call, _plain_load)]))
        return func.with_attr(_NOALIAS, False)

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="tl.PdlSyncKernels")
