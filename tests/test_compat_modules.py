"""The module layout TileLang code imports from, ``PassConfigKey`` and TileLang's pass-config keys,
and what ``tilelang.lower`` results expose."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import PassConfigError


def test_submodules_import_without_tvm_or_torch():
    code = (
        "import sys\n"
        "import tilelang, tilelang.jit, tilelang.engine, tilelang.transform, tilelang.cache, tilelang.env\n"
        "from tilelang.jit import jit, compile, par_compile, JITKernel\n"
        "from tilelang.engine.lower import lower\n"
        "from tilelang.transform import PassConfigKey\n"
        "from tilelang.env import env\n"
        "assert tilelang.jit.compile is tilelang.compile and lower is tilelang.lower\n"
        "assert tilelang.PassConfigKey is PassConfigKey\n"
        "print(sorted(m for m in ('tvm', 'torch') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_transform_pass_context_is_tvms():
    """docs/compatibility.md: ``tilelang.transform.PassContext`` is TVM's. It raised
    ``ModuleNotFoundError: No module named 'tvm.transform'`` (TVM 0.27 has no such module)."""
    import tvm

    import tilelang.transform

    assert tilelang.transform.PassContext is tvm.ir.transform.PassContext
    from tilelang.transform import PassContext

    with PassContext(config={"tirx.noalias": True}) as ctx:
        assert ctx.config["tirx.noalias"]


def test_top_level_profiler_names():
    """docs/compatibility.md lists ``tilelang.Profiler`` as provided (upstream exports it); it was an
    AttributeError."""
    from tilelang import Profiler, TensorSupplyType
    from tilelang_core.profiler import Profiler as core_profiler
    from tilelang_core.profiler import TensorSupplyType as core_supply

    assert Profiler is core_profiler and tilelang.Profiler is core_profiler
    assert TensorSupplyType is core_supply and "Profiler" in dir(tilelang)


def test_jit_module_is_still_the_decorator():
    import tilelang.jit as jit_module

    @jit_module(out_idx=-1)
    def build(n):
        @T.prim_func
        def ones(A: T.Tensor((n,), T.float32)):
            with T.Kernel(1, threads=1):
                for i in T.serial(n):
                    A[i] = T.float32(1)

        return ones

    assert isinstance(build, jit_module.JitFunction)
    assert tilelang.jit is jit_module


def test_language_submodules_are_the_core_modules():
    import tilelang.language.dtypes as via_facade
    import tilelang_core.language.dtypes as core

    assert via_facade is core
    from tilelang.language.dtypes import dtype

    assert dtype is core.dtype and T.dtype is dtype
    with pytest.raises(ModuleNotFoundError):
        import tilelang.language.no_such_module  # noqa: F401


def test_cache_switches(monkeypatch):
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    assert tilelang.is_cache_enabled()
    tilelang.disable_cache()
    try:
        assert not tilelang.is_cache_enabled()
        from tilelang.cache import active_cache

        assert active_cache() is None
    finally:
        tilelang.enable_cache()
    assert tilelang.is_cache_enabled()
    from tilelang.env import env

    monkeypatch.setenv("TILELANG_CACHE_DIR", "/tmp/somewhere")
    assert env.TILELANG_CACHE_DIR == "/tmp/somewhere"


def test_the_env_module_is_the_environment_too(monkeypatch, tmp_path):
    """Upstream's ``tilelang.env`` is its environment object: ``tilelang.env.TILELANG_CACHE_DIR``
    reads the variable and assigning to it sets it for the process (not a module attribute)."""
    import os

    import tilelang.env

    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "a"))
    assert tilelang.env.TILELANG_CACHE_DIR == str(tmp_path / "a")
    tilelang.env.TILELANG_CACHE_DIR = str(tmp_path / "b")
    assert os.environ["TILELANG_CACHE_DIR"] == str(tmp_path / "b") == tilelang.env.env.TILELANG_CACHE_DIR
    assert "TILELANG_CACHE_DIR" not in vars(tilelang.env)
    assert tilelang.env.is_cache_enabled() == tilelang.is_cache_enabled()
    with pytest.raises(AttributeError, match="tilelang.env has no variable or function 'TILELANG_NOPE'; it has: CUDA_HOME"):
        tilelang.env.TILELANG_NOPE


def test_set_log_level_sets_the_tilelang_logger_family():
    import logging

    before = tilelang.logger.level
    try:
        tilelang.set_log_level("warning")
        assert tilelang.logger is logging.getLogger("tilelang") and tilelang.logger.level == logging.WARNING
        assert logging.getLogger("tilelang.jit.diagnostics").getEffectiveLevel() == logging.WARNING
        tilelang.set_log_level(logging.DEBUG)
        assert tilelang.logger.level == logging.DEBUG
        with pytest.raises(ValueError, match="unknown level 'LOUD'"):
            tilelang.set_log_level("LOUD")
        with pytest.raises(ValueError, match="non-negative int, got -1"):
            tilelang.set_log_level(-1)
    finally:
        tilelang.logger.setLevel(before)


def _kernel():
    @T.prim_func
    def add_one(A: T.Tensor((16,), T.float32), B: T.Tensor((16,), T.float32)):
        with T.Kernel(1, threads=16):
            for i in T.Parallel(16):
                B[i] = A[i] + T.float32(1)

    return add_one


def test_pass_config_keys_are_strings_and_mix_with_strings():
    key = tilelang.PassConfigKey.TL_DISABLE_VECTORIZE
    assert key == "tl.disable_vectorize" and str(key) == "tl.disable_vectorize"
    art = tilelang.lower(_kernel(), target="c", pass_configs={key: True})
    assert "omp simd" not in art.kernel_source
    assert art.pass_configs == {"tl.disable_vectorize": True}


def test_tilelang_keys_without_effect_are_accepted_and_change_nothing():
    plain = tilelang.lower(_kernel(), target="c").kernel_source
    configs = {
        tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER: True,
        "tl.disable_warp_specialized": True,
        "tl.disable_data_race_check": True,
        tilelang.PassConfigKey.TIR_SIMPLIFY: {"transitively_prove_inequalities": True},
    }
    assert tilelang.lower(_kernel(), target="c", pass_configs=configs).kernel_source == plain


def test_misspelled_key_is_rejected_with_a_suggestion_and_the_known_keys():
    with pytest.raises(PassConfigError) as info:
        tilelang.lower(_kernel(), target="c", pass_configs={"tl.disable_tma_lowr": True})
    message = str(info.value)
    assert "did you mean 'tl.disable_tma_lower'" in message
    assert "tl.disable_vectorize" in message and "tl.disable_warp_specialized" in message


def test_lower_result_exposes_tilelangs_names():
    art = tilelang.lower(_kernel(), target="c")
    assert art.kernel_source == art.device_source and "add_one" in art.kernel_source
    assert art.target_host is None and art.target == "c"
    assert [p.name for p in art.params] == ["A", "B"]
    assert art.rt_mod is None  # no runtime module was asked for
    assert "add_one" in [g.name_hint for g in art.device_mod.functions]
    gpu = tilelang.lower(_kernel(), target="cuda")
    assert gpu.host_mod is not None and gpu.device_mod is not None
    assert "__global__" in gpu.kernel_source and gpu.target_host == gpu.host_target


def test_jit_kernel_get_kernel_source_accepts_kernel_only():
    kernel = tilelang.compile(_kernel(), target="c", execution_backend="cython")
    assert kernel.get_kernel_source(kernel_only=True) == kernel.get_kernel_source()
    a = torch.arange(16, dtype=torch.float32)
    b = torch.empty(16)
    kernel(a, b)
    torch.testing.assert_close(b, a + 1)


def test_compatibility_doc_lists_every_key_without_effect():
    from pathlib import Path

    from tilelang_core.lowering.configs import CHOICE_CONFIGS, NO_EFFECT, PassConfigKey

    text = (Path(__file__).resolve().parent.parent / "docs" / "compatibility.md").read_text()
    missing = [k for k in NO_EFFECT if f"`{k}`" not in text]
    assert not missing, f"docs/compatibility.md does not list {missing}"
    # every PassConfigKey member is a key that validation accepts
    for member in PassConfigKey:
        if member.value.startswith("tl.") and member.value not in NO_EFFECT:
            value = CHOICE_CONFIGS.get(member.value, (True,))[-1]  # tl.config_index_bitwidth takes 32 or 64
            assert tilelang.lower(_kernel(), target="c", pass_configs={member: value}).kernel_source
        assert member.value in NO_EFFECT or member.value.startswith(("tl.", "tirx.")), member


def test_utils_tensor_supplies_inputs_for_kernel_parameters():
    """``tilelang.utils.tensor`` (TileLang's block-sparse GEMM example imports it at module level)."""
    from tilelang.utils import TensorSupplyType as Kind
    from tilelang.utils.tensor import get_tensor_supply, torch_assert_close
    from tilelang_core.profiler.supply import TensorSupplyError

    assert Kind is tilelang.TensorSupplyType
    assert torch_assert_close is tilelang.testing.torch_assert_close

    @T.prim_func
    def kernel(A: T.Tensor((4, 8), "float16"), I: T.Tensor((5,), "uint8"), B: T.Tensor((T.dynamic("n"),), "float32")):
        with T.Kernel(1):
            B[0] = T.cast(A[0, 0], "float32") + T.cast(I[0], "float32")

    params = tilelang.compile(kernel, target="c").params
    half = get_tensor_supply(Kind.Auto)(params[0])
    assert half.dtype == torch.float16 and half.shape == (4, 8) and half.device.type == "cpu"
    assert bool(((half >= -1) & (half <= 1)).all()) and half.unique().numel() > 2
    small = get_tensor_supply(Kind.Integer)(params[1])
    assert small.dtype == torch.uint8 and small.shape == (5,) and int(small.max()) <= 2
    assert torch.equal(get_tensor_supply("One")(params[0]), torch.ones(4, 8, dtype=torch.float16))
    with pytest.raises(TensorSupplyError, match=r"parameter 'B': a supplied tensor needs a static shape"):
        get_tensor_supply(Kind.Randn)(params[2])
    with pytest.raises(TensorSupplyError, match=r"tensor_supply_type must be a TensorSupplyType"):
        get_tensor_supply("gaussian")


def test_engine_callback_registrations_import_and_refuse():
    """Upstream's gdn examples import register_cuda_postproc_callback unused: the import works;
    a registration, which nothing here would honour, is refused."""
    from tilelang.engine.callback import register_c_postproc, register_cuda_postproc_callback

    with pytest.raises(NotImplementedError, match=r"register_cuda_postproc_callback: post-processing generated source "
                                                  r"is not provided"):
        register_cuda_postproc_callback(lambda code, target: code)
    with pytest.raises(NotImplementedError, match="register_c_postproc"):
        register_c_postproc(lambda code, target: code)


@pytest.mark.parametrize("module,what", [
    ("tilelang.carver.arch", "tilelang.carver is upstream TileLang's hardware-aware tile-size search"),
    ("tilelang.jit.adapter.cutedsl", "tilelang.jit.adapter is upstream TileLang's execution adapters"),
    ("tilelang.language.eager.ast", "tilelang.language.eager is upstream TileLang's AST builder"),
    ("tilelang._ffi_api", "tilelang._ffi_api is upstream TileLang's binding of its C++ library"),
    ("tilelang.autodd", "tilelang.autodd is upstream TileLang's test-case reducer"),
    ("tilelang.utils.language", "tilelang.utils.language is upstream TileLang's buffer helpers"),
    ("tilelang.utils.device", "use torch.cuda.is_available()"),
    ("tilelang.utils.target", "tilelang.utils.target is upstream TileLang's target helpers"),
])
def test_upstream_modules_not_provided_say_so_when_imported(module, what):
    """docs/compatibility.md lists them as not provided; importing one said only "No module named
    ..." (tilelang/__init__.py, _NotProvidedFinder). It is still a ModuleNotFoundError, so code that
    falls back on ImportError keeps working; modules that exist are not affected."""
    import importlib

    with pytest.raises(ModuleNotFoundError, match="which tilelang-core does not provide") as caught:
        importlib.import_module(module)
    assert what in str(caught.value)
    assert importlib.import_module("tilelang.jit.diagnostics")  # a submodule that exists


def test_simplify_prim_func_decorates_a_kernel_factory_without_changing_it():
    """Upstream's bitnet examples import it (ImportError here before); provided with no effect
    (docs/compatibility.md): kernels are simplified when lowered."""
    from tilelang.transform import apply_simplify, simplify_prim_func

    @simplify_prim_func
    def factory(n):
        @T.prim_func
        def double(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=n) as bx:
                for i in T.Parallel(n):
                    B[i] = A[i] * 2.0

        return double

    func = factory(8)
    assert apply_simplify(func) is func
    a = torch.randn(8)
    torch.testing.assert_close(tilelang.compile(func, out_idx=-1, target="c")(a), a * 2)
