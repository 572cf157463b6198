"""The key of a tuning result: a hash of everything that could change which config wins.

It covers the function's source and closure values, the arguments it was called with (bound to
its signature, defaults applied, ``do_not_specialize`` parameters left out), the configs, the
resolved target and the backend's name and version, the compile and profile arguments, the
inputs given with ``set_autotune_inputs`` (tensors by shape, dtype and device), the identity of
the device the candidates are timed on, and the core's version. Values of global variables the
function reads are not part of it: pass what changes the kernel as arguments.

A ``functools.partial`` is keyed with its bound arguments and keywords, a bound method with the
object it is bound to (by content: its ``repr`` when that is not the default ``<... at 0x...>``
one, else its attributes). A value known only by its address (a default ``repr`` and no
attributes) cannot be keyed: :class:`Undescribable` is raised and the tuner does not cache the
call (an address is reused once its object is gone, and a later object would get its result).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import re
import types
from typing import Any, Callable, Optional

#: Bumped when what goes into the key changes.
TUNE_KEY_VERSION = 2

#: ``repr`` text that names a memory address (``<Maker object at 0x7f...>``): not a description.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


class Undescribable(TypeError):
    """A value the key cannot describe by content (only by its address, which is reused once
    the object is gone); the tuner then keeps no result of the call."""


def describe_value(value: Any, _depth: int = 0, pin: Optional[Callable[[Any], Any]] = None) -> Any:
    """A JSON-able description of ``value`` that differs when the value differs.

    ints, floats, strings, bools and None are themselves; containers are described item by item
    (tuples tagged, so ``(1, 2)`` and ``[1, 2]`` differ); tensors by shape, dtype and device;
    functions by their source (partials and bound methods with what they are bound to); NumPy
    arrays by shape, dtype and a hash of their bytes; anything else by type and ``repr``, or by
    type and attributes when its ``repr`` names an address.

    ``pin(value)`` describes a value known only by its address instead (a caller that keeps the
    value alive for as long as it uses the description, so the address cannot be reused).

    :raises Undescribable: the value is known only by its address and no ``pin`` is given.
    """
    if _depth > 32:
        return "<deep>"
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tuple):
        return {"tuple": [describe_value(v, _depth + 1, pin) for v in value]}
    if isinstance(value, list):
        return [describe_value(v, _depth + 1, pin) for v in value]
    if isinstance(value, dict):
        return {"dict": sorted(([repr(k), describe_value(v, _depth + 1, pin)] for k, v in value.items()), key=lambda kv: kv[0])}
    if isinstance(value, (set, frozenset)):
        return {"set": sorted(repr(v) for v in value)}
    if _is_tensor(value):
        return {"tensor": [list(value.shape), str(value.dtype), value.device.type]}
    if isinstance(value, types.ModuleType):
        return {"module": value.__name__}
    if isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType)):  # len, torch.add, [].append
        owner = getattr(value, "__self__", None)
        builtin = {"builtin": f"{getattr(value, '__module__', None)}.{getattr(value, '__qualname__', value.__name__)}"}
        if owner is not None and not isinstance(owner, (types.ModuleType, type)):
            builtin["self"] = describe_value(owner, _depth + 1, pin)
        return builtin
    if isinstance(value, (types.FunctionType, types.MethodType, functools.partial)) or hasattr(value, "__wrapped__"):
        return {"function": function_identity(value, _depth + 1, pin)}
    if hasattr(value, "__array_interface__") and hasattr(value, "tobytes"):
        # a NumPy array: its repr shortens large arrays ("1., 1., ..., 1."), so two different
        # tables would share a tuning result; its bytes do not
        digest = hashlib.sha256(value.tobytes()).hexdigest()
        return {"array": [list(value.shape), str(value.dtype), digest]}
    if hasattr(value, "shape") and hasattr(value, "dtype") and hasattr(value, "device"):  # a TensorSpec
        return {"spec": [list(value.shape), str(value.dtype), str(value.device)]}
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    text = repr(value)
    if not _ADDRESS.search(text):
        return {"object": kind, "repr": text}
    state = _attributes(value)
    if state is None:
        if pin is not None:
            return {"object": kind, "pinned": pin(value)}
        raise Undescribable(
            f"a {kind} value is known only by its address ({text}), which a later object can reuse; give it a "
            f"__repr__ that shows what it holds, or pass plain values (numbers, strings, tuples)"
        )
    return {"object": kind, "state": describe_value(state, _depth + 1, pin)}


def _attributes(value: Any) -> Optional[dict[str, Any]]:
    """The attributes of an object (``__dict__`` and ``__slots__``), or None when it has neither."""
    found = hasattr(value, "__dict__")
    state: dict[str, Any] = dict(getattr(value, "__dict__", None) or {})
    for cls in type(value).__mro__:
        slots = getattr(cls, "__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name in ("__dict__", "__weakref__"):
                continue
            found = True
            if hasattr(value, name):
                state.setdefault(name, getattr(value, name))
    return state if found else None


def _is_tensor(value: Any) -> bool:
    import sys

    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def unwrap(fn: Any) -> Callable[..., Any]:
    """The plain Python function behind a ``@tilelang.jit``/``functools.wraps`` wrapper."""
    seen = 0
    while seen < 16:
        inner = getattr(fn, "func", None) if not isinstance(fn, types.FunctionType) else None
        inner = inner if callable(inner) else getattr(fn, "__wrapped__", None)
        if inner is None or inner is fn:
            break
        fn = inner
        seen += 1
    return fn


def callable_name(fn: Any) -> str:
    """A name for ``fn`` in messages: the qualified name of the function behind its wrappers."""
    fn = unwrap(fn)
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__


def _bound_layers(fn: Any, _depth: int, pin: Optional[Callable[[Any], Any]]) -> tuple[Any, list[Any]]:
    """The function under ``functools.partial`` / bound-method / wrapper layers, and what each
    partial and bound method adds to it (its arguments, its ``__self__``), outermost first."""
    layers: list[Any] = []
    for _ in range(16):
        if isinstance(fn, functools.partial):
            layers.append({"partial": [describe_value(tuple(fn.args), _depth + 1, pin),
                                       describe_value(dict(fn.keywords), _depth + 1, pin)]})
            fn = fn.func
        elif isinstance(fn, types.MethodType):
            owner = fn.__self__
            layers.append({"self": describe_value(owner, _depth + 1, pin)})
            fn = fn.__func__
        else:
            inner = getattr(fn, "func", None) if not isinstance(fn, types.FunctionType) else None
            inner = inner if callable(inner) else getattr(fn, "__wrapped__", None)
            if inner is None or inner is fn:
                break
            fn = inner
    return fn, layers


def function_identity(fn: Any, _depth: int = 0, pin: Optional[Callable[[Any], Any]] = None) -> dict[str, Any]:
    """Module, qualified name, source text and closure values of a function, and the bound
    arguments of ``functools.partial`` layers and the object of a bound method around it.

    :raises Undescribable: a bound value is known only by its address (``pin``: see
        :func:`describe_value`).
    """
    fn, layers = _bound_layers(fn, _depth, pin)
    ident: dict[str, Any] = {
        "module": getattr(fn, "__module__", None),
        "qualname": getattr(fn, "__qualname__", type(fn).__qualname__),
    }
    try:
        ident["source"] = inspect.getsource(fn)
    except (OSError, TypeError):
        code = getattr(fn, "__code__", None)
        if code is not None:
            ident["code"] = hashlib.sha256(code.co_code + repr(code.co_consts).encode()).hexdigest()
        else:  # a callable object: its class's source and its own state (never its address)
            try:
                ident["source"] = inspect.getsource(type(fn))
            except (OSError, TypeError):
                pass
            ident["object"] = describe_value(fn, _depth + 1, pin)
    closure = getattr(fn, "__closure__", None) or ()
    names = getattr(getattr(fn, "__code__", None), "co_freevars", ())
    values = {}
    for name, cell in zip(names, closure):
        try:
            contents = cell.cell_contents
        except ValueError:  # an empty cell
            contents = "<empty>"
        values[name] = describe_value(contents, _depth + 1, pin) if contents is not fn else "<self>"
    if values:
        ident["closure"] = values
    defaults = getattr(fn, "__defaults__", None)
    if defaults:
        ident["defaults"] = describe_value(tuple(defaults), _depth + 1, pin)
    kwdefaults = getattr(fn, "__kwdefaults__", None)
    if kwdefaults:
        ident["kwdefaults"] = describe_value(dict(kwdefaults), _depth + 1, pin)
    if layers:
        ident["bound"] = layers
    return ident


def tuning_key(
    *,
    function: Any,
    arguments: Any,
    configs: Any,
    target: str,
    backend: tuple[str, str],
    compile_args: dict[str, Any],
    profile_args: dict[str, Any],
    inputs: Any,
    device: dict[str, Any],
    explicit: Optional[str] = None,
) -> str:
    """The key (64 hex digits) of one tuning run; ``explicit`` is the user's ``cache_key``.

    :raises Undescribable: something in it is known only by its address (the run is not cached).
    """
    from .. import __version__

    doc = {
        "version": TUNE_KEY_VERSION,
        "core": __version__,
        "function": function_identity(function),
        "arguments": describe_value(arguments),
        "configs": describe_value(configs),
        "target": target,
        "backend": list(backend),
        "compile": describe_value(compile_args),
        "profile": describe_value(profile_args),
        "inputs": describe_value(inputs),
        "device": describe_value(device),
        "explicit": explicit,
    }
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


__all__ = ["TUNE_KEY_VERSION", "Undescribable", "describe_value", "function_identity", "tuning_key", "unwrap"]
