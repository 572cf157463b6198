"""A factory's parameter used only in a kernel's parameter annotations is the factory's value, not
a module global of the same name (language/core.py ``_resolve_annotation_names``).

TVMScript evaluates annotations again from the source, and a name only annotations use is not in
the function's closure: with a global ``out_dtype``/``M`` in the module, ``scale(4, 4, "float32")``
compiled an int32 output of 8 elements and returned it, with half of it never written. Checked
with and without ``from __future__ import annotations`` (annotations as strings).
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from backend_pairs import cpu_pairs  # noqa: E402

MODULE = '''{future}
import tilelang
import tilelang.language as T

out_dtype = "int32"  # unrelated globals named like the factory's parameters
M = 8


def scale(N, M, out_dtype):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((M,), out_dtype)):
        with T.Kernel(1, threads=4) as bx:
            for i in T.Parallel(4):
                B[i] = A[i] * 1.75

    return main
'''


@pytest.mark.parametrize("future", ["", "from __future__ import annotations"], ids=["objects", "strings"])
@pytest.mark.parametrize("backend,target", cpu_pairs())
def test_a_factory_parameter_in_an_annotation_is_not_shadowed_by_a_global(tmp_path, backend, target, future):
    import tilelang

    path = tmp_path / "factory.py"
    path.write_text(MODULE.format(future=future))
    module = runpy.run_path(str(path))
    out = tilelang.compile(module["scale"](4, 4, "float32"), out_idx=-1, target=target, execution_backend=backend)(
        torch.ones(4))
    assert out.dtype == torch.float32 and out.tolist() == [1.75] * 4


def test_a_global_used_only_in_annotations_still_resolves():
    import tilelang.language as T

    @T.prim_func
    def main(A: T.Tensor((WIDTH,), "float32")):
        with T.Kernel(1, threads=1):
            A[0] = 1.0

    assert [int(d) for d in main.buffer_map[main.params[0]].shape] == [WIDTH]


WIDTH = 6
