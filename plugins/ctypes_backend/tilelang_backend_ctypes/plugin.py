"""Entry point of the ``ctypes`` execution backend: the smallest complete backend.

It is the reference example of docs/writing-a-backend.md: ``c`` kernels are built by running the
C compiler (``$CC``, else ``cc``) on the artifact's device source, loaded with :mod:`ctypes`, and
their calls are checked by :class:`tilelang_core.calling.CallChecker`. Pure Python, no build step
of its own. Retired: the ``cython`` backend supersedes it (same kernels, a native dispatcher).
This module imports nothing heavy; torch is imported when a kernel is built.
"""

from __future__ import annotations

import atexit
import os
import shlex
from pathlib import Path
from typing import Any

from tilelang_core.env_commands import command_from_env, program_from_env
from tilelang_core.hookspecs import hookimpl

#: Plugin API version this backend was written for.
TILELANG_PLUGIN_API = 1

LIBRARY, SOURCE = "kernel.so", "kernel.c"
#: ctypes passes every C scalar but half-precision ones (see tilelang_core.calling).
DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64"]


def compiler() -> list[str]:
    """The C compiler command: ``$CC`` (shell-split, may carry flags) or ``cc``."""
    return command_from_env("CC", "cc")


@hookimpl
def tilelang_backend_spec() -> dict[str, Any]:
    """Declare the backend: CPU kernels (target ``c``) from C device source."""
    return {
        "name": "ctypes",
        "plugin_api_version": TILELANG_PLUGIN_API,
        "description": "Compiles C device source with $CC and calls it through ctypes (retired: use cython)",
        "deprecated": {"since": "0.1.0", "replacement": "cython",
                       "message": "The cython backend runs the same kernels with a much cheaper call."},
        "targets": {
            "c": {
                "priority": 1,
                "consumes": ["device_source"],
                "device_language": "c",
                "dynamic_strides": True,
                "platforms": ["linux", "darwin"],
                "dtypes": DTYPES,
                "loads_without_tvm": True,
                "requires": {"executables": [program_from_env("CC", "cc")], "python_modules": ["torch"]},
                "native_compiler": {"program": "cc", "env": "CC"},
            }
        },
    }


class Kernel:
    """A built kernel: the shared library in ``directory``, its entry function and the call checker."""

    def __init__(self, artifact: Any, options: Any, directory: Path) -> None:
        import ctypes
        import weakref

        from tilelang_core.calling import CallChecker, ctypes_assert_message, ctypes_type

        self.artifact, self.options, self.directory, self.name = artifact, options, Path(directory), artifact.name
        (entry,) = artifact.device_kernels
        self.args = entry.args
        library = ctypes.CDLL(str(self.directory / LIBRARY))
        self.function = getattr(library, entry.name)
        self.function.restype = None if entry.return_type == "void" else ctypes.c_int32
        self.function.argtypes = [ctypes.c_void_p if a.kind == "pointer" else ctypes_type(a.dtype) for a in entry.args]
        self.checker = CallChecker(artifact, options.out_idx)
        self.assert_message = ctypes_assert_message(library, entry)  # a failed T.device_assert's text
        # The folder is this kernel's own (a build's, or a private copy of a saved one): remove it with
        # the kernel, and give the library back (it stayed mapped before: 5 maps and ~25 KB for each
        # load, for the life of the process). A failed build keeps its folder for the error.
        # At interpreter exit a kernel still alive keeps its library mapped (an atexit handler or a
        # __del__ may still call it: a dlclose there made that call jump into unmapped memory); its
        # folder goes then (_remove_live_folders).
        weakref.finalize(self, _release, library._handle, str(self.directory)).atexit = False
        _LIVE_FOLDERS.add(str(self.directory))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Check the call, allocate the outputs, run the entry function (ctypes releases the GIL)."""
        call = self.checker.bind(args, kwargs)
        values = [call.values[a.param_index].data_ptr() if a.kind == "pointer"
                  else call.symbols[a.symbol] if a.symbol else call.values[a.param_index] for a in self.args]
        call.check_status(self.function(*values), self.assert_message)
        return call.result()


#: The folders of the kernels alive now, removed at interpreter exit (their libraries stay mapped).
_LIVE_FOLDERS: set = set()


def _release(handle: int, directory: str) -> None:
    """Unload a freed kernel's library (``dlclose``) and remove its folder."""
    import _ctypes
    import shutil

    _LIVE_FOLDERS.discard(directory)
    _ctypes.dlclose(handle)
    shutil.rmtree(directory, True)


def _remove_live_folders() -> None:
    """At interpreter exit: remove the folders of the kernels still alive, keeping their libraries
    mapped (unlinking a mapped file is fine); registered when this module is imported, so it runs
    after the atexit handlers registered later (LIFO), which may still call a kernel."""
    import shutil

    for directory in list(_LIVE_FOLDERS):
        shutil.rmtree(directory, True)
    _LIVE_FOLDERS.clear()


atexit.register(_remove_live_folders)


@hookimpl
def tilelang_backend_build(artifact: Any, options: Any) -> Kernel:
    """Compile the device source into a shared library in a kept temporary directory."""
    import tempfile

    from tilelang_core.compiler_process import run_compiler, writing_build_file
    from tilelang_core.errors import BuildError

    import shutil

    directory = Path(tempfile.mkdtemp(prefix=f"tilelang-ctypes-{artifact.name[:40]}-"))
    try:
        with writing_build_file(directory, directory / SOURCE, artifact.name):  # a full disk: say where, leave nothing
            (directory / SOURCE).write_text(artifact.device_source or "")
        # -fno-strict-aliasing: T.view with another dtype (clang ignores the source's GCC pragma)
        cmd = [*compiler(), "-O2", "-fno-strict-aliasing", "-fPIC", "-shared", *options.compile_flags, "-o",
               str(directory / LIBRARY), str(directory / SOURCE)]
        if options.verbose:
            print(f"[tilelang ctypes] {shlex.join(cmd)}")
        try:  # bounded in time ($TILELANG_COMPILE_TIMEOUT_SECONDS) and in the output kept
            run = run_compiler(cmd, writes=directory / LIBRARY)
        except OSError as exc:
            raise BuildError(f"cannot run the C compiler {cmd[0]!r}: {exc}; set $CC to a working compiler",
                             command=cmd, output=str(exc), source=directory / SOURCE) from None
        if not run.ok:
            raise run.build_error(f"kernel '{artifact.name}'", directory / SOURCE)
        return Kernel(artifact, options, directory)
    except BuildError:
        raise  # the folder stays: the error names the source kept there
    except BaseException:  # Ctrl-C while compiling, a library that does not load: nothing to inspect
        shutil.rmtree(directory, ignore_errors=True)
        raise


@hookimpl
def tilelang_backend_save(kernel: Any, directory: Path) -> None:
    """Copy the kernel's shared library and its C source into ``directory``."""
    import shutil

    if not isinstance(kernel, Kernel):
        raise TypeError(f"the ctypes backend cannot save {type(kernel).__name__}; expected a kernel it built")
    for name in (LIBRARY, SOURCE):
        shutil.copy2(kernel.directory / name, Path(directory) / name)


@hookimpl
def tilelang_backend_load(artifact: Any, directory: Path, options: Any) -> Kernel:
    """Load a saved kernel's shared library (no TVM, no compiler) from a private copy: dlopen
    hands back a library already loaded from the same path, though the file may have changed."""
    import shutil
    import tempfile

    from tilelang_core.errors import ArtifactError

    missing = [name for name in (LIBRARY, SOURCE) if not (Path(directory) / name).is_file()]
    if missing:  # a damaged entry: the cache removes it and builds the kernel again
        raise ArtifactError(f"cannot load the ctypes kernel in {directory}: {', '.join(missing)} missing; recompile the kernel")
    private = Path(tempfile.mkdtemp(prefix=f"tilelang-ctypes-{artifact.name[:40]}-"))
    try:
        for name in (LIBRARY, SOURCE):
            shutil.copy2(Path(directory) / name, private / name)  # an OSError here is the environment's (a full disk)
        try:
            return Kernel(artifact, options, private)
        except (OSError, AttributeError, ValueError) as exc:  # not a library, or not this kernel's
            from tilelang_core.cache.native import load_advice

            raise ArtifactError(f"cannot load the ctypes kernel in {directory}: {exc}; "
                                f"{load_advice(private, 'recompile the kernel')}") from None
    except BaseException:
        shutil.rmtree(private, ignore_errors=True)
        raise
