"""``tilelang.compile``: select a backend, lower for what it consumes, build, wrap."""

from __future__ import annotations

import os
import shlex
import sys
import threading
from collections import OrderedDict
from typing import Any, Optional, Sequence, Union

from ..fork_locks import renew_after_fork, waits_for_fork
from ..artifact import BuildOptions, KernelArtifact, TensorParam
from ..backends import BackendWarning, auto_candidates, select_backend
from ..backends.selection import AUTO, declared_kind, default_execution_backend, warn_if_deprecated
from ..env_switches import switch_from_env
from ..capabilities import TargetCapability
from ..errors import (
    BackendCapabilityError,
    BackendError,
    BuildError,
    CompileFlagsError,
    KernelDefinitionError,
    KernelNotSupportedError,
)
from ..warning_location import warn
from .kernel import BackendInfo, JITKernel
from .outputs import OutIdx, bind_symbols_from_inputs, declared_out_idx, normalize_out_idx, warn_unwritten_outputs


@waits_for_fork  # a fork waits for it (fork_locks.py)
def compile(  # noqa: A001 - the public name is tilelang.compile
    func: Any,
    out_idx: OutIdx = None,
    execution_backend: Optional[str] = None,
    target: Any = "auto",
    target_host: Any = None,
    verbose: Optional[bool] = None,
    pass_configs: Optional[dict[str, Any]] = None,
    compile_flags: Union[None, str, Sequence[str]] = None,
) -> JITKernel:
    """Compile a kernel (a ``T.prim_func``) into a :class:`JITKernel` callable with torch tensors.

    :param func: the kernel, a ``tvm.tirx.PrimFunc`` written with ``tilelang.language``.
    :param out_idx: parameter index (negative allowed) or list of indices the kernel allocates
        and returns; the caller then passes only the other parameters.
    :param execution_backend: a backend name (``tilelang backends`` lists them) or ``"auto"``,
        the available backend with the highest declared priority for the target; when that one
        refuses the kernel or its build fails, ``auto`` warns (``BackendWarning``, naming the
        failure) and tries the next available backend. A backend given by name never falls back.
        None (the default): ``$TILELANG_EXECUTION_BACKEND`` when set, else ``"auto"``.
    :param target: ``"auto"``, a target string (``"c"``, ``"llvm"``, ``"cuda -arch=sm_90"``), a
        dict or a ``tvm.target.Target``.
    :param target_host: host target for GPU targets.
    :param verbose: print the generated sources and the commands the backend runs. None (the
        default): ``$TILELANG_VERBOSE`` (1/true/yes/on), else False.
    :param pass_configs: lowering options (see docs/pipeline.md); unknown keys are an error.
    :param compile_flags: extra flags for the backend's native compiler (a list or one string).
    :raises MissingDependencyError: TVM is not installed (the message says what to install).
    :raises PassConfigError, CompileFlagsError: a bad ``pass_configs`` or ``compile_flags``.
    """
    from ..cache.store import active_cache

    backend_name = default_execution_backend() if execution_backend is None else execution_backend
    if verbose is None:
        verbose = default_verbose()
    cache = active_cache()
    fast = subject = None
    if cache is not None:
        subject = _fast_subject(func)
        fast = _fast_key(subject, out_idx, backend_name, target, target_host, pass_configs, compile_flags)
        if fast is not None:
            hit = _fast_lookup(fast)
            if hit is not None:
                if verbose:
                    print(f"[tilelang] {hit.name}: in-memory cache hit")
                warn_unwritten_outputs(hit.artifact, hit.options.out_idx)
                return hit

    from ..dependencies import require

    require("tvm", needed_by="tilelang.compile (lowering kernels)")
    from ..lowering import resolve_target

    prim_func = _check_prim_func(func)
    out_idx = declared_out_idx(prim_func, out_idx)
    flags = _flags(compile_flags)
    _check_pass_configs(pass_configs)
    resolved = resolve_target(target, target_host)
    kind = resolved.kind.name
    auto = backend_name == AUTO
    records = auto_candidates(kind) if auto else [select_backend(execution_backend, kind)]
    failures: list[tuple[Any, BaseException]] = []
    for position, record in enumerate(records):
        try:
            kernel = _compile_with(
                record, prim_func, resolved, kind, cache, out_idx, target_host, pass_configs, flags, verbose
            )
        except _FALL_BACK_ON as exc:
            if not auto:
                raise
            failures.append((record, exc))
            if position + 1 < len(records):
                _warn_fallback(record, exc, records[position + 1], prim_func, kind)
            continue
        if auto:
            warn_if_deprecated(record)
        if fast is not None:
            _fast_store(fast, subject, record, kernel)
        warn_unwritten_outputs(kernel.artifact, kernel.options.out_idx)  # built now or loaded from the disk cache
        return kernel
    raise _first_failure(failures)  # outside the handler: each error keeps its own cause and context


#: Failures of one backend after which ``auto`` tries the next: refusals, build failures, broken or
#: unavailable backends. Mistakes in the kernel or the call (``OutIdxError``, ``LoweringError``, ...)
#: and the environment's ``OSError`` are the same for every backend and raise at once.
_FALL_BACK_ON = (BackendError, BuildError)

#: Environment variable: ``verbose`` of a compile that does not give it (as in upstream TileLang).
VERBOSE_ENV = "TILELANG_VERBOSE"


def default_verbose() -> bool:
    """``verbose`` of a compile that does not give it: ``$TILELANG_VERBOSE`` (1/true/yes/on), else False.

    :raises SettingError: the value is not a yes/no value.
    """
    return switch_from_env(VERBOSE_ENV, "print the sources and commands of each compile", "keep it quiet")


def _kernel_name(prim_func: Any) -> Optional[str]:
    """The kernel's name for diagnostics (its ``global_symbol`` or Python name), if it has one."""
    attrs = getattr(prim_func, "attrs", None)
    try:
        symbol = attrs["global_symbol"] if attrs is not None and "global_symbol" in attrs else None
    except Exception:  # noqa: BLE001 - attrs of an unexpected kind
        symbol = None
    return str(symbol) if symbol is not None else getattr(prim_func, "__name__", None)


def _target_text(target: Any) -> str:
    """A short form of a target for diagnostics: its kind, and its arch when it has one (``cuda -arch=sm_90``)."""
    kind = getattr(getattr(target, "kind", None), "name", None)
    if kind is None:
        return str(target)
    try:
        arch = target.attrs.get("arch") if hasattr(target.attrs, "get") else None
    except Exception:  # noqa: BLE001 - attrs of an unexpected kind
        arch = None
    return f"{kind} -arch={arch}" if arch else str(kind)


def _compile_with(record, prim_func, resolved, kind, cache, out_idx, target_host, pass_configs, flags, verbose) -> JITKernel:
    """Compile with one backend: lower for what it consumes and build, through the cache if active."""
    assert record.spec is not None
    capability = record.spec.targets[declared_kind(record, kind)]
    cannot_run = _cannot_run_here(record, kind)

    def build() -> JITKernel:
        from ..lowering import lower
        from .diagnostics import jit_phase

        check_declared_dtypes(prim_func, capability, record.name, kind)
        context = {"kernel": _kernel_name(prim_func), "target": _target_text(resolved), "backend": record.name}
        with jit_phase("lower", **context):
            artifact = lower(
                prim_func, target=resolved, target_host=target_host, pass_configs=pass_configs, consumes=capability.consumes
            )
        with jit_phase("build", **context):
            return build_kernel(record, capability, artifact, out_idx, flags, pass_configs, verbose, kind, cannot_run)

    if cache is None:
        return build()

    from ..cache.key import compute_key, native_compiler_identity

    host = getattr(resolved, "host", None)
    key = compute_key(
        prim_func,
        target=str(resolved),
        target_kind=kind,
        target_host=str(host) if host is not None else (str(target_host) if target_host is not None else None),
        backend_name=record.name,
        backend_version=record.version or "0",
        backend_files=record.files_hash(),
        native_compiler=native_compiler_identity(capability),
        pass_configs=pass_configs,
        compile_flags=flags,
        out_idx=out_idx,
    )
    kernel = cache.get_or_build(key, record, build)
    if cannot_run is not None and kernel.cannot_run is None:  # loaded from the disk cache
        cache_key = kernel.cache_key
        kernel = JITKernel.create(kernel.runner, kernel.artifact, kernel.backend, kernel.options, cannot_run=cannot_run)
        kernel.cache_key = cache_key
    if verbose:
        print(f"[tilelang] {kernel.name}: cache key {key}")
    return kernel


def _summary(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _warn_fallback(record: Any, exc: BaseException, following: Any, prim_func: Any, kind: str) -> None:
    from ..cache.key import kernel_name

    warn(
        f"execution_backend='auto': execution backend {record.name!r} could not build kernel "
        f"{kernel_name(prim_func)!r} for target {kind!r} ({_summary(exc)}); falling back to the next available "
        f"backend, {following.name!r}. Pass execution_backend={record.name!r} to get its full error",
        BackendWarning,
    )


def _first_failure(failures: list[tuple[Any, BaseException]]) -> BaseException:
    """The best backend's error, noting what the others that ``auto`` tried said."""
    first = failures[0][1]
    if len(failures) > 1 and hasattr(first, "add_note"):
        tried = "; ".join(f"{record.name!r} ({_summary(exc)})" for record, exc in failures[1:])
        first.add_note(f"execution_backend='auto' also tried: {tried}")
    return first


def build_kernel(
    record: Any,
    capability: TargetCapability,
    artifact: KernelArtifact,
    out_idx: OutIdx,
    flags: list[str],
    pass_configs: Optional[dict[str, Any]],
    verbose: bool,
    kind: str,
    cannot_run: Optional[str] = None,
) -> JITKernel:
    """Normalise ``out_idx``, check capabilities, call the backend's build hook, wrap the result.

    :param cannot_run: why the backend cannot run kernels here although it can build them
        (its probe's reason); the kernel is built and can be exported, and calling it raises.
    """
    outputs = normalize_out_idx(out_idx, artifact)
    artifact = bind_symbols_from_inputs(artifact, outputs)
    check_capabilities(artifact, capability, outputs, record.name, kind)
    options = BuildOptions(out_idx=outputs, compile_flags=flags, pass_configs=dict(pass_configs or {}), verbose=verbose)
    if verbose:
        print(f"[tilelang] {artifact.name}: target {artifact.target!r}, backend {record.name} {record.version}")
        if artifact.device_source:
            print(artifact.device_source)
    try:
        runner = record.call("tilelang_backend_build", artifact=artifact, options=options)
    except KernelNotSupportedError as exc:
        raise KernelNotSupportedError(
            f"execution backend {record.name!r} does not support kernel {artifact.name!r} for target {kind!r}: {exc}"
        ) from exc
    if not callable(runner):  # a plugin bug, like a hook that raised: the backend is broken, auto falls back
        record.returned_wrong_type("tilelang_backend_build", runner, "a callable kernel (the object that runs it)")
    return JITKernel.create(runner, artifact, BackendInfo(record.name, record.version or "0"), options, cannot_run)


def _cannot_run_here(record: Any, kind: str) -> Optional[str]:
    """The probe's reason when ``record`` can build but not run ``kind`` kernels here, else None."""
    from ..backends import get_registry

    availability = get_registry().probe(record, declared_kind(record, kind))
    return None if availability.available else (availability.reason or "the backend's probe says so")


# -- the in-memory fast path -------------------------------------------------------------------
#
# A warm cache hit must cost well under a millisecond, less than printing the kernel's TIR to hash
# it. So the memory layer is also indexed by the identity of the prim_func object plus the raw
# arguments (and the enclosing ``with Target`` scope and the environment variables a compile reads,
# which "auto" and the native compilers depend on: :func:`_environment_key`). The entry keeps the
# prim_func alive, so its id cannot be reused, and remembers the backend record it was built with:
# after the registry is refreshed (plugins installed or removed) the entry is ignored. A
# ``tvm.IRModule`` is keyed by the prim_func it holds, not by itself: a module can be changed in
# place (``mod["main"] = other``), a prim_func cannot (:func:`_fast_subject`).

_FAST_CAPACITY = 4096
_fast: "OrderedDict[tuple, tuple[Any, Any, JITKernel]]" = OrderedDict()
_fast_lock = threading.Lock()
renew_after_fork(sys.modules[__name__], "_fast_lock")


def _freeze(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    raise TypeError


#: Environment variables besides ``TILELANG_*`` that a compile may read: the native compilers,
#: toolkits and search paths (``target="auto"``, ``TILELANG_CUDA_ARCH``, ``CC``, ... change the kernel).
_COMPILE_ENVIRONMENT = frozenset({"CC", "CXX", "NVCC", "CUDA_HOME", "CUDA_PATH", "CFLAGS", "CXXFLAGS", "LDFLAGS",
                                  "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "LIBRARY_PATH", "PATH"})
_COMPILE_ENVIRONMENT_BYTES = frozenset(name.encode() for name in _COMPILE_ENVIRONMENT)


def _environment_key() -> tuple:
    """The environment variables a compile may read, as they are now (part of the fast key: the same
    prim_func object compiled after ``TILELANG_DEFAULT_TARGET`` or ``CC`` changed is another kernel)."""
    data = getattr(os.environ, "_data", None)  # POSIX: the bytes behind os.environ, read without decoding
    if isinstance(data, dict) and all(isinstance(k, bytes) for k in data):
        return tuple([item for item in data.items() if item[0][:9] == b"TILELANG_" or item[0] in _COMPILE_ENVIRONMENT_BYTES])
    return tuple(sorted(item for item in os.environ.items() if item[0].startswith("TILELANG_") or item[0] in _COMPILE_ENVIRONMENT))


def _fast_subject(func: Any) -> Any:
    """The object whose identity keys the fast path for ``func``: a prim_func itself (immutable), the
    one prim_func of a ``tvm.IRModule`` (the module is mutable: ``mod["main"] = other`` must not find
    the kernel of the function it held before; None when it holds not exactly one), else ``func``
    (``_check_prim_func`` rejects what is not a kernel)."""
    try:
        import tvm
    except ImportError:
        return func
    return _single_prim_func(func) if isinstance(func, tvm.IRModule) else func


def _fast_key(func, out_idx, execution_backend, target, target_host, pass_configs, compile_flags) -> Optional[tuple]:
    try:
        import tvm

        if func is None:  # an IRModule without exactly one prim_func: compile raises the error
            return None
        current = tvm.target.Target.current(allow_none=True)
        target_key = _freeze(target) if not hasattr(target, "kind") else ("T", str(target))
        host_key = _freeze(target_host) if not hasattr(target_host, "kind") else ("T", str(target_host))
        return (
            id(func),
            _freeze(out_idx),
            execution_backend,
            target_key,
            host_key,
            _freeze(pass_configs),
            _freeze(compile_flags),
            None if current is None else str(current),
            _environment_key(),
        )
    except (TypeError, ImportError, AttributeError):
        return None


def _fast_lookup(fast: tuple) -> Optional[JITKernel]:
    entry = _fast.get(fast)
    if entry is None:
        return None
    _, record, kernel = entry
    from ..backends import get_registry

    if not get_registry().is_current(record) or not record.usable:
        return None
    return kernel


def _fast_store(fast: tuple, func: Any, record: Any, kernel: JITKernel) -> None:
    with _fast_lock:
        _fast[fast] = (func, record, kernel)
        while len(_fast) > _FAST_CAPACITY:
            _fast.popitem(last=False)


def clear_memory() -> None:
    """Forget every kernel of the in-memory fast path (``tilelang.cache.clear`` calls it)."""
    with _fast_lock:
        _fast.clear()


def _single_prim_func(func: Any) -> Any:
    """``func`` when it is a prim_func, the prim_func of a ``tvm.IRModule`` that holds exactly one,
    else None."""
    import tvm

    if isinstance(func, tvm.tirx.PrimFunc):
        return func
    if isinstance(func, tvm.IRModule):
        funcs = [f for f in func.functions.values() if isinstance(f, tvm.tirx.PrimFunc)]
        if len(funcs) == 1:
            return funcs[0]
    return None


def _check_prim_func(func: Any) -> Any:
    found = _single_prim_func(func)
    if found is not None:
        return found
    hint = ""
    if callable(func):
        hint = " (it is a Python function: decorate it with @T.prim_func, or call the function that returns the prim_func)"
    raise KernelDefinitionError(
        f"tilelang.compile expects a prim_func written with tilelang.language (T.prim_func), got {type(func).__name__}{hint}"
    )


def _flags(compile_flags: Union[None, str, Sequence[str]]) -> list[str]:
    if compile_flags is None:
        return []
    if isinstance(compile_flags, str):
        try:
            return shlex.split(compile_flags)
        except ValueError as exc:
            raise CompileFlagsError(
                f"compile_flags {compile_flags!r} cannot be split into flags like a shell command line ({exc}); "
                f"balance its quotes, or pass a list of flags, e.g. ['-DNAME=a b']"
            ) from None
    if isinstance(compile_flags, (list, tuple)) and all(isinstance(f, str) for f in compile_flags):
        return list(compile_flags)
    raise CompileFlagsError(f"compile_flags must be a string or a list of strings, got {compile_flags!r}")


def _check_pass_configs(pass_configs: Any) -> None:
    """``pass_configs`` must be a dict of known options (checked before anything else happens)."""
    from ..lowering import validate_pass_configs

    validate_pass_configs(pass_configs)


#: Dtypes the pipeline puts into the artifact as the kernel declares them (so a backend's declared
#: dtypes can be checked before lowering; others, such as pointers, are checked on the artifact).
_PLAIN_DTYPES = frozenset(
    ["bool", "float16", "bfloat16", "float32", "float64"]
    + [f"{s}int{b}" for s in ("", "u") for b in (8, 16, 32, 64)]
)


def _refuse_dtype(param: str, dtype: str, tensor: bool, kernel: str, capability: TargetCapability, backend: str,
                  kind: str) -> None:
    if capability.dtypes != "all" and dtype not in capability.dtypes:
        raise BackendCapabilityError(
            f"parameter {param!r} of kernel {kernel!r} is a {dtype} {'tensor' if tensor else 'scalar'}, which execution "
            f"backend {backend!r} does not support for target {kind!r} (it supports: {', '.join(capability.dtypes)})"
        )


def check_declared_dtypes(prim_func: Any, capability: TargetCapability, backend: str, kind: str) -> None:
    """Refuse, before lowering, a parameter dtype the backend does not declare for the target (a
    float64 tensor for Metal, say), so that the refusal is the backend's, not the code generator's."""
    if capability.dtypes == "all" or not hasattr(prim_func, "params"):
        return
    from ..lowering.signature import declared_param_dtypes

    attrs = prim_func.attrs if getattr(prim_func, "attrs", None) is not None else {}
    kernel = str(attrs.get("global_symbol", "")) or str(getattr(prim_func, "__name__", "main"))
    for name, dtype, tensor in declared_param_dtypes(prim_func):
        if dtype in _PLAIN_DTYPES:
            _refuse_dtype(name, dtype, tensor, kernel, capability, backend, kind)


def check_capabilities(
    artifact: KernelArtifact, capability: TargetCapability, out_idx: list[int], backend: str, kind: str
) -> None:
    """Refuse, before building, a kernel that needs what the backend did not declare."""
    if out_idx and not capability.allocates_outputs:
        raise BackendCapabilityError(
            f"execution backend {backend!r} does not allocate outputs (out_idx) for target {kind!r}; "
            f"pass the outputs yourself (out_idx=None) or choose another backend"
        )
    if artifact.symbols and not capability.dynamic_shapes:
        raise BackendCapabilityError(
            f"kernel {artifact.name!r} has dynamic dimensions ({', '.join(artifact.symbol_names())}) but execution "
            f"backend {backend!r} supports only static shapes for target {kind!r}"
        )
    from_strides = [s for s in artifact.symbols if s.stride]
    if from_strides and not capability.dynamic_strides:
        where = ", ".join(f"'{s.name}' (stride[{s.dim}] of '{artifact.params[s.param_index].name}')" for s in from_strides)
        raise BackendCapabilityError(
            f"kernel {artifact.name!r} reads symbol(s) {where} from tensor strides, which execution backend "
            f"{backend!r} does not support for target {kind!r} (its capability declaration has no dynamic_strides); "
            "pass the stride as a scalar parameter or choose another backend"
        )
    for param in artifact.params:
        _refuse_dtype(param.name, param.dtype, isinstance(param, TensorParam), artifact.name, capability, backend, kind)
