"""GPU fragment layout and tile-operator finishing, run first in the GPU pass list.

Input: a GPU function after :mod:`tilelang_core.lowering.frontend` (``threadIdx``/``blockIdx``
attributes; each ``T.Parallel`` nest turned into ``flat = it * threads + tid`` loops with
``Bind`` statements). Output: no ``local.fragment`` buffers and no atomic marker calls.

**Fragment layout.** A fragment of shape ``S`` (``numel`` elements) in a block of ``threads``
threads puts the element with row-major index ``f`` in thread ``f % threads``, slot
``f // threads``; every thread allocates ``ceil(numel / threads)`` registers. This is exactly
how the frontend spreads a ``T.Parallel`` nest over the threads, so ``T.Parallel`` over the
fragment's shape (and the tile operators, which expand into such nests) touches only the
calling thread's elements. For every access the pass proves ``f % threads == tid`` with TVM's
arithmetic analyzer; a fragment with an access it cannot prove (another thread's element: a
row maximum read by a whole row, a gemm operand read along K, serial code outside
``T.Parallel``) is placed in shared memory instead, where every thread sees every element and
``ThreadSync`` later inserts the barriers. docs/tile-operators.md describes it for kernel authors.

**Views.** ``T.reshape``/``T.view`` of a fragment declare another buffer on its storage. The
layout only depends on an element's offset in that storage, so a view with the fragment's dtype
keeps every element in its thread and slot: its accesses are checked (and rewritten to the
register slot) with the offset the view computes (row-major in its shape, or its explicit
strides). A view with another dtype reinterprets bits across elements, which only the row-major
storage of shared memory keeps: the fragment goes there. Views of a fragment placed in shared
(or per-thread) memory are declared again on the new storage.

**Atomics.** The atomic operators leave marker calls (``tl.atomic``); once the fragments have
their final scope, :func:`tilelang_core.lowering.atomics.lower_gpu_atomics` turns them into CUDA
atomics (plain updates for per-thread ``local`` destinations). Other GPU kinds reject them.
"""

from __future__ import annotations

from typing import Any, Optional

import tvm
import tvm_ffi
from tvm import tirx

from ..errors import LoweringError
from ..language.tileops._common import scope_of
from .access_ptr import is_access_ptr
from .atomics import contains_atomics, lower_gpu_atomics
from .tma_atomics import arch_number
from .intrinsics import contains_intrinsics, lower_gpu_intrinsics
from .signature import inline_binds
from .views import owner_of

FRAGMENT_SCOPE = "local.fragment"


def _int(expr: Any) -> Optional[int]:
    if isinstance(expr, int):
        return expr
    if type(expr).__name__ == "IntImm":
        return int(expr.value)
    return None


class _Kernel:
    """Thread context of one fragment allocation."""

    def __init__(self, thread_ivs: list):
        self.threads = 1
        self.tid: Any = None
        stride = 1
        for tag in ("threadIdx.x", "threadIdx.y", "threadIdx.z"):
            for iv, extent in thread_ivs:
                if str(iv.thread_tag) == tag:
                    term = iv.var if stride == 1 else iv.var * stride
                    self.tid = term if self.tid is None else self.tid + term
                    stride *= extent
                    self.threads *= extent


def _walk_allocs(stmt: Any, stack: list, out: dict, views: dict) -> None:
    """Map each fragment AllocBuffer's buffer to the thread attributes enclosing it, and each
    view of one (a DeclBuffer on its storage, ``T.reshape``/``T.view``) to that fragment."""
    if stmt is None:
        return
    if isinstance(stmt, tirx.SeqStmt):
        for s in stmt.seq:
            _walk_allocs(s, stack, out, views)
    elif isinstance(stmt, tirx.AttrStmt):
        pushed = False
        if stmt.attr_key == "thread_extent" and str(getattr(stmt.node, "thread_tag", "")).startswith("threadIdx."):
            extent = _int(stmt.value)
            if extent is not None:
                stack.append((stmt.node, extent))
                pushed = True
        _walk_allocs(stmt.body, stack, out, views)
        if pushed:
            stack.pop()
    elif isinstance(stmt, (tirx.For, tirx.While)):
        _walk_allocs(stmt.body, stack, out, views)
    elif isinstance(stmt, tirx.IfThenElse):
        _walk_allocs(stmt.then_case, stack, out, views)
        _walk_allocs(stmt.else_case, stack, out, views)
    elif isinstance(stmt, tirx.AllocBuffer):
        if scope_of(stmt.buffer) == FRAGMENT_SCOPE:
            out[stmt.buffer] = list(stack)
    elif isinstance(stmt, tirx.DeclBuffer):
        owner = owner_of(stmt.data)
        if owner is not None:
            root = views.get(owner, owner)
            if root in out:
                views[stmt.buffer] = root


class FragmentLowering:
    """Rewrites one GPU PrimFunc (see the module docstring)."""

    def __init__(self, func: tirx.PrimFunc, location: str = "<unknown>"):
        """``location`` (``file:line`` of the kernel) prefixes error messages."""
        self.func = func
        self.location = location
        self.binds: dict = {}
        self.ranges: dict = {}
        self.analyzer = tvm.sym.Analyzer()

    def _collect(self, body: Any) -> dict:
        accesses: dict = {}

        def on_bind(stmt):
            self.binds[stmt.var] = stmt.value
            return stmt

        def on_for(stmt):
            self.ranges[stmt.loop_var] = (stmt.min, stmt.extent)
            return stmt

        def on_load(expr):
            if scope_of(expr.source) == FRAGMENT_SCOPE:
                accesses.setdefault(expr.source, []).append(list(expr.indices))
            return expr

        def on_store(stmt):
            if scope_of(stmt.buffer) == FRAGMENT_SCOPE:
                accesses.setdefault(stmt.buffer, []).append(list(stmt.indices))
            return stmt

        def on_call(call):
            # T.access_ptr to more than one element: the callee walks the fragment's row-major
            # elements, which only shared memory keeps contiguous (lowering/access_ptr.py)
            if is_access_ptr(call) and scope_of(call.args[0].source) == FRAGMENT_SCOPE and _int(call.args[1]) != 1:
                accesses.setdefault(call.args[0].source, []).append(None)
            return call

        tvm_ffi.structural_map(
            body,
            [(tirx.Bind, on_bind), (tirx.For, on_for), (tvm.ir.TensorLoad, on_load), (tirx.BufferStore, on_store),
             (tvm.ir.Call, on_call)],
        )
        return accesses

    def _flat(self, buf: Any, indices: list) -> Any:
        """The storage offset of ``buf[indices]``: row-major in its shape, or through its strides (a view)."""
        strides = list(buf.ty.strides)
        flat: Any = None
        if strides:
            for idx, stride in zip(indices, strides):
                term = idx * stride
                flat = term if flat is None else flat + term
        else:
            for idx, dim in zip(indices, buf.ty.shape):
                flat = idx if flat is None else flat * dim + idx
        return flat if flat is not None else tirx.IntImm("int32", 0)

    def _owned(self, kernel: _Kernel, buf: Any, indices: list) -> Optional[Any]:
        """The slot of an access when it provably touches the calling thread's element, else None."""
        if indices is None:  # a pointer to several elements (see _collect)
            return None
        if any(type(i).__name__ == "Ramp" for i in indices):
            return None
        flat = inline_binds(self._flat(buf, indices), self.binds)
        threads = tirx.IntImm("int32", kernel.threads)
        try:
            if not self.analyzer.can_prove(tirx.floormod(flat, threads) == kernel.tid):
                return None
            return self.analyzer.simplify(tirx.floordiv(flat, threads))
        except Exception:  # noqa: BLE001 - unprovable means "not owned"
            return None

    def run(self) -> tirx.PrimFunc:
        """The rewritten function (the same object when it has no fragments and no atomics)."""
        body = self.func.body
        kernels: dict = {}
        views: dict = {}  # view -> the fragment whose storage it is on
        _walk_allocs(body, [], kernels, views)
        has_atomic = contains_atomics(body) or contains_intrinsics(body)
        if not kernels and not has_atomic:
            return self.func
        accesses = self._collect(body)
        for var, (lo, ext) in self.ranges.items():
            self.analyzer.bind(var, tvm.ir.Range.from_min_extent(lo, ext))
        replace: dict = {}  # old buffer -> (new buffer, slot function or None)
        for buf, stack in kernels.items():
            kernel = _Kernel(stack)
            shape = [_int(d) for d in buf.ty.shape]
            if any(d is None for d in shape):
                from .tile_sizes import tile_size_error

                raise LoweringError(tile_size_error(None, buf, gpu=True) or f"{self.location}: fragment '{buf}' "
                                    f"has the shape {list(buf.ty.shape)}, known only at run time")
            numel = 1
            for d in shape:
                numel *= d
            own_views = [v for v, root in views.items() if root.same_as(buf)]
            if kernel.tid is None:
                self._whole(buf, own_views, shape, "local", replace)
                continue
            for iv, extent in stack:
                self.analyzer.bind(iv.var, tvm.ir.Range.from_min_extent(0, extent))
            if self._all_owned(kernel, buf, own_views, accesses):
                per_thread = -(-numel // kernel.threads)
                new = tirx.decl_buffer([per_thread], buf.ty.dtype, name=str(buf), scope="local")
                for b in [buf, *own_views]:  # a view's accesses go to the same register slots
                    replace[b] = (new, kernel)
            else:
                self._whole(buf, own_views, shape, "shared", replace)
        body = self._rewrite(body, replace)
        if has_atomic:
            body = self._atomics(body)
        return self.func.with_body(body)

    def _all_owned(self, kernel: _Kernel, buf: Any, own_views: list, accesses: dict) -> bool:
        """Whether every access to ``buf`` and its views provably touches the calling thread's element."""
        for b in [buf, *own_views]:
            if str(b.ty.dtype) != str(buf.ty.dtype):  # bits reinterpreted across elements
                return False
            if any(self._owned(kernel, b, indices) is None for indices in accesses.get(b, [])):
                return False
        return True

    @staticmethod
    def _whole(buf: Any, own_views: list, shape: list, scope: str, replace: dict) -> None:
        """Place ``buf`` whole (row-major) in ``scope``, its views declared again on that storage."""
        new = tirx.decl_buffer(shape, buf.ty.dtype, name=str(buf), scope=scope)
        replace[buf] = (new, None)
        for view in own_views:
            strides = list(view.ty.strides) or None
            replace[view] = (tirx.decl_buffer(list(view.ty.shape), view.ty.dtype, name=str(view), data=new.data,
                                              strides=strides, scope=scope), None)

    def _rewrite(self, body: Any, replace: dict) -> Any:
        if not replace:
            return body

        def new_indices(buf, indices):
            new, kernel = replace[buf]
            if kernel is None:
                return new, list(indices)
            slot = self._owned(kernel, buf, list(indices))
            if slot is None:  # every access was proven owned when the layout was chosen
                raise LoweringError(f"{self.location}: internal error: lost the owner of fragment '{buf}' access {list(indices)}")
            return new, [slot]

        def lookup(buf):
            for old in replace:
                if old.same_as(buf):
                    return old
            return None

        def on_load(expr):
            old = lookup(expr.source)
            if old is None:
                return expr
            new, idx = new_indices(old, expr.indices)
            return tirx.BufferLoad(new, idx)

        def on_store(stmt):
            old = lookup(stmt.buffer)
            if old is None:
                return stmt
            new, idx = new_indices(old, stmt.indices)
            return tirx.BufferStore(new, stmt.value, idx)

        def on_alloc(stmt):
            old = lookup(stmt.buffer)
            if old is None:
                return stmt
            return tirx.AllocBuffer(replace[old][0])

        def on_decl(stmt):
            old = lookup(stmt.buffer)
            if old is None:
                return stmt
            new, kernel = replace[old]
            if kernel is not None:  # a view in registers: its accesses were rewritten to the slots
                return tirx.Evaluate(tirx.IntImm("int32", 0))
            owner = lookup(owner_of(stmt.data))  # the fragment, or the view this one is on
            return tirx.DeclBuffer(new, data=replace[owner][0].data)

        return tvm_ffi.structural_map(
            body, [(tvm.ir.TensorLoad, on_load), (tirx.BufferStore, on_store), (tirx.AllocBuffer, on_alloc),
                   (tirx.DeclBuffer, on_decl)]
        )

    def _atomics(self, body: Any) -> Any:
        target = self.func.attrs.get("target") if self.func.attrs is not None else None
        kind = target.kind.name if target is not None else "cuda"
        number = arch_number(target) if target is not None else None
        native_bf16 = number is None or number >= 80
        return lower_gpu_intrinsics(lower_gpu_atomics(body, kind, self.location, native_bf16), kind, self.location, native_bf16)


def lower_fragments(func: tirx.PrimFunc, location: Optional[str] = None) -> tirx.PrimFunc:
    """Apply :class:`FragmentLowering` to one GPU PrimFunc."""
    if location is None:
        attrs = func.attrs if func.attrs is not None else {}
        location = str(attrs.get("tl.source_location", "")) or "<unknown>"
    return FragmentLowering(func, location).run()


def FragmentLayoutPass() -> tvm.transform.Pass:  # noqa: N802 - TVM pass naming
    """The GPU pass: fragment layout + atomics for every PrimFunc of the module."""

    def transform(func, mod, ctx):  # noqa: ARG001
        return lower_fragments(func)

    return tirx.transform.prim_func_pass(transform, opt_level=0, name="tl.FragmentLayout")
