"""The CUDA driver API (``cuda.bindings.driver``): modules, functions, launches.

- Whether a driver and a device are there: :func:`driver_problem` (``cuInit`` raises
  ``DynamicLibNotFoundError`` from ``cuda.pathfinder`` when ``libcuda.so.1`` is missing).
- Modules are loaded into **torch's primary context** of the tensors' device (the context the
  CUDA runtime, and so torch, uses) and kept per (cubin SHA-256, device): two different kernels
  with the same name never share a module, and one cubin is loaded once per device.
- A launch makes that context current only when it is not already (push/pop), raises the
  function's dynamic shared memory limit once when a launch needs more than 48 KB (and again
  only if a later launch needs more), and goes on the stream it is given.

:class:`Driver` takes the bindings module as a parameter so the launch sequence can be tested on
a machine without a GPU with a stand-in that records the calls.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Optional

#: Dynamic shared memory a kernel may use without raising its limit.
DEFAULT_SHARED_LIMIT = 48 * 1024

#: What to do on a machine that cannot run kernels.
RUN_ELSEWHERE_HINT = "export the kernel and load it where there is a GPU"


class LaunchError(RuntimeError):
    """A driver call failed while loading or launching a kernel."""


def _check(cu: Any, result: Any, what: str) -> Any:
    if isinstance(result, tuple):
        err, rest = result[0], result[1:]
    else:
        err, rest = result, ()
    if int(err) != 0:
        try:
            _, name = cu.cuGetErrorName(err)
            detail = name.decode() if isinstance(name, bytes) else str(name)
        except Exception:  # noqa: BLE001
            detail = str(err)
        raise LaunchError(f"{what} failed: {detail}")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else rest


@dataclass
class LoadedModule:
    """A cubin loaded into one device's primary context."""

    handle: Any
    context: Any
    functions: dict[str, Any]
    shared_limit: dict[str, int] = field(default_factory=dict)


class Driver:
    """The driver calls the backend makes, over a ``cuda.bindings.driver``-like module ``cu``."""

    def __init__(self, cu: Any) -> None:
        self.cu = cu
        self._lock = threading.Lock()
        self._contexts: dict[int, Any] = {}
        self._context_ids: dict[int, int] = {}
        self._modules: dict[tuple[str, int], LoadedModule] = {}
        self._attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES

    def primary_context(self, device_index: int) -> Any:
        """Torch's (the runtime's) primary context of device ``device_index``, retained once."""
        ctx = self._contexts.get(device_index)
        if ctx is None:
            cu = self.cu
            device = _check(cu, cu.cuDeviceGet(device_index), f"cuDeviceGet({device_index})")
            ctx = _check(cu, cu.cuDevicePrimaryCtxRetain(device), f"cuDevicePrimaryCtxRetain(device {device_index})")
            self._contexts[device_index] = ctx
            self._context_ids[device_index] = int(ctx)
        return ctx

    def module(self, digest: str, image: bytes, device_index: int, names: list[str]) -> LoadedModule:
        """The module of cubin ``image`` (SHA-256 ``digest``) on a device, loaded on first use."""
        key = (digest, device_index)
        loaded = self._modules.get(key)
        if loaded is not None:
            return loaded
        with self._lock:
            loaded = self._modules.get(key)
            if loaded is not None:
                return loaded
            cu = self.cu
            ctx = self.primary_context(device_index)
            _check(cu, cu.cuCtxPushCurrent(ctx), "cuCtxPushCurrent")
            try:
                handle = _check(cu, cu.cuModuleLoadData(image), f"cuModuleLoadData (cuda:{device_index})")
                functions = {
                    n: _check(cu, cu.cuModuleGetFunction(handle, n.encode()), f"cuModuleGetFunction({n!r})") for n in names
                }
            finally:
                cu.cuCtxPopCurrent()
            loaded = LoadedModule(handle, ctx, functions)
            self._modules[key] = loaded
            return loaded

    def launch(self, module: LoadedModule, device_index: int, launches: list[tuple], stream: int) -> None:
        """Launch ``(name, (gx, gy, gz, bx, by, bz, smem), params)`` entries in order on ``stream``;
        ``params`` is what ``cuLaunchKernel`` takes as ``kernelParams`` (the address of an argument
        pointer array, :mod:`.parameters`, or a ``(values, types)`` tuple)."""
        cu = self.cu
        pushed = False
        current = cu.cuCtxGetCurrent()
        if int(current[0]) != 0 or int(current[1]) != self._context_ids[device_index]:
            _check(cu, cu.cuCtxPushCurrent(module.context), "cuCtxPushCurrent")
            pushed = True
        try:
            for name, dims, params in launches:
                fn = module.functions[name]
                smem = dims[6]
                if smem > DEFAULT_SHARED_LIMIT and smem > module.shared_limit.get(name, DEFAULT_SHARED_LIMIT):
                    _check(cu, cu.cuFuncSetAttribute(fn, self._attr, smem),
                           f"cuFuncSetAttribute({name!r}, max dynamic shared memory = {smem})")
                    module.shared_limit[name] = smem
                _check(
                    cu,
                    cu.cuLaunchKernel(fn, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], smem, stream, params, 0),
                    f"cuLaunchKernel({name!r}, grid {dims[0:3]}, block {dims[3:6]}, shared memory {smem})",
                )
        finally:
            if pushed:
                cu.cuCtxPopCurrent()


_driver: Optional[Driver] = None
_problem: Optional[str] = None
_probed = False
_probe_lock = threading.Lock()


def _probe() -> None:
    global _driver, _problem, _probed
    with _probe_lock:
        if _probed:
            return
        try:
            from cuda.bindings import driver as cu
        except Exception as exc:  # noqa: BLE001
            _problem = f"cuda-bindings cannot be imported ({type(exc).__name__}: {exc})"
            _probed = True
            return
        try:
            (err,) = cu.cuInit(0)
        except Exception as exc:  # noqa: BLE001 - DynamicLibNotFoundError when libcuda.so.1 is missing
            _problem = f"no CUDA driver on this machine ({type(exc).__name__}: libcuda.so.1 cannot be loaded)"
            _probed = True
            return
        if int(err) != 0:
            _problem = f"the CUDA driver does not initialise (cuInit: {err!r}); no usable GPU on this machine"
        else:
            err, count = cu.cuDeviceGetCount()
            if int(err) != 0 or count == 0:
                _problem = "no CUDA device on this machine (the CUDA driver reports none)"
            else:
                _driver = Driver(cu)
        _probed = True


def driver_problem() -> Optional[str]:
    """Why kernels cannot run here (no driver, no device), or None when they can. Cached."""
    _probe()
    return _problem


def get_driver() -> Driver:
    """The process's :class:`Driver`; :raises BackendUnavailableError: no driver or no device."""
    _probe()
    if _driver is None:
        from tilelang_core.errors import BackendUnavailableError

        raise BackendUnavailableError(f"{_problem}; {RUN_ELSEWHERE_HINT}")
    return _driver
