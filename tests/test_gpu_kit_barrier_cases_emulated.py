"""The GPU kit's barrier cases (scripts/gpu_kit/barrier_cases.py) are right before a GPU runs them.

Every ``barrier.*`` case, with its scalar argument, is lowered for CUDA and run on the emulated
GPU (tests/test_tileops_cuda.py ``_emulated``: one block = one OpenMP team) with the arguments the
kit makes from its specs (tensors from seeds, scalars at their place in the call), several times,
and its outputs are compared with the expected outputs the build computes, by the kit's own
comparison. So a wrong reference or a wrongly passed scalar shows here, not on a lent GPU.
The emulator has no bfloat16 type: the ``bf16_atomics_*`` cases are checked against the same
kernels built for ``c`` instead (what the kit's build does for every case).
"""

from __future__ import annotations

import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests"))

from gpu_kit import tensors  # noqa: E402
from gpu_kit.barrier_cases import barrier_cases  # noqa: E402
from gpu_kit.build_kit import expected_outputs  # noqa: E402
from gpu_kit.worker import compare  # noqa: E402
from private_modules import load_private  # noqa: E402

CU = load_private("test_tileops_cuda", "gpu_kit_barrier_emulator")
CASES = {case.id: case for case in barrier_cases()}
BF16 = sorted(i for i in CASES if "bf16" in i)
LAUNCHES = 5  # a missing barrier shows on some launches only


@pytest.fixture(scope="module")
def runners(tmp_path_factory):
    """CUDA source -> emulator runner (cases that differ only in their scalar share one)."""
    return {}, tmp_path_factory.mktemp("emulated_kit_cases")


def test_every_barrier_feature_has_cases_with_several_scalars_and_threads():
    ids = sorted(CASES)
    for kernel in ("while_counter", "break_out", "local_if"):
        mine = [i for i in ids if i.startswith(f"barrier.{kernel}.")]
        assert {i.split(".")[2] for i in mine} == {"t64", "t256"}, mine
        assert len({i.split(".")[3] for i in mine}) >= 3, mine
    assert "barrier.while_counter.t64.n0" in ids and "barrier.break_out.t256.n7" in ids
    assert {f"barrier.bf16_atomics_{s}" for s in ("shared", "fragment", "local")} <= set(ids)
    assert any(".float32." in i for i in ids if i.startswith("barrier.shared_atomics."))
    assert {"barrier.read_once.t64", "barrier.read_once.t256", "barrier.empty_grid.t64"} <= set(ids)
    for case in CASES.values():
        assert tensors.check_specs(case.params) == [], case.id
        assert case.archs == ("sm_90",)


@pytest.mark.skipif(not CU._gxx_openmp_ok(), reason="g++ is not installed")
@pytest.mark.parametrize("case_id", sorted(set(CASES) - set(BF16)))
def test_emulated_gpu_runs_the_kit_case_as_its_reference_says(case_id, runners):
    from tilelang_core.lowering import lower

    case = CASES[case_id]
    cache, build_dir = runners
    art = lower(case.func(), target="cuda")
    if art.device_source not in cache:
        cache[art.device_source] = CU._emulated(art, build_dir)
    run = cache[art.device_source]
    expected, _, _ = expected_outputs(case)
    scalars = [s for s in case.params if tensors.is_scalar(s)]
    for _ in range(LAUNCHES):
        args = tensors.call_arguments(case.params)
        assert [args[s["name"]] for s in scalars] == [s["value"] for s in scalars]
        run(*args.values())
        got = tensors.outputs_of(case.params, args, None)
        ok, worst, first = compare(got, expected, case.rtol, case.atol, case.checks, args)
        assert ok, (case_id, worst, first)


@pytest.mark.parametrize("case_id", BF16)
def test_bf16_cases_agree_with_their_kernels_built_for_c(case_id):
    from gpu_kit.build_kit import cpu_check

    case = CASES[case_id]
    expected, _, _ = expected_outputs(case)
    assert cpu_check(case, expected) is None
