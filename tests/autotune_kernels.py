"""Kernels and a throwaway backend for the profiler and autotuner tests (an importable module).

Tests put this directory on ``sys.path`` and import it, so that a second process and the workers
of a Dask cluster find the same functions (by module and name) and the same source text.

* ``matmul``: the blocked CPU matmul of examples/matmul.py as a ``@tilelang.jit`` function, with
  ``MATMUL_CONFIGS`` whose times are far apart (1x1 blocks are >10x slower than 32x32 ones),
  plus one config that fails to compile (block size 0) and one that computes a wrong result
  (``skip_k=1`` drops the last K slice). Real lowering, a real C compiler, the cython backend.
* ``TUNEKIT``: the name of a throwaway backend (``install_tunekit(root)`` writes it): its build
  hook returns a Python runner computing ``C = A + B`` that sleeps ``speed`` * 0.5 ms per call
  (``speed`` is read from the kernel name ``vadd_s<speed>``), adds 1 when the name contains
  ``wrong``, refuses to build names containing ``fail``, and builds slowly for ``slowbuild``.
  Builds and loads are logged to ``$TL_TEST_BUILD_LOG`` / ``$TL_TEST_LOAD_LOG``, every call
  (kernel name, start and end on the monotonic clock) to ``$TL_TEST_CALL_LOG``, every build's
  span (the same) to ``$TL_TEST_BUILD_SPAN_LOG``.
"""

from __future__ import annotations

from pathlib import Path

import tilelang
import tilelang.language as T

#: Unlikely to be the name of any real backend.
TUNEKIT = "zq_tunekit"

TUNEKIT_BODY = '''
import hashlib
import json
import os
import re
import time
from pathlib import Path

from tilelang_core.errors import ArtifactError, BuildError


def _log(var, text):
    path = os.environ.get(var)
    if path:
        with open(path, "a") as f:
            f.write(text + "\\n")


class Runner:
    def __init__(self, artifact, options, library):
        self.artifact = artifact
        self.options = options
        self.library = library
        m = re.search(r"_s(\\d+)", artifact.name)
        self.delay = int(m.group(1)) * 0.0005 if m else 0.0
        self.bias = 1.0 if "wrong" in artifact.name else 0.0

    def __call__(self, a, b, stream=None):
        start = time.monotonic()
        if self.delay:
            time.sleep(self.delay)
        _log("TL_TEST_CALL_LOG", f"{self.artifact.name} {start!r} {time.monotonic()!r}")
        return a + b + self.bias


@hookimpl
def tilelang_backend_build(artifact, options):
    if "fail" in artifact.name:
        raise BuildError(f"cannot build {artifact.name}: it is meant to fail")
    start = time.monotonic()
    log = os.environ.get("TL_TEST_BUILD_LOG")  # read now: a slow build must log where it started
    span_log = os.environ.get("TL_TEST_BUILD_SPAN_LOG")
    if "slowbuild" in artifact.name:
        time.sleep(float(os.environ.get("TL_TEST_SLOW_BUILD", "5")))
    if log:
        with open(log, "a") as f:
            f.write(f"{os.getpid()} {artifact.name}\\n")
    if span_log:
        with open(span_log, "a") as f:
            f.write(f"{artifact.name} {start!r} {time.monotonic()!r}\\n")
    return Runner(artifact, options, ("LIB:" + artifact.name).encode())


@hookimpl
def tilelang_backend_save(kernel, directory):
    (Path(directory) / "kernel.bin").write_bytes(kernel.library)
    (Path(directory) / "manifest.json").write_text(json.dumps({"sha256": hashlib.sha256(kernel.library).hexdigest()}))


@hookimpl
def tilelang_backend_load(artifact, directory, options):
    try:
        library = (Path(directory) / "kernel.bin").read_bytes()
        manifest = json.loads((Path(directory) / "manifest.json").read_text())
    except (OSError, ValueError) as exc:
        raise ArtifactError(f"zq_tunekit: cannot read {directory}: {exc}")
    if hashlib.sha256(library).hexdigest() != manifest["sha256"]:
        raise ArtifactError(f"zq_tunekit: {directory} is corrupt")
    _log("TL_TEST_LOAD_LOG", f"{os.getpid()} {artifact.name}")
    return Runner(artifact, options, library)
'''


def install_tunekit(root: Path) -> Path:
    """Write the throwaway ``zq_tunekit`` distribution under ``root`` (target ``c``, priority 0)."""
    from tilelang_core.testkit import plugin_source, spec_dict, write_distribution

    spec = spec_dict(TUNEKIT, {"c": {"priority": 0, "consumes": ["device_source"], "device_language": "c"}})
    return write_distribution(root, TUNEKIT, plugin_source(spec, body=TUNEKIT_BODY))


def vadd_func(name: str, n: int):
    """A real prim_func ``C = A + B`` over ``n`` float32 values, named ``name``."""

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(1) as _:
            for i in T.Parallel(n):
                C[i] = A[i] + B[i]

    return main.with_attr("global_symbol", name)


@tilelang.jit(out_idx=-1, execution_backend=TUNEKIT, target="c")
def kit_vadd(n, speed=1, variant=""):
    """The test kit's kernel: ``speed`` sets its time per call, ``variant`` its misbehaviour."""
    return vadd_func(f"vadd_s{speed}{variant}", n)


KIT_CONFIGS = [{"speed": 4}, {"speed": 40}, {"speed": 1, "variant": "_fail"}, {"speed": 0, "variant": "_wrong"}]


def kit_reference(a, b):
    return a + b


kit_vadd_tuned = tilelang.autotune(
    configs=KIT_CONFIGS, warmup=1, rep=5, timeout=60, ref_prog=kit_reference, cache_key="kit-v1"
)(kit_vadd)


# -- the real blocked matmul ---------------------------------------------------------------------


def blocked_matmul(M, N, K, block_M=32, block_N=32, block_K=32, skip_k=0, dtype="float32"):
    """C = A @ B in block_M x block_N tiles; ``skip_k`` > 0 leaves out that many K slices (wrong)."""
    k_tiles = T.ceildiv(K, block_K) - skip_k

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            acc = T.alloc_fragment((block_M, block_N), dtype)
            for i, j in T.Parallel(block_M, block_N):
                acc[i, j] = T.cast(0, dtype)
            for ko in T.serial(k_tiles):
                for kk in T.serial(block_K):
                    for i, j in T.Parallel(block_M, block_N):
                        if by * block_M + i < M and bx * block_N + j < N and ko * block_K + kk < K:
                            acc[i, j] = acc[i, j] + A[by * block_M + i, ko * block_K + kk] * B[ko * block_K + kk, bx * block_N + j]
            for i, j in T.Parallel(block_M, block_N):
                if by * block_M + i < M and bx * block_N + j < N:
                    C[by * block_M + i, bx * block_N + j] = acc[i, j]

    return main


#: Blocks run one after the other: on a loaded 2-core machine OpenMP threads make timings erratic.
SERIAL = {"tl.disable_parallel_blocks": True}


@tilelang.jit(out_idx=-1, target="c", pass_configs=SERIAL)
def matmul(M, N, K, block_M=32, block_N=32, block_K=32, skip_k=0):
    """The blocked matmul as a ``@tilelang.jit`` function."""
    return blocked_matmul(M, N, K, block_M, block_N, block_K, skip_k)


#: Configs of ``matmul`` for 128x128x128: 1x1 blocks are >10x slower than 32x32 ones on CPU
#: (about 3.3 ms against 0.18 ms on the 2-core development machine; 4x4 blocks take 0.26 ms,
#: too close for a loaded machine to order them reliably).
MATMUL_CONFIGS = [
    {"block_M": 1, "block_N": 1},
    {"block_M": 32, "block_N": 32},
    {"block_M": 0, "block_N": 32},  # compile error: division by zero in T.ceildiv
    {"block_M": 32, "block_N": 32, "skip_k": 1},  # wrong result: the last K slice is missing
]
MATMUL_FASTEST = {"block_M": 32, "block_N": 32}


def matmul_reference(a, b):
    return a @ b


matmul_tuned = tilelang.autotune(
    configs=MATMUL_CONFIGS, warmup=2, rep=10, ref_prog=matmul_reference, atol=1e-3, rtol=1e-3, cache_key="matmul-v1"
)(matmul)
