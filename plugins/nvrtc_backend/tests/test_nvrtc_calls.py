"""What happens on a call, up to the GPU: argument checks, launch batches, the driver sequence,
modules keyed by content, the architecture check, save and load in a fresh process.

The launch itself cannot happen here (no GPU); the driver sequence is checked against a stand-in
of ``cuda.bindings.driver`` that records the calls (tests named ``..._with_standin_driver``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.artifact import BuildOptions
from tilelang_core.calling import CallChecker
from tilelang_core.errors import ArtifactError
from tilelang_core.lowering import lower

from tilelang_backend_nvrtc import plugin
from tilelang_backend_nvrtc.arch import Arch
from tilelang_backend_nvrtc.driver import Driver


def scaled_add(N, block=128, value=1.0):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32"),
             s: T.float32):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    C[bx * block + i] = A[bx * block + i] * s + B[bx * block + i] + value

    return main


def _built(func, out_idx=None, target="cuda -arch=sm_90"):
    from tilelang_core.jit.outputs import bind_symbols_from_inputs, normalize_out_idx

    artifact = lower(func, target=target)
    outputs = normalize_out_idx(out_idx, artifact)
    artifact = bind_symbols_from_inputs(artifact, outputs)
    return plugin.tilelang_backend_build(artifact=artifact, options=BuildOptions(out_idx=outputs))


# -- argument checks (the contract's messages) ----------------------------------------------------


def test_argument_checks_use_the_contract_messages():
    kernel = _built(scaled_add(T.dynamic("n")), out_idx=[2])
    a = torch.zeros(10)
    with pytest.raises(ValueError, match=r"^main\(\) argument 'A' \(#0\): expected a tensor on cuda, got cpu$"):
        kernel._checker.bind((a, a, 1.0))
    # The same checker (the core's) on the CPU lowering of the kernel: tensors that exist here pass
    # the device check.
    from tilelang_core.jit.outputs import bind_symbols_from_inputs

    check = CallChecker(bind_symbols_from_inputs(lower(scaled_add(T.dynamic("n")), target="c"), [2]), [2]).bind
    with pytest.raises(TypeError, match=r"^main\(\) takes 3 tensor/scalar arguments \(A, B, s\), got 2$"):
        check((a, a))
    with pytest.raises(TypeError, match=r"^main\(\) argument 'A' \(#0\): expected a torch.Tensor, got list$"):
        check(([1.0], a, 1.0))
    with pytest.raises(ValueError, match=r"^main\(\) argument 'B' \(#1\): expected dtype float32, got float16$"):
        check((a, a.half(), 1.0))
    with pytest.raises(ValueError, match=r"^main\(\) argument 'B' \(#1\): expected 1 dimensions, got 2$"):
        check((a, a.view(2, 5), 1.0))
    with pytest.raises(ValueError, match=r"^main\(\) argument 'B' \(#1\): shape\[0\] binds symbol 'n' = 9, "
                                         r"but argument 'A' bound it to 10$"):
        check((a, torch.zeros(9), 1.0))
    with pytest.raises(TypeError, match=r"^main\(\) argument 's' \(#2\): expected a float, got str$"):
        check((a, a, "1"))
    call = check((a, a, 2))
    assert call.symbols == {"n": 10} and call.values[3] == 2 and call.device == torch.device("cpu")
    assert call.values[2].shape == (10,) and call.result() is call.values[2]  # C, allocated


def test_static_shape_layout_and_int_scalar_messages():
    @T.prim_func
    def main(A: T.Tensor((4, 8), "float32"), k: T.int32):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(8):
                A[0, i] = A[0, i] + T.cast(k, "float32")

    art = lower(main, target="c")  # a CPU artifact: the same checker, tensors that exist here
    check = CallChecker(art, []).bind
    with pytest.raises(ValueError, match=r"^main\(\) argument 'A' \(#0\): expected shape\[1\] == 8, got 7$"):
        check((torch.zeros(4, 7), 1))
    with pytest.raises(ValueError, match=r"^main\(\) argument 'A' \(#0\): expected a contiguous tensor, got strides "
                                         r"\(1, 4\); call .contiguous\(\)$"):
        check((torch.zeros(8, 4).t(), 1))
    with pytest.raises(TypeError, match=r"^main\(\) argument 'k' \(#1\): expected an int, got float$"):
        check((torch.zeros(4, 8), 1.5))
    with pytest.raises(ValueError, match=r"^main\(\) argument 'k' \(#1\): value 4294967296 does not fit in int32$"):
        check((torch.zeros(4, 8), 1 << 32))
    call = check((torch.zeros(4, 8), True))
    assert call.values[1] == 1 and type(call.values[1]) is int and call.device == torch.device("cpu")


# -- launch batches and the driver sequence --------------------------------------------------------


def test_launch_batch_computes_sizes_from_symbols_and_packs_arguments():
    kernel = _built(scaled_add(T.dynamic("n")), out_idx=[2])
    a, b, c = torch.zeros(1000), torch.zeros(1000), torch.zeros(1000)
    batch = kernel.launch_batch({0: a, 1: b, 2: c, 3: 2.5}, {"n": 1000})
    ((name, dims, address),) = batch
    assert name == "main_kernel" and dims == (8, 1, 1, 128, 1, 1, 0)
    values = _arguments_at(address, kernel.plan["kernels"][0]["args"])  # what cuLaunchKernel will read
    assert values[:3] == [a.data_ptr(), b.data_ptr(), c.data_ptr()]
    assert 2.5 in values and 1000 in values
    assert kernel.launch_batch({0: a, 1: b, 2: c, 3: 2.5}, {"n": 0}) == []  # empty grid: nothing launched
    a2 = torch.zeros(7)  # the next call refills the same array
    ((_, dims, again),) = kernel.launch_batch({0: a2, 1: b, 2: c, 3: -1.0}, {"n": 7})
    assert again == address and dims[0] == 1
    values = _arguments_at(again, kernel.plan["kernels"][0]["args"])
    assert values[0] == a2.data_ptr() and -1.0 in values and 7 in values


def test_threads_fill_their_own_argument_arrays():
    """Two threads calling one kernel never write into the array the other one launches with."""
    import threading

    kernel = _built(scaled_add(T.dynamic("n")), out_idx=[2])
    a, b, c = torch.zeros(8), torch.zeros(8), torch.zeros(8)
    both_filled = threading.Barrier(2)
    seen = {}

    def fill(tag):
        ((_, _, address),) = kernel.launch_batch({0: a, 1: b, 2: c, 3: float(tag)}, {"n": 8})
        both_filled.wait()  # the other thread has filled its array too (and both are alive)
        seen[tag] = (address, _arguments_at(address, kernel.plan["kernels"][0]["args"]))

    threads = [threading.Thread(target=fill, args=(t,)) for t in (1, 2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert seen[1][0] != seen[2][0]
    assert 1.0 in seen[1][1] and 2.0 not in seen[1][1] and 2.0 in seen[2][1] and 1.0 not in seen[2][1]


class FakeTensor:
    """Stands for a CUDA tensor where only its address is read (packing the launch arguments)."""

    def __init__(self, address: int) -> None:
        self.address = address

    def data_ptr(self) -> int:
        return self.address


def half_scalars(N=128):
    @T.prim_func
    def main(A: T.Tensor((N,), "float16"), B: T.Tensor((N,), "bfloat16"), s: T.float16, t: T.bfloat16):
        with T.Kernel(1, threads=N) as bx:
            for i in T.Parallel(N):
                A[i] = A[i] * s
                B[i] = B[i] * t

    return main


def _bits16(value: float, dtype) -> int:
    """The bits torch gives ``value`` (a double) in ``dtype``."""
    return torch.tensor([value], dtype=torch.float64).to(dtype).view(torch.int16).item() & 0xFFFF


@pytest.mark.parametrize("s, t", [(70000.0, 1e39), (-70000.0, -1e39), (1e300, -3.5e38)])
def test_half_and_bfloat16_scalars_past_their_range_are_passed_as_infinity(s, t):
    """The call checker takes any float a double holds (docs/backend-conventions.md); a float16 or
    bfloat16 scalar too large for its type is its infinity, as a C conversion gives, not a bare
    OverflowError from struct.pack."""
    kernel = _built(half_scalars())
    ((_, _, address),) = kernel.launch_batch({0: FakeTensor(4096), 1: FakeTensor(8192), 2: s, 3: t}, {})
    values = _arguments_at(address, kernel.plan["kernels"][0]["args"])
    assert values == [4096, 8192, _bits16(s, torch.float16), _bits16(t, torch.bfloat16)]
    assert values[2:] == [0x7C00 if s > 0 else 0xFC00, 0x7F80 if t > 0 else 0xFF80]  # +-inf


def _arguments_at(address, args):
    """The argument values behind a ``void**`` argument array, read as the plan's types."""
    import ctypes

    from tilelang_backend_nvrtc.plan import scalar_ctype

    pointers = (ctypes.c_void_p * len(args)).from_address(address)
    out = []
    for arg, pointer in zip(args, pointers):
        ctype = ctypes.c_void_p if arg["kind"] == "pointer" else scalar_ctype(arg["dtype"])
        out.append(ctype.from_address(pointer).value)
    return out


class StandinDriver:
    """Records the calls of the ``cuda.bindings.driver`` functions the backend uses."""

    class CUfunction_attribute:
        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8

    def __init__(self, current_context: int = 0):
        self.calls = []
        self.current = current_context
        self.loaded = 0

    def _record(self, name, *args):
        self.calls.append((name, *args))

    def cuDeviceGet(self, index):
        self._record("cuDeviceGet", index)
        return 0, 100 + index

    def cuDevicePrimaryCtxRetain(self, device):
        self._record("cuDevicePrimaryCtxRetain", device)
        return 0, 5000 + device

    def cuCtxPushCurrent(self, ctx):
        self._record("cuCtxPushCurrent", ctx)
        return (0,)

    def cuCtxPopCurrent(self):
        self._record("cuCtxPopCurrent")
        return 0, 0

    def cuCtxGetCurrent(self):
        return 0, self.current

    def cuModuleLoadData(self, image):
        self._record("cuModuleLoadData", bytes(image[:4]))
        self.loaded += 1
        return 0, 9000 + self.loaded

    def cuModuleGetFunction(self, module, name):
        self._record("cuModuleGetFunction", module, name)
        return 0, (module, name)

    def cuFuncSetAttribute(self, fn, attr, value):
        self._record("cuFuncSetAttribute", fn, attr, value)
        return (0,)

    def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        self._record("cuLaunchKernel", fn, (gx, gy, gz), (bx, by, bz), smem, stream, params)
        return (0,)

    def cuGetErrorName(self, err):
        return 0, b"CUDA_ERROR_STANDIN"


def test_launch_sequence_with_standin_driver():
    cu = StandinDriver(current_context=0)
    driver = Driver(cu)
    module = driver.module("digest-a", b"\x7fELF...", 0, ["first", "second"])
    assert driver.module("digest-a", b"\x7fELF...", 0, ["first", "second"]) is module  # loaded once per device
    loads = [c for c in cu.calls if c[0] == "cuModuleLoadData"]
    assert len(loads) == 1 and ("cuDevicePrimaryCtxRetain", 100) in cu.calls  # torch's primary context
    cu.calls.clear()
    params = ((1, 2), (None, None))
    batch = [("first", (4, 1, 1, 128, 1, 1, 64 * 1024), params), ("second", (2, 2, 1, 32, 1, 1, 0), params)]
    driver.launch(module, 0, batch, stream=777)
    driver.launch(module, 0, batch, stream=778)
    names = [c[0] for c in cu.calls]
    assert names.count("cuFuncSetAttribute") == 1  # raised once, above 48 KB
    attr = [c for c in cu.calls if c[0] == "cuFuncSetAttribute"][0]
    assert attr[2:] == (8, 64 * 1024) and attr[1] == (9001, b"first")
    launches = [c for c in cu.calls if c[0] == "cuLaunchKernel"]
    assert [(c[1][1], c[5]) for c in launches] == [(b"first", 777), (b"second", 777), (b"first", 778), (b"second", 778)]
    assert launches[0][2:5] == ((4, 1, 1), (128, 1, 1), 64 * 1024)
    assert names.count("cuCtxPushCurrent") == 2 and names.count("cuCtxPopCurrent") == 2  # no context current


def test_no_context_switch_when_torch_context_is_current_with_standin_driver():
    cu = StandinDriver()
    driver = Driver(cu)
    module = driver.module("d", b"\x7fELF", 0, ["k"])
    cu.current = 5100  # the primary context of device 0 (cuDeviceGet -> 100, retain -> 5100)
    cu.calls.clear()
    driver.launch(module, 0, [("k", (1, 1, 1, 1, 1, 1, 0), ((), ()))], stream=0)
    assert [c[0] for c in cu.calls] == ["cuLaunchKernel"]


def test_same_named_kernels_get_their_own_modules_with_standin_driver():
    one = _built(scaled_add(256, value=1.0), out_idx=[2])
    two = _built(scaled_add(256, value=2.0), out_idx=[2])
    assert one.plan["kernels"][0]["name"] == two.plan["kernels"][0]["name"] == "main_kernel"
    assert one.digest != two.digest
    driver = Driver(StandinDriver())
    m1 = driver.module(one.digest, one.cubin, 0, ["main_kernel"])
    m2 = driver.module(two.digest, two.cubin, 0, ["main_kernel"])
    assert m1 is not m2 and m1.handle != m2.handle


def test_failed_driver_call_is_a_clear_error_with_standin_driver():
    from tilelang_backend_nvrtc.driver import LaunchError

    cu = StandinDriver()
    cu.cuLaunchKernel = lambda *a: (1,)
    driver = Driver(cu)
    module = driver.module("d", b"\x7fELF", 0, ["k"])
    with pytest.raises(LaunchError, match=r"cuLaunchKernel\('k', grid \(1, 1, 1\), .* failed: CUDA_ERROR_STANDIN"):
        driver.launch(module, 0, [("k", (1, 1, 1, 1, 1, 1, 0), ((), ()))], stream=0)


# -- architectures ---------------------------------------------------------------------------------


def test_cubin_compatibility_rules():
    assert Arch.parse("sm_80").runs_on(Arch.parse("sm_86")) and not Arch.parse("sm_86").runs_on(Arch.parse("sm_80"))
    assert not Arch.parse("sm_80").runs_on(Arch.parse("sm_90"))
    assert Arch.parse("sm_90a").runs_on(Arch.parse("sm_90")) and not Arch.parse("sm_90a").runs_on(Arch.parse("sm_91"))
    assert Arch.parse("9.0") == Arch.parse("sm_90") == Arch.parse("90")
    with pytest.raises(ValueError, match="not a CUDA architecture"):
        Arch.parse("compute_90")


class StandinTorchCuda:
    """A torch stand-in reporting one GPU of a given compute capability."""

    def __init__(self, capability):
        self.cuda = self
        self.capability = capability

    def get_device_capability(self, index=None):
        return self.capability


def test_wrong_architecture_is_rebuilt_from_source_with_standin_device():
    kernel = _built(scaled_add(256), out_idx=[2], target="cuda -arch=sm_80")
    kernel._torch = StandinTorchCuda((9, 0))
    digest, image = kernel._image_for(0)
    from tilelang_backend_nvrtc.cubin import read_cubin

    assert digest != kernel.digest and read_cubin(image).sm == 90
    kernel._torch = StandinTorchCuda((8, 6))  # sm_80 code runs on sm_86 unchanged
    kernel._devices.clear()
    assert kernel._image_for(0) == (kernel.digest, kernel.cubin)


def test_wrong_architecture_without_nvrtc_is_refused_with_standin_device(monkeypatch):
    from tilelang_backend_nvrtc import toolchain

    kernel = _built(scaled_add(256), out_idx=[2], target="cuda -arch=sm_80")

    def missing():
        raise toolchain.ToolchainMissing("NVRTC cannot be loaded (stand-in)")

    monkeypatch.setattr(toolchain, "toolchain", missing)
    kernel._torch = StandinTorchCuda((9, 0))
    with pytest.raises(ArtifactError, match=r"built for sm_80, which cannot run on cuda:0 \(sm_90\), and NVRTC is "
                                            r"not here to rebuild it .*target='cuda -arch=sm_90'"):
        kernel._image_for(0)


# -- save and load -------------------------------------------------------------------------------


def test_load_checks_the_saved_files(tmp_path):
    kernel = _built(scaled_add(T.dynamic("n")), out_idx=[2])
    plugin.tilelang_backend_save(kernel=kernel, directory=tmp_path)
    loaded = plugin.tilelang_backend_load(artifact=kernel.artifact, directory=tmp_path, options=kernel.options)
    assert loaded.cubin == kernel.cubin and loaded.plan == kernel.plan
    cubin = tmp_path / "kernel.cubin"
    cubin.write_bytes(kernel.cubin[:-1] + bytes([kernel.cubin[-1] ^ 1]))
    with pytest.raises(ArtifactError, match="does not match its recorded SHA-256"):
        plugin.tilelang_backend_load(artifact=kernel.artifact, directory=tmp_path, options=kernel.options)
    cubin.write_bytes(kernel.cubin)
    plan = json.loads((tmp_path / "nvrtc_plan.json").read_text())
    plan["kernels"][0]["block"] = [256, 1, 1]
    (tmp_path / "nvrtc_plan.json").write_text(json.dumps(plan))
    with pytest.raises(ArtifactError, match="launch plan does not match"):
        plugin.tilelang_backend_load(artifact=kernel.artifact, directory=tmp_path, options=kernel.options)
    (tmp_path / "nvrtc_plan.json").unlink()
    with pytest.raises(ArtifactError, match="incomplete or corrupt"):
        plugin.tilelang_backend_load(artifact=kernel.artifact, directory=tmp_path, options=kernel.options)


def test_exported_kernel_loads_in_a_fresh_process_without_nvrtc_or_tvm(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    kernel = tilelang.compile(scaled_add(T.dynamic("n")), out_idx=[2], execution_backend="nvrtc",
                              target="cuda -arch=sm_90")
    kernel.export(tmp_path / "k")
    script = textwrap.dedent(
        f"""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "tvm" or name.startswith("tvm.") or name == "cuda.bindings.nvrtc":
                    raise ImportError("blocked in this test: " + name)
        sys.meta_path.insert(0, Block())
        import torch, tilelang
        k = tilelang.load({str(tmp_path / 'k')!r})
        assert k.runner.cubin[:4] == b"\\x7fELF", "no cubin"
        try:
            k(torch.zeros(4), torch.zeros(4), 1.0)
        except Exception as exc:
            print(type(exc).__name__, exc)
        print("modules:", sorted(m for m in sys.modules if m.startswith(("tvm", "cuda.bindings"))))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TILELANG_DISABLE_CACHE": "1"})
    assert proc.returncode == 0, proc.stderr
    if not torch.cuda.is_available():
        assert "BackendUnavailableError main() cannot run on this machine: no CUDA driver on this machine" in proc.stdout, proc.stdout
    assert "'cuda.bindings.nvrtc'" not in proc.stdout and "'tvm'" not in proc.stdout, proc.stdout


def test_random_wrong_calls_only_raise_the_contract_errors():
    """2000 random calls against the checker: a TypeError/ValueError or a pass, nothing else."""
    import random

    from tilelang_core.jit.outputs import bind_symbols_from_inputs

    rng = random.Random(15)
    checkers = [
        CallChecker(bind_symbols_from_inputs(lower(scaled_add(T.dynamic("n")), target="c"), [2]), [2]).bind,
        _built(scaled_add(T.dynamic("n")), out_idx=[2])._checker.bind,
    ]
    pool = [None, "x", 1, -1, 2.5, True, 1 << 70, [1.0], torch.zeros(()), torch.zeros(5), torch.zeros(5).half(),
            torch.zeros(2, 3), torch.zeros(6)[::2], torch.zeros(5, dtype=torch.int32), torch.zeros(0),
            torch.zeros(5).to_sparse(), torch.empty(5, device="meta")]
    outcomes = set()
    for _ in range(2000):
        args = tuple(rng.choice(pool) for _ in range(rng.choice([0, 1, 2, 3, 3, 3, 4])))
        try:
            rng.choice(checkers)(args)
            outcomes.add("ok")
        except (TypeError, ValueError) as exc:
            assert str(exc).startswith("main() "), exc
            outcomes.add(type(exc).__name__)
    assert {"TypeError", "ValueError"} <= outcomes
