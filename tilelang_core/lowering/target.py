"""Target resolution: argument, else the enclosing ``with tvm.target.Target(...)``, else
``$TILELANG_DEFAULT_TARGET``, else auto."""

from __future__ import annotations

from typing import Any, Optional

from ..errors import TargetError

#: Target families by TVM target kind.
GPU_KINDS = ("cuda", "rocm", "metal", "opencl", "vulkan", "webgpu", "nvptx")
CPU_KINDS = ("c", "llvm")
#: GPU targets whose TVM code generators emulate float8 with bit tricks that are wrong for zero,
#: subnormals, NaN and overflow (checked in their generated source): float8/6/4 is refused there as
#: on CPU targets (lowering/cpu_dtypes.py).
NARROW_FLOAT_EMULATED_KINDS = ("metal", "opencl")

#: DLPack device family of the tensors a target's kernels take.
DEVICE_OF_KIND = {
    "c": "cpu",
    "llvm": "cpu",
    "cuda": "cuda",
    "nvptx": "cuda",
    "rocm": "rocm",
    "metal": "metal",
    "opencl": "opencl",
    "vulkan": "vulkan",
    "webgpu": "webgpu",
}


#: Architecture CUDA kernels are lowered for when the target names none, no GPU is visible and
#: ``$TILELANG_CUDA_ARCH`` is unset (documented in docs/pipeline.md). TVM alone would pick sm_50,
#: which current toolkits no longer compile for.
DEFAULT_CUDA_ARCH = "sm_80"

#: Environment variable naming the CUDA architecture for targets without ``-arch``.
CUDA_ARCH_ENV = "TILELANG_CUDA_ARCH"


def default_cuda_arch() -> str:
    """The ``sm_XX`` for a CUDA target without ``-arch``.

    ``$TILELANG_CUDA_ARCH`` (``sm_90``, ``90`` or ``9.0``), else the current GPU's as torch sees
    it, else :data:`DEFAULT_CUDA_ARCH`.

    :raises TargetError: ``$TILELANG_CUDA_ARCH`` is not an architecture.
    """
    import os
    import re

    env = os.environ.get(CUDA_ARCH_ENV, "").strip()
    if env:
        # a compute capability of one or two digits of major version and one of minor (sm_75,
        # sm_100a): 'sm_2' stopped in TVM's code generator as an error at the kernel's line, and
        # 'sm_1000' or twenty digits in nvcc
        if re.fullmatch(r"sm_[1-9]\d{1,2}[af]?", env):
            return env
        if re.fullmatch(r"[1-9]\d{1,2}", env):
            return f"sm_{env}"
        if re.fullmatch(r"[1-9]\d?\.\d", env):
            major, minor = env.split(".")
            return f"sm_{major}{minor}"
        raise TargetError(f"${CUDA_ARCH_ENV}={env!r} is not a CUDA architecture; use e.g. sm_90, 90 or 9.0")
    try:
        import torch

        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return f"sm_{major}{minor}"
    except Exception:  # noqa: BLE001 - torch without CUDA support
        pass
    return DEFAULT_CUDA_ARCH


def _with_cuda_arch(target: Any) -> Any:
    """A CUDA target config (kind name or dict) with ``arch`` filled in when it has none."""
    if isinstance(target, str):
        text = target.strip()
        if text.startswith("{"):
            import json

            try:
                target = json.loads(text)
            except ValueError:
                return target  # let TVM report it
        elif text == "cuda":
            target = {"kind": "cuda"}
        else:
            return target
    if isinstance(target, dict) and target.get("kind") == "cuda" and not target.get("arch"):
        target = {**target, "arch": default_cuda_arch()}
    return target


def _check_cuda_config(target: Any, described: str) -> None:
    """Refuse, in words of this package, what a CUDA target dict asks that TVM 0.27 cannot build
    (TVM's own message was a failed C++ check, or a list of every option it knows)."""
    if not (isinstance(target, dict) and target.get("kind") == "cuda"):
        return
    if "code" in target:
        raise TargetError(
            f"cannot understand target {described}: 'code' (TileLang's list of architectures one build covers) is not "
            f"an option of TVM 0.27's cuda target; compile once per architecture ('arch': 'sm_100a', then 'sm_103a')")
    arch = target.get("arch")
    if isinstance(arch, str) and not arch.startswith("sm_"):
        raise TargetError(
            f"cannot understand target {described}: 'arch' must be a real GPU architecture 'sm_<major><minor>' "
            f"(e.g. 'sm_90', 'sm_90a'), got {arch!r}"
            + (f"; for the virtual architecture {arch!r} give 'sm_{arch[len('compute_'):]}'"
               if arch.startswith("compute_") else ""))


def auto_target_kind() -> str:
    """``cuda`` when torch sees a CUDA device, ``metal`` when MPS is available, else ``c``."""
    try:
        import torch  # lazy: importing torch is slow
    except ImportError:  # pragma: no cover - torch is a dependency
        return "c"
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "metal"
    return "c"


#: Environment variable naming the target ``"auto"`` means (as in TileLang): a target string
#: (``c``, ``llvm``, ``cuda -arch=sm_90``) or a JSON object (``{"kind": "cuda", "arch": "sm_80"}``).
DEFAULT_TARGET_ENV = "TILELANG_DEFAULT_TARGET"


def env_default_target() -> Any:
    """``$TILELANG_DEFAULT_TARGET`` as a target string or dict; None when unset or ``auto``.

    :raises TargetError: a value that starts like a JSON object but is not one with a ``kind``.
    """
    import json
    import os

    text = os.environ.get(DEFAULT_TARGET_ENV, "").strip()
    if not text or text == "auto":
        return None
    if not text.startswith("{"):
        return text
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise TargetError(
            f"{DEFAULT_TARGET_ENV}={text!r} looks like a JSON object but does not parse ({exc}). "
            'Use JSON syntax, with quoted keys: {"kind": "cuda", "arch": "sm_90"}; or a target string such as \'cuda\''
        ) from None
    if not isinstance(value, dict) or not isinstance(value.get("kind"), str):
        raise TargetError(f'{DEFAULT_TARGET_ENV}={text!r}: a JSON target needs a "kind" string, e.g. {{"kind": "cuda"}}')
    return value


def resolve_target(target: Any = "auto", target_host: Any = None):
    """Return a ``tvm.target.Target`` (with host set for GPU targets).

    :param target: ``"auto"``/None (the enclosing ``with tvm.target.Target(...)``, else
        :func:`env_default_target`, else :func:`auto_target_kind`), a target string (``"c"``,
        ``"llvm"``, ``"cuda -arch=sm_90"``, ``"metal"``), a dict accepted by ``tvm.target.Target``,
        or a ``Target``.
    :param target_host: host target for GPU kinds; default ``llvm`` when TVM has LLVM, else ``c``.
    :raises TargetError: the target cannot be understood.
    """
    import tvm

    described = repr(target)
    if target is None or (isinstance(target, str) and target.strip() == "auto"):
        current = tvm.target.Target.current(allow_none=True)
        if current is not None:
            target = current
        elif (from_env := env_default_target()) is not None:
            target, described = from_env, f"{from_env!r} (from {DEFAULT_TARGET_ENV})"
        else:
            target = auto_target_kind()
    if isinstance(target, str) and target.strip() == "":
        raise TargetError("target must not be empty; use e.g. 'c', 'llvm', 'cuda' or 'auto'")
    if not isinstance(target, (str, dict, tvm.target.Target)):
        raise TargetError(
            f"target must be 'auto', a target string, a dict or a tvm.target.Target, got {type(target).__name__}"
        )
    if isinstance(target, str):
        target = parse_target_string(target)
    target = _with_cuda_arch(target)
    _check_cuda_config(target, described)
    try:
        resolved = target if isinstance(target, tvm.target.Target) else tvm.target.Target(target)
    except Exception as exc:  # noqa: BLE001 - TVM raises various errors for bad strings
        raise TargetError(
            f"cannot understand target {described}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else exc}. "
            "Use e.g. 'c', 'llvm', 'cuda', 'cuda -arch=sm_90' or 'metal'."
        ) from None
    kind = resolved.kind.name
    if kind in GPU_KINDS:
        host = target_host if target_host is not None else resolved.host
        if host is None:
            host = "llvm" if tvm.runtime.enabled("llvm") else "c"
        if isinstance(host, str):
            host = parse_target_string(host)
        try:
            host_target = host if isinstance(host, tvm.target.Target) else tvm.target.Target(host)
        except Exception as exc:  # noqa: BLE001
            raise TargetError(f"cannot understand target_host {target_host!r}: {exc}") from None
        resolved = tvm.target.Target(resolved, host=host_target)
    elif target_host is not None:
        # CPU targets are their own host; a different host makes no sense.
        pass
    return resolved


_LIST_OPTIONS = ("keys", "mattr", "libs", "model")


def parse_target_string(text: str) -> Any:
    """``"cuda -arch=sm_90"`` -> ``{"kind": "cuda", "arch": "sm_90"}`` (TVM 0.27 only takes dicts).

    Strings that already are a single kind or a JSON object are returned as they are.
    """
    text = text.strip()
    if text.startswith("{") or " " not in text:
        return text
    tokens = text.split()
    config: dict[str, Any] = {"kind": tokens[0]}
    for token in tokens[1:]:
        if not token.startswith("-"):
            raise TargetError(f"cannot understand target {text!r}: option {token!r} does not start with '-'")
        key, eq, value = token.lstrip("-").partition("=")
        if not eq:
            config[key] = True
        elif key in _LIST_OPTIONS:
            config[key] = [v for v in value.split(",") if v]
        elif value.lstrip("-").isdigit():
            config[key] = int(value)
        elif value.lower() in ("true", "false"):
            config[key] = value.lower() == "true"
        else:
            config[key] = value
    return config


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)) or type(value).__name__ == "Array":
        return ",".join(str(v) for v in value)
    return value


def target_string(target: Any) -> str:
    """The target (without its host) as a CLI-style string, e.g. ``"cuda -arch=sm_90"``.

    Options equal to the kind's defaults are left out, so ``Target("c")`` gives ``"c"``.
    """
    import tvm

    kind = target.kind.name
    exported = dict(target.export())
    base: dict[str, Any] = {"kind": kind}
    if kind == "cuda" and exported.get("arch"):
        base["arch"] = exported["arch"]  # a bare CUDA target would make TVM probe for a GPU
    defaults = dict(tvm.target.Target(base).export())
    parts = [kind]
    for key in sorted(exported):
        if key in ("kind", "tag", "keys", "host"):
            continue
        value = exported[key]
        if key in defaults and str(defaults[key]) == str(value) and not (kind == "cuda" and key == "arch"):
            continue
        if isinstance(value, bool):
            if value:
                parts.append(f"-{key}")
            continue
        parts.append(f"-{key}={_plain(value)}")
    return " ".join(parts)


def arch_of(target: Any) -> Optional[str]:
    """The GPU architecture of a CUDA target (``"sm_90"``), None for other kinds."""
    if target.kind.name != "cuda":
        return None
    try:
        value = target.attrs.get("arch")
    except Exception:  # noqa: BLE001
        return None
    return str(value) if value else None


def device_of(kind: str) -> str:
    """DLPack device family of a target kind."""
    return DEVICE_OF_KIND.get(kind, kind)


def max_threads_of(target: Any) -> int:
    """Threads-per-block limit of a GPU target (1024 if the target does not say)."""
    try:
        value = target.attrs.get("max_num_threads")
        if value is not None:
            return int(value)
    except Exception:  # noqa: BLE001
        pass
    return 1024
