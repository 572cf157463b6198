"""Checking a call's arguments, with the rules and messages every backend shares.

See ``docs/backend-conventions.md`` ("Calling a built kernel"): the count, then each argument in
order (a tensor's type, layout, dtype, rank, static and symbolic sizes, its size against
``TensorParam.index_limit``, device, contiguity or strides; a scalar's type and range), then
overlaps of written tensors with other arguments (``TensorParam.written``), then the sizes given
by expressions once every symbol is bound. The first problem raises ``TypeError``/``ValueError``
naming the kernel, the parameter and its position, what was expected and what was given.

:class:`ArgumentChecker` decides everything it can when the kernel is built; a call runs one
loop over precomputed entries.
"""

from __future__ import annotations

import operator
from typing import Any, Optional, Sequence

from tilelang_core import symbolic
from tilelang_core.artifact import KernelArtifact, ScalarParam, TensorParam
from tilelang_core.errors import BuildError, OutIdxError

_INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")

#: torch device type of each artifact device family.
_TORCH_DEVICE_TYPE = {"cpu": "cpu", "cuda": "cuda"}

_STATIC, _BIND, _EXPR = 0, 1, 2


def torch_dtype(name: str) -> Any:
    """The torch dtype of a TVM dtype string; :raises BuildError: there is none."""
    import torch

    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise BuildError(f"nvrtc: dtype {name!r} has no torch equivalent; cannot pass or allocate it")
    return dtype


def _dtype_name(dtype: Any) -> str:
    text = str(dtype)
    return text[6:] if text.startswith("torch.") else text


def scalar_value(pre: str, dtype: str, x: Any) -> Any:
    """The Python value of scalar argument ``x`` for ``dtype``, or raise the contract's error.

    Float dtypes take anything with ``__float__`` except tensors and strings; int and bool dtypes
    take ints or ``__index__`` objects (not floats, not tensors) that fit the dtype; bool takes
    0 or 1.
    """
    import torch

    if dtype not in _INT_DTYPES and dtype != "bool":
        if type(x) is float:
            return x
        if isinstance(x, (int, float)):  # an int beyond a double's range is the contract's error, not ctypes'
            try:
                return float(x)
            except OverflowError:
                raise ValueError(f"{pre}: expected a float, got {type(x).__name__} out of range") from None
        if hasattr(type(x), "__float__") and not isinstance(x, (torch.Tensor, str, bytes)):
            try:
                return float(x)
            except (TypeError, ValueError, OverflowError):
                raise ValueError(f"{pre}: expected a float, got {type(x).__name__} out of range") from None
        raise TypeError(f"{pre}: expected a float, got {type(x).__name__}")
    kind = "a bool" if dtype == "bool" else "an int"
    if isinstance(x, int):
        value = int(x)
    elif not isinstance(x, float) and hasattr(type(x), "__index__") and not isinstance(x, torch.Tensor):
        try:
            value = operator.index(x)
        except TypeError:
            raise TypeError(f"{pre}: expected {kind}, got {type(x).__name__}") from None
    else:
        raise TypeError(f"{pre}: expected {kind}, got {type(x).__name__}")
    if dtype == "bool":
        if value not in (0, 1):
            raise ValueError(f"{pre}: expected a bool (True/False, 0 or 1), got {value}")
        return bool(value)
    bits = int(dtype.lstrip("uint"))
    lo, hi = (0, (1 << bits) - 1) if dtype.startswith("u") else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if not lo <= value <= hi:
        raise ValueError(f"{pre}: value {x!r} does not fit in {dtype}")
    return value


def check_out_idx(artifact: KernelArtifact, out_idx: Sequence[int]) -> tuple[int, ...]:
    """``out_idx`` as a sorted tuple; :raises OutIdxError: out of range, repeated or a scalar."""
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
    return tuple(sorted(seen))


class ArgumentChecker:
    """Validates the caller's arguments of one kernel and binds its symbols.

    :param artifact: the kernel's artifact (after ``out_idx`` was applied by the core).
    :param out_idx: the parameters the kernel allocates; the caller passes all others in order.
    """

    def __init__(self, artifact: KernelArtifact, out_idx: Sequence[int]) -> None:
        import torch

        self._tensor_type = torch.Tensor
        self._strided = torch.strided
        self.name = artifact.name
        self.out_idx = check_out_idx(artifact, out_idx)
        self.inputs = [(i, p) for i, p in enumerate(artifact.params) if i not in self.out_idx]
        self.arg_of_param = {pi: j for j, (pi, _) in enumerate(self.inputs)}
        self._names = ", ".join(p.name for _, p in self.inputs)
        self._params = [p for _, p in self.inputs]
        scalar_symbol = {s.param_index: s.name for s in artifact.symbols if s.dim is None}
        self.symbol_names: list[str] = []
        self._entries: list[tuple] = []
        bound: set[str] = set()
        for j, (pi, p) in enumerate(self.inputs):
            pre = f"{self.name}() argument '{p.name}' (#{j})"
            if isinstance(p, ScalarParam):
                sym = scalar_symbol.get(pi)
                if sym is not None:
                    bound.add(sym)
                self._entries.append((False, pre, p.dtype, sym, None, None, None, None, p.name, None))
                continue
            dims = []
            for d, dim in enumerate(p.shape):
                if isinstance(dim, int):
                    dims.append((_STATIC, dim, d))
                elif dim.strip().isidentifier():
                    sym = dim.strip()
                    dims.append((_BIND, sym, d))
                    bound.add(sym)
                else:
                    dims.append((_EXPR, dim, d))
            device_type = _TORCH_DEVICE_TYPE.get(p.device, p.device)
            strides = None if p.strides is None else list(p.strides)
            self._entries.append((True, pre, torch_dtype(p.dtype), p.dtype, dims, device_type, p.device, strides, p.name,
                                  p.index_limit))
        # caller positions of the tensors the kernel writes, and of all tensors (overlap check)
        self._written = [j for j, (_, p) in enumerate(self.inputs) if isinstance(p, TensorParam) and p.written]
        self._tensors = [j for j, (_, p) in enumerate(self.inputs) if isinstance(p, TensorParam)]
        self.symbol_names = sorted(bound)
        for _, p in [(i, artifact.params[i]) for i in self.out_idx]:
            for d, dim in enumerate(p.shape):
                for sym in sorted(symbolic.free_symbols(dim)):
                    if sym not in bound:
                        raise OutIdxError(
                            f"out_idx names output {p.name!r} of kernel {artifact.name!r} whose shape[{d}] = "
                            f"{dim!r} uses symbol {sym!r}, which no input argument binds"
                        )

    def check(self, args: Sequence[Any]) -> tuple[list[Any], dict[str, int], Optional[Any]]:
        """Validate ``args``; returns ``(values, symbols, device)``.

        ``values`` are the arguments as passed (scalars converted to plain Python values),
        ``symbols`` the bound symbol values, ``device`` the tensors' torch device (None when the
        kernel takes no tensor). Raises ``TypeError``/``ValueError`` with the contract's message.
        """
        if len(args) != len(self.inputs):
            raise TypeError(
                f"{self.name}() takes {len(self.inputs)} tensor/scalar arguments ({self._names}), got {len(args)}"
            )
        symbols: dict[str, int] = {}
        origin: dict[str, str] = {}
        values = list(args)
        deferred: list[tuple] = []
        device = None
        tensor_type = self._tensor_type
        for j, entry in enumerate(self._entries):
            x = args[j]
            if not entry[0]:
                _, pre, dtype, sym, *_rest, pname = entry
                value = scalar_value(pre, dtype, x)
                values[j] = value
                if sym is not None:
                    value = int(value)
                    if value < 0:
                        raise ValueError(f"{pre}: gives symbol '{sym}' = {value}, but a dimension cannot be negative")
                    if sym in symbols and symbols[sym] != value:
                        raise ValueError(
                            f"{pre}: value binds symbol '{sym}' = {value}, but argument "
                            f"'{origin[sym]}' bound it to {symbols[sym]}"
                        )
                    symbols.setdefault(sym, value)
                    origin.setdefault(sym, pname)
                continue
            _, pre, tdtype, dtype_name, dims, device_type, device_name, strides, pname, index_limit = entry
            if not isinstance(x, tensor_type):
                raise TypeError(f"{pre}: expected a torch.Tensor, got {type(x).__name__}")
            if x.layout is not self._strided:
                raise ValueError(f"{pre}: expected a dense (strided) tensor, got layout {x.layout}; call .to_dense()")
            xdev = x.device
            if xdev.type == "meta":
                raise ValueError(f"{pre}: expected a tensor on {device_name}, got meta")
            if x.dtype != tdtype:
                raise ValueError(f"{pre}: expected dtype {dtype_name}, got {_dtype_name(x.dtype)}")
            shape = x.shape
            if len(shape) != len(dims):
                raise ValueError(f"{pre}: expected {len(dims)} dimensions, got {len(shape)}")
            for kind, what, d in dims:
                got = shape[d]
                if kind == _STATIC:
                    if got != what:
                        raise ValueError(f"{pre}: expected shape[{d}] == {what}, got {got}")
                elif kind == _EXPR:
                    deferred.append((j, pre, d, what, got))
                elif what in symbols:
                    if symbols[what] != got:
                        raise ValueError(
                            f"{pre}: shape[{d}] binds symbol '{what}' = {got}, but argument "
                            f"'{origin[what]}' bound it to {symbols[what]}"
                        )
                else:
                    symbols[what] = got
                    origin[what] = pname
            if index_limit is not None:  # 32-bit indices (a dynamic shape): elements, or largest offset + 1
                reach = x.numel() if strides is None else _reach(x)
                if reach > index_limit:
                    raise ValueError(
                        f"{pre}: {reach} elements ({dynamic_dims(self._params[j].shape, shape)}) exceed this kernel's "
                        f"32-bit index limit of {index_limit}; compile it with "
                        "pass_configs={'tl.config_index_bitwidth': 64}"
                    )
            if xdev.type != device_type:
                raise ValueError(f"{pre}: expected a tensor on {device_name}, got {xdev}")
            if device is None:
                device = xdev
            elif xdev != device:
                raise ValueError(f"{pre}: expected a tensor on {device}, got {xdev}")
            if strides is None:
                if not x.is_contiguous():
                    raise ValueError(
                        f"{pre}: expected a contiguous tensor, got strides {tuple(x.stride())}; call .contiguous()"
                    )
            else:
                deferred.append((j, pre, -1, strides, tuple(x.stride())))
        if self._written:
            self._check_overlap(args)
        for j, pre, d, expr, got in deferred:
            needed = set().union(*(symbolic.free_symbols(e) for e in expr)) if d == -1 else symbolic.free_symbols(expr)
            if not needed <= symbols.keys():
                continue  # uses a symbol no input binds: nothing to compare with
            if d == -1:  # explicit strides; size-1 dimensions may have any stride
                want = tuple(symbolic.evaluate(s, symbols) for s in expr)
                sizes = tuple(args[j].shape)
                if any(w != g and sizes[k] != 1 for k, (w, g) in enumerate(zip(want, got))):
                    raise ValueError(f"{pre}: expected strides {want}, got strides {got}")
                continue
            want = symbolic.evaluate(expr, symbols)
            if want != got:
                raise ValueError(f"{pre}: expected shape[{d}] == {expr} = {want}, got {got}")
        return values, symbols, device

    def _check_overlap(self, args: Sequence[Any]) -> None:
        """Refuse a call in which a tensor the kernel writes shares memory with another tensor
        argument: the contract's error for the first such pair in argument order."""
        ranges = {j: _byte_range(args[j]) for j in self._tensors}
        for i in self._tensors:
            for j in self._tensors:
                if j <= i or not (self._params[i].written or self._params[j].written):
                    continue
                (lo_i, n_i), (lo_j, n_j) = ranges[i], ranges[j]
                if n_i and n_j and lo_i < lo_j + n_j and lo_j < lo_i + n_i:
                    a, b = self._params[i], self._params[j]
                    raise ValueError(
                        f"{self.name}() arguments '{a.name}' (#{i}) and '{b.name}' (#{j}) overlap in memory, and the "
                        f"kernel writes '{a.name if a.written else b.name}'; pass tensors that do not share memory "
                        "(for example a .clone())"
                    )

    def check_output_size(self, p: TensorParam, shape: Sequence[int]) -> None:
        """Refuse an ``out_idx`` output too large for the kernel's 32-bit indices (call it before
        allocating the output)."""
        if p.index_limit is None:
            return
        total = 1
        for n in shape:
            total *= n
        if total > p.index_limit:
            raise ValueError(
                f"{self.name}(): output '{p.name}' would have {total} elements ({dynamic_dims(p.shape, shape)}), "
                f"over this kernel's 32-bit index limit of {p.index_limit}; compile it with "
                "pass_configs={'tl.config_index_bitwidth': 64}"
            )


def dynamic_dims(dims: Sequence[Any], shape: Sequence[int]) -> str:
    """``'m' = 32769, 'n + 1' = 8``: the sizes of a tensor's dynamic dimensions, for messages."""
    return ", ".join(f"'{dim.strip()}' = {got}" for dim, got in zip(dims, shape) if not isinstance(dim, int))


def _reach(x: Any) -> int:
    """Elements from a tensor's first to its last element, + 1 (its numel when contiguous)."""
    if x.numel() == 0:
        return 0
    return 1 + sum((n - 1) * abs(st) for n, st in zip(x.shape, x.stride()))


def _byte_range(x: Any) -> tuple[int, int]:
    """(first byte, bytes up to the end of the last element) of a tensor's data."""
    if x.numel() == 0:
        return x.data_ptr(), 0
    return x.data_ptr(), _reach(x) * x.element_size()
