"""``@tilelang.jit``: compile a kernel-building Python function once per distinct arguments.

Two ways to call a decorated function (see docs/jit.md):

* **with Python values** (``matmul(1024, 1024, 1024)``): the function runs with those values,
  returns a prim_func, and the call returns the :class:`JITKernel` compiled from it. Each distinct
  set of argument values is built once (and found in the memory and disk cache afterwards).
* **with torch tensors** (``add(a, b)``, the direct form): every tensor argument is replaced by
  a :class:`TensorSpec` (shape, dtype, device) when the function runs, the prim_func it returns is
  compiled for those shapes and dtypes, and the kernel is *called* with the tensors. Later calls
  with tensors of the same shapes and dtypes go straight to the compiled kernel.

The direct form's per-call cost is one tuple of ``(shape, dtype)`` pairs, one dict lookup and
the backend's own dispatch: the specialisation key is built by a small function generated for
the argument count, without a Python loop.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import sys
import threading
import types
from typing import Any, Callable, Optional, Sequence, Union

from ..errors import TileLangError
from .binding import symbol_stand_in, value_types
from .build_locks import BuildLocks
from .kernel import JITKernel
from ..fork_locks import renew_after_fork
from .outputs import OutIdx

#: Target used by the direct form with ``target="auto"``, by the tensors' device type.
DEVICE_TARGETS = {"cpu": "c", "cuda": "cuda", "mps": "metal"}


class TensorSpec:
    """What the direct form passes to the decorated function in place of a tensor.

    ``shape`` (a tuple of ints), ``dtype`` (a TVM dtype string such as ``"float32"``) and
    ``device`` (``"cpu"``, ``"cuda"``, ...) are what the kernel is specialised on; use them in
    the prim_func's signature, e.g. ``T.Tensor(A.shape, A.dtype)``.
    """

    __slots__ = ("shape", "dtype", "device")

    def __init__(self, shape: Sequence[int], dtype: str, device: str) -> None:
        self.shape = tuple(int(d) for d in shape)
        self.dtype = dtype
        self.device = device

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"TensorSpec(shape={self.shape}, dtype={self.dtype!r}, device={self.device!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorSpec) and (self.shape, self.dtype, self.device) == (
            other.shape,
            other.dtype,
            other.device,
        )

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype, self.device))


_dtype_names: dict[Any, str] = {}


def _dtype_name(dtype: Any) -> str:
    name = _dtype_names.get(dtype)
    if name is None:
        name = _dtype_names[dtype] = str(dtype).replace("torch.", "")
    return name


def _freeze(value: Any) -> Any:
    """A hashable key for an argument value: containers and dataclass instances by content (a
    plain ``@dataclass`` cannot be hashed), anything else as itself. The key holds the value, so
    a value hashed by identity cannot be freed and its id reused by another while the key lives.

    :raises TypeError: the value (or one inside it) cannot be hashed.
    """
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_freeze(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((repr(k), _freeze(v)) for k, v in value.items())))
    if isinstance(value, (set, frozenset)):
        return ("set", tuple(sorted(repr(v) for v in value)))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value), tuple((f.name, _freeze(getattr(value, f.name))) for f in dataclasses.fields(value)))
    stand_in = symbol_stand_in(value)  # a T.dynamic symbol: by name and dtype (binding.py)
    if stand_in is not value:
        return stand_in
    hash(value)  # TypeError for anything else that cannot be a key
    return (type(value), value)


def _freezes(value: Any) -> bool:
    """Whether :func:`_freeze` takes ``value``."""
    try:
        _freeze(value)
    except TypeError:
        return False
    return True


def _check_binds(func: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> None:
    """Python's own error for a call that does not fit ``func``'s parameters (a missing or an
    unexpected argument), before anything is built with it."""
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):  # no signature to check against
        return
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"{getattr(func, '__name__', 'kernel')}(): {exc}") from None


def is_numpy_array(value: Any) -> bool:
    """Whether ``value`` is a NumPy array (told without importing NumPy)."""
    kind = type(value)
    return kind.__module__ == "numpy" and kind.__name__ == "ndarray"


def numpy_array_message(function: str, what: str) -> str:
    """The error for a NumPy array given as argument ``what`` of ``function``: kernels take torch
    tensors, and an array cannot be a compile-time value (it cannot be hashed)."""
    return (
        f"{function}(): {what} is a numpy.ndarray, which cannot be hashed: NumPy arrays are not tensors here "
        "(kernels take torch tensors); pass torch.from_numpy(x) for a tensor, or pass a hashable value (a tuple, "
        "tuple(x.tolist())) for a compile-time value"
    )


def unhashable_message(function: str, what: str, value: Any) -> str:
    """The error for an argument ``what`` (``"argument #1"``, ``"argument 'cfg'"``) of ``function`` that
    cannot be part of a kernel's key."""
    if is_numpy_array(value):
        return numpy_array_message(function, what)
    return (
        f"{function}(): {what} is a {type(value).__module__}.{type(value).__qualname__}, which cannot be hashed, so "
        "the kernel made for it could not be found again: pass a hashable value (an int, float, string, dtype, "
        "tuple, frozen dataclass, ...), or a list, dict or set of such values (they are compared by content)"
    )


def _make_fast_key(arity: int) -> Callable[[tuple], tuple]:
    """``key(args)`` for ``arity`` tensors: shapes, dtypes and the first tensor's device family."""
    names = [f"a{i}" for i in range(arity)]
    unpack = ", ".join(names) + ("," if arity == 1 else "")
    parts = [f"{n}.shape, {n}.dtype" for n in names] + ["a0.is_cuda, a0.is_mps"]
    source = f"def key(args):\n    {unpack} = args\n    return ({', '.join(parts)})\n"
    scope: dict[str, Any] = {}
    exec(compile(source, f"<tilelang.jit key/{arity}>", "exec"), scope)  # noqa: S102 - generated from ints only
    return scope["key"]


def _no_fast_key(args: tuple) -> tuple:
    raise LookupError


class JitFunction:
    """A function decorated with ``@tilelang.jit``; call it (see the module docstring).

    Attributes: ``func`` (the decorated function), ``options`` (the ``tilelang.compile``
    arguments), ``kernels`` (a snapshot of every kernel compiled so far, by argument key).
    """

    def __init__(self, func: Callable[..., Any], options: dict[str, Any], mode: str = "auto",
                 debug_root_path: Optional[str] = None) -> None:
        if mode not in ("auto", "lazy", "eager"):
            raise ValueError(f"@tilelang.jit(mode=...) must be 'auto', 'lazy' or 'eager', got {mode!r}")
        self.func = func
        self.options = options
        self.mode = mode
        self.debug_root_path = debug_root_path  # jit/debug_dump.py
        self._eager: Any = None
        self._by_args: dict[Any, JITKernel] = {}  # compile form and direct form, by a general key
        self._table: dict[tuple, JITKernel] = {}  # direct form, all-tensor calls, by the fast key
        self._fast_key: Callable[[tuple], tuple] = _no_fast_key
        self._fast_arity: Optional[int] = None
        self._lock = threading.Lock()
        renew_after_fork(self, "_lock")
        #: one lock per specialisation being built: threads asking for it at once wait for the first
        #: (with the kernel cache off, each built it: 6 threads, 6 builds of one kernel)
        self._building = BuildLocks()
        self._binder: Any = None
        self._kernel_cache: dict[Any, JITKernel] = {}  # compile form, by the bound-arguments key (binding.py)
        self._call_form_cache: dict[Any, JITKernel] = {}  # compile form, by the call as written
        self._key_types: dict[Any, tuple] = {}  # the value types each _kernel_cache kernel was built for
        self._typed_kernels: dict[Any, JITKernel] = {}  # compile form, keys equal to one of other types
        functools.update_wrapper(self, func)
        # TileLang's spelling: f.func.parse_args(...), f.func._parse_phase1_key(...), f.func.set_mode(...)
        for name, method in (("parse_args", self.parse_args), ("_parse_phase1_key", self._parse_phase1_key),
                             ("set_mode", self.set_mode)):
            try:
                setattr(func, name, method)
            except (AttributeError, TypeError):
                pass  # a builtin or a callable object that takes no attributes

    def __reduce__(self) -> str:
        """Pickled by reference, as the function it decorates would be: by its module and
        qualified name (a decorated function at a module's top level pickles, a local one cannot;
        what it compiled stays behind)."""
        return getattr(self, "__qualname__", None) or type(self).__qualname__

    # The hot path: all-tensor calls of an already compiled specialisation.
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.mode != "lazy":
            eager = self._eager_function()
            if eager is not None:
                return eager(*args, **kwargs)
        if not kwargs:
            try:
                kernel = self._table[self._fast_key(args)]
            except Exception:  # noqa: BLE001 - any miss (not tensors, other arity, new shapes) -> slow path
                pass
            else:
                return kernel(*args)
        return self._call_slow(args, kwargs)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        """On a class, ``@tilelang.jit`` methods bind like functions: ``m.k(4)`` calls ``k(m, 4)``
        (the instance is then a compile-time value: one kernel per instance and arguments)."""
        if obj is None:
            return self
        return types.MethodType(self, obj)

    @property
    def kernels(self) -> dict[Any, JITKernel]:
        if self._eager is not None:
            return self._eager.kernels
        return {**self._kernel_cache, **self._typed_kernels, **self._by_args}

    def _argument_binder(self) -> Any:
        if self._binder is None:
            from .binding import ArgumentBinder

            self._binder = ArgumentBinder(self.func)
        return self._binder

    def parse_args(self, *args: Any, **kwargs: Any) -> tuple[tuple, dict[str, Any]]:
        """``(key, tensors)``: the cache key of a call and its tensor arguments by name.

        Equivalent calls (defaults omitted or spelled out, positional or by keyword, in any
        order) give the same key; see :mod:`tilelang_core.jit.binding`.

        :raises TypeError: the call does not bind to the signature, or a value cannot be a key.
        """
        return self._argument_binder().parse_args(*args, **kwargs)

    def parse_cache_key(self, *args: Any, **kwargs: Any) -> tuple:
        """The key of a call's kernel without the tensors themselves (TileLang's spelling; its
        notebooks time it against a kernel call): :meth:`parse_args`'s key."""
        return self.parse_args(*args, **kwargs)[0]

    def _parse_phase1_key(self, *args: Any, **kwargs: Any) -> tuple[tuple, dict[str, Any], dict[str, Any]]:
        """``(key, tensors, compile_kwargs)``: the non-tensor arguments by name (``**kwargs`` flattened) and their key."""
        return self._argument_binder().phase1_key(*args, **kwargs)

    def set_mode(self, mode: str) -> None:
        """Decide the style: ``"lazy"`` (returns a prim_func), ``"eager"`` (the body is the kernel) or ``"auto"``."""
        if mode not in ("auto", "lazy", "eager"):
            raise ValueError(f"@tilelang.jit mode must be 'auto', 'lazy' or 'eager', got {mode!r}")
        self.mode = mode
        if mode == "lazy":
            self._eager = None

    def _eager_function(self) -> Any:
        """The :class:`~tilelang_core.jit.eager.EagerFunction` when the body is the kernel, else None.

        Decided once, from the function's source (``mode="auto"``), or as ``mode`` says, by one
        thread: threads making the first call at once each made their own, and each built the
        kernel (4 threads, 4 builds).
        """
        if self._eager is None and self.mode != "lazy":
            with self._building.held("eager style"):
                if self._eager is None and self.mode != "lazy":
                    from .eager import is_eager_style
                    from .eager_variants import eager_function

                    if self.mode == "eager" or is_eager_style(self.func):
                        self._eager = eager_function(self.func, self.options, debug_root_path=self.debug_root_path)
                        self.mode = "eager"
                    else:
                        self.mode = "lazy"
        return self._eager

    def get_tir(self, *args: Any, **kwargs: Any) -> Any:
        """The prim_func these arguments give, without compiling it.

        For a function returning a prim_func: what it returns for these arguments. In the eager
        style: the kernel specialised for these tensors (or ``T.Tensor`` specs) and values.
        """
        eager = self._eager_function()
        if eager is not None:
            return eager.get_tir(*args, **kwargs)
        return self.func(*args, **kwargs)

    def get_kernel_source(self, *args: Any, **kwargs: Any) -> Optional[str]:
        """The generated kernel source for these arguments (compiling the kernel, once)."""
        return self.compile(*args, **kwargs).get_kernel_source()

    def _call_slow(self, args: tuple, kwargs: dict[str, Any]) -> Any:
        torch = sys.modules.get("torch")
        tensor_type = torch.Tensor if torch is not None else ()
        if tensor_type and any(isinstance(v, tensor_type) for v in kwargs.values()):
            raise TypeError(
                f"{self.func.__name__}(): pass tensors positionally in the direct form "
                f"(got tensor keyword argument(s) {', '.join(k for k, v in kwargs.items() if isinstance(v, tensor_type))})"
            )
        if tensor_type and any(isinstance(a, tensor_type) for a in args):
            return self._call_direct(args, kwargs, tensor_type)
        return self.compile(*args, **kwargs)

    def compile(self, *args: Any, **kwargs: Any) -> JITKernel:
        """The kernel for these Python argument values (compiled on first use).

        In the eager style: the kernel for these tensors (or ``T.Tensor`` specs) and values;
        ``T.const`` values may be given by name (``f.compile(M=1024, N=1024, block=64)``).
        """
        eager = self._eager_function()
        if eager is not None:
            return eager.compile(*args, **kwargs)
        form = (symbol_stand_in(args), symbol_stand_in(tuple(kwargs.items())) if kwargs else ())
        try:
            form = (form, value_types(form))  # 1, 1.0 and True are equal, and three kernels
            kernel = self._call_form_cache.get(form)
        except TypeError as exc:
            given = [(f"argument #{i}", a) for i, a in enumerate(args)] + [(f"argument {k!r}", v) for k, v in kwargs.items()]
            array = next((what for what, v in given if is_numpy_array(v)), None)
            if array is not None:
                raise TypeError(numpy_array_message(self.func.__name__, array)) from None
            raise TypeError(
                f"{self.func.__name__}(): arguments of a @tilelang.jit function must be hashable values "
                f"(ints, floats, strings, dtypes, tuples, ...) to find their kernel ({exc}); got "
                f"{', '.join(type(a).__name__ for a in (*args, *kwargs.values()))}. Pass tuples instead of lists"
            ) from None
        if kernel is not None:
            return kernel
        key, _ = getattr(self.func, "parse_args", self.parse_args)(*args, **kwargs)
        types = value_types(key)
        kernel = self._kernel_for(key, types)
        if kernel is None:
            with self._building.held(("compile", key, types)):
                kernel = self._kernel_for(key, types)
                if kernel is None:
                    kernel = self._build(args, kwargs, self.options.get("target", "auto"))
                    with self._lock:
                        kernel = self._kernel_for(key, types) or self._keep(key, types, kernel)
        self._call_form_cache[form] = kernel
        return kernel

    def _kernel_for(self, key: Any, types: Any) -> Optional[JITKernel]:
        """The kernel compiled for the bound-arguments ``key`` and the types of its values: a key
        equal to another (``1`` and ``1.0``, ``1`` and ``True``) of other types is another kernel
        (``a // 2`` and ``a // 2.0`` are not the same operation). ``_kernel_cache`` stays keyed by
        ``parse_args`` alone, as TileLang's is; the first kernel of a key is kept there, the others
        in ``_typed_kernels``. A kernel put there from outside counts for every type. ``types`` is
        :func:`~.binding.value_types` of ``key``."""
        kernel = self._kernel_cache.get(key)
        if kernel is not None and self._key_types.get(key, types) == types:
            return kernel
        return self._typed_kernels.get((key, types))

    def _keep(self, key: Any, types: Any, kernel: JITKernel) -> JITKernel:
        """Keep ``kernel`` for ``key`` and its value ``types`` (see :meth:`_kernel_for`)."""
        if key not in self._kernel_cache:
            self._kernel_cache[key] = kernel
            self._key_types[key] = types
        else:
            self._typed_kernels[(key, types)] = kernel
        return kernel

    def _call_direct(self, args: tuple, kwargs: dict[str, Any], tensor_type: Any) -> Any:
        specs: list[Any] = []
        key_parts: list[Any] = []
        tensors: list[Any] = []
        device = None
        for a in args:
            if isinstance(a, tensor_type):
                spec = TensorSpec(a.shape, _dtype_name(a.dtype), a.device.type)
                device = device or spec.device
                specs.append(spec)
                key_parts.append(("tensor", spec.shape, spec.dtype, spec.device))
                tensors.append(a)
            else:
                specs.append(a)
                try:
                    key_parts.append(_freeze(a))
                except TypeError:
                    raise TypeError(unhashable_message(self.func.__name__, f"argument #{len(specs) - 1}", a)) from None
        try:
            key = ("direct", tuple(key_parts), _freeze(kwargs))
        except TypeError:
            name, value = next((n, v) for n, v in kwargs.items() if not _freezes(v))
            raise TypeError(unhashable_message(self.func.__name__, f"argument {name!r}", value)) from None
        kernel = self._by_args.get(key)
        if kernel is None:
            with self._building.held(key):
                kernel = self._by_args.get(key) or self._build_direct(key, specs, args, kwargs, device)
        if not kwargs and len(tensors) == len(args):
            self._register_fast(args, kernel)
        return kernel(*tensors)

    def _build_direct(self, key: Any, specs: list, args: tuple, kwargs: dict[str, Any], device: Any) -> JITKernel:
        """Build the direct form's kernel for ``specs`` and keep it under ``key``."""
        target = self.options.get("target", "auto")
        if target == "auto":
            target = DEVICE_TARGETS.get(device or "cpu", "auto")
        _check_binds(self.func, args, kwargs)
        try:
            kernel = self._build(tuple(specs), kwargs, target)
        except TileLangError:
            raise
        except Exception as exc:  # noqa: BLE001 - TVM's own error for a spec where a number was meant
            given = ", ".join(f"#{i} ({s.dtype} tensor {tuple(s.shape)})" for i, s in enumerate(specs)
                              if isinstance(s, TensorSpec))
            raise TypeError(
                f"{self.func.__name__}() was called with tensors (arguments {given}): the direct form passes "
                f"each as a T.Tensor spec to the function, and building its kernel failed ({type(exc).__name__}: "
                f"{exc}). If those parameters are sizes or other compile-time values, call "
                f"{self.func.__name__}(...) with them to get the kernel, then call the kernel with the tensors"
            ) from exc
        with self._lock:
            return self._by_args.setdefault(key, kernel)

    def _register_fast(self, args: tuple, kernel: JITKernel) -> None:
        with self._lock:
            if self._fast_arity is None:
                self._fast_arity = len(args)
                self._fast_key = _make_fast_key(len(args)) if args else _no_fast_key
            if self._fast_arity == len(args) and args:
                self._table[self._fast_key(args)] = kernel

    def _build(self, args: tuple, kwargs: dict[str, Any], target: Any) -> JITKernel:
        from .compile import compile as tl_compile

        produced = self.func(*args, **kwargs)
        if isinstance(produced, JITKernel):
            kernel, prim_func = produced, None
        else:
            opts = dict(self.options)
            opts["target"] = target
            kernel, prim_func = tl_compile(produced, **opts), produced
        if self.debug_root_path is not None:
            from .debug_dump import dump_kernel

            dump_kernel(self.debug_root_path, self.func.__name__, kernel, prim_func)
        return kernel

    def par_compile(self, configs: Sequence[Any], **kwargs: Any) -> list[JITKernel]:
        """Compile many specialisations at once (see :func:`tilelang.par_compile`).

        Each config is a tuple of positional arguments, a dict of keyword arguments, or a
        single value; returns the kernels in the order of ``configs``.
        """
        from .parallel import par_compile

        def job(config: Any) -> Callable[[], JITKernel]:
            if isinstance(config, dict):
                return lambda: self.compile(**config)
            if isinstance(config, tuple):
                return lambda: self.compile(*config)
            return lambda: self.compile(config)

        return par_compile([job(c) for c in configs], **kwargs)

    def __repr__(self) -> str:
        compiled = len(self._by_args) + len(self._kernel_cache) + len(self._typed_kernels)
        name = getattr(self.func, "__qualname__", None) or type(self.func).__name__
        return f"<tilelang.jit {name} ({compiled} compiled)>"


def jit(
    func: Optional[Callable[..., Any]] = None,
    *,
    out_idx: OutIdx = None,
    execution_backend: Optional[str] = None,
    target: Any = "auto",
    target_host: Any = None,
    verbose: Optional[bool] = None,
    pass_configs: Optional[dict[str, Any]] = None,
    compile_flags: Union[None, str, Sequence[str]] = None,
    mode: str = "auto",
    debug_root_path: Optional[Union[str, "os.PathLike[str]"]] = None,
) -> Any:
    """Decorate a kernel-building function; see :class:`JitFunction` and docs/jit.md.

    Usable bare (``@tilelang.jit``) or with the arguments of :func:`tilelang.compile`
    (``@tilelang.jit(out_idx=-1, target="c")``). A function that returns a prim_func: calling
    it with Python values returns a :class:`JITKernel`; calling it with torch tensors compiles
    for their shapes and dtypes (once) and runs the kernel on them. A function whose body *is*
    the kernel (the eager style, :mod:`tilelang_core.jit.eager`): calling it compiles for the
    arguments (once) and runs the kernel, returning its ``T.empty`` outputs. A ``T.prim_func``
    itself (``@tilelang.jit(out_idx=-1)`` above ``@T.prim_func``): calling it with tensors compiles
    it (once) and runs it; ``k()`` returns its :class:`JITKernel`.

    :param mode: ``"auto"`` (tell the style from the function's source), ``"lazy"`` (it returns
        a prim_func) or ``"eager"`` (its body is the kernel).
    :param debug_root_path: a directory into which every kernel built is written, its source and
        its TIR (:mod:`tilelang_core.jit.debug_dump`); relative to the current directory.
    """
    from .debug_dump import check_debug_root_path

    root = check_debug_root_path(debug_root_path)
    from ..lowering.configs import config_key

    if pass_configs is not None and hasattr(pass_configs, "items"):
        pass_configs = {config_key(k): v for k, v in pass_configs.items()}
    options = {
        "out_idx": out_idx,
        "execution_backend": execution_backend,
        "target": target,
        "target_host": target_host,
        "verbose": verbose,
        "pass_configs": pass_configs,
        "compile_flags": compile_flags,
    }

    def decorate(f: Any) -> JitFunction:
        if _is_prim_func(f):  # @tilelang.jit on a @T.prim_func: the kernel is already built
            return JitFunction(_returning(f, options), options, "lazy", root)
        return JitFunction(_decoratable(f), options, mode, root)

    return decorate if func is None else decorate(func)


def _is_prim_func(value: Any) -> bool:
    """Whether ``value`` is a ``T.prim_func``; without importing TVM (a prim_func exists only once
    it is imported), so that decorating a function costs no TVM import."""
    tvm = sys.modules.get("tvm")
    return tvm is not None and isinstance(value, tvm.tirx.PrimFunc)


def _returning(prim_func: Any, options: dict[str, Any]) -> Callable[..., Any]:
    """The function that ``@tilelang.jit`` decorates in place of a ``T.prim_func``: whatever it is
    called with, it returns the kernel compiled (once) with the decorator's ``options``. So a call
    with tensors (the direct form) runs it, and ``k()`` returns its :class:`JITKernel`, the same
    object."""
    from .compile import compile as tl_compile

    name = getattr(prim_func, "__name__", None) or "kernel"
    built: list[JITKernel] = []
    lock = threading.Lock()

    def kernel(*args: Any, **kwargs: Any) -> Any:
        with lock:
            if not built:
                built.append(tl_compile(prim_func, **options))
        return built[0]

    kernel.__name__ = kernel.__qualname__ = name
    kernel.__doc__ = f"the T.prim_func {name!r}, compiled by @tilelang.jit on its first call"
    return kernel


def _decoratable(func: Any) -> Callable[..., Any]:
    """``func`` when ``@tilelang.jit`` can decorate it, else a ``TypeError`` saying what to pass."""
    if isinstance(func, JITKernel):
        raise TypeError(
            f"@tilelang.jit decorates a function that returns a prim_func (or whose body is the kernel), got the "
            f"compiled kernel {func.name!r} (a JITKernel): call it directly, or decorate the function that built it")
    if not callable(func):
        raise TypeError(f"@tilelang.jit decorates a function that returns a prim_func, got {type(func).__name__}")
    return func
