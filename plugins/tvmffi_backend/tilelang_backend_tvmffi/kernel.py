"""The callable kernel of the ``tvm_ffi`` backend.

A kernel wraps the TVM packed function named ``artifact.name`` (it takes every parameter in
order). Calls go through tvm-ffi, which reads torch tensors through torch's DLPack C exchange API
and, for CUDA tensors, launches on torch's current stream.

Per kernel, a small Python function is generated for the common call (no ``stream=``, the right
number of arguments, plain ``torch.Tensor`` inputs whose data is aligned as TVM's code assumes):
it binds the symbols the outputs need from the input shapes, allocates the ``out_idx`` outputs
with torch on the inputs' device, and calls the TVM function directly. TVM's host code checks
every argument itself (count, type, dtype, ndim, shape, strides, device); when it refuses a call,
the arguments are validated in Python and the error is re-raised as the TypeError/ValueError
with the message every backend gives (see ``docs/backend-conventions.md``). Everything else (a
``stream=``, tensor subclasses, misaligned views) takes the general path, which validates first.

Misaligned views: TVM's LLVM and CUDA code assume 64-byte aligned tensor data (a view with a
storage offset would crash it), so such tensors are copied into aligned temporaries for the call
and copied back afterwards.
"""

from __future__ import annotations

import ast
import functools
import operator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from tilelang_core import symbolic
from tilelang_core.artifact import BuildOptions, KernelArtifact, ScalarParam, TensorParam
from tilelang_core.calling import (
    is_complex_number,
    is_numpy_bool,
    index_reach_text,
    kernel_check_text,
    narrow_symbols,
    not_dense_message,
    self_overlap_message,
    storage_error,
    stream_handle,
    strides_mismatch_text,
    symbol_range_message,
    tensors_disjoint,
    type_name,
)
from tilelang_core.errors import BuildError, OutIdxError

from . import fork_safety  # noqa: F401 - registers the after-fork handler: a forked child runs CPU blocks serially

#: Byte alignment TVM assumes for tensor data (``kAllocAlignment``).
TVM_ALIGNMENT = 64

#: torch device type for each artifact device family.
_TORCH_DEVICE_TYPE = {"cpu": "cpu", "cuda": "cuda", "rocm": "cuda", "hip": "cuda", "metal": "mps"}

#: Default of the generated call function's positional parameters ("not passed").
_MISSING = object()

_INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def torch_dtype(name: str):
    """The torch dtype of a TVM dtype string (``float32`` -> ``torch.float32``)."""
    import torch

    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise BuildError(f"tvm_ffi: TVM dtype {name!r} has no torch equivalent; cannot pass or allocate it")
    return dtype


def _torch_dtype_name(dtype: Any) -> str:
    text = str(dtype)
    return text[6:] if text.startswith("torch.") else text


@dataclass
class KernelState:
    """Everything a kernel object holds besides its generated call function."""

    artifact: KernelArtifact
    options: BuildOptions
    out_idx: tuple[int, ...]
    func: Any
    module: Any = None  # the TVM module to export (None after load)
    library_path: Optional[Path] = None  # the library file: loaded from a cache, or a kept (verbose) build
    library_bytes: Optional[bytes] = None  # the library built here (its build directory is gone)
    module_kinds: list[str] = field(default_factory=list)
    alignment: int = TVM_ALIGNMENT
    source: str = ""


KERNEL_DOC = """A kernel built by the ``tvm_ffi`` backend: ``kernel(*inputs, stream=None)``.

Pass the non-output parameters in order; the ``out_idx`` outputs are allocated on the inputs'
device and returned (one tensor, a list for several, None when there are none). On CUDA the
launch goes on torch's current stream, or on ``stream`` (a ``torch.cuda.Stream`` or a raw
``cudaStream_t`` int); CPU kernels ignore ``stream``.

The kernel is a plain generated Python function (the cheapest thing to call); its attributes:
``artifact``, ``out_idx``, ``backend`` (``"tvm_ffi"``), ``get_source()``, ``call_plan_code``.
"""


def kernel_state(kernel: Any) -> KernelState:
    """The :class:`KernelState` of a kernel this backend built or loaded (or a JITKernel of one)."""
    state = getattr(kernel, "_state", None)
    if state is None and hasattr(kernel, "runner"):
        state = getattr(kernel.runner, "_state", None)
    if not isinstance(state, KernelState):
        raise TypeError(f"tvm_ffi: expected a kernel built by the tvm_ffi backend, got {type(kernel).__name__}")
    return state


# --- build ----------------------------------------------------------------------------------


def build(artifact: KernelArtifact, options: BuildOptions) -> Any:
    """Wrap ``artifact.tvm_modules`` into a callable kernel (the build hook)."""
    from .runtime import module_kinds, runnable_module, undefined_jit_symbols, unwrap_module

    if artifact.tvm_modules is None:
        raise BuildError(
            f"tvm_ffi: kernel {artifact.name!r} carries no TVM runtime module; the tvm_ffi backend "
            "consumes 'runtime_module' (lower with consumes=['runtime_module'])"
        )
    mod = unwrap_module(artifact.tvm_modules)
    kinds = module_kinds(mod)
    device_kinds = [k for k in kinds if k not in ("llvm", "c", "static_library", "library")]
    missing = _missing_device_runtime(device_kinds) if device_kinds else None
    alignment = assumed_alignment(mod, kinds, artifact)
    if missing is not None:  # build here, run elsewhere: the module saves, it does not run
        state = KernelState(artifact=artifact, options=options, out_idx=_check_out_idx(artifact, options.out_idx),
                            func=None, module=mod, module_kinds=list(kinds), alignment=alignment,
                            source=artifact.device_source or "")
        return unrunnable_kernel(state, missing)
    from .identity import kernel_id

    runnable, library_path, library_bytes = runnable_module(mod, list(options.compile_flags),
                                                            identity=kernel_id(artifact, kinds, alignment),
                                                            keep=options.verbose)
    source = artifact.device_source or artifact.host_source or ""
    if not source:
        try:
            source = mod.imports[0].inspect_source() if mod.imports else mod.inspect_source()
        except Exception:  # noqa: BLE001 - not every module kind can show its source
            source = ""
    if runnable is mod and "llvm" in kinds:  # run by the ORC JIT in this process (runtime.undefined_jit_symbols)
        missing_symbols = undefined_jit_symbols(source)
        if missing_symbols:
            raise BuildError(
                f"tvm_ffi: kernel {artifact.name!r} calls {', '.join(missing_symbols)}, which no library loaded in this "
                "process defines (a T.call_extern of a function the CPU has not, such as a CUDA intrinsic?); the "
                "LLVM JIT would leave the call unresolved and the kernel would crash")
    return make_kernel(
        artifact, options, runnable, module_for_export=mod, library_path=library_path,
        library_bytes=library_bytes, kinds=kinds, alignment=alignment, source=source,
    )


def _bind(symbols: dict, origin: dict, sym: str, value: int, where: str, owner: str) -> Optional[Exception]:
    """Bind ``sym`` to ``value`` (read at ``where``, from argument ``owner``); the contract's
    error when an earlier argument bound it to another value."""
    if sym in symbols and symbols[sym] != value:
        return ValueError(f"{where} binds symbol '{sym}' = {value}, but argument '{origin[sym]}' bound it "
                          f"to {symbols[sym]}")
    symbols.setdefault(sym, value)
    origin.setdefault(sym, owner)
    return None


def assumed_alignment(mod: Any, kinds: list[str], artifact: KernelArtifact) -> int:
    """Byte alignment of tensor data the compiled code assumes; 0 when torch's guarantee suffices.

    TVM marks every buffer parameter as ``data_alignment``-aligned (64 bytes by default): the LLVM
    code carries ``llvm.assume(align 64)`` and may use aligned vector instructions, so a view
    with a storage offset would crash it. For LLVM hosts without device modules the assumption
    is read from the IR; device code (CUDA, ...) is taken to assume TVM's default; C sources
    compiled by the system compiler assume nothing unless they say ``assume_aligned``.
    """
    import re

    itemsizes = [_itemsize(p.dtype) for _, p in artifact.tensor_params] or [1]
    device_kinds = [k for k in kinds if k not in ("llvm", "c", "static_library", "library")]
    if device_kinds:
        return TVM_ALIGNMENT
    if set(kinds) <= {"c"}:
        try:
            source = mod.inspect_source()
        except Exception:  # noqa: BLE001
            return TVM_ALIGNMENT
        return TVM_ALIGNMENT if "assume_aligned" in source else 0
    try:
        ir = mod.inspect_source("ll")
    except Exception:  # noqa: BLE001 - no IR: assume TVM's default
        return TVM_ALIGNMENT
    found = [int(n) for n in re.findall(r'"align"\(ptr [^,]+, i64 (\d+)\)', ir)]
    found += [int(n) for n in re.findall(r"ptr noalias[^,)]* align (\d+)", ir)]
    need = max(found, default=0)
    return need if need > min(itemsizes) else 0


def _itemsize(dtype: str) -> int:
    import re

    m = re.search(r"(\d+)(x\d+)?$", dtype)
    if dtype == "bool" or m is None:
        return 1
    return max(1, int(m.group(1)) // 8)


def _missing_device_runtime(device_kinds: list[str]) -> Optional[str]:
    """Why TVM's runtime cannot run these device modules in this process, or None."""
    import tvm_ffi

    for kind in device_kinds:
        if tvm_ffi.get_global_func(f"ffi.Module.load_from_bytes.{kind}", allow_missing=True) is None:
            return (
                f"tvm_ffi: the kernel's {kind!r} device module cannot run here: TVM's {kind} runtime "
                "is not loaded (no driver or device, or TVM built without it); the module was built "
                "and can be saved or exported, not called"
            )
    return None


def unrunnable_kernel(state: KernelState, reason: str) -> Any:
    """A kernel that can be saved (its module or library) but whose call raises ``reason``."""
    from tilelang_core.errors import BackendUnavailableError

    def __call__(*args: Any, stream: Any = None) -> Any:
        raise BackendUnavailableError(reason)

    __call__._state = state
    __call__.artifact = state.artifact
    __call__.out_idx = state.out_idx
    __call__.backend = "tvm_ffi"
    __call__.get_source = lambda: state.source
    __call__.__qualname__ = __call__.__name__ = state.artifact.name
    return __call__


def make_kernel(
    artifact: KernelArtifact,
    options: BuildOptions,
    module: Any,
    *,
    module_for_export: Any,
    library_path: Optional[Path],
    library_bytes: Optional[bytes] = None,
    kinds: list[str],
    alignment: int = TVM_ALIGNMENT,
    source: str = "",
) -> Any:
    """Create the kernel (a generated function, see :data:`KERNEL_DOC`) around ``artifact.name``."""
    try:
        func = module.get_function(artifact.name, query_imports=True)
    except Exception:  # noqa: BLE001 - tvm-ffi raises AttributeError/RuntimeError
        func = None
    if func is None:
        raise BuildError(
            f"tvm_ffi: the TVM module has no function named {artifact.name!r} (artifact.name); "
            "the pipeline must build the kernel under that global symbol"
        )
    out_idx = _check_out_idx(artifact, options.out_idx)
    state = KernelState(
        artifact=artifact, options=options, out_idx=out_idx, func=func, module=module_for_export,
        library_path=library_path, library_bytes=library_bytes, module_kinds=list(kinds), alignment=alignment,
        source=source,
    )
    plan = _CallPlan(state)
    call = plan.generate()
    call._state = state
    call.artifact = artifact
    call.out_idx = out_idx
    call.backend = "tvm_ffi"
    call.get_source = lambda: state.source
    call.call_plan_code = plan.code
    if options.verbose:
        print(
            f"[tvm_ffi] {artifact.name}: modules {kinds}, data alignment checked: {alignment or 'no'}, "
            f"library {library_path or '(in memory)'}\n{plan.code}"
        )
    return call


def _check_out_idx(artifact: KernelArtifact, out_idx: Sequence[int]) -> tuple[int, ...]:
    n = len(artifact.params)
    seen: list[int] = []
    for i in out_idx:
        if not isinstance(i, int) or not 0 <= i < n:
            raise OutIdxError(f"out_idx entry {i!r} is out of range for kernel {artifact.name!r} with {n} parameters")
        if i in seen:
            raise OutIdxError(f"out_idx entry {i} is repeated for kernel {artifact.name!r}")
        if not isinstance(artifact.params[i], TensorParam):
            raise OutIdxError(
                f"out_idx entry {i} names scalar parameter {artifact.params[i].name!r} of kernel "
                f"{artifact.name!r}; only tensor parameters can be outputs"
            )
        seen.append(i)
    return tuple(seen)


# --- call plan ------------------------------------------------------------------------------


class _Renamer(ast.NodeTransformer):
    def __init__(self, mapping: dict[str, str]) -> None:
        self.mapping = mapping

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.mapping:
            return ast.copy_location(ast.Name(id=self.mapping[node.id], ctx=node.ctx), node)
        return node


def _expr_code(expr: Any, mapping: dict[str, str]) -> str:
    """Python source of a shape entry with symbol names replaced by local variable names."""
    if isinstance(expr, int):
        return str(expr)
    tree = symbolic._parse(expr)  # validated: names, ints, + - * // %, min/max
    return ast.unparse(_Renamer(mapping).visit(ast.parse(ast.unparse(tree), mode="eval")))


class _CallPlan:
    """Per-kernel call plan: inputs, outputs, symbol sources; generates the call function."""

    def __init__(self, state: KernelState) -> None:
        import torch

        self.state = state
        a = state.artifact
        self.name = a.name
        self.inputs = [(i, p) for i, p in enumerate(a.params) if i not in state.out_idx]
        self.outputs = [(i, a.params[i]) for i in sorted(state.out_idx)]
        self.arg_of_param = {pi: j for j, (pi, _) in enumerate(self.inputs)}
        self.names = ", ".join(p.name for _, p in self.inputs)
        self.torch = torch
        self.dtypes = {i: torch_dtype(p.dtype) for i, p in enumerate(a.params) if isinstance(p, TensorParam)}
        devices = {p.device for p in a.params if isinstance(p, TensorParam)}
        self.device_family = devices.pop() if len(devices) == 1 else ("cpu" if not devices else sorted(devices)[0])
        self.torch_device_type = _TORCH_DEVICE_TYPE.get(self.device_family, self.device_family)
        self.is_cpu = self.torch_device_type == "cpu"
        # Symbols read from an input's stride (SymbolBinding.stride): symbol -> (caller index, dim).
        self.stride_source = {
            b.name: (self.arg_of_param[b.param_index], b.dim) for b in a.symbols
            if b.stride and b.param_index in self.arg_of_param
        }
        self.symbol_source = self._symbol_sources()
        # Symbols narrower than a torch size (int32): symbol -> (largest value, dtype); a call
        # binding a larger size or stride is refused, never narrowed.
        self.symbol_high = narrow_symbols(a.symbols)
        # Caller positions of the tensor inputs the kernel writes (checked for overlaps).
        self.written_inputs = [j for j, (_, p) in enumerate(self.inputs) if isinstance(p, TensorParam) and p.written]
        # Symbols named by scalar parameters (bound from the scalar's value).
        self.scalar_symbols = {
            s.param_index: s.name for s in a.symbols
            if s.dim is None and s.param_index in self.arg_of_param
        }

    # -- symbols -----------------------------------------------------------------------------

    def _symbol_sources(self) -> dict[str, tuple[int, Optional[int]]]:
        """symbol -> (caller argument index, dim or None) for every symbol an input binds."""
        a = self.state.artifact
        sources: dict[str, tuple[int, Optional[int]]] = {}
        for s in a.symbols:
            if s.param_index in self.arg_of_param and not s.stride:
                sources.setdefault(s.name, (self.arg_of_param[s.param_index], s.dim))
        for j, (_, p) in enumerate(self.inputs):
            if isinstance(p, TensorParam):
                for d, dim in enumerate(p.shape):
                    if isinstance(dim, str) and dim.strip().isidentifier():
                        sources.setdefault(dim.strip(), (j, d))
        for pi, p in self.outputs:
            for d, dim in enumerate(p.shape):
                for sym in sorted(symbolic.free_symbols(dim)):
                    if sym not in sources and sym not in self.stride_source:
                        raise OutIdxError(
                            f"out_idx names output {p.name!r} of kernel {a.name!r} whose shape[{d}] = "
                            f"{dim!r} uses symbol {sym!r}, which no input argument binds"
                        )
        return sources

    def _narrowed(self, sym: str, value: int, where: str) -> Optional[Exception]:
        """The error for a size or stride too large for its symbol's dtype (None when it fits)."""
        high = self.symbol_high.get(sym)
        if high is not None and value > high[0]:
            return ValueError(symbol_range_message(where, sym, value, high[1]))
        return None

    # -- generated fast path -----------------------------------------------------------------

    def generate(self):
        torch = self.torch
        state = self.state
        nin = len(self.inputs)
        arg_names = [f"a{j}" for j in range(nin)]
        tensor_args = [f"a{j}" for j, (_, p) in enumerate(self.inputs) if isinstance(p, TensorParam)]
        # An output with exactly an input's shape, dtype and layout is allocated with
        # torch.empty_like(input): much cheaper than torch.empty(shape, dtype=, device=).
        like: dict[int, str] = {}
        for pi, p in self.outputs:
            if p.strides is not None:
                continue
            for j, (qi, q) in enumerate(self.inputs):
                if isinstance(q, TensorParam) and q.strides is None and q.dtype == p.dtype and q.shape == p.shape:
                    like[pi] = f"a{j}"
                    break
        needed: list[str] = []
        for pi, p in self.outputs:
            if pi in like:
                continue
            for dim in list(p.shape) + list(p.strides or []):
                for sym in sorted(symbolic.free_symbols(dim)):
                    if sym not in needed:
                        needed.append(sym)
        mapping = {sym: f"_s{k}" for k, sym in enumerate(needed)}
        env: dict[str, Any] = {
            "_Tensor": torch.Tensor,
            "_f": state.func,
            "_empty": torch.empty,
            "_empty_strided": torch.empty_strided,
            "_empty_like": torch.empty_like,
            "_reraise": self.reraise,
            "_reach": _reach,
            "_slow": self.slow_call,
            "_cpu": torch.device("cpu"),
            "_current_device": self.current_device,
        }
        body: list[str] = []
        for sym in needed:
            if sym in self.symbol_source:
                j, d = self.symbol_source[sym]
                body.append(f"{mapping[sym]} = a{j}" + ("" if d is None else f".shape[{d}]"))
            else:
                j, d = self.stride_source[sym]
                body.append(f"{mapping[sym]} = a{j}.stride({d})")
        if len(like) < len(self.outputs):
            if self.is_cpu:
                dev = "_cpu"
            elif tensor_args:
                body.append(f"_dev = {tensor_args[0]}.device")
                dev = "_dev"
            else:
                body.append("_dev = _current_device()")
                dev = "_dev"
        call_args: list[str] = []
        out_names: list[str] = []
        for pi, p in enumerate(state.artifact.params):
            if pi in self.arg_of_param:
                call_args.append(f"a{self.arg_of_param[pi]}")
                continue
            m = len(out_names)
            out_names.append(f"o{m}")
            call_args.append(f"o{m}")
            env[f"_dt{m}"] = self.dtypes[pi]
            if pi in like:
                body.append(f"o{m} = _empty_like({like[pi]})")
                continue
            shape = "(" + "".join(_expr_code(d, mapping) + ", " for d in p.shape) + ")"
            if p.index_limit is not None:  # too large for 32-bit indices: the general path raises
                size = " * ".join(f"({_expr_code(d, mapping)})" for d in p.shape) or "1"
                body.append(f"if {size} > {int(p.index_limit)}:")
                body.append("    return _slow(_GIVEN, stream)")
            if p.strides is not None:
                strides = "(" + "".join(_expr_code(d, mapping) + ", " for d in p.strides) + ")"
                body.append(f"o{m} = _empty_strided({shape}, {strides}, dtype=_dt{m}, device={dev})")
            else:
                body.append(f"o{m} = _empty({shape}, dtype=_dt{m}, device={dev})")
        if self.written_inputs:
            # a written tensor sharing memory with another argument: the general path raises. The
            # byte size of a static compact tensor is a constant (a wrong shape only sends the call
            # down the general path, which checks everything first).
            tensor_pos = [j for j, (_, p) in enumerate(self.inputs) if isinstance(p, TensorParam)]
            sizes: dict[int, str] = {}
            lines = []
            for j in tensor_pos:
                p = self.inputs[j][1]
                static = _static_nbytes(p)
                sizes[j] = str(static) if static is not None else f"_n{j}"
                lines.append(f"_p{j} = a{j}.data_ptr()" + ("" if static is not None else f"; _n{j} = a{j}.nbytes"))
            pairs = []
            for w in self.written_inputs:
                for j in tensor_pos:
                    if j != w and not (j in self.written_inputs and j < w):  # each pair once
                        nw, nj = sizes[w], sizes[j]
                        if "0" in (nw, nj):
                            continue  # a static empty tensor overlaps nothing
                        empty = "" if nw.isdigit() and nj.isdigit() else f" and {nw} and {nj}"
                        pairs.append(f"(_p{w} < _p{j} + {nj} and _p{j} < _p{w} + {nw}{empty})")
            if pairs:
                lines.append(f"if {' or '.join(pairs)}:")
                lines.append("    return _slow(_GIVEN, stream)")
                body[:0] = lines
        body.append(f"_f({', '.join(call_args)})")
        if not out_names:
            ret = "None"
        elif len(out_names) == 1:
            ret = out_names[0]
        else:
            ret = "[" + ", ".join(out_names) + "]"

        conds = [f"type({t}) is _Tensor" for t in tensor_args]
        for j, (_, p) in enumerate(self.inputs):  # 32-bit indices: larger tensors take the general path
            # A dimension given to an int32 symbol must fit it (TVM's host code narrows it, then
            # compares the others after narrowing too): with at most that many elements every
            # dimension fits, unless there are none (then one dimension of several may be huge),
            # so a compact tensor with such dimensions takes the general path when it has more
            # elements, or none and several dimensions. (Explicit strides always do, below.)
            narrow = [self.symbol_high[d.strip()][0] for d in (p.shape if isinstance(p, TensorParam) else ())
                      if isinstance(d, str) and d.strip() in self.symbol_high]
            if isinstance(p, TensorParam) and p.strides is None and (p.index_limit is not None or narrow):
                bound = min(narrow + ([] if p.index_limit is None else [int(p.index_limit)]))
                conds.append(f"{'0 < ' if narrow and len(p.shape) > 1 else ''}a{j}.numel() <= {bound}")
            elif isinstance(p, TensorParam) and p.index_limit is not None:
                conds.append(f"_reach(a{j}) <= {int(p.index_limit)}")
        if any(isinstance(p, TensorParam) and p.strides is not None for _, p in self.inputs):
            conds.append("_M is None")  # explicit strides: always the general path (see slow_call)
        for j, (_, p) in enumerate(self.inputs):
            # A tensor with torch's negative bit takes the general path, which refuses it with the
            # fix (.resolve_neg()). Such a tensor is usually .imag of a conjugate view (stride 2, which
            # the C entry's compact-stride check refuses), but .as_strided() or ._neg_view() of one
            # is compact: DLPack hands over its memory without the sign, and the kernel read the
            # values negated (C = A + B gave A - B).
            if isinstance(p, TensorParam) and p.strides is None:
                conds.append(f"not a{j}.is_neg()")
        for j, (pi, p) in enumerate(self.inputs):
            if isinstance(p, ScalarParam):  # exact Python types only; others are converted by _slow
                conds.append(_scalar_fast_condition(f"a{j}", p.dtype))
                if pi in self.scalar_symbols:  # a size: a negative one is refused by the general path
                    conds.append(f"a{j} >= 0")  # (the outputs it shapes were allocated, then written past)
        aligned_check = None
        if state.alignment and tensor_args:
            # data_ptr() raises for tensors without storage (sparse, ...): evaluated inside the try.
            ptrs = " | ".join(f"{t}.data_ptr()" for t in tensor_args)
            aligned_check = f"(({ptrs}) & {state.alignment - 1})"
        # Positional parameters with a sentinel default: the common call needs no tuple
        # unpacking; missing or extra arguments fall through to the general path, which raises
        # the contract's count error.
        env["_M"] = _MISSING
        params = "".join(f"{a}=_M, " for a in arg_names)
        packed = "(" + "".join(f"{a}, " for a in arg_names) + ")"
        given = f"tuple(x for x in {packed} if x is not _M) + rest"
        env["_bad_kw"] = functools.partial(_unexpected_keyword, self.name)
        lines = [f"def __call__({params}*rest, stream=None, **kw):"]
        lines.append(f"    if {' and '.join(conds + ['stream is None', 'not rest', 'not kw'])}:")
        lines.append("        try:")
        if aligned_check:
            lines.append(f"            if {aligned_check}:")
            lines.append(f"                return _slow({given}, stream)  # misaligned: staged copies")
        lines.extend("            " + b.replace("_GIVEN", given) for b in body)
        lines.append("        except Exception as exc:")
        lines.append(f"            return _reraise({given}, exc)")
        lines.append(f"        return {ret}")
        lines.append("    if kw:")
        lines.append("        _bad_kw(kw)")
        lines.append(f"    return _slow({given}, stream)")
        code = "\n".join(lines) + "\n"
        self.code = code
        exec(compile(code, f"<tvm_ffi kernel {self.name}>", "exec"), env)  # noqa: S102 - generated
        fn = env["__call__"]
        fn.__doc__ = KERNEL_DOC
        fn.__qualname__ = fn.__name__ = self.name
        return fn

    # -- validation --------------------------------------------------------------------------

    def check(self, args: Sequence[Any]) -> tuple[Optional[Exception], dict[str, int]]:
        """Validate a call; return ``(error or None, bound symbols)``. Messages per the contract."""
        torch = self.torch
        name = self.name
        nin = len(self.inputs)
        if len(args) != nin:
            return TypeError(f"{name}() takes {nin} tensor/scalar arguments ({self.names}), got {len(args)}"), {}
        symbols: dict[str, int] = {}
        origin: dict[str, str] = {}
        deferred: list[tuple[int, str, int, Any, Any]] = []
        first_device = None
        for j, (pi, p) in enumerate(self.inputs):
            x = args[j]
            pre = f"{name}() argument '{p.name}' (#{j})"
            if isinstance(p, ScalarParam):
                err, value = _scalar_value(pre, p.dtype, x, torch.Tensor)
                if err is not None:
                    return err, symbols
                sym = self.scalar_symbols.get(pi)
                if sym is not None:
                    value = int(value)
                    if value < 0:
                        return ValueError(
                            f"{pre}: gives symbol '{sym}' = {value}, but a dimension cannot be negative"
                        ), symbols
                    err = _bind(symbols, origin, sym, value, f"{pre}: value", p.name)
                    if err is not None:
                        return err, symbols
                continue
            if not isinstance(x, torch.Tensor):
                return TypeError(f"{pre}: expected a torch.Tensor, got {type_name(x)}"), symbols
            if x.layout != torch.strided or x.is_nested:
                return ValueError(f"{pre}: {not_dense_message(x)}"), symbols
            if x.device.type == "meta":  # no data: reported before anything else, as DLPack refuses it
                return ValueError(f"{pre}: expected a tensor on {p.device}, got meta"), symbols
            if x.dtype != self.dtypes[pi]:
                return ValueError(f"{pre}: expected dtype {p.dtype}, got {_torch_dtype_name(x.dtype)}"), symbols
            if x.dim() != len(p.shape):
                return ValueError(f"{pre}: expected {len(p.shape)} dimensions, got {x.dim()}"), symbols
            shape = tuple(x.shape)
            narrowed: Optional[Exception] = None  # an int32 symbol's size or stride: after the index limit
            for d, dim in enumerate(p.shape):
                got = shape[d]
                if isinstance(dim, int):
                    if got != dim:
                        return ValueError(f"{pre}: expected shape[{d}] == {dim}, got {got}"), symbols
                elif dim.strip().isidentifier():
                    err = _bind(symbols, origin, dim.strip(), got, f"{pre}: shape[{d}]", p.name)
                    if err is not None:
                        return err, symbols
                    narrowed = narrowed or self._narrowed(dim.strip(), got, f"{pre}: shape[{d}]")
                else:
                    deferred.append((j, pre, d, dim, got))
            for sym, (k, d) in self.stride_source.items():  # the strides check compares the others
                if k == j:
                    err = _bind(symbols, origin, sym, x.stride(d), f"{pre}: stride[{d}]", p.name)
                    if err is not None:
                        return err, symbols
                    narrowed = narrowed or self._narrowed(sym, x.stride(d), f"{pre}: stride[{d}]")
            if p.index_limit is not None:  # elements (compact) or largest offset + 1 (explicit strides)
                reach = x.numel() if p.strides is None else _reach(x)
                if reach > p.index_limit:
                    what = index_reach_text(reach, p.shape, shape, None if p.strides is None else x.stride())
                    return ValueError(
                        f"{pre}: {what} exceed this kernel's 32-bit index "
                        f"limit of {p.index_limit}; compile it with pass_configs={{'tl.config_index_bitwidth': 64}}"
                    ), symbols
            if narrowed is not None:
                return narrowed, symbols
            device = x.device
            if device.type != self.torch_device_type:
                return ValueError(f"{pre}: expected a tensor on {p.device}, got {device}"), symbols
            if first_device is None:
                first_device = device
            elif device != first_device:
                return ValueError(f"{pre}: expected a tensor on {first_device}, got {device}"), symbols
            if p.strides is None:
                if not x.is_contiguous():
                    return ValueError(
                        f"{pre}: expected a contiguous tensor, got strides {tuple(x.stride())}; call .contiguous()"
                    ), symbols
            else:
                deferred.append((j, pre, -1, p.strides, tuple(x.stride())))
            if x.is_conj() or x.is_neg():  # DLPack cannot describe lazy views: the data would be read as stored
                view, fix = ("conjugate", "resolve_conj") if x.is_conj() else ("negative", "resolve_neg")
                return ValueError(f"{pre}: expected a tensor with its data materialized, got a lazy {view} view; "
                                  f"call .{fix}()"), symbols
            # a freed storage (tvm-ffi refuses its NULL pointer, and this words it); a shrunk one is
            # seen here on the general path only: the fast path does not pay for the check
            err = storage_error(pre, x)
            if err is not None:
                return err, symbols
            if p.written and p.strides is not None:  # a written tensor's elements must not overlap one another
                text = self_overlap_message(x)  # (explicit strides: always on this general path)
                if text is not None:
                    return ValueError(f"{pre}: {text}"), symbols
        err = self._overlap(args)
        if err is not None:
            return err, symbols
        for j, pre, d, expr, got in deferred:
            if d == -1:  # explicit strides; size-1 dimensions may have any stride
                if not set().union(*(symbolic.free_symbols(s) for s in expr)) <= set(symbols):
                    continue
                want = tuple(symbolic.evaluate(s, symbols) for s in expr)
                sizes = tuple(args[j].shape)
                if any(w != g and sizes[k] != 1 for k, (w, g) in enumerate(zip(want, got))):
                    return ValueError(f"{pre}: {strides_mismatch_text(expr, want, got)}"), symbols
                continue
            if not symbolic.free_symbols(expr) <= set(symbols):
                continue
            want = symbolic.evaluate(expr, symbols)
            if want != got:
                return ValueError(f"{pre}: expected shape[{d}] == {expr} = {want}, got {got}"), symbols
        return None, symbols

    def _overlap(self, args: Sequence[Any]) -> Optional[Exception]:
        """The contract's error when a tensor the kernel writes shares memory with another argument:
        the first such pair in argument order (same rule as the cython dispatcher)."""
        if not self.written_inputs:
            return None
        ranges: dict[int, tuple[int, int]] = {}
        for j, (_, p) in enumerate(self.inputs):
            if isinstance(p, TensorParam):
                ranges[j] = _byte_range(args[j])
        for i in ranges:
            for j in ranges:
                if j <= i or not (self.inputs[i][1].written or self.inputs[j][1].written):
                    continue
                (lo_i, n_i), (lo_j, n_j) = ranges[i], ranges[j]
                if (n_i and n_j and lo_i < lo_j + n_j and lo_j < lo_i + n_i
                        and not tensors_disjoint(args[i], args[j])):  # interleaved views pass
                    a, b = self.inputs[i][1], self.inputs[j][1]
                    return ValueError(
                        f"{self.name}() arguments '{a.name}' (#{i}) and '{b.name}' (#{j}) overlap in memory, and the "
                        f"kernel writes '{a.name if a.written else b.name}'; pass tensors that do not share memory "
                        "(for example a .clone())"
                    )
        return None

    def reraise(self, args: Sequence[Any], exc: BaseException, retry: bool = True) -> Any:
        """Raise the contract error for a call TVM refused, or re-raise TVM's error as is; a call
        with an empty tensor (TVM refused its strides) runs on the general path instead (once:
        ``retry`` is False there, which gives every tensor compact strides)."""
        err, _ = self.check(args)
        if err is not None:
            raise err from None
        if retry and any(isinstance(p, TensorParam) and p.strides is None and args[j].numel() == 0
                         for j, (_, p) in enumerate(self.inputs)):
            # an empty input, or an output made empty by it: TVM checks strides before running anything
            return self.slow_call(args, None)
        failed = kernel_check_text(exc)  # a failed T.device_assert, a division by zero
        if failed is not None:
            raise RuntimeError(f"{self.name}() failed: {failed}") from None
        raise exc

    # -- general path ------------------------------------------------------------------------

    def current_device(self):
        torch = self.torch
        if self.torch_device_type == "cuda":
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device(self.torch_device_type)

    def slow_call(self, args: Sequence[Any], stream: Any):
        """Validate, stage misaligned tensors, allocate outputs, call (on ``stream``)."""
        torch = self.torch
        err, symbols = self.check(args)
        if err is not None:
            raise err
        a = self.state.artifact
        call_args: list[Any] = [None] * len(a.params)
        device = None
        for j, (pi, p) in enumerate(self.inputs):
            call_args[pi] = args[j]
            if isinstance(p, ScalarParam):  # numpy scalars, bools for ints...: plain Python values
                call_args[pi] = _scalar_value("", p.dtype, args[j], torch.Tensor)[1]
            if device is None and isinstance(p, TensorParam):
                device = args[j].device
        if device is None:
            device = self.current_device()
        for sym, (j, d) in self.symbol_source.items():
            if sym not in symbols:
                symbols[sym] = int(call_args[self.inputs[j][0]]) if d is None else int(args[j].shape[d])
        for sym, (j, d) in self.stride_source.items():
            symbols.setdefault(sym, int(args[j].stride(d)))
        for pi, p in self.inputs:
            if isinstance(p, TensorParam) and p.strides is not None:  # TVM also checks size-1 dims' strides
                x, want = call_args[pi], [symbolic.evaluate(s, symbols) for s in p.strides]
                if list(x.stride()) != want:  # check() allowed it: only size-1 dims differ, same addresses
                    call_args[pi] = x.as_strided(x.shape, want, x.storage_offset())
            elif isinstance(p, TensorParam) and call_args[pi].numel() == 0 and not _compact(call_args[pi]):
                # torch calls an empty tensor contiguous whatever its strides ((1, 1) for shape (3, 0));
                # TVM wants the compact ones: no element is read through them
                x = call_args[pi]
                call_args[pi] = x.as_strided(x.shape, _compact_strides(x.shape), x.storage_offset())
        outs = []
        context = self._stream_context(stream, device)
        with context:
            staged = []
            align = self.state.alignment
            if align:
                for j, (pi, p) in enumerate(self.inputs):
                    x = call_args[pi]
                    if isinstance(p, TensorParam) and x.data_ptr() % align:
                        y = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device)
                        y.copy_(x)
                        staged.append((x, y))
                        call_args[pi] = y
            for pi, p in self.outputs:
                shape = tuple(symbolic.evaluate(d, symbols) for d in p.shape)
                _check_output_size(self.name, p, shape)
                if p.strides is not None:
                    strides = tuple(symbolic.evaluate(d, symbols) for d in p.strides)
                    o = torch.empty_strided(shape, strides, dtype=self.dtypes[pi], device=device)
                else:  # compact strides: torch gives an empty (m, 0) tensor (1, 1), TVM wants (0, 1)
                    o = torch.empty_strided(shape, _compact_strides(shape), dtype=self.dtypes[pi], device=device)
                call_args[pi] = o
                outs.append(o)
            try:
                self.state.func(*call_args)
            except Exception as exc:  # noqa: BLE001 - translated when the arguments explain it
                self.reraise(args, exc, retry=False)
            for x, y in staged:
                x.copy_(y)
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else outs

    def _stream_context(self, stream: Any, device: Any):
        """Context that makes ``stream`` torch's (and so tvm-ffi's) current stream for the call."""
        import contextlib

        if stream is None:
            return contextlib.nullcontext()
        handle = stream_handle(self.name, stream)  # the core's check: type and range, the table's words
        if self.torch_device_type != "cuda":
            return contextlib.nullcontext()  # CPU kernels run synchronously; the stream is ignored
        torch = self.torch
        import tvm_ffi

        s = stream if isinstance(stream, torch.cuda.Stream) else torch.cuda.ExternalStream(handle, device=device)
        return tvm_ffi.use_torch_stream(torch.cuda.stream(s))


def _static_nbytes(p: TensorParam) -> Optional[int]:
    """Bytes of a compact tensor parameter with a static shape (None otherwise)."""
    import re

    if p.strides is not None or not all(isinstance(d, int) for d in p.shape):
        return None
    m = re.fullmatch(r"[a-z_]*?(\d+)(?:_\w+)?(?:x(\d+))?", p.dtype)
    if p.dtype == "bool":
        n = 1
    elif m is None:
        return None
    else:
        n = (int(m.group(1)) * int(m.group(2) or 1) + 7) // 8
    for d in p.shape:
        n *= d
    return n


def _reach(x: Any) -> int:
    """Elements from a tensor's first to its last element, + 1 (its numel when contiguous)."""
    if x.numel() == 0:
        return 0
    return 1 + sum((n - 1) * abs(st) for n, st in zip(x.shape, x.stride()))


def _dynamic_dims(p: TensorParam, shape: Sequence[int]) -> str:
    """``'m' = 32769, 'n + 1' = 8``: the sizes of a tensor's dynamic dimensions, for messages."""
    return ", ".join(f"'{dim.strip()}' = {got}" for dim, got in zip(p.shape, shape) if not isinstance(dim, int))


def _check_output_size(name: str, p: TensorParam, shape: Sequence[int]) -> None:
    """Refuse an ``out_idx`` output too large for the kernel's 32-bit indices (before allocating it)."""
    if p.index_limit is None:
        return
    total = 1
    for n in shape:
        total *= n
    if total > p.index_limit:
        raise ValueError(
            f"{name}(): output '{p.name}' would have {total} elements ({_dynamic_dims(p, shape)}), over this "
            f"kernel's 32-bit index limit of {p.index_limit}; compile it with "
            "pass_configs={'tl.config_index_bitwidth': 64}"
        )


def _byte_range(x: Any) -> tuple[int, int]:
    """(first byte, bytes up to the end of the last element) of a tensor's data."""
    if x.numel() == 0:
        return x.data_ptr(), 0
    last = sum((n - 1) * abs(st) for n, st in zip(x.shape, x.stride()))
    return x.data_ptr(), (last + 1) * x.element_size()


def _compact_strides(shape: Sequence[int]) -> tuple:
    """Row-major strides of ``shape`` as TVM computes them (a size-0 dimension makes the strides before it 0)."""
    strides, step = [], 1
    for size in reversed(tuple(shape)):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def _compact(x: Any) -> bool:
    """Whether the tensor ``x`` has the compact strides TVM checks (size-1 dimensions: any stride)."""
    return all(s == w or n == 1 for n, s, w in zip(x.shape, x.stride(), _compact_strides(x.shape)))


def _scalar_fast_condition(var: str, dtype: str) -> str:
    """Python condition under which ``var`` can go to TVM unchanged for a scalar of ``dtype``."""
    if dtype == "bool":
        return f"type({var}) is bool"
    if dtype in _INT_DTYPES:
        bits = int(dtype.lstrip("uint"))
        lo, hi = (0, (1 << bits) - 1) if dtype.startswith("u") else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
        hi = min(hi, (1 << 63) - 1)  # larger uint64 values go through _scalar_value
        return f"(type({var}) is int and {lo} <= {var} <= {hi})"
    # TVM's FFI converts an int for a float parameter only within int64: larger ones go through _scalar_value
    return f"(type({var}) is float or (type({var}) is int and {-(1 << 63)} <= {var} <= {(1 << 63) - 1}))"


def _unexpected_keyword(name: str, kwargs: dict) -> None:
    raise TypeError(f"{name}() got an unexpected keyword argument '{next(iter(kwargs))}' (only 'stream' is accepted)")


def _scalar_value(pre: str, dtype: str, x: Any, tensor_type: Any) -> tuple[Optional[Exception], Any]:
    """``(error, python value)`` of a scalar argument, with the cython backend's rules.

    float dtypes take anything with ``__float__`` but tensors; int and bool dtypes take ints or
    ``__index__`` objects (not floats, not tensors) that fit the dtype; bool takes 0 or 1.
    """
    if dtype not in _INT_DTYPES and dtype != "bool":
        if isinstance(x, (int, float)) and (type(x) is float or -(2**1023) < x < 2**1023):
            return None, x if type(x) is float else float(x)  # TVM takes ints only within int64
        if hasattr(type(x), "__float__") and not isinstance(x, tensor_type) and not isinstance(x, (str, bytes)) \
                and not is_complex_number(x):
            try:
                return None, float(x)
            except OverflowError:
                return ValueError(f"{pre}: expected a float, got {type_name(x)} out of range"), None
            except (TypeError, ValueError):  # no number after all (a numpy array of several)
                pass
        return TypeError(f"{pre}: expected a float, got {type_name(x)}"), None
    kind = "a bool" if dtype == "bool" else "an int"
    if isinstance(x, int):
        value = int(x)
    elif is_numpy_bool(x):
        value = int(bool(x))
    elif not isinstance(x, float) and hasattr(type(x), "__index__") and not isinstance(x, tensor_type):
        try:
            value = operator.index(x)
        except TypeError:
            return TypeError(f"{pre}: expected {kind}, got {type_name(x)}"), None
    else:
        return TypeError(f"{pre}: expected {kind}, got {type_name(x)}"), None
    if dtype == "bool":
        if value not in (0, 1):
            return ValueError(f"{pre}: expected a bool (True/False, 0 or 1), got {value}"), None
        return None, bool(value)
    bits = int(dtype.lstrip("uint"))
    lo, hi = (0, (1 << bits) - 1) if dtype.startswith("u") else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if not lo <= value <= hi:
        return ValueError(f"{pre}: value {value} does not fit in {dtype}"), None
    if dtype == "uint64" and value >= 1 << 63:
        value -= 1 << 64  # TVM's FFI passes 64-bit ints signed: the same bits
    return None, value
