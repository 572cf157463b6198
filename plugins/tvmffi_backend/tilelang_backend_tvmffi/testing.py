"""Helpers that build ``tvm_ffi`` kernels straight from TVM prim_funcs (tests and benchmarks).

These bypass TileLang's lowering pipeline: a TVMScript/TE ``prim_func`` is compiled with
``tvm.compile`` and wrapped in a :class:`~tilelang_core.artifact.KernelArtifact` built from its
buffer map, which is what the pipeline hands a ``runtime_module`` backend. ``bench/dispatch.py``
uses :func:`sum_kernel` to time this backend's per-call overhead.

Importing this module imports TVM (seconds); the plugin's entry point never imports it.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional, Union

from tilelang_core.artifact import KernelArtifact, ScalarParam, SymbolBinding, TensorParam


def _dim(expr: Any) -> Union[int, str]:
    import tvm

    if isinstance(expr, (int, tvm.tirx.IntImm)):
        return int(expr)
    return str(expr)


def make_target(kind: str = "llvm", arch: Optional[str] = None):
    """A TVM target for ``kind`` (CUDA gets an LLVM host and ``arch``, default ``sm_80``)."""
    import tvm

    if kind == "cuda":
        return tvm.target.Target({"kind": "cuda", "arch": arch or "sm_80"}, host="llvm")
    return tvm.target.Target(kind)


def artifact_from_prim_func(func: Any, target: Any = "llvm", name: Optional[str] = None) -> KernelArtifact:
    """Compile ``func`` with ``tvm.compile`` for ``target`` and describe it as a KernelArtifact.

    Tensor parameters come from the buffer map (shapes as ints or expression strings), scalar
    parameters from the remaining params; each shape variable is bound to the first tensor
    dimension (or scalar parameter) that names it.
    """
    import tvm

    if isinstance(target, str):
        target = make_target(target)
    kind = target.kind.name
    if name is None:
        gs = func.attrs.get("global_symbol") if func.attrs is not None else None
        name = str(gs) if gs is not None else "main"
    func = func.with_attr("global_symbol", name)
    executable = tvm.compile(tvm.IRModule({name: func}), target=target)

    from tilelang_core.lowering.signature import written_params

    device = {"llvm": "cpu", "c": "cpu"}.get(kind, kind)
    written = written_params(func)  # as the pipeline records it (the overlap check reads it)
    params: list = []
    symbols: list[SymbolBinding] = []
    bound: set[str] = set()
    scalar_index = {}
    for index, var in enumerate(func.params):
        if type(var.ty).__name__ == "BufferType":  # TVM 0.27 tirx: buffer parameters are typed Vars
            params.append(
                TensorParam(
                    name=var.name,
                    dtype=str(var.dtype),
                    shape=[_dim(s) for s in var.shape],
                    strides=[_dim(s) for s in var.strides] if len(var.strides) else None,
                    device=device,
                    written=index in written,
                )
            )
        else:
            params.append(ScalarParam(name=var.name, dtype=str(var.ty.dtype)))
            scalar_index[var.name] = index
    for name_, index in scalar_index.items():
        used = any(
            isinstance(p, TensorParam) and any(isinstance(d, str) and name_ in d for d in p.shape) for p in params
        )
        if used:
            symbols.append(SymbolBinding(name=name_, param_index=index, dim=None))
            bound.add(name_)
    for index, p in enumerate(params):
        if isinstance(p, TensorParam):
            for d, dim in enumerate(p.shape):
                if isinstance(dim, str) and dim.isidentifier() and dim not in bound:
                    symbols.append(SymbolBinding(name=dim, param_index=index, dim=d))
                    bound.add(dim)
    artifact = KernelArtifact(
        name=name,
        target=str(target),
        target_kind=kind,
        arch=str(target.attrs["arch"]) if "arch" in target.attrs else None,  # as the pipeline records it
        host_target="llvm" if kind not in ("llvm", "c") else None,
        params=params,
        symbols=symbols,
    )
    return artifact.with_tvm_modules(executable)


def sum_prim_func(num_tensors: int = 3, n: Union[int, str] = 16, dtype: str = "float32"):
    """A TE prim_func ``out = in_0 + ... + in_{k-2}`` over ``num_tensors`` 1-D tensors.

    ``n`` is the length, or a symbol name for a dynamic length.
    """
    from tvm import te

    if num_tensors < 2:
        raise ValueError(f"num_tensors must be at least 2, got {num_tensors}")
    length = te.var(n, "int32") if isinstance(n, str) else n
    ins = [te.placeholder((length,), dtype, name=f"x{i}") for i in range(num_tensors - 1)]

    def body(i):
        acc = ins[0][i]
        for t in ins[1:]:
            acc = acc + t[i]
        return acc

    out = te.compute((length,), body, name="out")
    return te.create_prim_func(ins + [out])


def sum_kernel(
    num_tensors: int = 3, n: Union[int, str] = 16, out_idx: Iterable[int] = (), target: str = "llvm"
):
    """Build the :func:`sum_prim_func` kernel with the ``tvm_ffi`` backend (for benchmarks).

    ``sum_kernel(3)`` is ``kernel(a, b, c)`` writing ``a + b`` into ``c``; with ``out_idx=[-1]``
    it is ``c = kernel(a, b)``.
    """
    from . import build_kernel

    artifact = artifact_from_prim_func(sum_prim_func(num_tensors, n), target=target, name=f"sum{num_tensors}")
    return build_kernel(artifact, out_idx=list(out_idx))


__all__ = ["artifact_from_prim_func", "make_target", "sum_kernel", "sum_prim_func"]
