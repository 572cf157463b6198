"""``tilelang.testing``: requirement decorators, tolerant tensor comparison, seeding, main()."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap

import pytest
import torch

import tilelang.testing as tt


def _skip_reason(func):
    marks = [m for m in getattr(func, "pytestmark", []) if m.name == "skipif"]
    return [(bool(m.args[0]), m.kwargs.get("reason", "")) for m in marks]


def test_requires_cuda_skips_without_a_device_and_says_why():
    @tt.requires_cuda
    def needs_gpu():
        pass

    (skipped, reason), = _skip_reason(needs_gpu)
    assert skipped == (not torch.cuda.is_available())
    if skipped:
        assert "CUDA" in reason and "no CUDA device" in reason


def test_requires_cuda_also_works_called_without_arguments():
    """``@requires_cuda()`` (upstream's is a TVM Feature, callable empty) was a TypeError here."""
    @tt.requires_cuda()
    def needs_gpu():
        pass

    @tt.requires_cuda
    def also_needs_gpu():
        pass

    assert _skip_reason(needs_gpu) == _skip_reason(also_needs_gpu) != []


def test_requires_cuda_compute_version_forms_compare_against_the_device():
    have = tt.cuda_compute_version()
    cases = {
        tt.requires_cuda_compute_version_ge: lambda v: have >= v,
        tt.requires_cuda_compute_version_gt: lambda v: have > v,
        tt.requires_cuda_compute_version_lt: lambda v: have < v,
        tt.requires_cuda_compute_version_le: lambda v: have <= v,
        tt.requires_cuda_compute_version_eq: lambda v: have == v,
    }
    for make, holds in cases.items():
        requirement = make(8, 0)
        expected = torch.cuda.is_available() and holds((8, 0))
        assert requirement.available() == expected, make.__name__
        assert "8.0" in requirement.name
    # the general form with an explicit mode, and a bad mode
    assert tt.requires_cuda_compute_version(9, 0, mode="ge").available() == (torch.cuda.is_available() and have >= (9, 0))
    with pytest.raises(ValueError, match="mode must be one of"):
        tt.requires_cuda_compute_version(9, 0, mode="approx")


def test_requires_package_checks_importability():
    present = tt.requires_package("torch", "pytest")
    absent = tt.requires_package("torch", "no_such_package_for_tilelang_tests")
    assert present.available()
    assert not absent.available()

    @absent
    def test_something():
        pass

    (skipped, reason), = _skip_reason(test_something)
    assert skipped and "no_such_package_for_tilelang_tests" in reason and "torch" not in reason.split(":")[-1]
    with pytest.raises(TypeError):
        tt.requires_package()


def test_requires_llvm_matches_tvm_build():
    import tvm

    has_llvm = tvm.get_global_func("target.build.llvm", allow_missing=True) is not None
    assert tt.requires_llvm.available() == has_llvm


def test_requirement_marks_work_in_pytest_param():
    marks = tt.requires_package("no_such_package_for_tilelang_tests").marks()
    param = pytest.param(1, marks=marks)
    assert param.marks and param.marks[0].name == "skipif"


def test_torch_assert_close_allows_the_given_share_of_mismatches():
    expected = torch.zeros(1000)
    actual = expected.clone()
    actual[:5] = 1.0  # 0.5 % of the elements are off
    tt.torch_assert_close(actual, expected, atol=1e-3, rtol=0, max_mismatched_ratio=0.01)
    with pytest.raises(AssertionError) as info:
        tt.torch_assert_close(actual, expected, atol=1e-3, rtol=0, max_mismatched_ratio=0.001)
    message = str(info.value)
    assert "5 of 1000" in message and "allowed" in message and "[0]: 1.0 vs 0.0" in message


def test_torch_assert_close_tolerances_and_nan():
    a = torch.tensor([1.0, 2.0, float("nan")])
    b = torch.tensor([1.005, 2.0, float("nan")])
    tt.torch_assert_close(a, b, rtol=1e-2, atol=0, max_mismatched_ratio=0)
    with pytest.raises(AssertionError):
        tt.torch_assert_close(a, b, rtol=1e-4, atol=0, max_mismatched_ratio=0)
    with pytest.raises(AssertionError):
        tt.torch_assert_close(a, b, rtol=1e-2, atol=0, max_mismatched_ratio=0, equal_nan=False)


def test_torch_assert_close_checks_shape_dtype_and_compares_half_exactly():
    with pytest.raises(AssertionError, match="shapes"):
        tt.torch_assert_close(torch.zeros(3), torch.zeros(4))
    with pytest.raises(AssertionError, match="dtypes"):
        tt.torch_assert_close(torch.zeros(3), torch.zeros(3, dtype=torch.float64))
    tt.torch_assert_close(torch.zeros(3), torch.zeros(3, dtype=torch.float64), check_dtype=False)
    # float16 values differing by one ulp near 2048 (= 2) are far apart in absolute terms
    a = torch.tensor([2048.0], dtype=torch.float16)
    b = torch.tensor([2050.0], dtype=torch.float16)
    with pytest.raises(AssertionError):
        tt.torch_assert_close(a, b, rtol=0, atol=1.0, max_mismatched_ratio=0)
    with pytest.raises(TypeError):
        tt.torch_assert_close([1.0], torch.zeros(1))


def test_torch_assert_close_returns_true_and_compares_unsigned_with_signed():
    """Upstream's returns True (``assert torch_assert_close(a, b)``); here it returned None. And
    torch promotes no uint16/uint32/uint64 with int64: a kernel's unsigned output against an int64
    reference raised torch's 'Promotion for uint16, uint32, uint64 types is not supported'."""
    x = torch.arange(5)
    assert tt.torch_assert_close(x, x) is True
    assert tt.torch_assert_close(torch.zeros(0), torch.zeros(0)) is True
    for dtype in (torch.uint16, torch.uint32, torch.uint64):
        assert tt.torch_assert_close(x.to(dtype), x, check_dtype=False, rtol=0, atol=0) is True
        with pytest.raises(AssertionError, match="1 of 5"):
            tt.torch_assert_close(x.to(dtype), x + (x == 4), check_dtype=False, rtol=0, atol=0, max_mismatched_ratio=0)
    # past int64: equal to no int64 value (wrapped, 2**63 + 2048 would be -(2**63) + 2048), and the
    # other elements still compared exactly (2**60 + 1 is not 2**60, as in float64 it would be)
    big = torch.tensor([2**63 + 2048, 2**60 + 1], dtype=torch.uint64)
    with pytest.raises(AssertionError, match="2 of 2"):
        tt.torch_assert_close(big, torch.tensor([-(2**63) + 2048, 2**60]), check_dtype=False, rtol=0, atol=0,
                              max_mismatched_ratio=0.5)
    tt.torch_assert_close(torch.tensor([7], dtype=torch.uint32), torch.tensor([7.0]), check_dtype=False)
    with pytest.raises(AssertionError, match="not close"):  # the imaginary part counts
        tt.torch_assert_close(torch.tensor([3], dtype=torch.uint32), torch.tensor([3 + 4j]), check_dtype=False)


def test_set_random_seed_makes_runs_repeat():
    tt.set_random_seed(7)
    first = (random.random(), torch.rand(3))
    tt.set_random_seed(7)
    second = (random.random(), torch.rand(3))
    assert first[0] == second[0] and torch.equal(first[1], second[1])


def test_main_runs_the_calling_file_with_pytest(tmp_path):
    script = tmp_path / "test_uses_main.py"
    script.write_text(
        textwrap.dedent(
            """
            import tilelang.testing

            def test_one():
                assert 1 + 1 == 2

            def test_two():
                assert "two" == "two"

            if __name__ == "__main__":
                tilelang.testing.main()
            """
        )
    )
    done = subprocess.run(
        [sys.executable, str(script), "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
