"""TileLang execution backend ``tvm_ffi``: TVM runtime modules called through apache-tvm-ffi.

The backend consumes the TVM runtime module that the lowering pipeline builds (host code with the
packed calling convention plus imported device modules) and calls it with torch tensors through
tvm-ffi (DLPack). It is registered under the entry-point group ``tilelang.backends`` as
``tvm_ffi``; see :mod:`tilelang_backend_tvmffi.plugin` for the hooks.

Importing this package is cheap: torch, TVM and tvm-ffi are imported only when a kernel is built,
loaded or probed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

__version__ = "0.1.0"

#: The entry-point / backend name.
BACKEND_NAME = "tvm_ffi"

if TYPE_CHECKING:  # pragma: no cover
    from tilelang_core.artifact import KernelArtifact


def build_kernel(artifact: "KernelArtifact", out_idx: Iterable[int] = (), **options: Any):
    """Build a callable kernel from ``artifact`` (convenience wrapper around the build hook).

    :param artifact: a :class:`~tilelang_core.artifact.KernelArtifact` carrying TVM modules
        (``artifact.tvm_modules``), as the pipeline produces it for ``consumes=["runtime_module"]``.
    :param out_idx: indices of the parameters the kernel allocates and returns (negative allowed).
    :param options: other :class:`~tilelang_core.artifact.BuildOptions` fields.
    :returns: the same callable ``kernel(*inputs, stream=None)`` the build hook returns.
    """
    from tilelang_core.artifact import BuildOptions

    from .kernel import build

    nparams = len(artifact.params)
    normalised = [i + nparams if i < 0 else i for i in out_idx]
    return build(artifact, BuildOptions(out_idx=normalised, **options))


__all__ = ["BACKEND_NAME", "__version__", "build_kernel"]
