"""How a ``@tilelang.jit`` call's arguments become the key of its compiled kernel.

A kernel-building function is called in many equivalent ways: ``f(512, 512)``,
``f(512, 512, False)`` (a default spelled out), ``f(hidden=512, token_stride=512)``. They must
all find the same kernel. :class:`ArgumentBinder` binds a call to the function's signature the
way Python does (same errors: "multiple values", "missing a required argument"), applies the
defaults, and builds a hashable key from the bound values in parameter order:

* hashable values stay as they are (``512``, ``False``, ``T.float32``);
* lists, tuples, dicts and sets become tagged tuples (``[1, 2]`` and the default ``[1, 2]``
  give the same key); any other unhashable value is a ``TypeError`` naming the parameter;
* keyword arguments that no parameter takes (compile-time constants of the eager style, or a
  ``**kwargs`` parameter) are one trailing element: their ``(name, value)`` pairs, sorted;
* torch tensors are not part of the values: they are returned by name, and the key's second
  part describes them (shape, dtype, device), ``None`` when there are none.

TileLang spells these ``f.func.parse_args(...)`` and ``f.func._parse_phase1_key(...)``; the
decorator attaches them to the decorated function (:mod:`tilelang_core.jit.decorator`).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import numbers
import sys
from typing import Any, Callable, Optional

__all__ = ["ArgumentBinder", "KeywordPositions", "cache_value", "special_float", "symbol_stand_in", "value_types"]


def special_float(value: Any) -> Optional[tuple]:
    """``("float", "nan")`` or ``("float", "-0.0")`` for a NaN or a negative zero (Python's or
    NumPy's floats), else None: the stand-ins that let them be keys.

    ``-0.0 == 0.0`` and both hash alike, so a kernel built for one compile-time value was handed
    out for the other (``x * c`` with ``c = -0.0`` gave ``+0.0``); a NaN equals nothing, itself
    included, so each call with a new NaN object parsed and kept one more kernel.
    """
    if not isinstance(value, float) and not (type(value).__module__ == "numpy"
                                             and isinstance(value, numbers.Real)
                                             and not isinstance(value, numbers.Integral)):
        return None
    if value != value:
        return ("float", "nan")
    if value == 0 and math.copysign(1.0, float(value)) < 0:
        return ("float", "-0.0")
    return None


def symbol_stand_in(value: Any) -> Any:
    """``value``, with a scalar TVM variable (a ``T.dynamic`` symbol) in it replaced by
    ``("T.dynamic", name, dtype)``, a NaN or ``-0.0`` by :func:`special_float`'s stand-in, and the
    values that compare equal across types by content: a NamedTuple (``P(4) == P(4.0)``), a
    hashable (frozen) dataclass instance (its fields) or a frozenset, each tagged with its type,
    looked into as a tuple is.

    A symbol hashes by identity, so a function called with a fresh ``T.dynamic("n")`` each time
    (``vector_add(T.dynamic("n"))`` in a model's forward) made a new key, a new parse and a kept
    kernel per call, without bound (3,001 kernels after 3,000 calls). Two symbols of one name and
    dtype build the same kernel: its cache key is the kernel's text, which names the symbol. A
    ``-0.0`` or a ``4.0`` inside a frozen dataclass, a NamedTuple or a frozenset was handed the
    kernel built for ``0.0`` or ``4``, and a NaN in one kept a kernel per call.
    """
    kind = type(value)
    if kind is tuple:  # a call's arguments: first
        for item in value:
            of = type(item)  # most arguments stand for themselves: no TVM isinstance (microseconds) for them
            if of in PLAIN_TYPES or (of is float and special_float(item) is None):
                continue
            return tuple([symbol_stand_in(v) for v in value])
        return value
    if kind in PLAIN_TYPES:
        return value
    if kind is float:
        return special_float(value) or value
    if _is_symbol(value):
        return ("T.dynamic", str(value), str(value.dtype))
    float_key = special_float(value)
    if float_key is not None:
        return float_key
    if isinstance(value, tuple):  # a NamedTuple (a plain tuple is above)
        return ("tuple", kind, tuple([symbol_stand_in(v) for v in value]))
    if isinstance(value, frozenset):
        return ("frozenset", frozenset(symbol_stand_in(v) for v in value))
    names = _compared_fields(kind)
    if names is not None:  # a dataclass that compares and hashes by its fields (frozen)
        return ("dataclass", kind, tuple((n, symbol_stand_in(getattr(value, n))) for n in names))
    return value


@functools.lru_cache(maxsize=256)
def _compared_fields(kind: type) -> Optional[tuple[str, ...]]:
    """The names of a dataclass type's fields (``compare=False`` ones too: a kernel may be built
    from one) when its instances are equal by their fields and hashable (frozen, or
    ``unsafe_hash``); None for any other type: a plain ``@dataclass`` stays unhashable (a
    TypeError, as TileLang's), one with ``eq=False`` is itself (compared by identity). Once per
    type: the lazy call path asks at every call."""
    params = getattr(kind, "__dataclass_params__", None)
    if params is None or not params.eq or kind.__hash__ is None or not dataclasses.is_dataclass(kind):
        return None
    return tuple(f.name for f in dataclasses.fields(kind))


#: Types whose values stand for themselves in a key (:func:`symbol_stand_in` skips them; the eager
#: style's positional fast path keys them as they are).
PLAIN_TYPES = frozenset({int, str, bool, type(None)})


def _is_symbol(value: Any) -> bool:
    """Whether ``value`` is a scalar TVM variable (told without importing TVM)."""
    var = _VAR[0]
    if var is None:
        tvm = sys.modules.get("tvm")
        if tvm is None:
            return False
        var = _VAR[0] = tvm.ir.Var
    return isinstance(value, var) and type(getattr(value, "ty", None)).__name__ == "PrimType"


#: TVM's variable class, once TVM is imported (symbol_stand_in).
_VAR: list = [None]


def cache_value(value: Any, where: str = "value") -> Any:
    """A hashable stand-in for ``value`` that compares equal exactly when the values do.

    :raises TypeError: ``value`` is unhashable and not a list, tuple, dict or set of such values.
    """
    if isinstance(value, list):
        return ("list", tuple(cache_value(v, where) for v in value))
    if isinstance(value, tuple):
        items = tuple(cache_value(v, where) for v in value)
        return items if type(value) is tuple else ("tuple", type(value), items)  # a NamedTuple by its type too
    if isinstance(value, dict):
        return ("dict", tuple(sorted(((repr(k), cache_value(v, where)) for k, v in value.items()), key=lambda kv: kv[0])))
    if isinstance(value, (set, frozenset)):
        return ("set", frozenset(cache_value(v, where) for v in value))
    stand_in = symbol_stand_in(value)
    try:
        hash(stand_in)
    except TypeError:
        raise TypeError(
            f"Unsupported unhashable JIT compile-time cache key value for {where}: {type(value).__name__} {value!r}; "
            "pass an int, float, str, dtype, or a tuple/list/dict of those (or make the type hashable)"
        ) from None
    return stand_in


def value_types(key: Any) -> Any:
    """The types of the values in ``key`` (a :func:`cache_value` or a call's arguments), in its
    shape: values that compare equal (``1``, ``1.0``, ``True``) can still build different kernels.

    :raises TypeError: a value in it cannot be hashed (a list or dict in a call's arguments).
    """
    if isinstance(key, tuple):
        return tuple(value_types(v) for v in key)
    if isinstance(key, frozenset):
        return frozenset(value_types(v) for v in key)
    hash(key)
    return type(key)


def _tensor_type() -> Any:
    torch = sys.modules.get("torch")
    return torch.Tensor if torch is not None else ()


class ArgumentBinder:
    """Binds calls of one function to its signature (see the module docstring)."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func
        self.signature = inspect.signature(func)
        params = list(self.signature.parameters.values())
        self.var_keyword = next((p.name for p in params if p.kind is inspect.Parameter.VAR_KEYWORD), None)
        self.named = {p.name for p in params if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)}

    def bind(self, args: tuple, kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(bound, extra)``: every parameter's value (defaults applied) and the keyword arguments no parameter takes.

        A ``**kwargs`` parameter's contents count as extra. Binding errors are Python's ``TypeError``.
        """
        if self.var_keyword is None:
            known = {k: v for k, v in kwargs.items() if k in self.named}
            extra = {k: v for k, v in kwargs.items() if k not in self.named}
        else:
            known, extra = kwargs, {}
        bound = self.signature.bind(*args, **known)
        bound.apply_defaults()
        values = dict(bound.arguments)
        if self.var_keyword is not None:
            extra = dict(values.pop(self.var_keyword, {}))
        return values, extra

    def parse_args(self, *args: Any, **kwargs: Any) -> tuple[tuple, dict[str, Any]]:
        """``((values_key, tensors_key), tensors)`` for a call: the cache key and the tensor arguments by name."""
        values, extra = self.bind(args, kwargs)
        tensor_type = _tensor_type()
        tensors = {n: v for n, v in values.items() if tensor_type and isinstance(v, tensor_type)}
        key = [cache_value(v, f"parameter {n!r}") for n, v in values.items() if n not in tensors]
        if extra:
            key.append(tuple(sorted((k, cache_value(v, f"keyword {k!r}")) for k, v in extra.items())))
        tensors_key = (
            tuple((n, tuple(t.shape), str(t.dtype), t.device.type) for n, t in tensors.items()) if tensors else None
        )
        return (tuple(key), tensors_key), tensors

    def phase1_key(self, *args: Any, **kwargs: Any) -> tuple[tuple, dict[str, Any], dict[str, Any]]:
        """``(key, tensors, compile_kwargs)``: the non-tensor arguments (``**kwargs`` flattened) and their key."""
        values, extra = self.bind(args, kwargs)
        tensor_type = _tensor_type()
        tensors = {n: v for n, v in values.items() if tensor_type and isinstance(v, tensor_type)}
        compile_kwargs = {n: v for n, v in values.items() if n not in tensors}
        compile_kwargs.update(extra)
        key = tuple(cache_value(v, f"parameter {n!r}") for n, v in compile_kwargs.items())
        return key, tensors, compile_kwargs


#: A keyword call shape not planned yet (:class:`KeywordPositions`).
_UNPLANNED = object()


class KeywordPositions:
    """Turns a keyword call of one function into the positional call that binds alike, so that
    keyword calls can take a positional fast path: ``scale(x, factor=2.0)`` and
    ``scale(X=x, factor=2.0)`` are ``scale(x, 2.0)``; ``scale(x, block=64)`` of ``factor=1.0``
    is ``scale(x, 1.0, 64)`` (a parameter skipped is given its default).

    The plan of each call shape (the number of positional arguments and the keyword names, in
    order) is made once and kept. A shape Python would refuse (an unknown keyword, a parameter
    given twice, a missing one, a positional-only one by name) or that has no positional
    equivalent (``*args``/``**kwargs`` in the signature) has no plan: :meth:`positional` returns
    None and the caller takes its general path, which raises Python's own error.
    """

    #: plans kept at most (call shapes are few; a flood of distinct keyword names is not kept)
    LIMIT = 1024

    def __init__(self, signature: inspect.Signature) -> None:
        self._params = list(signature.parameters.values())
        self._plans: dict[tuple, Optional[tuple]] = {}

    def positional(self, args: tuple, kwargs: dict[str, Any]) -> Optional[tuple]:
        """The positional arguments that bind as ``(*args, **kwargs)`` do, or None (see the class)."""
        shape = (len(args), tuple(kwargs))
        plan = self._plans.get(shape, _UNPLANNED)
        if plan is _UNPLANNED:
            plan = self._plan(*shape)
            if len(self._plans) < self.LIMIT:
                self._plans[shape] = plan
        if plan is None:
            return None
        return args + tuple([kwargs.get(name, default) for name, default in plan])

    def _plan(self, given: int, names: tuple[str, ...]) -> Optional[tuple]:
        """``(name, default)`` for each parameter after the ``given`` positional ones up to the last
        named: a named one is read from the call, a skipped one takes its default."""
        params = self._params
        P = inspect.Parameter
        if any(p.kind in (P.VAR_POSITIONAL, P.VAR_KEYWORD) for p in params):
            return None
        if given > sum(p.kind is not P.KEYWORD_ONLY for p in params):
            return None  # too many positional arguments
        index = {p.name: i for i, p in enumerate(params)}
        at = [index.get(name) for name in names]
        if any(i is None or i < given or params[i].kind is P.POSITIONAL_ONLY for i in at):
            return None  # unknown, given twice, or positional-only
        last = max(at)
        named = set(names)
        plan = []
        for p in params[given:]:
            if p.name in named:
                plan.append((p.name, None))
            elif p.default is P.empty:
                return None  # missing a required argument
            elif index[p.name] < last:
                plan.append((p.name, p.default))
        return tuple(plan)
