"""Build, save and load of the cython backend (imported by the hooks in :mod:`.plugin`)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Optional

from tilelang_core.artifact import BuildOptions, KernelArtifact
from tilelang_core.errors import ArtifactError, BuildError, SettingError, TileLangError

from .plan import PLAN_FORMAT, make_plan

LIBRARY_FILE = "kernel.so"
PLAN_FILE = "cython_plan.json"


def _dispatch():
    try:
        from . import _dispatch
    except ImportError as exc:  # a broken installation, or a source folder shadowing the installed package
        from .plugin import not_built_reason

        raise BuildError(f"the cython backend's dispatch extension (tilelang_backend_cython._dispatch) cannot be "
                         f"imported ({exc}): {not_built_reason()}") from None
    return _dispatch


def build(artifact: KernelArtifact, options: BuildOptions) -> Any:
    """Compile ``artifact`` and return the callable kernel (see ``tilelang_backend_build``)."""
    from . import codegen, compiler

    kind = artifact.target_kind
    if kind not in ("c", "cuda"):
        raise BuildError(f"the cython backend builds targets 'c' and 'cuda', got '{kind}'")
    plan = make_plan(artifact, options)
    if kind == "c":
        built = compiler.compile_c(artifact.name, codegen.c_source(artifact, plan),
                                   compile_flags=options.compile_flags, verbose=options.verbose)
    else:
        built = compiler.compile_cuda(artifact.name, codegen.cuda_source(artifact, plan), target=artifact.target,
                                      compile_flags=options.compile_flags, verbose=options.verbose)
    try:
        return kernel_from_plan(plan, built.path, built.source_path, library_data=built.data, source_text=built.source)
    except OSError as exc:
        from tilelang_core.cache.native import noexec_note

        raise BuildError(f"kernel '{artifact.name}': {exc}{noexec_note(built.path)}") from None
    finally:
        built.release()  # the library is loaded (or failed to): its build directory goes


#: environment variable: ``dlpack`` makes kernels read every tensor through DLPack (not through the
#: optional ``_torch_reader``); unset, empty or ``auto``: the fastest reader that is usable
TENSOR_READER_ENV = "TILELANG_CYTHON_TENSOR_READER"


def tensor_reader_choice() -> str:
    """``"auto"`` or ``"dlpack"``, from ``$TILELANG_CYTHON_TENSOR_READER``.

    :raises SettingError: the variable holds something else (a setting error, not the backend's
        failure: the backend stays usable and no cache entry is taken for broken).
    """
    value = os.environ.get(TENSOR_READER_ENV, "").strip().lower() or "auto"
    if value not in ("auto", "dlpack"):
        raise SettingError(f"{TENSOR_READER_ENV}: expected 'auto' or 'dlpack' (or unset), got "
                         f"{os.environ[TENSOR_READER_ENV]!r}; unset it to use the fastest reader")
    return value


def kernel_from_plan(plan: dict, library: Path, source: Path | None = None, *, load_as: str | None = None,
                     library_data: bytes | None = None, source_text: str | None = None) -> Any:
    """The native kernel object for ``plan`` calling into ``library`` (the plan is checked first).

    ``load_as`` is the path handed to ``dlopen`` when it differs from ``library`` (see
    :func:`tilelang_core.cache.native.dlopen_path`). ``library_data``/``source_text``: the
    library's bytes and source kept in memory (a fresh build, whose files are removed once
    loaded); the save hook writes them.

    :raises ValueError: an inconsistent plan; :raises OSError: the library cannot be loaded.
    """
    from .plan import check_plan

    check_plan(plan)
    meta = {"plan": plan, "library": str(library), "source": str(source) if source else None,
            "library_data": library_data, "source_text": source_text}
    return _dispatch().make_kernel(plan, load_as or str(library), meta, tensor_reader_choice())


def host_cpu_id() -> str:
    """Identity of this CPU's instruction set: CPU kernels are built with ``-march=native``."""
    from tilelang_core.devices import instruction_set_id

    return instruction_set_id()


def save(kernel: Any, directory: Path) -> None:
    """Copy the kernel's library (and its source, for reference) and write the plan as JSON."""
    meta = getattr(kernel, "meta", None)
    if not isinstance(meta, dict) or "plan" not in meta:
        raise TypeError(f"the cython backend cannot save {type(kernel).__name__}; expected a kernel it built")
    directory = Path(directory)
    if meta.get("library_data") is not None:  # a fresh build: its files are gone, the bytes are here
        (directory / LIBRARY_FILE).write_bytes(meta["library_data"])
    elif not Path(meta["library"]).is_file():  # loaded from a cache entry or export since removed
        raise ArtifactError(f"cannot save cython kernel '{meta['plan'].get('name')}': the library it was loaded "
                            f"from, {meta['library']}, is gone (its cache entry or export was removed); compile the "
                            "kernel again to save it")
    else:
        shutil.copy2(meta["library"], directory / LIBRARY_FILE)
    record = {"plan": meta["plan"], "library": LIBRARY_FILE, "source": None,
              "cpu": host_cpu_id() if meta["plan"].get("device") == "cpu" else None}
    suffix = ".cu" if meta["plan"].get("device") == "cuda" else ".c"
    if meta.get("source_text") is not None:
        record["source"] = "kernel" + suffix
        (directory / record["source"]).write_text(meta["source_text"])
    elif meta.get("source") and Path(meta["source"]).exists():
        name = "kernel" + Path(meta["source"]).suffix
        shutil.copy2(meta["source"], directory / name)
        record["source"] = name
    (directory / PLAN_FILE).write_text(json.dumps(record, indent=1))


def _plain_name(value: Any) -> bool:
    return isinstance(value, str) and value not in ("", ".", "..") and "/" not in value and "\\" not in value


def _first_difference(stored: Any, derived: Any, where: str = "plan") -> Optional[str]:
    """Where ``stored`` and ``derived`` (JSON values) first differ, as ``plan.params[2].dims``."""
    if isinstance(stored, dict) and isinstance(derived, dict):
        for key in sorted(set(stored) | set(derived), key=str):
            if key not in stored or key not in derived:
                return f"{where}.{key}"
            found = _first_difference(stored[key], derived[key], f"{where}.{key}")
            if found:
                return found
        return None
    if isinstance(stored, list) and isinstance(derived, list):
        if len(stored) != len(derived):
            return where
        for i, (a, b) in enumerate(zip(stored, derived)):
            found = _first_difference(a, b, f"{where}[{i}]")
            if found:
                return found
        return None
    return None if stored == derived and type(stored) is type(derived) else where


def _check_plan_matches_artifact(plan: dict, artifact: KernelArtifact, options: BuildOptions, directory: Path) -> None:
    """The saved plan must be the one this backend derives from the artifact and the options.

    The dispatcher trusts the plan's shapes, dtypes and symbol slots when it checks a call and
    when it allocates outputs; a plan edited on disk (say an output's 256 elements made 64)
    would let the kernel write past the memory it was given.
    """
    try:
        derived = json.loads(json.dumps(make_plan(artifact, options)))
    except (TileLangError, ValueError, TypeError, KeyError) as exc:
        raise ArtifactError(f"cython kernel in {directory}: its artifact no longer gives a call plan ({exc}); "
                            f"recompile the kernel") from None
    where = _first_difference(plan, derived)
    if where is not None:
        raise ArtifactError(f"cython kernel in {directory}: the saved call plan does not match the artifact "
                            f"(first difference at {where}); the files were changed after saving; recompile the kernel")


def load(artifact: KernelArtifact, directory: Path, options: BuildOptions) -> Any:
    """Restore a kernel written by :func:`save`; needs neither TVM nor a compiler.

    Before any code of the library runs through the dispatcher, the saved call plan must equal
    the plan derived from the artifact and the options, and the library must carry the identity
    of that artifact and plan (:mod:`.identity`); any disagreement is an :class:`ArtifactError`.
    """
    from . import identity

    directory = Path(directory)
    try:
        record = json.loads((directory / PLAN_FILE).read_text())
        plan = record["plan"]
        library_name = record["library"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ArtifactError(f"cython kernel directory {directory} is missing or has a corrupt {PLAN_FILE}: {exc}; "
                            f"recompile the kernel") from None
    if library_name != LIBRARY_FILE or not (record.get("source") is None or _plain_name(record.get("source"))):
        raise ArtifactError(f"cython kernel in {directory}: {PLAN_FILE} names files outside the kernel directory "
                            f"(library {library_name!r}, source {record.get('source')!r}); recompile the kernel")
    library = directory / LIBRARY_FILE
    if not isinstance(plan, dict) or plan.get("format") != PLAN_FORMAT:
        raise ArtifactError(f"cython kernel in {directory} has call plan format {plan.get('format') if isinstance(plan, dict) else None!r}, "
                            f"this backend reads {PLAN_FORMAT}; recompile the kernel")
    if plan.get("name") != artifact.name:
        raise ArtifactError(f"cython kernel in {directory} is '{plan.get('name')}', but the artifact is '{artifact.name}'")
    if sorted(set(options.out_idx)) != plan.get("outputs"):
        raise ArtifactError(f"cython kernel in {directory} was built with out_idx {plan.get('outputs')}, "
                            f"but out_idx {list(options.out_idx)} was asked; recompile the kernel")
    if record.get("cpu") and record["cpu"] != host_cpu_id():
        raise ArtifactError(f"cython kernel in {directory} was built for another CPU (-march=native); recompile the kernel")
    if not library.is_file():
        raise ArtifactError(f"cython kernel library {library} is missing; recompile the kernel")
    _check_plan_matches_artifact(plan, artifact, options, directory)
    from tilelang_core.cache.native import dlopen_path, load_advice

    try:
        load_as = dlopen_path(library)  # never a library loaded earlier from this path
        found = identity.library_id(Path(load_as), keep_loaded=plan.get("device") == "cuda")
    except OSError as exc:
        raise ArtifactError(f"cannot load cython kernel from {directory}: {exc}; "
                            f"{load_advice(library, 'recompile the kernel')}") from None
    expected = identity.kernel_id(artifact, plan)
    if found != expected:
        what = "carries no kernel identity" if found is None else f"was built for another kernel ({found[:12]}...)"
        raise ArtifactError(f"cython kernel library {library} {what}, not for kernel '{artifact.name}' "
                            f"({expected[:12]}...) as saved with it; recompile the kernel")
    source = directory / record["source"] if record.get("source") else None
    try:
        kernel = kernel_from_plan(plan, library, source, load_as=load_as)
    except SettingError:  # the user's setting, not the entry, is wrong: the entry stays
        raise
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ArtifactError(f"cannot load cython kernel from {directory}: {exc}; "
                            f"{load_advice(library, 'recompile the kernel')}") from None
    if plan.get("device") == "cuda":
        problem = cuda_run_problem()
        if problem is not None:  # an export loaded where it cannot run: say so, not "expected a tensor on cuda"
            return _RefusesCalls(kernel, f"{artifact.name}() cannot run on this machine: {problem}; load this "
                                         f"export on a machine with an NVIDIA GPU and its driver")
    return kernel


def cuda_run_problem() -> Optional[str]:
    """Why CUDA kernels cannot run here (no driver, no device), or None when they can."""
    import ctypes

    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "no CUDA driver on this machine (libcuda.so.1 cannot be loaded)"
    count = ctypes.c_int(0)
    if libcuda.cuInit(0) != 0 or libcuda.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return "no CUDA device on this machine (the CUDA driver reports none)"
    return None


class _RefusesCalls:
    """A loaded kernel that cannot run here: calls raise ``BackendUnavailableError``; ``meta``
    (what :func:`save` reads) is the real kernel's, so it can still be exported again."""

    def __init__(self, kernel: Any, message: str) -> None:
        self.meta = getattr(kernel, "meta", None)
        self._message = message

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from tilelang_core.errors import BackendUnavailableError

        raise BackendUnavailableError(self._message)
