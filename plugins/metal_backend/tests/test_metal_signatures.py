"""Every example and tile-operator kernel lowered to Metal: the kernel signatures the backend reads
from the source, the launch plan it makes, and the launch sizes for static and dynamic shapes."""

from __future__ import annotations

import pytest

from tilelang_core.artifact import BuildOptions

import metal_kernels as MK
from tilelang_backend_metal import plan as P
from tilelang_backend_metal.kernel import build
from tilelang_backend_metal.source import METAL_TYPES, parse_kernels

KERNELS = MK.examples() + MK.tileops() + [
    ("scalars:every", MK.every_scalar(), [1], None),
    ("multi:two_kernels", MK.two_kernels(), [1, 2], None),
]


@pytest.fixture(scope="module")
def artifacts():
    """name -> (artifact, out_idx) of every kernel lowered for Metal, outputs applied as compile does."""
    from tilelang_core.jit.outputs import bind_symbols_from_inputs, normalize_out_idx
    from tilelang_core.lowering import lower

    found = {}
    for name, func, out_idx, _ in KERNELS:
        artifact = lower(func, target="metal")
        outputs = normalize_out_idx(out_idx, artifact)
        found[name] = (bind_symbols_from_inputs(artifact, outputs), outputs)
    return found


def test_the_suite_covers_every_example_and_tile_operator_kernel(artifacts):
    names = set(artifacts)
    assert {"example:vector_add[dynamic n=1000]", "example:row_scale[dynamic m=333]", "tileop:matmul_f16",
            "tileop:softmax", "tileop:copy_dynamic"} <= names
    assert MK.NOT_ON_METAL == {"tileop:atomic": "T.atomic_add is not supported on metal targets yet"}


def test_parsed_signatures_match_the_artifact(artifacts):
    for name, (artifact, out_idx) in artifacts.items():
        parsed = parse_kernels(artifact.device_source)
        assert set(parsed) == {k.name for k in artifact.device_kernels}, name
        for kernel in artifact.device_kernels:
            sig = parsed[kernel.name]
            pointers = [a for a in kernel.args if a.kind == "pointer"]
            for i, arg in enumerate(pointers):
                p = sig.buffers[i]
                assert (p.space, p.type, p.ref) == ("device", METAL_TYPES[arg.dtype], "*"), (name, i)
            scalars = [a for a in kernel.args if a.kind == "scalar"]
            if scalars:
                struct = kernel.scalar_struct
                assert struct.binding == len(pointers) and sorted(sig.buffers) == list(range(len(pointers) + 1))
                p = sig.buffers[struct.binding]
                assert (p.space, p.type, p.ref, p.name) == ("constant", struct.type_name, "&", "arg"), name
                assert [s.field for s in struct.slots] == [a.name for a in scalars]
                assert [s.offset for s in struct.slots] == [8 * i for i in range(len(scalars))]
                assert struct.size == 8 * len(scalars)
            else:
                assert kernel.scalar_struct is None and sorted(sig.buffers) == list(range(len(pointers)))
            positions = {p.attribute for p in sig.params if p.attribute != "buffer"}
            assert positions == {"threadgroup_position_in_grid", "thread_position_in_threadgroup"}, name
        build(artifact, BuildOptions(out_idx=out_idx))  # the backend's own checks agree


def test_launch_plan_converts_threadgroups_to_total_threads(artifacts):
    for name, (artifact, out_idx) in artifacts.items():
        plan = P.make_plan(artifact, out_idx)
        for entry, kernel in zip(plan["kernels"], artifact.device_kernels):
            assert entry["name"] == kernel.name and entry["group_size"] == kernel.launch.block
            assert entry["buffers"] == [
                {"buffer": i, "name": a.name, "dtype": a.dtype, "param_index": a.param_index}
                for i, a in enumerate(a for a in kernel.args if a.kind == "pointer")
            ]
            for g, b, t in zip(kernel.launch.grid, kernel.launch.block, entry["threads"]):
                if isinstance(g, int) and isinstance(b, int):
                    assert t == g * b, name


def test_static_launch_sizes():
    from tilelang_core.lowering import lower

    art = lower(MK.tileops_module().matmul(96, 80, 72, 32, 32, 16, "float16", "float32", style="gpu"), target="metal")
    (launch,) = P.launches(P.make_plan(art, []))
    assert art.device_kernels[0].launch.grid == [3, 3, 1] and art.device_kernels[0].launch.block == [128, 1, 1]
    assert launch.static_sizes == ((384, 3, 1), (128, 1, 1))  # 3 threadgroups of 128 along x, 3 along y
    assert launch.sizes({}) == ((384, 3, 1), (128, 1, 1))


@pytest.mark.parametrize("n, threads", [(1, 64), (64, 64), (65, 128), (1000, 1024), (0, 0)])
def test_dynamic_launch_sizes(n, threads):
    from tilelang_core.lowering import lower

    art = lower(MK.scaled("float32"), target="metal")
    (launch,) = P.launches(P.make_plan(art, []))
    assert launch.static_sizes is None
    assert launch.sizes({"n": n}) == ((threads, 1, 1), (64, 1, 1))


def test_two_dimensional_threadgroups_and_the_second_kernel():
    from tilelang_core.lowering import lower

    art = lower(MK.two_kernels(), target="metal")
    first, second = P.launches(P.make_plan(art, [1, 2]))
    assert first.sizes({"n": 100}) == ((128, 1, 1), (64, 1, 1))
    assert second.sizes({"n": 100}) == ((128, 2, 1), (32, 2, 1))
    assert second.buffers == [1, 2] and first.buffers == [0, 1]
    assert [s for s in first.scalars] == [("symbol", "n"), ("param", 3)]
