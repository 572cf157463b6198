"""The plugin's entry point, declaration, hook signatures and probe."""

from __future__ import annotations

from importlib.metadata import entry_points

import pluggy
import pytest

from tilelang_core import hookspecs
from tilelang_core import schema
from tilelang_core.capabilities import Availability, BackendSpec


def test_entry_point_is_registered():
    eps = [ep for ep in entry_points(group="tilelang.backends") if ep.name == "tvm_ffi"]
    assert len(eps) == 1
    assert eps[0].value == "tilelang_backend_tvmffi.plugin"
    assert eps[0].dist is not None and eps[0].dist.name == "tilelang-backend-tvmffi"


def test_declaration_validates_and_orders_priorities():
    from tilelang_backend_tvmffi import plugin

    spec = schema.validate_python(BackendSpec, plugin.tilelang_backend_spec())
    assert spec.name == "tvm_ffi" and spec.distribution == "tilelang-backend-tvmffi"
    assert spec.targets["llvm"].priority == 100
    assert spec.targets["cuda"].priority == 100 and spec.targets["cuda"].cuda_streams
    assert spec.targets["c"].priority < 100  # below the cython backend's C path
    for cap in spec.targets.values():
        assert cap.consumes == ["runtime_module"]
        assert {"tvm", "tvm_ffi"} <= set(cap.requires.python_modules)


def test_hooks_match_the_specification():
    from tilelang_backend_tvmffi import plugin

    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    pm.register(plugin, name="tvm_ffi")
    pm.check_pending()
    spec = pm.hook.tilelang_backend_spec()
    assert spec["name"] == "tvm_ffi"
    assert pm.hook.tilelang_backend_probe(target_kind="llvm") == Availability.yes()


def test_probe_llvm_and_c():
    from tilelang_backend_tvmffi.probe import probe

    assert probe("llvm").available
    c = probe("c")
    import shutil

    if any(shutil.which(x) for x in ("g++", "gcc", "clang++", "clang", "c++", "cc")):
        assert c.available, c.reason
    else:
        assert not c.available and "compiler" in c.reason


def test_probe_cuda_reports_why_not():
    import torch
    import tvm

    from tilelang_backend_tvmffi.probe import probe

    result = probe("cuda")
    if tvm.runtime.enabled("cuda") and torch.cuda.is_available():
        assert result.available
    else:
        assert not result.available
        assert result.reason.startswith("no CUDA device") or "TVM built without CUDA" in result.reason, result.reason


@pytest.mark.parametrize("kind, human", [("rocm", "ROCm"), ("metal", "Metal")])
def test_probe_other_device_kinds_ask_tvm(kind, human):
    import tvm

    from tilelang_backend_tvmffi.probe import probe

    result = probe(kind)
    if not tvm.runtime.enabled(kind):
        assert not result.available
        assert result.reason == f"TVM built without {human} runtime"


def test_probe_unknown_kind():
    from tilelang_backend_tvmffi.probe import probe

    assert not probe("vulkan").available
