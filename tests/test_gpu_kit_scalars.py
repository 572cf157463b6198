"""Scalar arguments of GPU kit cases (scripts/gpu_kit/tensors.py, build_kit.py, run_kit.py).

A case lists a kernel's scalar parameter (``n: T.int32``) as a scalar spec; the kit passes its
value at its place in the call and gives it to the reference at its place among the inputs. A bad
definition is refused when the kit is built (exit 2, nothing written), with the case, the
parameter and what to change, and a run half refuses a manifest it cannot pass arguments from.
"""

from __future__ import annotations

import json
import pathlib
import sys

import pytest
import torch

import tilelang.language as T

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from gpu_kit import KIT_FORMAT, build_kit, environment, run_kit, tensors  # noqa: E402
from gpu_kit import cases as catalogue  # noqa: E402


def _scalar(value, dtype="int32", name="n"):
    return {"name": name, "role": "scalar", "dtype": dtype, "value": value}


def _tensor(name="A", shape=(8,), dtype="float32", role="in"):
    return catalogue._spec("test.case", name, shape, dtype, "randn" if role == "in" else "nan", role)


def _kernel():
    @T.prim_func
    def scaled(A: T.Tensor((8,), "float32"), O: T.Tensor((8,), "float32"), n: T.int32):
        with T.Kernel(1, threads=8) as bx:
            for i in T.Parallel(8):
                O[i] = A[i] * n

    return scaled


def test_scalars_are_passed_in_place_and_given_to_the_reference():
    specs = [_tensor("A"), _scalar(3), _tensor("O", role="out"), _scalar(-0.5, "float32", "w"), _scalar(True, "bool", "b")]
    assert tensors.check_specs(specs) == []
    args = tensors.call_arguments(specs)
    assert list(args) == ["A", "n", "O", "w", "b"]
    assert args["n"] == 3 and type(args["n"]) is int
    assert args["w"] == -0.5 and type(args["w"]) is float and args["b"] is True
    inputs = tensors.reference_inputs(specs, args)
    assert inputs[0] is args["A"] and inputs[1:] == [3, -0.5, True]
    assert set(tensors.input_digests(specs, args)) == {"A", "O"}


@pytest.mark.parametrize("spec, words", [
    (_scalar(2**31), "does not fit int32"),
    (_scalar(-1, "uint8"), "does not fit uint8"),
    (_scalar(1.5), "must be an integer for int32"),
    (_scalar(True), "must be a number for int32"),
    (_scalar("3"), "must be a number for int32"),
    (_scalar(float("nan"), "float32"), "finite number"),
    (_scalar(1, "bool"), "true or false"),
    (_scalar(1, "complex64"), "dtype must be one of"),
    ({**_scalar(1), "shape": [1]}, "remove shape"),
    ({**_tensor(), "value": 1}, "role 'scalar'"),
    ({**_tensor(), "role": "input"}, "role must be one of"),
    ({**_tensor(), "shape": [8, -1]}, "non-negative integers"),
])
def test_a_bad_spec_is_named_with_what_to_change(spec, words):
    problems = tensors.check_specs([spec])
    assert len(problems) == 1 and words in problems[0] and f"({spec['name']!r})" in problems[0], problems


def test_names_must_differ():
    problems = tensors.check_specs([_tensor("A"), _scalar(1, name="A")])
    assert problems == ["param 1 ('A'): the name is used twice; each parameter needs its own"]


def test_the_specs_must_match_the_kernel_parameters():
    func = _kernel()
    a, o = _tensor("A"), _tensor("O", role="out")
    assert build_kit.signature_problem(func, [a, o, _scalar(2)]) is None
    cases = [
        ([a, o], "the kernel has 3 parameters (A, O, n), the case lists 2"),
        ([a, o, _tensor("n", (1,), "int32")], "kernel's parameter n is a scalar (int32); give it a scalar spec"),
        ([a, _scalar(1, name="O"), _scalar(2)], "is a scalar spec, but the kernel's parameter O is a tensor"),
        ([a, o, _scalar(2.0, "float32")], "the kernel's scalar n is int32, the spec says float32"),
        ([_tensor("A", (8,), "float16"), o, _scalar(2)], "the kernel's tensor A is float32, the spec says float16"),
        ([_tensor("A", (4, 2)), o, _scalar(2)], "the kernel's tensor A has shape [8], the spec says [4, 2]"),
    ]
    for specs, words in cases:
        problem = build_kit.signature_problem(func, specs)
        assert problem is not None and words in problem, (words, problem)


def test_the_build_refuses_a_bad_case_and_writes_nothing(tmp_path, monkeypatch, capsys):
    bad = catalogue.Case(id="test.scaled", source="barrier", func=_kernel, reference=None,
                         params=[_tensor("A"), _tensor("O", role="out"), _tensor("n", (1,), "int32")],
                         expected_fn=lambda a, n: (a * n,))
    monkeypatch.setattr(catalogue, "all_cases", lambda reduced=False, only=None: [bad])
    out = tmp_path / "kit"
    assert build_kit.main([str(out), "--no-wheels", "--no-cpu-check"]) == 2
    err = capsys.readouterr().err
    assert "case test.scaled is defined wrongly: param 2 ('n') is a tensor spec" in err, err
    assert "scripts/gpu_kit/barrier_cases.py" in err and "nothing was written" in err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def _manifest(tmp_path, **change):
    manifest = {"kit_format": KIT_FORMAT, "cases": [{"id": "c", "params": [_tensor("A"), _scalar(4)]}], **change}
    (tmp_path / "MANIFEST.json").write_text(json.dumps(manifest))
    return tmp_path


def test_the_run_half_reads_scalar_specs_and_refuses_bad_ones(tmp_path):
    assert KIT_FORMAT == 2
    assert run_kit.read_manifest(_manifest(tmp_path))["cases"][0]["params"][1]["value"] == 4
    with pytest.raises(environment.SetupError, match="kit format 1; this run half reads format 2"):
        run_kit.read_manifest(_manifest(tmp_path, kit_format=1))
    bad = [{"id": "c", "params": [_tensor("A"), _scalar(2**40)]}]
    with pytest.raises(environment.SetupError, match=r"case 'c': param 1 \('n'\): value 1099511627776 does not fit int32"):
        run_kit.read_manifest(_manifest(tmp_path, cases=bad))


def test_a_scalar_case_computes_its_expected_outputs_with_its_value():
    case = catalogue.Case(id="test.scaled", source="barrier", func=_kernel, reference=None,
                          params=[_tensor("A"), _tensor("O", role="out"), _scalar(3)],
                          expected_fn=lambda a, n: (a * n,))
    build_kit.check_case(case)
    expected, digests, _ = build_kit.expected_outputs(case)
    a = tensors.make(case.params[0])
    assert torch.equal(expected["O"], a * 3) and set(digests) == {"A", "O"}
