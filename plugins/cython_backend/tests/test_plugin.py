"""The entry point, the declaration, the probe and the cheap import of the plugin module."""

from __future__ import annotations

from importlib.metadata import entry_points

from tilelang_core import schema
from tilelang_core.capabilities import Availability, BackendSpec
from tilelang_core.hookspecs import PLUGIN_API_VERSION


def test_entry_point_is_registered():
    eps = [ep for ep in entry_points(group="tilelang.backends") if ep.name == "cython"]
    assert len(eps) == 1 and eps[0].value == "tilelang_backend_cython.plugin"
    assert eps[0].dist.name == "tilelang-backend-cython"


def test_declaration_validates():
    from tilelang_backend_cython import plugin

    spec = schema.validate_python(
        BackendSpec, {**plugin.tilelang_backend_spec(), "distribution": "tilelang-backend-cython", "version": "0.1.0"}
    )
    assert plugin.TILELANG_PLUGIN_API == PLUGIN_API_VERSION == spec.plugin_api_version
    c, cuda = spec.targets["c"], spec.targets["cuda"]
    assert c.priority == 100 and c.consumes == ["device_source"] and c.device_language == "c"
    assert cuda.priority == 50 and cuda.cuda_streams and cuda.requires.executables == ["nvcc"]


def test_probe():
    import torch

    from tilelang_backend_cython import plugin

    assert plugin.tilelang_backend_probe(target_kind="c") == Availability.yes()
    cuda = plugin.tilelang_backend_probe(target_kind="cuda")
    if not torch.cuda.is_available():
        assert not cuda.available and ("no CUDA driver" in cuda.reason or "no CUDA device" in cuda.reason)


def test_dlpack_exchange_api_version():
    from tilelang_backend_cython import _dispatch

    major, minor = _dispatch.dlpack_api_version()
    assert major == 1 and minor >= 3
