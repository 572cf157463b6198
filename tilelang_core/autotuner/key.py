"""The key of a tuning result: a hash of everything that could change which config wins.

It covers the function's source and closure values, the arguments it was called with (bound to
its signature, defaults applied, ``do_not_specialize`` parameters left out), the configs, the
resolved target and the backend's name and version, the compile and profile arguments, the
inputs given with ``set_autotune_inputs`` (tensors by shape, dtype and device), the identity of
the device the candidates are timed on, and the core's version. Values of global variables the
function reads are not part of it: pass what changes the kernel as arguments.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import types
from typing import Any, Callable, Optional

#: Bumped when what goes into the key changes.
TUNE_KEY_VERSION = 1


def describe_value(value: Any, _depth: int = 0) -> Any:
    """A JSON-able description of ``value`` that differs when the value differs.

    ints, floats, strings, bools and None are themselves; containers are described item by item
    (tuples tagged, so ``(1, 2)`` and ``[1, 2]`` differ); tensors by shape, dtype and device;
    functions by their source; NumPy arrays by shape, dtype and a hash of their bytes; anything
    else by type and ``repr``.
    """
    if _depth > 32:
        return "<deep>"
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tuple):
        return {"tuple": [describe_value(v, _depth + 1) for v in value]}
    if isinstance(value, list):
        return [describe_value(v, _depth + 1) for v in value]
    if isinstance(value, dict):
        return {"dict": sorted(([repr(k), describe_value(v, _depth + 1)] for k, v in value.items()), key=lambda kv: kv[0])}
    if isinstance(value, (set, frozenset)):
        return {"set": sorted(repr(v) for v in value)}
    if _is_tensor(value):
        return {"tensor": [list(value.shape), str(value.dtype), value.device.type]}
    if isinstance(value, types.ModuleType):
        return {"module": value.__name__}
    if isinstance(value, (types.FunctionType, types.MethodType)) or hasattr(value, "__wrapped__"):
        return {"function": function_identity(value, _depth + 1)}
    if hasattr(value, "__array_interface__") and hasattr(value, "tobytes"):
        # a NumPy array: its repr shortens large arrays ("1., 1., ..., 1."), so two different
        # tables would share a tuning result; its bytes do not
        digest = hashlib.sha256(value.tobytes()).hexdigest()
        return {"array": [list(value.shape), str(value.dtype), digest]}
    if hasattr(value, "shape") and hasattr(value, "dtype") and hasattr(value, "device"):  # a TensorSpec
        return {"spec": [list(value.shape), str(value.dtype), str(value.device)]}
    return {"object": f"{type(value).__module__}.{type(value).__qualname__}", "repr": repr(value)}


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


def function_identity(fn: Any, _depth: int = 0) -> dict[str, Any]:
    """Module, qualified name, source text and closure values of a function."""
    fn = unwrap(fn)
    ident: dict[str, Any] = {
        "module": getattr(fn, "__module__", None),
        "qualname": getattr(fn, "__qualname__", type(fn).__qualname__),
    }
    try:
        ident["source"] = inspect.getsource(fn)
    except (OSError, TypeError):
        code = getattr(fn, "__code__", None)
        ident["code"] = (
            hashlib.sha256(code.co_code + repr(code.co_consts).encode()).hexdigest() if code is not None else repr(fn)
        )
    closure = getattr(fn, "__closure__", None) or ()
    names = getattr(getattr(fn, "__code__", None), "co_freevars", ())
    values = {}
    for name, cell in zip(names, closure):
        try:
            contents = cell.cell_contents
        except ValueError:  # an empty cell
            contents = "<empty>"
        values[name] = describe_value(contents, _depth + 1) if contents is not fn else "<self>"
    if values:
        ident["closure"] = values
    defaults = getattr(fn, "__defaults__", None)
    if defaults:
        ident["defaults"] = describe_value(tuple(defaults), _depth + 1)
    kwdefaults = getattr(fn, "__kwdefaults__", None)
    if kwdefaults:
        ident["kwdefaults"] = describe_value(dict(kwdefaults), _depth + 1)
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
    """The key (64 hex digits) of one tuning run; ``explicit`` is the user's ``cache_key``."""
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


__all__ = ["TUNE_KEY_VERSION", "describe_value", "function_identity", "tuning_key", "unwrap"]
