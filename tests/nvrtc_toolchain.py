"""Whether the nvrtc backend and its NVRTC wheels are installed here (shared by tests that compile with NVRTC)."""

from __future__ import annotations


def nvrtc_available() -> bool:
    """True when ``tilelang_backend_nvrtc`` imports and finds its NVRTC toolchain."""
    try:
        from tilelang_backend_nvrtc.toolchain import toolchain

        toolchain()
    except Exception:  # noqa: BLE001 - plugin or its NVRTC wheels missing
        return False
    return True
