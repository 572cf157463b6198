"""The hook specification every execution-backend plugin implements.

An execution backend is a Python distribution with an entry point in the group
``tilelang.backends``; the entry point's name is the backend's name and its object is a module
(or any object) carrying hook implementations marked with :data:`hookimpl`, plus the module
attribute ``TILELANG_PLUGIN_API`` (an int, the :data:`PLUGIN_API_VERSION` it was written for)::

    # pyproject.toml
    [project.entry-points."tilelang.backends"]
    mybackend = "tilelang_backend_mybackend.plugin"

    # tilelang_backend_mybackend/plugin.py  (must import cheaply: no torch, TVM, CUDA at import)
    from tilelang_core.hookspecs import hookimpl
    TILELANG_PLUGIN_API = 1

    @hookimpl
    def tilelang_backend_spec():
        return {...}  # a BackendSpec or a dict validated into one

Each plugin is registered in a plugin manager of its own, so every hook here is *first-result*:
the core calls exactly one backend's implementation and gets its single answer. Implementations
are validated against these specifications when the plugin is registered; an implementation of a
hook not listed here makes the plugin broken, with the hook's and plugin's names in the reason.

Hooks other than ``tilelang_backend_spec`` are called only after the declaration validated and
only for target kinds the backend declared.

Required hooks: ``tilelang_backend_spec`` and ``tilelang_backend_build``. ``tilelang_backend_probe``
is optional; ``tilelang_backend_save`` and ``tilelang_backend_load`` are optional but go together
(a backend with neither keeps its kernels in memory only and cannot export them). A plugin that
lacks a required hook, or has only one of the pair, is broken at registration, with the hook named.

Loading a plugin (importing its entry-point module and calling ``tilelang_backend_spec``) and each
call of ``tilelang_backend_probe`` must finish within ``TILELANG_PLUGIN_TIMEOUT`` seconds (default
60); a plugin that does not is listed as broken with that reason, and nothing else waits for it.
What lists every backend (``execution_backend="auto"``, ``tilelang backends``) loads the plugins
one after another, so each plugin that hangs costs one timeout there (at once, the heavy-import
check below could not tell which plugin imported what).
What the plugin prints meanwhile goes to stderr. Loading that imports torch, TVM, CUDA modules or
numpy is reported by ``tilelang backends`` as a warning: import them inside the hooks.

## Exception policy

What the core does with an exception from a hook. "Broken" means the backend is unusable for the
rest of the process, and every later use raises ``BackendBrokenError`` quoting the hook and the
exception; only the plugin's own faults break it. Errors are classes of ``tilelang_core.errors``.

| hook | exception | meaning | result |
| --- | --- | --- | --- |
| import, spec, probe | does not finish within ``TILELANG_PLUGIN_TIMEOUT`` s | the plugin hangs | broken |
| import, spec | ``ModuleNotFoundError`` for a module outside the plugin's package | a dependency is not installed (environment) | status *unavailable*: ``BackendDependencyError`` naming the module and the ``pip install`` command |
| import, spec | anything else (``SystemExit`` included) | a bug or a broken install | broken |
| probe | ``ModuleNotFoundError`` for a module outside the plugin's package | a dependency is not installed | target unavailable, with what to install; backend usable |
| probe | ``BackendUnavailableError`` (or returning ``Availability.no(reason)``) | cannot work here | target unavailable with the reason |
| probe | anything else (``SystemExit`` included), or an answer that is not an ``Availability`` | a bug | broken |
| build | ``KernelNotSupportedError`` or ``NotImplementedError`` | refuses this one kernel | ``auto`` tries the next available backend (warning with the reason); a backend named explicitly raises ``KernelNotSupportedError`` with its reason; backend usable |
| build | ``BuildError`` (with ``command``, ``output``, ``source``) | a native build failed | ``auto`` tries the next backend (warning naming the failure); by name: raised as it is; backend usable |
| build | ``OutIdxError``, ``BackendCapabilityError``, other ``TileLangError`` | documented refusals and mistakes | raised as they are (``auto`` falls back on ``BackendError`` subclasses); backend usable |
| build, save, load | ``ModuleNotFoundError`` for a module outside the plugin's package | a dependency is not installed | ``BackendDependencyError`` with what to install (``auto`` falls back); backend usable |
| build, save, load | ``OSError``, ``MemoryError`` | the environment (disk full, permissions, no memory) | raised as they are; the kernel cache warns and keeps the kernel in memory; backend usable |
| load | ``ArtifactError``, ``TypeError``, ``ValueError`` | the saved files are missing, corrupt or make no sense | the cache removes the entry and rebuilds; ``tilelang.load`` raises; backend usable |
| build, load | ``SettingError`` (a ``ValueError``) | an environment variable the backend reads has a value it cannot use | raised as it is, naming the variable; the cache entry stays; backend usable |
| build, save, load, probe, spec | anything else (``AttributeError``, ``KeyError``, ``SystemExit``, ...; for build, save, probe and spec also ``TypeError``, ``ValueError``) | a bug of the plugin | broken: ``BackendBrokenError`` naming the hook and the exception, with the original chained |
| build | returns something that is not callable (``None``, a path, ...) | a bug of the plugin | broken: ``BackendBrokenError`` naming the hook, what it returned and that a callable kernel was expected; ``auto`` tries the next backend |

``KeyboardInterrupt`` from a real Ctrl-C always stops the program; plugin code may not end the
process otherwise (a ``SystemExit`` it raises marks it broken, as above). ``execution_backend="auto"``
warns (``BackendWarning``) when it skips a broken or incompatible backend that might have won.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Union

import pluggy

if TYPE_CHECKING:  # pragma: no cover - for documentation only
    from pathlib import Path

    from .artifact import BuildOptions, KernelArtifact
    from .capabilities import Availability, BackendSpec

#: Project name used by pluggy's markers.
PROJECT_NAME = "tilelang"

#: The plugin API version of this core. A plugin whose ``TILELANG_PLUGIN_API`` differs is listed
#: as incompatible (with both numbers) and none of its hooks is ever called.
PLUGIN_API_VERSION = 1

#: Hooks every backend must implement; a plugin lacking one is broken at registration.
REQUIRED_HOOKS = ("tilelang_backend_spec", "tilelang_backend_build")

#: Optional hooks that only make sense together: a plugin with some but not all of a group is broken.
PAIRED_HOOKS = (("tilelang_backend_save", "tilelang_backend_load"),)

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec(firstresult=True)
def tilelang_backend_spec() -> "Union[BackendSpec, dict[str, Any]]":
    """Declare the backend: return its :class:`~tilelang_core.capabilities.BackendSpec`.

    Called once, the first time the registry needs this backend (listing, selection, loading
    from the cache). May return a ``BackendSpec`` or a plain dict that validates into one; the
    fields ``distribution`` and ``version`` may be omitted and are then filled from the entry
    point's distribution. ``name`` must equal the entry point's name. An invalid declaration
    marks the plugin broken with the offending field in the reason.

    Must be cheap: no compiler runs, no device queries. Required; runs within the loading time
    limit (``TILELANG_PLUGIN_TIMEOUT``).
    """


@hookspec(firstresult=True)
def tilelang_backend_probe(target_kind: str) -> "Optional[Availability]":
    """Say whether the backend can work on this machine for ``target_kind``.

    :param target_kind: a TVM target kind the backend declared (``"c"``, ``"cuda"``, ...).
    :returns: an :class:`~tilelang_core.capabilities.Availability` with a human reason when not
        available ("no CUDA driver", "macOS only"), or ``None`` for "nothing to add".

    **Build here, run elsewhere.** A backend that can build kernels without being able to run
    them (its compiler is here, the driver or device is not) answers
    ``Availability.build_only_because(reason)``: ``execution_backend="auto"`` never picks it, but a
    user who names it gets a kernel that builds, is cached and can be exported
    (``kernel.export(path)``), and whose call raises ``BackendUnavailableError`` quoting
    ``reason`` and saying to load the kernel where it can run. So ``reason`` should name what is
    missing ("no CUDA driver on this machine"). The build hook must then work without the
    driver, and the load hook must load without running anything. A target whose kernels run
    only on some platforms but build anywhere declares ``platforms`` (where they run) and
    ``build_platforms`` (where they build); elsewhere the probe is still called, and the core
    never reports more than build only.

    Called at most once per target kind per process, and only after the core checked the
    declared ``platforms`` and ``requires`` (executables, shared libraries, Python modules) of
    that target itself, so the probe only checks what cannot be declared (a driver, a device).
    Optional: a plugin without it is available whenever its declared requirements are met.
    Must finish within ``TILELANG_PLUGIN_TIMEOUT`` seconds. Declare the Python modules the target
    needs (``requires.python_modules``) rather than importing them here to find out; a
    ``ModuleNotFoundError`` for one still reports the target unavailable, not the backend broken.
    """


@hookspec(firstresult=True)
def tilelang_backend_build(artifact: "KernelArtifact", options: "BuildOptions") -> Any:
    """Build a runnable kernel from a lowered kernel artifact.

    :param artifact: produced by the pipeline for a target kind this backend declared, holding
        exactly what the backend's ``consumes`` asked for (device source, host source, TVM modules).
    :param options: ``out_idx`` (normalised, non-negative), ``compile_flags``, ``pass_configs``,
        ``verbose``.
    :returns: a callable ``kernel(*inputs, stream=None)``. Called with the non-output parameters
        in order, it validates them (raising ``TypeError``/``ValueError`` naming the parameter,
        what was expected and what was given), allocates the ``out_idx`` outputs, runs the
        kernel, and returns the output tensor (one output) or a list of them (several), or None.

    Called by ``tilelang.compile`` on a cache miss. Required.

    :raises KernelNotSupportedError: to refuse this one kernel (a dtype, a construct it cannot
        do), with the reason; ``auto`` then tries the next backend and the backend stays usable.
    :raises BuildError: when an external compiler fails, with ``command=``, ``output=`` (what it
        printed) and ``source=`` (the kept generated source).
    :raises OutIdxError, BackendCapabilityError: as documented for them.

    Anything else is a bug of the plugin and marks the backend broken (see the exception policy).

    **GPU kernels.** ``artifact.device_kernels`` lists the device kernels of one call; the kernel
    must launch every one of them, in list order, on one stream (each may read what an earlier
    one wrote), with grid, block and dynamic shared memory computed from the symbols bound by
    that call. The stream is the caller's ``stream=`` when given (a ``torch.cuda.Stream`` or a raw
    ``cudaStream_t`` int), else torch's current stream of the tensors' device, never the legacy
    default stream and never a stream of its own, so calls order with torch's work and can be
    captured in CUDA graphs. ``artifact.arch`` is the architecture the code is lowered for
    (``"sm_90"``); a backend must build for it (not for another) or raise ``BuildError``.
    """


@hookspec(firstresult=True)
def tilelang_backend_save(kernel: Any, directory: "Path") -> None:
    """Write everything needed to reload ``kernel`` into the existing, empty ``directory``.

    :param kernel: an object this backend's build or load hook returned.
    :param directory: a private temporary directory; the core renames it into the cache (or the
        export location) after this returns, and writes the artifact JSON beside the files.

    Used by the kernel cache and by ``JITKernel.export``. Must not pickle. An ``OSError`` (disk
    full) is the environment's: the cache warns and keeps the kernel in memory only.
    """


@hookspec(firstresult=True)
def tilelang_backend_load(artifact: "KernelArtifact", directory: "Path", options: "BuildOptions") -> Any:
    """Restore a kernel saved by ``tilelang_backend_save``, without lowering and without compiling.

    Called by the kernel cache on a disk hit and by ``tilelang.load`` on an exported kernel, in a
    process that may not have imported TVM.

    A target declaring ``compiles_at_load`` (its kernels are saved as source and a launch plan,
    because there is no binary to keep, as for a shader the OS compiles at run time) compiles the
    saved source here, where it can run; where it cannot (build only), loading compiles nothing
    and the call says what is missing. Document what that compile costs.

    :param artifact: the artifact read back from JSON (no TVM objects attached).
    :param directory: the directory the save hook filled. It may be removed as soon as this hook
        returns (the cache evicts entries that loaded kernels came from; ``pickle.loads`` loads
        from a temporary directory): keep what the kernel needs in memory or in a library it has
        loaded, never read the directory later. The conformance suite loads copies and removes
        them before the first call.
    :param options: the build options the kernel was built with.
    :returns: a callable kernel, as ``tilelang_backend_build`` returns.

    Raise :class:`~tilelang_core.errors.ArtifactError` when the files are missing or corrupt; the
    cache then removes the entry and rebuilds (it does the same for ``TypeError``/``ValueError``,
    and an ``OSError`` is the environment's; none of them marks the backend broken).
    """
