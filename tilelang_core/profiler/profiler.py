"""``Profiler``: benchmark and check one compiled kernel (``kernel.get_profiler()``).

A profiler knows the kernel's parameters (from its artifact), which of them it returns
(``out_idx``) and where dynamic sizes come from (the artifact's symbol bindings), so it can make
inputs itself: tensors of the declared shapes and dtypes, filled as the
:class:`~tilelang_core.profiler.supply.TensorSupplyType` says, on the kernel's device family.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from ..artifact import ScalarParam, TensorParam
from ..errors import TileLangError
from ..symbolic import evaluate, free_symbols
from .bench import BenchmarkError, do_bench, resolve_timer
from .compare import as_output_list, assert_tensors_close
from .poison import describe_unwritten, poisoned_allocations, unwritten_positions
from .supply import TensorSupplyError, TensorSupplyType, as_supply_type, make_tensor


def _one_sizes(dynamic_sizes: Optional[Mapping[str, int]], constraints: Optional[Mapping[str, int]]) -> Any:
    """``dynamic_sizes`` or upstream's ``dynamic_symbolic_constraints``: both given and disagreeing is a
    :class:`BenchmarkError` (the second was ignored without a word), as ``timer=``/``backend=`` are."""
    if dynamic_sizes is not None and constraints is not None and dict(dynamic_sizes) != dict(constraints):
        raise BenchmarkError(f"dynamic_sizes={dict(dynamic_sizes)!r} and dynamic_symbolic_constraints="
                             f"{dict(constraints)!r} disagree; dynamic_symbolic_constraints is another name for "
                             "dynamic_sizes: give one")
    return dynamic_sizes if dynamic_sizes is not None else constraints


class ProfilerError(TileLangError, ValueError):
    """The profiler was used in a way that cannot work (no kernel, nothing to compare, ...)."""


def backend_capability(kernel: Any) -> Any:
    """The :class:`~tilelang_core.capabilities.TargetCapability` the kernel's backend declares
    for its target, or None when the backend is no longer installed."""
    from ..backends import get_registry
    from ..backends.selection import declared_kind

    backend = getattr(kernel, "backend", None)
    artifact = getattr(kernel, "artifact", None)
    if backend is None or artifact is None:
        return None
    record = get_registry().get(backend.name)
    if record is None or record.spec is None:
        return None
    kind = declared_kind(record, artifact.target_kind)
    return record.spec.targets.get(kind) if kind is not None else None


def _family_of(params: Sequence[Any], kernel: Any) -> str:
    for p in params:
        if isinstance(p, TensorParam):
            return p.device
    artifact = getattr(kernel, "artifact", None)
    if artifact is not None:
        from ..lowering.target import device_of

        return device_of(artifact.target_kind)
    return "cpu"


class Profiler:
    """Benchmarks and validates a kernel; see :meth:`do_bench` and :meth:`assert_allclose`.

    Usually made by ``kernel.get_profiler(tensor_supply_type, dynamic_sizes)``. Attributes:
    ``params`` (the artifact's parameters), ``result_idx`` (the output indices), ``supply_type``,
    ``adapter`` (the kernel called; upstream's name), ``family`` (device family of the inputs),
    ``dynamic_sizes`` (sizes of dynamic dimensions used when making inputs).
    """

    def __init__(
        self,
        params: Sequence[Any],
        result_idx: Union[None, int, Sequence[int]],
        supply_type: Any = TensorSupplyType.Auto,
        adapter: Optional[Callable[..., Any]] = None,
        *,
        symbols: Sequence[Any] = (),
        dynamic_sizes: Optional[Mapping[str, int]] = None,
        family: Optional[str] = None,
        capability: Any = None,
    ) -> None:
        self.params = list(params)
        self.result_idx = self._legalize_result_idx(result_idx)
        self.supply_type = as_supply_type(supply_type)
        self.adapter = adapter
        self.symbols = list(symbols)
        self.dynamic_sizes = _check_sizes(dynamic_sizes, "dynamic_sizes")
        self.family = family or _family_of(self.params, adapter)
        self.capability = capability

    @classmethod
    def from_kernel(
        cls, kernel: Any, tensor_supply_type: Any = TensorSupplyType.Auto, dynamic_sizes: Optional[Mapping[str, int]] = None
    ) -> "Profiler":
        """The profiler of a :class:`~tilelang_core.jit.kernel.JITKernel`."""
        artifact = kernel.artifact
        return cls(
            artifact.params,
            kernel.out_idx,
            tensor_supply_type,
            kernel,
            symbols=artifact.symbols,
            dynamic_sizes=dynamic_sizes,
            family=_family_of(artifact.params, kernel),
            capability=backend_capability(kernel),
        )

    # -- upstream-compatible plumbing ------------------------------------------------------------

    def _legalize_result_idx(self, result_idx: Union[None, int, Sequence[int]]) -> list[int]:
        n = len(self.params)
        if result_idx is None:
            return []
        raw = [result_idx] if isinstance(result_idx, int) and not isinstance(result_idx, bool) else result_idx
        if not isinstance(raw, (list, tuple)) or not all(isinstance(i, int) and not isinstance(i, bool) for i in raw):
            raise ProfilerError(f"result_idx must be an int or a list of ints, got {result_idx!r}")
        out = []
        for i in raw:
            if not -n <= i < n:
                raise ProfilerError(f"result_idx {i} is out of range for {n} parameters; use an index in [{-n}, {n - 1}]")
            out.append(i % n)
        return out

    def with_default_adapter(self, adapter: Callable[..., Any]) -> "Profiler":
        """Set the callable profiled when ``func`` is not given; returns self."""
        self.adapter = adapter
        return self

    @property
    def func(self) -> Callable[..., Any]:
        """The kernel this profiler calls."""
        if self.adapter is None:
            raise ProfilerError("this profiler has no kernel; make it with kernel.get_profiler() or pass func=")
        return self.adapter

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    # -- inputs ------------------------------------------------------------------------------

    def _get_params(self, with_output: bool = False) -> list[Any]:
        """The parameters the caller passes (and the outputs too with ``with_output``)."""
        return [p for i, p in enumerate(self.params) if with_output or i not in self.result_idx]

    def _sizes(self, given: Optional[Mapping[str, int]]) -> dict[str, int]:
        sizes = dict(self.dynamic_sizes)
        sizes.update(_check_sizes(given, "dynamic_sizes"))
        return sizes

    def _get_inputs(
        self,
        with_output: bool = False,
        dynamic_symbolic_constraints: Optional[Mapping[str, int]] = None,
        *,
        dynamic_sizes: Optional[Mapping[str, int]] = None,
    ) -> list[Any]:
        """New inputs for one call: a tensor per tensor parameter, a value per scalar one.

        :raises TensorSupplyError: a dynamic dimension or scalar has no value, naming the
            missing ones and how to give them.
        """
        from ..devices import torch_device

        sizes = self._sizes(_one_sizes(dynamic_sizes, dynamic_symbolic_constraints))
        self._require_sizes(sizes, with_output)
        device = torch_device(self.family)
        bound_by_scalar = {b.param_index: b.name for b in self.symbols if b.dim is None}
        inputs: list[Any] = []
        for index, param in enumerate(self.params):
            if index in self.result_idx and not with_output:
                continue
            if isinstance(param, ScalarParam):
                name = bound_by_scalar.get(index, param.name)
                inputs.append(sizes[name] if name in sizes else sizes[param.name])
                continue
            for dim in param.shape:
                for sym in sorted(free_symbols(dim)):
                    size = sizes.get(sym)
                    if size is not None and (not float(size).is_integer() or size < 0):  # numbers (checked above)
                        raise TensorSupplyError(
                            f"tensor parameter {param.name!r}: dimension {dim} has {sym} = {size!r} from the sizes "
                            f"given; sizes of tensor dimensions must be ints >= 0"
                        )
            shape = [evaluate(d, sizes) for d in param.shape]
            if any(size < 0 for size in shape):
                raise TensorSupplyError(f"tensor parameter {param.name!r}: shape {shape} from the sizes given has a "
                                        f"negative dimension ({', '.join(f'{k}={v!r}' for k, v in sorted(sizes.items()))})")
            tensor = make_tensor(shape, param.dtype, self.supply_type, device)
            if param.strides is not None:
                tensor = _with_strides(tensor, [evaluate(s, sizes) for s in param.strides])
            inputs.append(tensor)
        return inputs

    def _require_sizes(self, sizes: Mapping[str, int], with_output: bool) -> None:
        name = getattr(getattr(self.adapter, "artifact", None), "name", "kernel")
        missing_dims: list[str] = []
        missing_scalars: list[str] = []
        bound_by_scalar = {b.param_index: b.name for b in self.symbols if b.dim is None}
        for index, param in enumerate(self.params):
            if index in self.result_idx and not with_output:
                continue
            if isinstance(param, ScalarParam):
                symbol = bound_by_scalar.get(index, param.name)
                if symbol not in sizes and param.name not in sizes:
                    missing_scalars.append(param.name)
                continue
            for expr in list(param.shape) + list(param.strides or []):
                for sym in sorted(free_symbols(expr)):
                    if sym not in sizes and sym not in missing_dims:
                        missing_dims.append(sym)
        problems = []
        if missing_dims:
            problems.append(
                f"kernel {name!r} has dynamic dimension(s) {', '.join(missing_dims)} with no size: pass "
                f"dynamic_sizes={{{', '.join(repr(s) + ': ...' for s in missing_dims)}}} to get_profiler() or do_bench()"
            )
        if missing_scalars:
            problems.append(
                f"scalar parameter(s) {', '.join(missing_scalars)} of kernel {name!r} need a value: pass it in "
                f"dynamic_sizes={{{', '.join(repr(s) + ': ...' for s in missing_scalars)}}} or give input_tensors="
            )
        if problems:
            raise TensorSupplyError("; ".join(problems))

    def _inputs_or(self, input_tensors: Optional[Sequence[Any]], sizes: Optional[Mapping[str, int]] = None) -> list[Any]:
        if input_tensors is not None:
            if not isinstance(input_tensors, (list, tuple)):
                raise ProfilerError(f"input_tensors must be a list of the kernel's inputs, got {type(input_tensors).__name__}")
            return list(input_tensors)
        return self._get_inputs(dynamic_sizes=sizes)

    # -- checks ------------------------------------------------------------------------------

    def _written_inputs(self) -> list[int]:
        """Indices (into the kernel's arguments) of the tensors it writes in place: the tensor
        parameters the artifact marks ``written`` (True when unknown). Only for a kernel without
        ``out_idx``, whose arguments are all its parameters."""
        return [i for i, p in enumerate(self.params) if isinstance(p, TensorParam) and getattr(p, "written", True)]

    def _outputs(
        self, reference_program: Callable[..., Any], ins: Sequence[Any]
    ) -> tuple[list[Any], list[Any], list[str]]:
        """The kernel's and the reference's outputs on ``ins``, and their names.

        Before, a kernel without ``out_idx`` (it returns nothing) checked against a reference
        that returns nothing compared 0 outputs with 0 and passed whatever it computed. Now such
        a kernel is checked on what it writes in place: the reference gets its own copy of the
        inputs, and each tensor the kernel writes (``TensorParam.written``) is compared with the
        reference's copy of it afterwards.

        :raises ProfilerError: neither side returns anything and the kernel writes no tensor:
            nothing to compare.
        :raises AssertionError: the two sides return different numbers of outputs.
        """
        from ..devices import synchronize

        in_place = not self.result_idx
        ref_ins = [_copy_tensor(x) for x in ins] if in_place else list(ins)
        ref_outs = as_output_list(reference_program(*ref_ins))
        synchronize(self.family)
        if in_place and not ref_outs:
            self._require_reference_writes(ins, ref_ins)
        with poisoned_allocations():  # outputs start as NaN, never as a freed right answer (poison.py)
            lib_outs = as_output_list(self.func(*ins))
            synchronize(self.family)
        if in_place and not lib_outs and not ref_outs:
            return self._written_pairs(ins, ref_ins)
        if len(lib_outs) != len(ref_outs):
            hint = (
                " (the kernel has no out_idx, so it returns nothing: compile it with out_idx, or return nothing "
                "from the reference and write its results into its arguments, which are then compared with "
                "the tensors the kernel writes)"
                if in_place
                else ""
            )
            raise AssertionError(
                f"the kernel returned {len(lib_outs)} output(s) but the reference returned {len(ref_outs)}{hint}"
            )
        if not lib_outs:
            raise ProfilerError(
                "nothing to compare: neither the kernel nor the reference returned an output; compile the kernel "
                "with out_idx, or return the expected tensors from the reference"
            )
        names = [self.params[i].name for i in self.result_idx] or [f"output {i}" for i in range(len(lib_outs))]
        return lib_outs, ref_outs, names

    def _require_reference_writes(self, ins: Sequence[Any], ref_ins: Sequence[Any]) -> None:
        """Raise :class:`ProfilerError` when a reference that returned nothing also left its
        copies of the tensors the kernel writes as they were: it says nothing about what the
        kernel should compute, so comparing with it would fail a right kernel."""
        import torch

        written = [i for i in self._written_inputs() if i < len(ins) and isinstance(ins[i], torch.Tensor)]
        if written and all(torch.equal(ref_ins[i], ins[i]) for i in written):
            names = ", ".join(self.params[i].name for i in written)
            raise ProfilerError(
                f"nothing to compare: the kernel has no out_idx and writes {names} in place, but the reference "
                f"returned nothing and left its copies of {names} unchanged; write the expected values into those "
                f"arguments in the reference, return them, or compile the kernel with out_idx"
            )

    def _written_pairs(self, ins: Sequence[Any], ref_ins: Sequence[Any]) -> tuple[list[Any], list[Any], list[str]]:
        """The tensors the kernel wrote in place and the reference's copies of them, with names."""
        import torch

        written = [i for i in self._written_inputs() if i < len(ins) and isinstance(ins[i], torch.Tensor)]
        if not written:
            raise ProfilerError(
                "nothing to compare: the kernel has no out_idx and writes no tensor argument, and the reference "
                "returned nothing; compile the kernel with out_idx, or return the expected tensors from the reference"
            )
        names = [f"{self.params[i].name} (written in place)" for i in written]
        return [ins[i] for i in written], [ref_ins[i] for i in written], names

    def assert_allclose(
        self,
        reference_program: Callable[..., Any],
        input_tensors: Optional[Sequence[Any]] = None,
        atol: float = 1e-2,
        rtol: float = 1e-2,
        max_mismatched_ratio: float = 0.01,
    ) -> None:
        """Check the kernel against ``reference_program`` called with the same inputs.

        The reference runs first, then the kernel; each returned output must match within
        ``atol + rtol * |ref|`` on all but ``max_mismatched_ratio`` of its elements (outputs
        that either side returns as None are skipped, but not all of them: a check that compares
        nothing is a :class:`ProfilerError`). The outputs the kernel allocates start
        as NaN (integers: their largest value), so elements it does not write never pass on
        values left in reused memory (:mod:`tilelang_core.profiler.poison`); an element that
        still holds that value where the reference's does not fails the check whatever
        ``max_mismatched_ratio`` allows, and the error names how many and where.

        :raises AssertionError: with the share of mismatches and the largest difference.
        """
        ins = self._inputs_or(input_tensors)
        lib_outs, ref_outs, names = self._outputs(reference_program, ins)
        pairs = [(i, lhs, rhs) for i, (lhs, rhs) in enumerate(zip(lib_outs, ref_outs)) if lhs is not None and rhs is not None]
        if not pairs:  # every output skipped: a check that compared nothing must not pass
            raise ProfilerError(
                f"assert_allclose: nothing to compare: reference_program returned None for every output of the kernel "
                f"({len(lib_outs)} output(s)); return the expected tensors (None only for an output "
                f"that is not to be checked)"
            )
        for i, lhs, rhs in pairs:
            name = names[i] if i < len(names) else f"output {i}"
            unwritten, where = unwritten_positions(lhs, rhs)
            try:
                assert_tensors_close(
                    lhs,
                    rhs,
                    rtol=rtol,
                    atol=atol,
                    max_mismatched_ratio=max_mismatched_ratio,
                    name=name,
                )
            except AssertionError as exc:
                if not unwritten:
                    raise
                raise AssertionError(f"{exc}; {describe_unwritten(unwritten, where, lhs.numel())}") from None
            if unwritten:  # never within max_mismatched_ratio: such a kernel is wrong on other inputs too
                raise AssertionError(
                    f"{name}: {describe_unwritten(unwritten, where, lhs.numel())} (max_mismatched_ratio does not "
                    f"excuse unwritten elements)"
                )

    def manual_assert_close(
        self,
        reference_program: Callable[..., Any],
        input_tensors: Optional[Sequence[Any]] = None,
        manual_check_prog: Optional[Callable[[list, list], Any]] = None,
    ) -> None:
        """Call ``manual_check_prog(kernel_outputs, reference_outputs)`` (two lists) to judge.

        It fails the check by raising, or by returning False (any false value but None, e.g.
        ``torch.allclose(...)`` giving False); returning None or a true value passes.

        :raises AssertionError: ``manual_check_prog`` returned a false value (or raised one).
        :raises ProfilerError: it returned something that is not a truth value (a tensor of
            several elements).
        """
        if manual_check_prog is None:
            raise ProfilerError("manual_assert_close needs manual_check_prog(kernel_outputs, reference_outputs)")
        ins = self._inputs_or(input_tensors)
        lib_outs, ref_outs, _ = self._outputs(reference_program, ins)
        verdict = manual_check_prog(lib_outs, ref_outs)
        if verdict is None:
            return
        try:
            passed = bool(verdict)
        except (RuntimeError, TypeError, ValueError) as exc:
            raise ProfilerError(
                f"manual_check_prog returned a {type(verdict).__name__}, which is not a truth value ({exc}); return "
                f"True/False (or None and raise AssertionError to fail)"
            ) from None
        if not passed:
            name = getattr(manual_check_prog, "__qualname__", None) or type(manual_check_prog).__name__
            raise AssertionError(f"manual_check_prog {name} returned {verdict!r}: the kernel's outputs failed its check")

    def assert_consistent(self, repeat: int = 10) -> None:
        """Run the kernel ``repeat`` more times on the same inputs; every run must give the
        first run's outputs (catches races between blocks).

        :raises ProfilerError: ``repeat`` is not an int >= 1 (0 or -1 compared nothing and passed).
        """
        import torch

        if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
            raise ProfilerError(f"assert_consistent: repeat must be an int >= 1 (runs compared with the first), got "
                                f"{repeat!r}")

        ins = self._get_inputs()
        first = [o.clone() if isinstance(o, torch.Tensor) else o for o in as_output_list(self.func(*ins))]
        if not first:
            raise ProfilerError(
                "assert_consistent compares the kernel's returned outputs, and this kernel returns none "
                "(compile it with out_idx)"
            )
        for run in range(repeat):
            outs = as_output_list(self.func(*ins))
            for i, (lhs, rhs) in enumerate(zip(outs, first)):
                if isinstance(lhs, torch.Tensor) and not torch.allclose(lhs, rhs, equal_nan=True):
                    raise AssertionError(f"result is not consistent: output {i} of run {run + 2} differs from run 1")

    def run_once(self, func: Optional[Callable[..., Any]] = None) -> Any:
        """Call ``func`` (default: the kernel) once on new inputs and return its result."""
        return (func or self.func)(*self._get_inputs())

    # -- timing ------------------------------------------------------------------------------

    def do_bench(
        self,
        func: Optional[Callable[..., Any]] = None,
        warmup: float = 25,
        rep: float = 100,
        n_warmup: int = 0,
        n_repeat: int = 0,
        input_tensors: Optional[Sequence[Any]] = None,
        timer: str = "auto",
        quantiles: Optional[Sequence[float]] = None,
        return_mode: str = "mean",
        dynamic_symbolic_constraints: Optional[Mapping[str, int]] = None,
        device: Any = None,
        early_stop_baseline: Optional[float] = None,
        *,
        backend: Optional[str] = None,
        dynamic_sizes: Optional[Mapping[str, int]] = None,
        deadline: Optional[float] = None,
    ) -> Union[float, list[float]]:
        """Milliseconds per call of ``func`` (default: the kernel) on the profiler's inputs.

        :param func: what to time, called with the inputs (e.g. a reference program).
        :param warmup: milliseconds of warm-up (``n_warmup``: a number of calls instead).
        :param rep: milliseconds of measurement (``n_repeat``: a number of calls instead).
        :param input_tensors: the inputs to use instead of new ones.
        :param timer: ``auto`` (wall clock for cpu kernels, device events for GPU ones),
            ``wall``, ``event``, ``cudagraph``, ``cupti``; ``backend`` is upstream's name for it.
        :param quantiles: return these quantiles of the per-call times instead.
        :param return_mode: ``mean``, ``median``, ``min`` or ``max``.
        :param dynamic_sizes: sizes of dynamic dimensions for new inputs
            (``dynamic_symbolic_constraints`` is upstream's name).
        :param device: a CUDA device index or ``torch.device`` to time on (GPU kernels).
        :param early_stop_baseline: see :func:`tilelang_core.profiler.bench.do_bench`.
        :param deadline: a ``time.monotonic()`` value past which :class:`BenchmarkTimeout` is raised.
        """
        if backend is not None:
            if timer != "auto" and timer != backend:
                raise BenchmarkError(f"timer={timer!r} and backend={backend!r} disagree; backend is another name for timer")
            timer = backend
        kind = resolve_timer(timer, self.family)
        target = func if func is not None else self.func
        if kind == "cudagraph" and func is None and self.capability is not None and not self.capability.cuda_streams:
            raise BenchmarkError(
                f"timer 'cudagraph' captures launches on a chosen stream, and execution backend "
                f"{self.adapter.backend.name!r} does not declare cuda_streams; use timer='event'"
            )
        sizes = _one_sizes(dynamic_sizes, dynamic_symbolic_constraints)
        ins = self._inputs_or(input_tensors, sizes)
        bench_device = self.family if device is None else device
        return do_bench(
            functools.partial(target, *ins),
            warmup=warmup,
            rep=rep,
            n_warmup=n_warmup,
            n_repeat=n_repeat,
            quantiles=quantiles,
            return_mode=return_mode,  # type: ignore[arg-type]
            timer=kind,
            device=bench_device,
            early_stop_baseline=early_stop_baseline,
            deadline=deadline,
        )


def _check_sizes(sizes: Optional[Mapping[str, int]], what: str) -> dict[str, int]:
    if sizes is None:
        return {}
    if not isinstance(sizes, Mapping):
        raise TensorSupplyError(f"{what} must be a dict of symbol name -> int, got {type(sizes).__name__}")
    out = {}
    for key, value in sizes.items():
        if not isinstance(key, str):
            key = str(getattr(key, "name", key))
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TensorSupplyError(f"{what}[{key!r}] must be a number, got {value!r}")
        out[key] = value
    return out


def _copy_tensor(value: Any) -> Any:
    """A copy of a tensor argument with its strides (anything else as it is), so a reference
    that writes into its arguments leaves the kernel's inputs alone."""
    import torch

    if not isinstance(value, torch.Tensor):
        return value
    copy = torch.empty_strided(tuple(value.shape), tuple(value.stride()), dtype=value.dtype, device=value.device)
    copy.copy_(value)
    return copy


def _with_strides(tensor: Any, strides: Sequence[int]) -> Any:
    """A view with ``strides`` over new storage, holding ``tensor``'s values."""
    import torch

    shape = tuple(tensor.shape)
    extent = 1 + sum((d - 1) * s for d, s in zip(shape, strides) if d > 0)
    storage = torch.empty(max(extent, 1), dtype=tensor.dtype, device=tensor.device)
    view = storage.as_strided(shape, tuple(strides))
    view.copy_(tensor)
    return view


__all__ = ["Profiler", "ProfilerError", "backend_capability"]
