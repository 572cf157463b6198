"""NVRTC: CUDA C source -> cubin for one architecture (in a worker process under the compile time limit).

**Headers.** TVM's CUDA preamble includes ``<cuda/std/cstdint>`` and ``<cuda/std/type_traits>``
when it sees NVRTC. The real libcu++ headers pull in most of libcu++'s configuration machinery and
cost NVRTC about a second per kernel, several times what the kernel itself costs. The backend puts
its own small versions of these two headers (:data:`~.toolchain.STANDIN_INCLUDE`) first on the
include path: they define the same types and traits, and the test suite proves the machine code
of every example and tile-operator kernel identical to a build with the real headers. Should a
kernel need more of libcu++ than the stand-ins give, its compile fails with them and is retried
with the real headers (slower, never wrong); ``TILELANG_NVRTC_REAL_HEADERS=1`` always uses them.

**Errors** raise :class:`~tilelang_core.errors.BuildError` carrying the NVRTC options, NVRTC's
log and the path of the kept source (also as ``.command``, ``.output``, ``.source_path``). The log
is kept to its first and last 32 KiB as a compiler's output is
(:mod:`tilelang_core.compiler_process`), the whole of it in ``compiler-output.txt`` next to the
kept source: a source with 100000 ``#warning`` lines once made a ``BuildError`` of 13 MB.
Options choosing the architecture (``-arch``, ``--gpu-architecture``) are refused in
``compile_flags`` with :class:`~tilelang_core.errors.CompileFlagsError`: the target says it, and
the launch plan, the cache key and the rebuild for another GPU go by the target's.

**Time.** A compile is bounded by ``$TILELANG_COMPILE_TIMEOUT_SECONDS`` (default 600 s, ``0``:
no limit), as the C compilers are: NVRTC then runs in a worker process that is killed past the
limit (:mod:`.worker`; NVRTC cannot be cancelled in-process while its front end instantiates
templates). With ``0`` it runs in this process, as before. Past the limit: a
:class:`~tilelang_core.errors.BuildError` saying so, with the options and the kept source.

Identical compiles (same source, architecture, options and NVRTC) in one process share one cubin.
"""

from __future__ import annotations

import functools
import hashlib
import re
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from tilelang_core.compiler_process import DEFAULT_TIMEOUT_S, TIMEOUT_ENV, bounded_output, compile_timeout_s
from tilelang_core.env_switches import switch_from_env
from tilelang_core.errors import BuildError, CompileFlagsError

from .arch import Arch
from .toolchain import STANDIN_INCLUDE, Toolchain, ToolchainMissing, toolchain

#: Options every compile gets, before the caller's ``compile_flags``. ``-diag-suppress=177``
#: silences "variable declared but never referenced", which TVM's generated code triggers often.
BASE_OPTIONS = ("-std=c++17", "-diag-suppress=177")

#: Set to 1 to compile with the real libcu++ headers only (no stand-ins).
REAL_HEADERS_ENV = "TILELANG_NVRTC_REAL_HEADERS"

#: NVRTC's options that choose the architecture (``-arch=sm_80``, ``-arch sm_80`` as two flags).
ARCH_OPTIONS = ("-arch", "--gpu-architecture")

#: The file next to a failed compile's kept source that holds NVRTC's whole log.
LOG_FILE = "compiler-output.txt"

_MEMO_CAPACITY = 256
_memo: "OrderedDict[str, Cubin]" = OrderedDict()
_lock = threading.Lock()


@dataclass(frozen=True)
class Cubin:
    """The result of one NVRTC compile."""

    image: bytes
    """The cubin (a CUDA ELF)."""
    arch: Arch
    options: tuple[str, ...]
    """The NVRTC options used, include paths included."""
    log: str
    """NVRTC's log (warnings)."""
    headers: str
    """'standin' or 'real': which libcu++ headers the source saw."""


class _CompileFailed(Exception):
    def __init__(self, options: list[str], log: str) -> None:
        super().__init__(log)
        self.options = options
        self.log = log


class _Stopped(Exception):
    """The compile did not finish: past the time limit, its worker process died, or the worker
    could not run NVRTC."""

    def __init__(self, options: list[str], why: str) -> None:
        super().__init__(why)
        self.options = options
        self.why = why


def _check(result: tuple, what: str):
    err = result[0]
    if int(err) != 0:
        from cuda.bindings import nvrtc

        _, text = nvrtc.nvrtcGetErrorString(err)
        raise RuntimeError(f"{what} failed: {text.decode() if isinstance(text, bytes) else text}")
    return result[1] if len(result) == 2 else result[1:]


def _run_nvrtc(source: bytes, name: str, options: list[str]) -> tuple[bytes, str]:
    """Compile once; returns (cubin, log); raises _CompileFailed with NVRTC's log."""
    from cuda.bindings import nvrtc

    prog = _check(nvrtc.nvrtcCreateProgram(source, f"{name}.cu".encode(), 0, [], []), "nvrtcCreateProgram")
    try:
        encoded = [o.encode() for o in options]
        (status,) = nvrtc.nvrtcCompileProgram(prog, len(encoded), encoded)
        size = _check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
        log_buf = b" " * size
        _check(nvrtc.nvrtcGetProgramLog(prog, log_buf), "nvrtcGetProgramLog")
        log = log_buf.rstrip(b"\0 ").decode(errors="replace").strip()
        if int(status) != 0:
            raise _CompileFailed(options, log)
        size = _check(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
        image = b" " * size
        _check(nvrtc.nvrtcGetCUBIN(prog, image), "nvrtcGetCUBIN")
        return image, log
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _compile(source: bytes, name: str, options: list[str]) -> tuple[bytes, str]:
    """:func:`_run_nvrtc` bounded by :func:`~tilelang_core.compiler_process.compile_timeout_s`:
    in a worker process (:mod:`.worker`) when there is a limit, in this process when there is none.

    :raises _CompileFailed: NVRTC rejected the source.
    :raises _Stopped: past the limit, the worker died, or an NVRTC call failed (out of memory, ...):
        a failure of this compile, not of the backend (it marked the backend broken in this process).
    """
    timeout = compile_timeout_s()
    if timeout is None:
        try:
            return _run_nvrtc(source, name, options)
        except _CompileFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - an NVRTC call that failed: this kernel's BuildError, as the worker's
            raise _Stopped(options, f"NVRTC could not compile it in this process: {type(exc).__name__}: {exc}") from None
    from .worker import CompileTimedOut, WorkerDied, compile_in_worker

    try:
        answer = compile_in_worker(source, name, options, timeout)
    except CompileTimedOut:
        raise _Stopped(options, f"stopped after {timeout:g} s: NVRTC ran longer than ${TIMEOUT_ENV} allows (default "
                                f"{DEFAULT_TIMEOUT_S:g} s; set it higher, or 0 for no limit, if the kernel is merely "
                                f"slow to compile)") from None
    except WorkerDied as exc:
        raise _Stopped(options, f"the NVRTC worker process ended during the compile: {exc}") from None
    if answer[0] == "ok":
        return answer[1], answer[2]
    if answer[0] == "failed":
        raise _CompileFailed(options, answer[1])
    raise _Stopped(options, f"the NVRTC worker process could not compile it: {answer[1]} (with ${TIMEOUT_ENV}=0 "
                            f"NVRTC runs in this process, without a time limit)")


def nvrtc_options(arch: Arch, flags: Sequence[str] = (), *, real_headers: bool = False) -> list[str]:
    """The NVRTC options for ``arch``: architecture, :data:`BASE_OPTIONS`, include paths, ``flags``."""
    tc = toolchain()
    includes: list[Path] = []
    if not real_headers:
        includes.append(STANDIN_INCLUDE)
    includes.append(tc.cuda_include)
    if real_headers and tc.cccl_include is not None and tc.cccl_include != tc.cuda_include:
        includes.append(tc.cccl_include)
    return [f"--gpu-architecture={arch.name}", *BASE_OPTIONS, *(f"-I{p}" for p in includes), *flags]


def _keep_source(name: str, source: str) -> Path:
    directory = Path(tempfile.mkdtemp(prefix="tilelang-nvrtc-"))
    path = directory / f"{re.sub(r'[^A-Za-z0-9_]', '_', name)[:64] or 'kernel'}.cu"
    path.write_text(source)
    return path


def _nvrtc_error(headline: str, source: str, name: str, options: list[str], output: str, log: bool) -> BuildError:
    """The :class:`BuildError` of a compile that failed (``headline``), with the NVRTC options, the
    kept source and, when ``log``, NVRTC's log ``output`` (bounded:
    :func:`~tilelang_core.compiler_process.bounded_output`; all of
    it in :data:`LOG_FILE` next to the kept source); ``.command``/``.output``/``.source`` set."""
    kept = _keep_source(name, source)
    if log:
        output = bounded_output(output, kept.with_name(LOG_FILE))
    return BuildError(
        f"{headline}\nNVRTC options: {' '.join(options)}\nsource kept at: {kept}"
        + (f"\nNVRTC log:\n{output}" if log else ""),
        command=["nvrtc", *options], output=output, source=kept,
    )


def _build_error(name: str, arch: Arch, source: str, failure: _CompileFailed, note: str = "") -> BuildError:
    return _nvrtc_error(f"NVRTC failed to compile kernel '{name}' for {arch.name}{note}", source, name,
                        failure.options, failure.log, log=True)


def _stopped_error(name: str, arch: Arch, source: str, stopped: _Stopped) -> BuildError:
    return _nvrtc_error(f"NVRTC did not finish compiling kernel '{name}' for {arch.name}: {stopped.why}", source,
                        name, stopped.options, stopped.why, log=False)


def check_flags(name: str, arch: Arch, flags: Sequence[str]) -> None:
    """Refuse ``compile_flags`` that choose the architecture (:data:`ARCH_OPTIONS`): NVRTC takes
    the last one given, so the cubin would be for another architecture than the launch plan's.

    :raises CompileFlagsError: naming the flag and the target to use instead.
    """
    for k, flag in enumerate(flags):
        option, equals, value = flag.partition("=")
        if option not in ARCH_OPTIONS:
            continue
        if not equals:
            value = flags[k + 1] if k + 1 < len(flags) else ""
            flag = f"{flag} {value}".strip()
        raise CompileFlagsError(
            f"compile_flags {list(flags)!r} choose the GPU architecture ({flag!r}), but the nvrtc backend takes it "
            f"from the target (kernel '{name}' is built for {arch.name}, and its launch plan, cache entry and "
            f"rebuilds for other GPUs go by that); remove {flag!r} from compile_flags and compile with "
            f"target='cuda -arch={value if value.startswith('sm_') else 'sm_XX'}'"
        )


@functools.lru_cache(maxsize=None)
def nvrtc_accepts(arch_name: str) -> bool:
    """Whether this process's NVRTC compiles for ``arch_name`` (``sm_90a``, ``sm_100f``): it
    compiles an empty program for it, here (no template to hang on, a few milliseconds)."""
    try:
        _run_nvrtc(b"", "arch_check", [f"--gpu-architecture={arch_name}"])
    except _CompileFailed:
        return False
    return True


def known_archs(tc: Toolchain) -> list[str]:
    """Every architecture NVRTC compiles for: each ``sm_XX`` of ``nvrtcGetSupportedArchs``, followed
    by its architecture-specific (``a``) and family (``f``) variants that NVRTC accepts."""
    return [f"sm_{a}{s}" for a in tc.supported_archs for s in ("", "a", "f") if not s or nvrtc_accepts(f"sm_{a}{s}")]


def check_arch(name: str, arch: Arch, tc: Toolchain) -> None:
    """:raises BuildError: NVRTC does not compile for ``arch`` (``sm_50``, ``sm_90f``), listing
    the architectures it does."""
    if arch.number in tc.supported_archs and (not arch.suffix or nvrtc_accepts(arch.name)):
        return
    raise BuildError(
        f"NVRTC {tc.version_text} cannot compile kernel '{name}' for {arch.name}; it supports "
        f"{', '.join(known_archs(tc))}. Choose one of them with target='cuda -arch=sm_XX'"
    )


def compile_cubin(name: str, source: str, arch: Arch, flags: Sequence[str] = (), *, verbose: bool = False) -> Cubin:
    """Compile CUDA ``source`` into a cubin for ``arch``.

    :param name: the kernel's name (for messages and the kept source's file name).
    :param flags: extra NVRTC options (``compile_flags``).
    :raises CompileFlagsError: ``flags`` choose the architecture (:func:`check_flags`).
    :raises BuildError: NVRTC is missing, does not know ``arch``, rejects the source, runs past
        ``$TILELANG_COMPILE_TIMEOUT_SECONDS``, or its worker process cannot run it.
    """
    check_flags(name, arch, flags)
    try:
        tc = toolchain()
    except ToolchainMissing as exc:
        raise BuildError(f"cannot compile kernel '{name}' with NVRTC: {exc}") from None
    check_arch(name, arch, tc)
    real_only = switch_from_env(REAL_HEADERS_ENV, "compile with the real libcu++ headers",
                                "compile with the bundled ones")
    key = hashlib.sha256(
        "\0".join([tc.version_text, arch.name, str(real_only), *flags, source]).encode()
    ).hexdigest()
    with _lock:
        hit = _memo.get(key)
        if hit is not None:
            _memo.move_to_end(key)
            return hit
    encoded = source.encode()
    attempts = [True] if real_only else [False, True]
    first_failure: Optional[_CompileFailed] = None
    result: Optional[Cubin] = None
    for real in attempts:
        if real and tc.cccl_include is None:
            break
        options = nvrtc_options(arch, flags, real_headers=real)
        if verbose:
            print(f"[tilelang nvrtc] {name}: nvrtc {' '.join(options)}")
        try:
            image, log = _compile(encoded, name, options)
        except _Stopped as stopped:
            raise _stopped_error(name, arch, source, stopped) from None
        except _CompileFailed as failure:
            if first_failure is None:
                first_failure = failure
            if real or real_only:
                raise _build_error(name, arch, source, failure) from None
            continue
        result = Cubin(image=image, arch=arch, options=tuple(options), log=bounded_output(log),
                       headers="real" if real else "standin")
        break
    if result is None:
        assert first_failure is not None
        note = " (no libcu++ headers installed to retry with: pip install nvidia-cuda-cccl)"
        raise _build_error(name, arch, source, first_failure, note) from None
    if verbose and result.log:
        print(f"[tilelang nvrtc] {name}: NVRTC log:\n{result.log}")
    with _lock:
        _memo[key] = result
        while len(_memo) > _MEMO_CAPACITY:
            _memo.popitem(last=False)
    return result
