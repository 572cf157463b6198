"""Throws thousands of wrong calls at compiled kernels (run in a subprocess by test_fuzz.py).

Each call must either succeed or raise TypeError/ValueError naming one of the kernel's
parameters; anything else (another exception, a crash) fails. Exit code 0 means all good.
"""

from __future__ import annotations

import os
import re
import sys

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
import kernels as K  # noqa: E402

N_EXAMPLES = int(os.environ.get("TL_FUZZ_EXAMPLES", "1500"))

KERNELS = {
    "vadd": (K.build(K.vadd_static()), ["A", "B", "C"]),
    "vadd_out": (K.build(K.vadd_static(), out_idx=[2]), ["A", "B"]),
    "vadd_dyn": (K.build(K.vadd_dynamic(), out_idx=[2]), ["A", "B"]),
    "mm": (K.build(K.matmul_blocked()), ["A", "B", "C"]),
    "axpy": (K.build(K.axpy()), ["X", "Y", "alpha", "count", "negate"]),
    "fill": (K.build(K.scaled_by_scalar_symbol()), ["A", "n", "v"]),
    "pad2": (K.build(K.pad2()), ["A", "Out"]),
    "colmajor": (K.build(K.colmajor()), ["X"]),
}

DTYPES = [torch.float32, torch.float16, torch.float64, torch.int32, torch.int64, torch.bool, torch.bfloat16,
          torch.uint8, torch.complex64]


@st.composite
def tensors(draw):
    ndim = draw(st.integers(0, 3))
    shape = draw(st.lists(st.integers(0, 20), min_size=ndim, max_size=ndim))
    dtype = draw(st.sampled_from(DTYPES))
    t = torch.zeros(shape, dtype=dtype)
    kind = draw(st.sampled_from(["plain", "transpose", "slice", "expand", "meta", "offset", "param"]))
    if kind == "transpose" and ndim >= 2:
        t = t.transpose(0, 1)
    elif kind == "slice" and ndim >= 1 and shape[-1] > 1:
        t = t[..., ::2]
    elif kind == "expand" and ndim >= 1:
        t = torch.zeros([1] * ndim, dtype=dtype).expand(*shape)
    elif kind == "meta":
        t = torch.empty(shape, dtype=dtype, device="meta")
    elif kind == "offset" and t.numel() > 0:
        t = torch.zeros(t.numel() + 3, dtype=dtype)[3:].view(shape)
    elif kind == "param" and dtype.is_floating_point:
        t = torch.nn.Parameter(t)
    return t


def right_tensor(shape):
    return torch.zeros(shape)


values = st.one_of(
    tensors(),
    st.none(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.booleans(),
    st.text(max_size=3),
    st.lists(st.integers(), max_size=3),
    st.builds(object),
    st.sampled_from([right_tensor([16]), right_tensor([8]), right_tensor([4, 4]), right_tensor([5])]),
)

calls = 0


@settings(max_examples=N_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(args=st.lists(values, max_size=6), stream=st.sampled_from([False, True]))
def test_wrong_calls(args, stream):
    """Every kernel gets the same drawn arguments (one call each)."""
    global calls
    kwargs = {"stream": None} if stream else {}
    for kernel, params in KERNELS.values():
        calls += 1
        try:
            kernel(*args, **kwargs)
        except (TypeError, ValueError) as exc:
            msg = str(exc)
            assert msg.startswith(f"{kernel.name}() "), msg
            if len(args) == len(params):
                names = "|".join(map(re.escape, params))
                assert re.search(r"argument '(%s)' \(#\d+\): " % names, msg) or re.search(
                    r"arguments '(%s)' \(#\d+\) and '(%s)' \(#\d+\) overlap in memory" % (names, names), msg), msg


if __name__ == "__main__":
    test_wrong_calls()
    print(f"fuzz: {calls} calls, no crash")
    sys.exit(0)
