"""The lowering pipeline: a TileLang/TVMScript ``PrimFunc`` -> :class:`KernelArtifact`.

``lower(func, target="auto", target_host=None, pass_configs=None, consumes=None)`` runs
the frontend step (``T.Kernel``/``T.Parallel``), the pass list of the target family
(:mod:`tilelang_core.lowering.passes`) and only the code generators the backend consumes.
See docs/pipeline.md.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional

from dataclasses import replace

from ..artifact import KernelArtifact, TensorParam
from ..errors import KernelDefinitionError, LoweringError, PassConfigError, TargetError
from ..fork_locks import waits_for_fork
from .configs import CHOICE_CONFIGS, NO_EFFECT, PASS_CONFIGS, config_flag, config_key, unknown_key_message
from .parameter_views import allow_aliased_pointers
from .target import (CPU_KINDS, GPU_KINDS, NARROW_FLOAT_EMULATED_KINDS, auto_target_kind, device_of,
                     parse_target_string, resolve_target)

__all__ = [
    "lower",
    "resolve_target",
    "auto_target_kind",
    "validate_pass_configs",
    "PASS_CONFIGS",
    "CONSUMABLES",
]

#: What a backend may ask the pipeline for (see tilelang_core.capabilities.Consumable).
CONSUMABLES = ("device_source", "host_source", "runtime_module")

_DEVICE_LANGUAGE = {"c": "c", "llvm": "c", "cuda": "cuda", "metal": "metal", "rocm": "hip", "opencl": "opencl"}


def validate_pass_configs(pass_configs: Optional[Mapping[str, Any]]) -> dict[str, Any]:
    """Check ``pass_configs``: documented ``tl.*`` keys (booleans, or one of the values of
    :data:`CHOICE_CONFIGS`) and TVM's own ``tirx.*`` keys.

    Keys may be strings or ``PassConfigKey`` members. TileLang's keys that have no effect here
    (:data:`~tilelang_core.lowering.configs.NO_EFFECT`) are accepted with any value and dropped.

    :raises PassConfigError: unknown key (the message lists the known ones) or a value that is
        not a bool (not one of the choices).
    """
    if pass_configs is None:
        return {}
    if not isinstance(pass_configs, Mapping):
        raise PassConfigError(f"pass_configs must be a dict, got {type(pass_configs).__name__}")
    result: dict[str, Any] = {}
    for key, value in pass_configs.items():
        key = config_key(key)
        if not isinstance(key, str):
            raise PassConfigError(f"pass_configs keys must be strings, got {key!r}")
        if key in CHOICE_CONFIGS:
            if isinstance(value, bool) or value not in CHOICE_CONFIGS[key]:
                choices = " or ".join(map(str, CHOICE_CONFIGS[key]))
                raise PassConfigError(f"pass_configs[{key!r}] must be {choices}, got {value!r}")
            result[key] = value
        elif key in PASS_CONFIGS:
            if not isinstance(value, (bool, int)) or (isinstance(value, int) and value not in (0, 1)):
                raise PassConfigError(f"pass_configs[{key!r}] must be a bool, got {value!r}")
            result[key] = bool(value)
        elif key in NO_EFFECT:
            continue  # a TileLang key this pipeline has nothing to do for (docs/pipeline.md)
        elif key.startswith("tirx."):
            result[key] = value  # TVM's own PassContext options, validated by TVM
        else:
            raise PassConfigError(unknown_key_message(key))
    return result


def _launches_nothing(front: Any, location: str, name: str, kind: str) -> str:
    """Why a GPU kernel has no device kernel: no ``T.Kernel`` at all, or a ``T.Kernel`` body that
    the simplifier removed because it can never write anything."""
    from tvm import tirx

    launched = []
    tirx.stmt_functor.post_order_visit(
        front.body, lambda n: launched.append(n) if isinstance(n, tirx.AttrStmt) and n.attr_key == "thread_extent" else None
    )
    if not launched:
        return (f"{location}: kernel '{name}' launches nothing on {kind}: wrap its body in "
                "'with T.Kernel(...)' (or bind loops to blockIdx/threadIdx)")
    return (f"{location}: kernel '{name}' does nothing on {kind}: its T.Kernel body never writes memory "
            "once the statements that can never run are removed (a T.fill/T.clear/T.copy of a region that "
            "lies entirely outside its tensor, such as A[N:N + 4] of a tensor of N elements, or code under a "
            "condition that is always false), so there is no GPU kernel to launch; fix the region or "
            "condition, or drop the statement")


def _merged(device_mods: Any) -> Any:
    """The device functions of every device module in one ``IRModule`` (for ``artifact.device_mod``)."""
    import tvm

    mods = list(device_mods.values()) if isinstance(device_mods, dict) else list(device_mods or [])
    functions = {}
    for mod in mods:
        for gvar, fn in mod.functions.items():
            functions[gvar.name_hint] = fn
    return tvm.IRModule(functions) if functions else None


def _consumes(consumes: Optional[Iterable[str]]) -> list[str]:
    if consumes is None:
        return ["device_source"]
    if isinstance(consumes, str):
        consumes = [consumes]
    items = list(consumes)
    bad = [c for c in items if c not in CONSUMABLES]
    if bad or not items:
        raise ValueError(f"consumes must be a non-empty list drawn from {list(CONSUMABLES)}, got {items!r}")
    return items


def _check_runtime_module_scalars(params: list, kind: str, location: str, name: str) -> None:
    """TVM 0.27's packed host code of a GPU runtime module takes no bfloat16 scalar (it stops with
    ``Check failed: dtype.code() == kDLFloat``): say so, and what to do, before it is asked."""
    for p in params:
        if p.kind == "scalar" and p.dtype == "bfloat16":
            raise LoweringError(
                f"{location}: kernel '{name}': scalar parameter '{p.name}' is bfloat16, which a {kind} "
                "runtime module (TVM's packed host code, for backends that consume 'runtime_module') "
                "cannot take; pass it as float32 and cast it in the kernel "
                "(T.cast(s, 'bfloat16')), or use a backend that consumes 'device_source'"
            )


def _check_runtime_module_strides(func: Any, location: str, name: str) -> None:
    """TVM 0.27's packed host code reads each declared stride in the dtype of its dimension's size
    and stops with ``Check failed: (arg.ty() == value.ty())`` when the stride is of another dtype
    (an int64 stride symbol of an int32 dimension): say so, and what to do, before it is asked."""
    from tvm import tirx

    from .signature import is_tensor_param

    for var in func.params:
        if not is_tensor_param(var) or not len(var.ty.strides):
            continue
        for d, (size, stride) in enumerate(zip(var.ty.shape, var.ty.strides)):
            if str(size.dtype) != str(stride.dtype):
                symbol = size if isinstance(stride, tirx.IntImm) else stride if isinstance(size, tirx.IntImm) else None
                if symbol is not None:  # a constant that does not fit the symbol's dtype (2**31 + 100 beside an int32 m)
                    shown = stride.value if symbol is size else size.value
                    advice = (f"the constant {shown} does not fit {symbol.dtype}: declare '{symbol}' "
                              f"T.dynamic('{symbol}', 'int64')")
                else:
                    advice = "declare both symbols with one dtype (e.g. both T.dynamic(name, 'int64'))"
                raise LoweringError(
                    f"{location}: kernel '{name}': parameter '{var.name}' has stride[{d}] = {stride} of dtype "
                    f"{stride.dtype}, but its shape[{d}] = {size} is {size.dtype}; a runtime module (TVM's packed "
                    "host code, for backends that consume 'runtime_module') reads a stride in its dimension's "
                    f"dtype: {advice}, or use a backend that consumes 'device_source'"
                )


@waits_for_fork  # a fork waits for it (fork_locks.py)
def lower(
    func: Any = None,
    target: Any = "auto",
    target_host: Any = None,
    pass_configs: Optional[Mapping[str, Any]] = None,
    consumes: Optional[Iterable[str]] = None,
    *,
    enable_host_codegen: bool = False,
    enable_device_compile: bool = False,
    func_or_mod: Any = None,
    runtime_only: bool = False,
) -> KernelArtifact:
    """Lower a kernel for a target and return its :class:`~tilelang_core.artifact.KernelArtifact`.

    :param func: a ``tirx.PrimFunc`` (from ``@T.prim_func``).
    :param target: ``"auto"`` (the enclosing ``with tvm.target.Target(...)``, else cuda when torch
        sees CUDA, metal when MPS is available, else ``c``), a string (``"c"``, ``"llvm"``,
        ``"cuda -arch=sm_90"``, ``"metal"``), a dict or a ``tvm.target.Target``.
    :param target_host: host target of GPU targets (default ``llvm``, or ``c`` without LLVM).
    :param pass_configs: see :data:`PASS_CONFIGS`; unknown keys raise ``PassConfigError``.
    :param consumes: what the backend takes: any of ``device_source``, ``host_source``,
        ``runtime_module`` (default ``["device_source"]``); nothing else is generated.
    :param enable_host_codegen: TileLang's spelling of adding ``host_source`` to ``consumes``.
    :param enable_device_compile: TileLang's spelling of adding ``runtime_module`` to
        ``consumes``: the device code is also compiled (nvcc for CUDA), so compile errors show
        here rather than at :func:`tilelang.compile`.
    :param func_or_mod: TileLang's name of ``func`` (give one of the two).
    :param runtime_only: accepted for TileLang compatibility; the artifact is the same either way.
    :raises KernelDefinitionError: ``func`` is not a PrimFunc.
    :raises LoweringError: the kernel cannot be lowered (message starts with ``file:line``).
    :raises TargetError, PassConfigError: bad target or pass config.
    """
    import tvm
    from tvm import tirx

    del runtime_only
    if func_or_mod is not None:
        if func is not None:
            raise TypeError("lower() got the kernel twice: give func or func_or_mod (TileLang's name), not both")
        func = func_or_mod
    if not isinstance(func, tirx.PrimFunc):
        raise KernelDefinitionError(
            f"lower() expects a kernel made with @T.prim_func (a tvm.tirx.PrimFunc), got {type(func).__name__}"
        )
    parsed = func  # as written: a failing TVM check is explained on it (lowering/zero_divisors.py)
    from ..language.hints import declared_pass_configs

    declared = declared_pass_configs(func)  # T.annotate_pass_configs in the kernel; the argument wins
    configs = validate_pass_configs({**declared, **dict(pass_configs or {})} if declared else pass_configs)
    wanted = _consumes(consumes)
    for flag, item in ((enable_host_codegen, "host_source"), (enable_device_compile, "runtime_module")):
        if flag and item not in wanted:
            wanted.append(item)
    tgt = resolve_target(target, target_host)
    from .target import arch_of, max_threads_of, target_string

    kind = tgt.kind.name
    if kind not in CPU_KINDS + GPU_KINDS:
        raise TargetError(f"target kind {kind!r} is not supported by the lowering pipeline")
    from ..language.core import SOURCE_LOCATION_ATTR

    attrs = func.attrs if func.attrs is not None else {}
    location = str(attrs.get(SOURCE_LOCATION_ATTR, "")) or "<unknown>"
    name = str(attrs.get("global_symbol", "")) or str(getattr(func, "__name__", "main"))
    from . import codegen
    from .frontend import FrontendOptions, lower_tile_constructs
    from .checked_divisions import check_divisions
    from .device_assert import has_device_asserts, lower_device_asserts
    from .signature import (constant_strides_in_size_dtype, describe_params, distinct_symbol_names, index_plan,
                            relax_param_alignment, widen_indices, written_params)

    from .pointer_params import address_params, sink_address_tensors

    func, pointer_indices = address_params(func)  # a: T.ptr -> an int64 address (lowering/pointer_params.py)
    func = sink_address_tensors(func)  # T.make_tensor before T.Kernel: declared in each kernel using it
    if pointer_indices and kind == "metal":
        raise LoweringError(f"{location}: kernel '{name}' has pointer parameters (T.ptr), which the metal target "
                            "cannot address (Metal passes buffers, not device addresses); pass T.Tensor parameters")
    func = relax_param_alignment(func)  # no 64-byte assumption: offset views (x[1:]) are fine
    from .cpu_dtypes import refuse_narrow_floats, refuse_sub_byte_integers

    refuse_sub_byte_integers(func, kind, location, name)  # int4, uint2: no target lowers them (lowering/cpu_dtypes.py)
    if kind in CPU_KINDS + NARROW_FLOAT_EMULATED_KINDS:  # float8/6/4: no C/LLVM/MSL/OpenCL type (lowering/cpu_dtypes.py)
        refuse_narrow_floats(func, kind, location, name)
    if kind == "cuda":  # float8 formats without a cuda_fp8.h type (lowering/float8_cuda.py)
        from .float8_cuda import refuse_float8_without_cuda_type

        refuse_float8_without_cuda_type(func, location, name)
    from .constant_casts import fold_constant_casts

    func = fold_constant_casts(func)  # T.cast(T.int16(-5), "uint32") wraps (TVM's folding refused it)
    from .casts import lower_rounded_casts

    func = lower_rounded_casts(func, kind, arch_of(tgt) or "")  # T.cast(..., round=...) for this target
    from .wrapping_casts import wrapping_integer_casts

    func = wrapping_integer_casts(func)  # casts that wrap, bounded right by the analyzer: before anything simplifies
    from .narrow_float_math import lower_narrow_float_math

    func = lower_narrow_float_math(func, location)  # truncmod/nextafter of 16- and 8-bit floats, every target alike
    from .lane_reductions import split_lane_reductions, strip_lane_reductions

    # float T.reduce_* loops: partial results on CPU targets, as written elsewhere (lowering/lane_reductions.py)
    cpu_lanes = kind in CPU_KINDS and not config_flag(configs, "tl.disable_vectorize")
    func = split_lane_reductions(func) if cpu_lanes else strip_lane_reductions(func)
    from .imported_source import drop_declared_prototypes, extern_callees, import_for_target, take_imported_sources

    func, imported = take_imported_sources(func)  # T.import_source texts, put back per target below
    callees = extern_callees(func) if imported else set()
    if imported and kind == "llvm":
        import_for_target(func, imported, kind, location, name)  # raises: no C source on llvm
    func = distinct_symbol_names(func)  # two T.dynamic('n') objects: n and n_1 (signature.py)
    params, symbols, symbol_vars = describe_params(func, device_of(kind), location)
    params = [replace(p, pointer=device_of(kind)) if i in pointer_indices else p for i, p in enumerate(params)]
    if kind == "c":  # TVM 0.27 folds 0u - n while lowering the C entry of an unsigned size and stops
        for sym in symbols:
            if sym.dtype.startswith("uint"):
                raise LoweringError(
                    f"{location}: kernel '{name}': dynamic dimension '{sym.name}' is {sym.dtype}, which the c target "
                    f"cannot take (TVM's C entry computes with signed sizes); declare it T.dynamic('{sym.name}', "
                    "'int64'), or lower the kernel for llvm")
    if kind in CPU_KINDS:  # a bfloat16 scalar travels as a float32 (lowering/bfloat16_rounding.py)
        from .bfloat16_rounding import float32_bfloat16_params

        func = float32_bfloat16_params(func)
    # 64-bit indices where a static size needs them (or everywhere); limits for dynamic shapes
    widened, index_limits = index_plan(params, int(configs.get("tl.config_index_bitwidth", 32)))
    func = widen_indices(func, widened)
    symbol_names = {s.name for s in symbols}
    func = func.with_attr("global_symbol", name)
    tvm_configs = {k: v for k, v in configs.items() if k.startswith("tirx.")}
    if config_flag(configs, "tl.disable_vectorize"):
        tvm_configs.setdefault("tirx.disable_vectorize", True)

    result: dict[str, Any] = {"device_kernels": [], "device_source": None, "host_source": None}
    written: list = []  # tensor params the kernel writes, read from the frontend step's output

    tvm_modules = None
    gpu = kind in GPU_KINDS
    if "runtime_module" in wanted:
        func = constant_strides_in_size_dtype(func)  # (s, 1) beside int64 sizes: an int64 1 (signature.py)
        _check_runtime_module_strides(func, location, name)
    from .tma_atomics import arch_number, check_target

    check_target(func.body, kind, arch_number(tgt))  # T.atomic_add(..., use_tma=True): every target, here only
    try:
        with tvm.transform.PassContext(opt_level=3, config=tvm_configs):
            if not gpu:
                c_entry = None
                if "device_source" in wanted or ("runtime_module" in wanted and kind == "c"):
                    front = lower_tile_constructs(
                        func,
                        FrontendOptions(
                            gpu=False,
                            parallel_blocks=not config_flag(configs, "tl.disable_parallel_blocks"),
                            emit_pragmas=True,
                            simd=not config_flag(configs, "tl.disable_vectorize"),
                            func_location=location,
                            guard_accesses=not config_flag(configs, "tl.disable_safe_memory_legalize"),
                        ),
                    )
                    written.append(written_params(front))
                    front = import_for_target(front, imported, "c", location, name)
                    front = check_divisions(front, "status", location)  # x // 0 raises (checked_divisions.py)
                    entry_func, assert_message = _with_status_asserts(front, f"{name}_kernel")
                    source, kernel = codegen.c_entry_source(
                        entry_func, tvm.target.Target("c"), configs, f"{name}_kernel", symbol_vars, list(func.params)
                    )
                    source = drop_declared_prototypes(source, imported, callees)  # the imported text declares them
                    c_entry = (source, replace(kernel, assert_message=assert_message))
                if "device_source" in wanted:
                    result["device_source"] = c_entry[0]
                    result["device_kernels"] = [c_entry[1]]
                    result["ir"] = {"device": tvm.IRModule({name: front})}
                if "runtime_module" in wanted and kind == "c":
                    # TVM's packed function around the C entry (lowering/c_runtime.py): of the
                    # frontend's output it takes the parameters, buffers and attributes only
                    from .c_runtime import c_runtime_module

                    tvm_modules = c_runtime_module(front, *c_entry, symbol_vars, tgt, configs)
                if "host_source" in wanted or ("runtime_module" in wanted and kind != "c"):
                    # TVM's parallel launch drops an error raised inside the parallel loop, so a
                    # kernel with T.device_assert runs its blocks serially in a runtime module
                    front = lower_tile_constructs(
                        func,
                        FrontendOptions(
                            gpu=False,
                            parallel_blocks=not (config_flag(configs, "tl.disable_parallel_blocks")
                                                 or has_device_asserts(func)),
                            simd=not config_flag(configs, "tl.disable_vectorize"),
                            func_location=location,
                            guard_accesses=not config_flag(configs, "tl.disable_safe_memory_legalize"),
                        ),
                    )
                    written.append(written_params(front))
                    front = import_for_target(front, imported, "c", location, name)  # llvm refused it above
                    front = check_divisions(front, "runtime", location)  # x // 0 raises (checked_divisions.py)
                    front, _, _ = lower_device_asserts(front, "runtime")  # TVM's host code raises the text
                    if "runtime_module" in wanted and kind != "c":
                        tvm_modules = codegen.cpu_runtime_module(front, tgt, configs)
                    if "host_source" in wanted:
                        c_module = codegen.cpu_runtime_module(front, tvm.target.Target("c"), configs)
                        result["host_source"] = codegen.host_source_of(c_module)
            else:
                front = lower_tile_constructs(
                    func,
                    FrontendOptions(
                        gpu=True,
                        max_threads=max_threads_of(tgt),
                        func_location=location,
                        guard_accesses=not config_flag(configs, "tl.disable_safe_memory_legalize"),
                    ),
                )
                from . import passes as P

                written.append(written_params(front))
                front, _, helpers = lower_device_asserts(front, "cuda" if kind == "cuda" else "drop")
                from .debug_print import lower_gpu_prints

                front, print_helpers = lower_gpu_prints(front, kind)  # T.print: device printf (cuda only)
                helpers += print_helpers
                if helpers:  # before the first kernel, as the atomics' helpers
                    from .source_imports import with_import_in_first_kernel

                    front = front.with_body(with_import_in_first_kernel(front.body, helpers)[0])
                front = import_for_target(front, imported, kind, location, name)  # T.import_source
                if kind == "metal":
                    from .msl import check_generator_names

                    check_generator_names(front)  # a scalar called threadIdx stopped TVM's Metal generator
                mod = tvm.IRModule({name: front})
                mod = tirx.transform.BindTarget(tgt)(mod)
                mod = P.gpu_passes(configs)(mod)
                host_mod, device_mods = codegen.split_gpu(mod)
                host_fn = host_mod[name]
                result["device_kernels"], launch_symbols = codegen.gpu_device_kernels(
                    host_fn, device_mods, symbol_names, location
                )
                symbols = symbols + launch_symbols  # scalar parameters that size the grid
                # a tensor's storage passed twice (a T.view of it): no __restrict__ (parameter_views.py)
                device_mods = allow_aliased_pointers(device_mods, result["device_kernels"])
                result["ir"] = {"host": host_mod, "device": _merged(device_mods)}
                if not result["device_kernels"]:
                    raise LoweringError(_launches_nothing(front, location, name, kind))
                if "device_source" in wanted:
                    result["device_source"], _ = codegen.gpu_device_source(device_mods)
                    if _DEVICE_LANGUAGE.get(kind) == "metal":  # one library, every union member, scalar layouts
                        from .msl import finish_source

                        result["device_source"], result["device_kernels"] = finish_source(
                            result["device_source"], result["device_kernels"], location
                        )
                if "host_source" in wanted:
                    c_host = P.host_finalize_passes()(P.host_packed_passes(configs)(host_mod))
                    c_host = tirx.transform.BindTarget(tvm.target.Target("c"))(c_host)
                    built = tvm.get_global_func("target.build.c")(c_host, tvm.target.Target("c"))
                    result["host_source"] = codegen.host_source_of(built)
                if "runtime_module" in wanted:
                    _check_runtime_module_scalars(params, kind, location, name)
                    tvm_modules = codegen.gpu_runtime_module(host_mod, device_mods, tgt, configs)
    except (LoweringError, TargetError, PassConfigError):
        raise
    except Exception as exc:  # noqa: BLE001 - TVM's errors, reported with the kernel's location
        from .interrupts import interrupted_in_callback

        if interrupted_in_callback(exc):  # Ctrl-C in a Python pass: TVM's FFI made it RuntimeError('')
            raise KeyboardInterrupt(f"interrupted while lowering kernel '{name}' for {kind}") from None
        text = str(exc).strip()
        from .zero_divisors import is_zero_division_failure, zero_divisor_error

        clear = zero_divisor_error(parsed, location) if is_zero_division_failure(text) else None
        if clear is not None:  # x // bx with T.Kernel(1): the division, its line and why it is 0
            raise clear from exc
        from .limit_hints import limit_hint

        raise LoweringError(f"{location}: lowering kernel '{name}' for {kind} failed: {text}{limit_hint(text)}") from exc

    params = [
        replace(p, written=(i in written[0]) if written else p.written, index_limit=index_limits.get(i))
        if isinstance(p, TensorParam) else p
        for i, p in enumerate(params)
    ]
    artifact = KernelArtifact(
        name=name,
        target=target_string(tgt),
        target_kind=kind,
        arch=arch_of(tgt),
        host_target=target_string(tgt.host) if gpu and tgt.host is not None else None,
        params=params,
        symbols=symbols,
        device_kernels=result["device_kernels"],
        device_source=result["device_source"],
        device_language=_DEVICE_LANGUAGE.get(kind) if result["device_source"] is not None else None,
        host_source=result["host_source"],
        runtime_source=codegen.runtime_source_of(tvm_modules) if tvm_modules is not None else None,
        pass_configs=dict(configs),
        source_location=location if location != "<unknown>" else None,
    )
    if tvm_modules is not None:
        artifact.with_tvm_modules(tvm_modules)
    artifact.with_tvm_ir(**result.get("ir", {}))
    return artifact


def _with_status_asserts(func: Any, entry: str) -> tuple[Any, Optional[str]]:
    """``func`` with its ``T.device_assert`` statements lowered for a C entry point named ``entry``
    (assertion k returns status -3 - k), and the name of the function that gives a status's text,
    ``<entry>_assert_message`` (None when the kernel asserts nothing)."""
    from .device_assert import assert_message_source, lower_device_asserts
    from .source_imports import with_import

    func, texts, _ = lower_device_asserts(func, "status")
    if not texts:
        return func, None
    function = f"{entry}_assert_message"
    text = assert_message_source(function, texts)
    return func.with_body(with_import(func.body, "pragma_import_c", text)), function
