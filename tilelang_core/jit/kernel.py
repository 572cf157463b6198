"""``JITKernel``: what ``tilelang.compile`` returns, callable with torch tensors."""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

from ..artifact import BuildOptions, KernelArtifact
from ..profiler.supply import TensorSupplyType


class BackendInfo(NamedTuple):
    """Name and version of the execution backend that built a kernel."""

    name: str
    version: str


class JITKernel:
    """A compiled kernel.

    Call it with the kernel's non-output parameters in order (torch tensors and Python
    scalars); with ``out_idx`` it allocates and returns the output tensor (or a list of them).
    CUDA backends that declare ``cuda_streams`` accept ``stream=``.

    Calling goes straight to the backend's dispatcher: each kernel gets its own subclass whose
    ``__call__`` *is* the backend's callable, so the core adds no Python frame per call (except
    for kernels with pointer parameters, ``a: T.ptr``, whose tensor arguments become addresses
    first: :func:`tilelang_core.calling.pointer_arguments`).

    Attributes: ``params`` (the artifact's parameter list), ``out_idx``, ``backend``
    (:class:`BackendInfo`), ``target`` (target string), ``artifact``
    (:class:`~tilelang_core.artifact.KernelArtifact`), ``runner`` (the backend's callable),
    ``cache_key`` (the kernel cache key it is stored under, None when it was not cached),
    ``cannot_run`` (why this machine cannot run it, None when it can).

    A kernel built on a machine where its backend can build but not run (no driver, no device)
    is complete: it can be exported (:meth:`export`) and cached, and loaded where it can run;
    calling it here raises :class:`~tilelang_core.errors.BackendUnavailableError` naming what is
    missing.
    """

    #: Set on the kernel an autotuning run returns (TileLang's ``kernel.config``, ``.latency`` in
    #: ms, ``.ref_latency``); None on any other kernel.
    config: Optional[dict] = None
    latency: Optional[float] = None
    ref_latency: Optional[float] = None

    def __init__(self, runner: Any, artifact: KernelArtifact, backend: BackendInfo, options: BuildOptions) -> None:
        self.runner = runner
        self.artifact = artifact
        self.backend = backend
        self.options = options
        self.cache_key: Optional[str] = None
        self.cannot_run: Optional[str] = None
        self._export_files: Optional[dict] = None  # a kernel from a pickle: its export's files (jit/pickling.py)

    @classmethod
    def create(
        cls,
        runner: Any,
        artifact: KernelArtifact,
        backend: BackendInfo,
        options: BuildOptions,
        cannot_run: Optional[str] = None,
    ) -> "JITKernel":
        """A JITKernel whose calls go directly to ``runner``.

        :param cannot_run: why this machine cannot run the kernel (the backend's probe said it
            can only build here); calls then raise instead of reaching ``runner``.
        """
        if not callable(runner):
            raise TypeError(f"execution backend {backend.name!r} returned a non-callable kernel: {type(runner).__name__}")
        if cannot_run is not None:
            call = _refusal(artifact, backend, cannot_run)
        else:
            call = _with_pointer_arguments(runner, artifact, options)
            listed = _outputs_in_listed_order(call, runner, options.out_idx)
            if listed is not None:
                call = listed
            elif call is None:
                call = runner if not hasattr(type(runner), "__get__") else staticmethod(runner)
        kernel_type = type(cls.__name__, (cls,), {"__call__": call, "__module__": cls.__module__, "__slots__": ()})
        kernel = kernel_type(runner, artifact, backend, options)
        kernel.cannot_run = cannot_run
        return kernel

    def __call__(self, *args: Any, **kwargs: Any) -> Any:  # replaced per kernel by create()
        return self.runner(*args, **kwargs)

    @property
    def params(self) -> list:
        return self.artifact.params

    @property
    def out_idx(self) -> list[int]:
        return list(self.options.out_idx)

    @property
    def target(self) -> str:
        return self.artifact.target

    @property
    def name(self) -> str:
        return self.artifact.name

    def export(self, path: Any, *, overwrite: bool = False) -> Any:
        """Write this kernel into a self-contained directory that :func:`tilelang.load` restores.

        The directory holds the artifact JSON, the files of the backend's
        ``tilelang_backend_save`` hook, and the versions of the core and the backend. It is
        written completely next to ``path`` and then renamed into place. Returns the path.

        :param path: directory to create; it must not exist unless ``overwrite=True``.
        :param overwrite: replace a previous export at ``path``. Only a previous export is
            replaced (recognised by its ``tilelang-kernel.json``, holding nothing else); any
            other file, folder or link there is refused with :class:`ArtifactError`.
        :raises FileExistsError: ``path`` exists and ``overwrite`` is false.
        :raises ArtifactError: the backend cannot save kernels (no save/load hooks), or
            ``overwrite=True`` would replace something that is not a previous export.
        """
        from .export import export_kernel

        return export_kernel(self, path, overwrite=overwrite)

    def get_profiler(
        self, tensor_supply_type: TensorSupplyType = TensorSupplyType.Auto, dynamic_sizes: Optional[dict] = None
    ) -> Any:
        """A :class:`~tilelang_core.profiler.Profiler` for this kernel (see docs/profiler.md).

        :param tensor_supply_type: how to fill the inputs it makes (a ``TensorSupplyType``).
        :param dynamic_sizes: sizes of the kernel's dynamic dimensions (``{"n": 1024}``), needed
            to make inputs for a kernel with symbolic shapes.
        """
        from ..profiler import Profiler

        return Profiler.from_kernel(self, tensor_supply_type, dynamic_sizes)

    def get_kernel_source(self, kernel_only: bool = True) -> Optional[str]:
        """The kernel's generated source: the device source the backend consumed (C, CUDA C or
        Metal) or, for backends that take TVM's runtime module, that module's source (CUDA C or
        Metal of a GPU kernel; C or LLVM IR on CPU targets). None when neither was made.

        ``kernel_only`` is accepted for TileLang compatibility: the source is only the kernel
        either way (:meth:`get_host_source` gives the host side).
        """
        return self.artifact.kernel_source

    def get_host_source(self) -> Optional[str]:
        """TVM's packed host function as C, made only for a backend whose declaration consumes
        ``host_source``; None otherwise (the bundled backends: their host side is their own
        dispatcher)."""
        return self.artifact.host_source

    @property
    def kernel_source(self) -> Optional[str]:
        """TileLang's attribute for :meth:`get_kernel_source`."""
        return self.get_kernel_source()

    @property
    def host_source(self) -> Optional[str]:
        """TileLang's attribute for :meth:`get_host_source`."""
        return self.get_host_source()

    def run_once(self, func: Optional[Any] = None) -> Any:
        """Call the kernel (or ``func``) once on inputs its profiler makes and return the result
        (TileLang's shortcut for ``get_profiler().run_once(func)``)."""
        return self.get_profiler().run_once(func)

    def print_source_code(self, which: str = "kernel", file: Any = None) -> None:
        """Print the kernel's source (``which="kernel"``), its host source (``"host"``) or both
        (``"both"``), as TileLang's method does; ``file`` as ``print``'s."""
        if which not in ("kernel", "host", "both"):
            raise ValueError(f"print_source_code: which must be 'kernel', 'host' or 'both', got {which!r}")
        parts = [self.get_kernel_source()] if which != "host" else []
        if which != "kernel":
            parts.append(self.get_host_source())
        print("\n".join(p for p in parts if p), file=file)

    def show_source(self, which: str = "kernel") -> None:
        """TileLang's other name of :meth:`print_source_code`."""
        self.print_source_code(which)

    def __getattr__(self, name: str) -> Any:
        """TileLang's ``JITKernel`` attributes this one does not have say why (only reached for a
        name the kernel lacks)."""
        why = _NOT_PROVIDED_ATTRIBUTES.get(name)
        if why is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}: {why}")

    def __reduce__(self) -> tuple:
        """Pickle support: the kernel travels as its export's files and is loaded again where it
        is unpickled, without lowering or compiling (:mod:`tilelang_core.jit.pickling`).

        :raises ArtifactError: the backend cannot export kernels (no save/load hooks).
        """
        from .pickling import kernel_files, kernel_from_files

        return kernel_from_files, (kernel_files(self), {"cache_key": self.cache_key})

    def __copy__(self) -> "JITKernel":
        """A kernel is immutable once built, like a function: copying it gives the kernel itself."""
        return self

    def __deepcopy__(self, memo: dict) -> "JITKernel":
        """The kernel itself, as :meth:`__copy__` (``copy.deepcopy`` of a model holding kernels
        does not export and reload them)."""
        return self

    def __repr__(self) -> str:
        return (
            f"<JITKernel {self.artifact.name} target={self.artifact.target!r} "
            f"backend={self.backend.name} {self.backend.version} out_idx={self.out_idx}>"
        )


#: TileLang's ``JITKernel`` attributes that belong to its own execution adapters, and what to use here.
_NOT_PROVIDED_ATTRIBUTES = {
    "adapter": "execution backends are plugins here; the backend's callable is kernel.runner, its name kernel.backend",
    "prim_func": "kernel.artifact describes the compiled kernel (its params, sources and lowered modules: "
                 "artifact.device_mod); keep the T.prim_func you compiled to have it",
    "export_library": "kernel.export(path) writes the kernel into a folder tilelang.load(path) restores",
    "export_sources": "kernel.get_kernel_source() and kernel.get_host_source() give the sources; kernel.export(path) "
                      "writes the whole kernel",
    "artifact_path": "kernel.export(path) writes the kernel into a folder tilelang.load(path) restores",
}


def _with_pointer_arguments(runner: Any, artifact: KernelArtifact, options: BuildOptions) -> Any:
    """The ``__call__`` of a kernel with pointer parameters (``a: T.ptr``): converts them
    (:func:`tilelang_core.calling.pointer_arguments`) and calls ``runner``; None for other kernels,
    which keep calling ``runner`` directly."""
    from ..calling import pointer_arguments

    convert = pointer_arguments(artifact, options.out_idx or ())
    if convert is None:
        return None

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        return runner(*convert(args), **kwargs)

    return __call__


def _outputs_in_listed_order(call: Any, runner: Any, out_idx: Any) -> Any:
    """The ``__call__`` of a kernel whose ``out_idx`` lists several outputs out of parameter order
    (``out_idx=[-1, -2]``): backends return outputs in parameter order (docs/backend-conventions.md),
    and this returns them in the order listed, as TileLang does (``c, b = kernel(a)``); None for
    every other kernel, which keeps calling ``runner`` (or ``call``) directly."""
    order = list(out_idx or ())
    if len(order) < 2 or order == sorted(order):
        return None
    ranks = [sorted(order).index(i) for i in order]

    if call is None:
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: ANN202 - the plain call
            return runner(*args, **kwargs)

    inner = call

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        outputs = inner(self, *args, **kwargs)
        return [outputs[r] for r in ranks]

    return __call__


def _refusal(artifact: KernelArtifact, backend: BackendInfo, reason: str) -> Any:
    """The ``__call__`` of a kernel this machine can build but not run."""
    from ..lowering.target import GPU_KINDS

    where = "where there is a GPU" if artifact.target_kind in GPU_KINDS else "on a machine that can run it"
    message = (
        f"{artifact.name}() cannot run on this machine: {reason}; execution backend {backend.name!r} built it "
        f"for target {artifact.target!r}, so export the kernel (kernel.export(path)) and load it "
        f"(tilelang.load(path)) {where}"
    )

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        from ..errors import BackendUnavailableError

        raise BackendUnavailableError(message)

    return __call__
