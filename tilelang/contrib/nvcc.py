"""``tilelang.contrib.nvcc``: compile a CUDA source string with the CUDA toolkit's ``nvcc``.

:func:`compile_cuda` writes the source to a temporary folder, runs ``nvcc`` on it (bounded by
``$TILELANG_COMPILE_TIMEOUT_SECONDS``) and returns the PTX, cubin or fatbin it produced. None of
TileLang-Core's backends calls it (the nvrtc backend compiles with NVRTC); it is here for code
written against upstream TileLang that calls nvcc itself. The helpers it uses are module
attributes so that a caller (or a test) can replace one of them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from typing import Any, Optional, Sequence, Union

from tilelang.env import env
from tilelang_core.compiler_process import TIMEOUT_ENV as _TIMEOUT_ENV, compile_timeout_s
from tilelang_core.errors import BuildError, TargetError

__all__ = [
    "compile_cuda",
    "get_nvcc_compiler",
    "get_nvcc_subprocess_env",
    "get_target_arch",
    "get_target_code_list",
    "get_target_compute_version",
    "parse_compute_version",
]

_FORMATS = ("ptx", "cubin", "fatbin")
_CODE_RE = re.compile(r"sm_\d+[af]?")


def _get_compile_timeout_seconds() -> Optional[float]:
    """The nvcc time limit from ``$TILELANG_COMPILE_TIMEOUT_SECONDS``: None (no limit) when it is
    unset, empty or 0, else a positive finite number of seconds (parsed as the backends' compiler
    runs parse it, :func:`tilelang_core.compiler_process.compile_timeout_s`, whose default of
    600 s applies to them only).

    :raises SettingError: (a ``ValueError``) the value is not a number, negative, or over 1000000.
    """
    if not os.environ.get(_TIMEOUT_ENV, "").strip():
        return None
    return compile_timeout_s()


def get_target_code_list(code: Optional[Sequence[str]]) -> list[str]:
    """The ``sm_XX`` codes a CUDA target's ``code`` attribute lists ([] for None).

    :raises TargetError: (a ``ValueError``) ``code`` is not a non-empty list of ``sm_XX``
        names (``sm_90``, ``sm_100a``, ``sm_100f``).
    """
    if code is None:
        return []
    if isinstance(code, str) or not isinstance(code, (list, tuple)) or not code:
        raise TargetError(
            f"CUDA target code must be a non-empty list of names such as ['sm_100a'], got {code!r}"
        )
    codes = [str(c) for c in code]
    for c in codes:
        if not _CODE_RE.fullmatch(c):
            raise TargetError(
                f"CUDA target code {c!r} in {code!r} is not an sm_XX name (such as 'sm_90' or 'sm_100a')"
            )
    return codes


def get_nvcc_compiler() -> str:
    """Path of ``nvcc``: on ``$PATH``, else ``$CUDA_HOME/bin/nvcc``.

    :raises BuildError: neither exists.
    """
    found = shutil.which("nvcc")
    if found:
        return found
    home = env.CUDA_HOME
    if home and os.path.isfile(os.path.join(home, "bin", "nvcc")):
        return os.path.join(home, "bin", "nvcc")
    raise BuildError("nvcc not found: put the CUDA toolkit's bin folder on PATH or set CUDA_HOME")


def get_nvcc_subprocess_env() -> Optional[dict]:
    """Environment for the nvcc process (None: this process's own)."""
    return None


def get_target_compute_version(target: Any = None) -> str:
    """``"major.minor"`` of a CUDA target's ``arch`` (the current target when None), else of the
    architecture TileLang-Core defaults to (``$TILELANG_CUDA_ARCH``, the GPU torch sees, sm_80)."""
    from tilelang_core.lowering.target import arch_of, default_cuda_arch

    arch = None
    if target is None:
        import tvm

        target = tvm.target.Target.current(allow_none=True)
    if target is not None:
        arch = arch_of(target)
    arch = arch or default_cuda_arch()
    digits = re.fullmatch(r"sm_(\d+)(\d)[af]?", arch)
    if digits is None:
        raise TargetError(f"CUDA architecture {arch!r} is not an sm_XX name")
    return f"{digits.group(1)}.{digits.group(2)}"


def parse_compute_version(compute_version: str) -> tuple[int, int]:
    """``(9, 0)`` for the compute version ``"9.0"`` (what :func:`get_target_compute_version` gives).

    :raises ValueError: not ``"<major>.<minor>"`` with two integers, naming the value.
    """
    major, dot, minor = str(compute_version).partition(".")
    try:
        if not dot:
            raise ValueError
        return int(major), int(minor.split(".")[0])
    except ValueError:
        raise ValueError(f"parse_compute_version: expected a compute version such as '8.6', got "
                         f"{compute_version!r}") from None


def get_target_arch(compute_version: str) -> str:
    """``"120"`` for compute version ``"12.0"``."""
    major, _, minor = str(compute_version).partition(".")
    return f"{major}{minor}"


def _arch_flags(arch: Union[None, str, Sequence[str]]) -> list[str]:
    if arch is None:
        return [f"-arch=sm_{get_target_arch(get_target_compute_version(None))}"]
    if isinstance(arch, str):
        return [arch if arch.startswith("-") else f"-arch={arch}"]
    return [str(a) for a in arch]


def compile_cuda(
    code: str,
    target_format: str = "ptx",
    arch: Union[None, str, Sequence[str]] = None,
    options: Union[None, str, Sequence[str]] = None,
    path_target: Optional[str] = None,
    verbose: bool = False,
) -> bytearray:
    """Compile CUDA source ``code`` with nvcc and return the ``target_format`` output's bytes.

    :param target_format: ``"ptx"``, ``"cubin"`` or ``"fatbin"``.
    :param arch: ``None`` (the current target's architecture), ``"sm_90"``, or nvcc flags
        (``["-gencode", "arch=compute_90,code=sm_90"]``).
    :param options: more nvcc flags.
    :param path_target: also keep the output at this path.
    :param verbose: print the command and nvcc's output.
    :raises BuildError: nvcc is missing, fails, or runs past ``$TILELANG_COMPILE_TIMEOUT_SECONDS``
        (the process is killed; the message has the command and the source).
    """
    if target_format not in _FORMATS:
        raise ValueError(f"compile_cuda: target_format must be one of {_FORMATS}, got {target_format!r}")
    timeout = _get_compile_timeout_seconds()
    extra = [options] if isinstance(options, str) else list(options or [])
    folder = tempfile.mkdtemp(prefix="tilelang-nvcc-")
    src = os.path.join(folder, "kernel.cu")
    out = path_target or os.path.join(folder, f"kernel.{target_format}")
    try:
        with open(src, "w") as f:
            f.write(code)
        cmd = [get_nvcc_compiler(), f"--{target_format}", "-O3", *_arch_flags(arch), *extra, "-o", out, src]
        if verbose:
            print(" ".join(cmd))
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=get_nvcc_subprocess_env())
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
            raise BuildError(
                f"NVCC compilation timed out after {timeout:g} seconds (${_TIMEOUT_ENV}); the "
                f"process was killed.\nCommand: {' '.join(cmd)}\nSource:\n{code}",
                command=cmd, output=_text(output), source=src,
            ) from None
        if verbose and output:
            print(_text(output))
        if proc.returncode != 0:
            raise BuildError(
                f"nvcc failed (exit status {proc.returncode}).\nCommand: {' '.join(cmd)}\n"
                f"Output:\n{_text(output)}\nSource:\n{code}",
                command=cmd, output=_text(output), source=src,
            )
        with open(out, "rb") as f:
            return bytearray(f.read())
    finally:
        if str(env.TILELANG_CLEANUP_TEMP_FILES) != "0":
            shutil.rmtree(folder, ignore_errors=True)


def _text(output: Any) -> str:
    if output is None:
        return ""
    return output.decode("utf-8", "replace") if isinstance(output, bytes) else str(output)
