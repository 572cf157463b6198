"""The runtime module of a CPU kernel for target ``c``: TVM's packed function around the C entry.

TVM's C host code generator runs a parallel loop as a plain ``for`` and knows nothing of
``#pragma omp simd``, so a runtime module printed by it ran a kernel's blocks one after the
other, without the loop pragmas the C entry has (3x-4x the time of the C entry on a matmul).
Here the module is made of two parts, compiled as one C file:

1. the kernel's C entry (:func:`.codegen.c_entry_source`, the source every C-consuming backend
   compiles): parallel block loops, ``#pragma omp simd`` loops, heap workspaces released on
   every early return, ``T.device_assert`` as status ``-3 - k`` for its ``k``-th check;
2. a packed function with the kernel's name and parameters, made by TVM's ``MakePackedAPI``
   (the same argument checks as before: dtype, shape, strides, device), whose body calls the C
   entry with the tensors' data pointers, the scalars and the dynamic sizes;

followed by :data:`GLUE_C`: the C entry's block launcher runs block ranges on TVM's thread pool
(``TVMBackendParallelLaunch``, as LLVM modules run their parallel loops; ``TVM_NUM_THREADS``),
and a failed call raises through tvm-ffi with the text of the failed ``T.device_assert``.
"""

from __future__ import annotations

from typing import Any, Mapping

import tvm
from tvm import tirx
from tvm.ir import PrimType

from ..artifact import DeviceKernel
from ..errors import LoweringError
from . import passes as P
from ..calling import DEVICE_ASSERT_FAILED, NEGATIVE_SIZE, STATUS_TEXTS, WORKSPACE_ALLOC_FAILED
from .device_assert import c_string

GLUE_C = """\
/* packed-function glue of the C entry %(entry)s (tilelang_core/lowering/c_runtime.py) */
struct %(entry)s_pool_job { tl_blocks_fn fn; void *args; int64_t blocks; int32_t rc; };
static int %(entry)s_pool_task(int task_id, TVMParallelGroupEnv *penv, void *cdata) {
  struct %(entry)s_pool_job *job = (struct %(entry)s_pool_job *)cdata;
  int64_t tasks = penv->num_task > 0 ? penv->num_task : 1;
  int64_t begin = job->blocks * task_id / tasks, end = job->blocks * (task_id + 1) / tasks;
  if (begin < end) {
    tl_keep_first_failure(&job->rc, job->fn(job->args, begin, end)); /* codegen.BLOCK_LAUNCHER_C */
  }
  return 0;
}
static int32_t %(entry)s_pool_launcher(int64_t blocks, int64_t work, tl_blocks_fn fn, void *args) {
  struct %(entry)s_pool_job job = { fn, args, blocks, 0 };
  (void)work;
  if (TVMBackendParallelLaunch(%(entry)s_pool_task, &job, 0) != 0) return fn(args, 0, blocks);
  return __atomic_load_n(&job.rc, __ATOMIC_RELAXED);
}
__attribute__((constructor)) static void %(entry)s_use_tvm_pool(void) {
  %(entry)s_block_launcher = %(entry)s_pool_launcher;
}
"""

RAISE_C = """\
int32_t %(entry)s_raise(int32_t rc) {
  const char *text = %(assert_text)s;
  if (text) TVMFFIErrorSetRaisedFromCStr("RuntimeError", text);
  else if (rc == %(negative)d) TVMFFIErrorSetRaisedFromCStr("ValueError", %(negative_text)s);
  else if (rc == %(no_memory)d) TVMFFIErrorSetRaisedFromCStr("MemoryError", %(no_memory_text)s);
  else TVMFFIErrorSetRaisedFromCStr("RuntimeError", "%(name)s: the kernel returned an error status");
  return -1;
}
"""


def _wrapper(func: tirx.PrimFunc, kernel: DeviceKernel, symbol_vars: list) -> tirx.PrimFunc:
    """``func`` (params, buffers, attributes kept) with a body calling the C entry ``kernel``."""
    args = []
    for arg in kernel.args:
        if arg.kind == "pointer":
            args.append(func.params[arg.param_index].data)
        elif arg.param_index is not None:
            args.append(func.params[arg.param_index])
        else:
            matches = [v for v in symbol_vars if str(v) == arg.symbol]
            if len(matches) != 1:
                raise LoweringError(f"C entry '{kernel.name}': cannot find dynamic size '{arg.symbol}'")
            args.append(matches[0])
    rc = tirx.Var("tl_rc", PrimType("int32"))
    raised = tirx.SeqStmt([
        tirx.Evaluate(tirx.call_extern("int32", f"{kernel.name}_raise", rc)),
        tirx.Evaluate(tirx.call_intrin("int32", "tirx.tvm_throw_last_error")),
    ])
    body = tirx.SeqStmt([
        tirx.Bind(rc, tirx.call_extern("int32", kernel.name, *args)),
        tirx.IfThenElse(rc != tirx.IntImm("int32", 0), raised, None),
    ])
    return func.with_body(body)


def c_runtime_module(func: tirx.PrimFunc, entry_source: str, kernel: DeviceKernel, symbol_vars: list,
                     target: Any, configs: Mapping[str, Any]) -> Any:
    """The runtime module (a C source module) of a CPU kernel for target ``c``.

    :param func: the kernel (after the frontend step for runtime modules); only its parameters,
        buffers and attributes are used.
    :param entry_source: the kernel's C entry source; ``kernel`` its :class:`DeviceKernel`.
    :param symbol_vars: the kernel's dynamic-size variables (``describe_params``).
    """
    name = str(func.attrs.get("global_symbol", "main"))
    mod = tvm.IRModule({name: _wrapper(func, kernel, symbol_vars)})
    mod = tirx.transform.BindTarget(tvm.target.Target(target, host=target))(mod)
    mod = P.cpu_runtime_passes(configs, vector_types=False)(mod)
    from tvm.tirx.build import split_host_device_mods, tir_to_runtime

    host_mod, device_mods = split_host_device_mods(mod)
    wrapper = tir_to_runtime(P.host_finalize_passes()(host_mod), device_mods, target).inspect_source()
    glue = [GLUE_C % {"entry": kernel.name}] if kernel.block_launcher else []
    assert_text = f"rc <= {DEVICE_ASSERT_FAILED} ? {kernel.assert_message}(rc) : 0" if kernel.assert_message else "0"
    glue.append(RAISE_C % {
        "entry": kernel.name, "assert_text": assert_text, "name": name.replace('"', ""),
        "negative": NEGATIVE_SIZE, "negative_text": c_string(f"{name}: {STATUS_TEXTS[NEGATIVE_SIZE]}"),
        "no_memory": WORKSPACE_ALLOC_FAILED,
        "no_memory_text": c_string(f"{name}: {STATUS_TEXTS[WORKSPACE_ALLOC_FAILED]}")})
    # TVM's part first: its headers define TVM_DLL and the backend API the glue uses; its
    # declaration of the C entry (same parameter types) comes before the entry's definition
    code = "\n".join([wrapper, entry_source, *glue])
    return tvm.get_global_func("runtime.CSourceModuleCreate")(code, "c", [name], [])
