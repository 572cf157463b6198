"""Build, save and load of the cython backend (imported by the hooks in :mod:`.plugin`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from tilelang_core.artifact import BuildOptions, KernelArtifact
from tilelang_core.errors import ArtifactError, BuildError

from .plan import PLAN_FORMAT, make_plan

LIBRARY_FILE = "kernel.so"
PLAN_FILE = "cython_plan.json"


def _dispatch():
    try:
        from . import _dispatch
    except ImportError as exc:  # pragma: no cover - broken installation
        raise BuildError(
            "the cython backend's dispatch extension (tilelang_backend_cython._dispatch) is not built: "
            f"{exc}; reinstall with `pip install --force-reinstall tilelang-backend-cython`"
        ) from None
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
        raise BuildError(f"kernel '{artifact.name}': {exc}") from None
    finally:
        built.release()  # the library is loaded (or failed to): its build directory goes


def kernel_from_plan(plan: dict, library: Path, source: Path | None = None, *, library_data: bytes | None = None,
                     source_text: str | None = None) -> Any:
    """The native kernel object for ``plan`` calling into ``library`` (the plan is checked first).

    ``library_data``/``source_text``: the library's bytes and source kept in memory (a fresh build,
    whose files are removed once loaded); the save hook writes them.

    :raises ValueError: an inconsistent plan; :raises OSError: the library cannot be loaded.
    """
    from .plan import check_plan

    check_plan(plan)
    meta = {"plan": plan, "library": str(library), "source": str(source) if source else None,
            "library_data": library_data, "source_text": source_text}
    return _dispatch().make_kernel(plan, str(library), meta)


def host_cpu_id() -> str:
    """Identity of this CPU's instruction set: CPU kernels are built with ``-march=native``."""
    import hashlib
    import platform

    text = platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features", "isa")):
                    text += " " + " ".join(sorted(line.split(":", 1)[1].split()))
                    break
    except OSError:
        text += " " + platform.processor()
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def save(kernel: Any, directory: Path) -> None:
    """Copy the kernel's library (and its source, for reference) and write the plan as JSON."""
    meta = getattr(kernel, "meta", None)
    if not isinstance(meta, dict) or "plan" not in meta:
        raise TypeError(f"the cython backend cannot save {type(kernel).__name__}; expected a kernel it built")
    directory = Path(directory)
    if meta.get("library_data") is not None:  # a fresh build: its files are gone, the bytes are here
        (directory / LIBRARY_FILE).write_bytes(meta["library_data"])
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


def load(artifact: KernelArtifact, directory: Path, options: BuildOptions) -> Any:
    """Restore a kernel written by :func:`save`; needs neither TVM nor a compiler."""
    directory = Path(directory)
    try:
        record = json.loads((directory / PLAN_FILE).read_text())
        plan = record["plan"]
        library = directory / record["library"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ArtifactError(f"cython kernel directory {directory} is missing or has a corrupt {PLAN_FILE}: {exc}; "
                            f"recompile the kernel") from None
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
    source = directory / record["source"] if record.get("source") else None
    try:
        return kernel_from_plan(plan, library, source)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ArtifactError(f"cannot load cython kernel from {directory}: {exc}; recompile the kernel") from None
