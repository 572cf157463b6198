"""The GPU check kit (issue 18): the build half here, the run half as far as no GPU allows.

The build half runs for real on the CI-sized case set (``--reduced``, plus ``--cpu-standin`` c
kernels): real lowering, nvcc, NVRTC and TVM builds for sm_90 and sm_80, real exports, real wheels.
The run half runs for real too, under a *stand-in GPU machine Python*: a fresh venv that has torch
(this machine's CPU build) and nothing else of the project's - no tilelang, pydantic, pluggy,
cuda-bindings or TVM - so everything the run needs must come from the kit, with pip kept off the
network. Without a GPU it must load every kernel and stop with a "no CUDA device" report (exit
2); its ``--standin-cpu`` mode then runs the kit's c kernels through the same worker, checks and
report code as the GPU run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from gpu_kit import references, tensors  # noqa: E402
from gpu_kit.report import markdown, problems  # noqa: E402
from gpu_kit.run_kit import best_arch, chunks, group_exports  # noqa: E402
from gpu_kit.worker import compare, sass_runs_on  # noqa: E402

sys.path.insert(0, str(ROOT / "tests"))
from torch_site import add_to_venv, link_torch_site  # noqa: E402

pytestmark = pytest.mark.exclusive  # builds the project's wheels in the source tree

BUILD_TIMEOUT = 900
RUN_TIMEOUT = 300
#: pip must never reach an index in the run half; a dead local address makes any attempt fail.
NO_NETWORK = {"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_EXTRA_INDEX_URL": "", "https_proxy": "http://127.0.0.1:9",
              "http_proxy": "http://127.0.0.1:9"}


def _run(cmd, timeout, env=None, cwd=None):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    return proc.returncode, proc.stdout + proc.stderr


# -- fixtures: one reduced kit, one stand-in GPU-machine Python ---------------------------------


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    out = tmp_path_factory.mktemp("kit") / "kit"
    code, output = _run(["bash", str(ROOT / "scripts" / "gpu-kit-build.sh"), str(out), "--reduced", "--cpu-standin",
                         "--jobs", "2"], BUILD_TIMEOUT)
    assert code == 0, output[-6000:]
    return out, output


@pytest.fixture(scope="module")
def machine_python(tmp_path_factory):
    """A Python like a GPU machine's: torch importable, none of the project's packages."""
    root = tmp_path_factory.mktemp("machine")
    link_torch_site(root / "site")
    base = getattr(sys, "_base_executable", sys.executable)
    code, output = _run([base, "-m", "venv", str(root / "venv")], 300)
    assert code == 0, output
    python = root / "venv" / "bin" / "python"
    add_to_venv(python, root / "site")
    check = "import torch, importlib.util as u; assert not any(u.find_spec(m) for m in ('tilelang', 'pydantic', 'pluggy', 'tvm', 'cuda'))"
    code, output = _run([str(python), "-c", check], 300, cwd=root)
    assert code == 0, f"the stand-in machine Python is not as meant: {output[-2000:]}"
    return python


def _run_kit(kit_dir, machine_python, out, *extra):
    env = {**os.environ, **NO_NETWORK, "PYTHON": str(machine_python)}
    env.pop("PYTHONPATH", None)
    code, output = _run(["bash", str(ROOT / "scripts" / "gpu-kit-run.sh"), str(kit_dir), "--out", str(out), *extra],
                        RUN_TIMEOUT, env=env, cwd=out.parent)
    report = json.loads((out / "gpu-kit-report.json").read_text()) if (out / "gpu-kit-report.json").is_file() else None
    return code, output, report, out


@pytest.fixture(scope="module")
def no_gpu_run(kit, machine_python, tmp_path_factory):
    return _run_kit(kit[0], machine_python, tmp_path_factory.mktemp("report") / "out")


# -- the build half --------------------------------------------------------------------------


@pytest.mark.slow
def test_build_exports_every_kernel_with_expected_outputs(kit):
    import torch

    folder, output = kit
    manifest = json.loads((folder / "MANIFEST.json").read_text())
    assert manifest["build_failures"] == []
    backends = [b for b, note in manifest["backends"].items() if note["status"] == "built"]
    assert {"cython", "nvrtc"} <= set(backends)
    assert manifest["archs"] == ["sm_90", "sm_80"]
    cases = {c["id"]: c for c in manifest["cases"]}
    assert set(cases) == {"example.vector_add.static_4096", "tileop.softmax", "tileop.atomic",
                          "compat.atomics_int32", "barrier.while_counter.t64.n1", "dispatch.t3"}
    assert cases["barrier.while_counter.t64.n1"]["params"][2] == {"name": "n", "role": "scalar", "dtype": "int32", "value": 1}
    assert cases["compat.atomics_int32"]["archs"] == ["sm_90"]
    assert cases["compat.atomics_int32"]["checks"]["P"]["name"] == "exchange_chain"
    wanted = {(c, b, a) for c in cases for b in backends for a in manifest["archs"]
              if cases[c]["archs"] is None or a in cases[c]["archs"]}
    have = {(e["case"], e["backend"], e["arch"]) for e in manifest["exports"]}
    assert wanted <= have
    assert any(e["arch"] == "c" for e in manifest["exports"])  # --cpu-standin
    with tarfile.open(folder / "kernels.tar.xz") as tar:
        names = set(tar.getnames())
    for e in manifest["exports"]:
        assert {f"{e['path']}/tilelang-kernel.json", f"{e['path']}/artifact.json", f"{e['path']}/backend"} <= names, e
    for case in cases.values():
        expected = torch.load(folder / case["expected"], weights_only=True)
        outputs = [s for s in case["params"] if s["role"] in ("out", "ret")]
        assert list(expected) == [s["name"] for s in outputs]
        for spec in outputs:
            assert list(expected[spec["name"]].shape) == spec["shape"]
        for spec in case["params"]:
            if spec["role"] == "in":
                assert spec["seed"] > 0 and len(case["input_sha256"][spec["name"]]) == 64
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    assert size < 48 * 2**20
    assert f"size {size / 2**20:.1f} MiB (limit 48 MiB)" in output


@pytest.mark.slow
def test_build_carries_the_wheels_the_run_needs(kit):
    folder, _ = kit
    manifest = json.loads((folder / "MANIFEST.json").read_text())
    files = sorted(p.name for p in (folder / "wheels").iterdir())
    assert manifest["wheels"]["files"] == files
    for project in ("tilelang_core-", "tilelang_backend_nvrtc-", "tilelang_backend_tvmffi-"):
        assert any(f.startswith(project) and f.endswith("-py3-none-any.whl") for f in files), project
    assert "tilelang_backend_cython-0.1.0.tar.gz" in files  # built on the GPU machine when no wheel fits
    requirements = " ".join(manifest["wheels"]["requirements"])
    for needed in ("pluggy", "pydantic", "importlib-metadata", "cuda-bindings"):
        assert needed in requirements
    assert "torch" not in requirements and "apache-tvm<" not in requirements and "nvidia-cuda-nvrtc" not in requirements
    for name in manifest["wheels"]["closure"]:  # each one installable on the lent machines' Python 3.12
        stem = name.replace("-", "_")
        assert any(f.lower().startswith(stem + "-") and ("-py3-none-" in f or "-cp312-" in f) for f in files), name
    assert manifest["tvm_runtime"]["file"] == "tvm-runtime.tar.xz"
    assert (folder / "gpu-kit-run.sh").is_file() and (folder / "gpu_kit" / "run_kit.py").is_file()


def test_build_refuses_a_folder_that_is_not_a_kit(tmp_path):
    precious = tmp_path / "mine"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    code, output = _run(["bash", str(ROOT / "scripts" / "gpu-kit-build.sh"), str(precious), "--reduced"], 300)
    assert code == 2
    assert "is not a GPU check kit" in output and "nothing was written" in output
    assert sorted(p.name for p in precious.iterdir()) == ["notes.txt"]
    assert (precious / "notes.txt").read_text() == "keep me"


# -- the run half without a GPU ----------------------------------------------------------------


@pytest.mark.slow
def test_run_installs_offline_loads_every_kernel_and_reports_no_cuda_device(kit, no_gpu_run):
    code, output, report, out = no_gpu_run
    assert code == 2, output[-4000:]
    assert "Traceback" not in output
    assert report["status"] == "no-cuda-device" and report["exit_code"] == 2
    assert "no CUDA device" in report["message"]
    manifest = json.loads((kit[0] / "MANIFEST.json").read_text())
    assert set(report["loads"]) == {e["id"] for e in manifest["exports"]}
    assert all(load["loaded"] for load in report["loads"].values()), report["loads"]
    assert all(info["inputs"] == "same" for info in report["inputs"].values())
    assert report["imported_tvm"] is False
    installed = " ".join(report["environment"]["from_kit"])
    for dist in ("pydantic-", "pluggy-", "cuda-bindings-", "importlib-metadata-", "apache-tvm-ffi-"):
        assert dist in installed, installed
    assert report["problems"] == []
    md = (Path(out) / "gpu-kit-report.md").read_text()
    assert "status: **no-cuda-device** (exit 2)" in md and "| nvrtc |" in md


@pytest.mark.slow
def test_run_standin_cpu_checks_the_c_kernels_through_the_worker(kit, machine_python, tmp_path):
    code, output, report, _ = _run_kit(kit[0], machine_python, tmp_path / "out", "--standin-cpu",
                                       "--exports-per-process", "8")
    assert code == 0, output[-4000:]
    loads = len(report["loads"])
    assert f"loading {loads} kernels in {-(-loads // 8)} process(es)" in output, output[-4000:]
    assert report["standin"] is True and report["status"] == "passed"
    results = report["results"]
    assert results and all(r["status"] == "ok" for r in results.values()), results
    assert all(r["id"].endswith("--c") for r in results.values())
    assert all(r["timing"]["kernel_ms"] > 0 for r in results.values())
    assert set(report["dispatch"]) >= {"torch", "cython"}
    md = (tmp_path / "out" / "gpu-kit-report.md").read_text()
    assert "| tileop.softmax |" in md and "Per-call dispatch" in md
    assert any(r["id"].startswith("compat.atomics_int32--") for r in results.values())  # its chain check ran
    assert any(r["id"].startswith("barrier.while_counter.t64.n1--") for r in results.values())  # a scalar argument


@pytest.mark.slow
def test_run_reports_a_tampered_kernel_and_exits_1(kit, machine_python, tmp_path):
    broken = tmp_path / "kit"
    shutil.copytree(kit[0], broken)
    unpacked = tmp_path / "unpacked"
    with tarfile.open(broken / "kernels.tar.xz") as tar:
        tar.extractall(unpacked, filter="data")
    victim = sorted((unpacked / "kernels").glob("tileop.softmax--nvrtc--sm_90/backend/*"))[0]
    victim.write_bytes(victim.read_bytes() + b"\0")
    with tarfile.open(broken / "kernels.tar.xz", "w:xz") as tar:
        tar.add(unpacked / "kernels", arcname="kernels")
    code, output, report, _ = _run_kit(broken, machine_python, tmp_path / "out")
    assert code == 1, output[-3000:]
    assert report["status"] == "failed" and "Traceback" not in output
    assert not report["loads"]["tileop.softmax--nvrtc--sm_90"]["loaded"]
    assert any(p.startswith("tileop.softmax--nvrtc--sm_90: not loaded:") for p in report["problems"])


def test_run_on_a_folder_that_is_not_a_kit_reports_setup_failed(tmp_path):
    code, output = _run(["bash", str(ROOT / "scripts" / "gpu-kit-run.sh"), str(tmp_path), "--out", str(tmp_path / "out")],
                        120, env={**os.environ, **NO_NETWORK, "PYTHON": sys.executable})
    assert code == 3, output
    report = json.loads((tmp_path / "out" / "gpu-kit-report.json").read_text())
    assert report["status"] == "setup-failed" and "is not a GPU check kit" in report["message"]
    assert "Traceback" not in output


# -- the pieces --------------------------------------------------------------------------------


def test_inputs_are_reproducible_from_their_seeds():
    spec = {"name": "A", "shape": [5, 3], "dtype": "float16", "init": "randn", "seed": 42, "role": "in"}
    first, second = tensors.make(spec), tensors.make(spec)
    assert first.dtype.is_floating_point and tuple(first.shape) == (5, 3)
    assert tensors.digest(first) == tensors.digest(second)
    assert tensors.digest(tensors.make({**spec, "seed": 43})) != tensors.digest(first)
    nan = tensors.make({**spec, "init": "nan", "dtype": "int32"})
    assert int(nan.min()) == int(nan.max()) == -1
    with pytest.raises(ValueError, match="init must be one of"):
        tensors.make({**spec, "init": "random"})


def test_integer_inputs_and_nan_cells_come_from_the_spec():
    spec = {"name": "A", "shape": [6, 4], "dtype": "float16", "init": "randint", "low": -3, "high": 4, "seed": 7,
            "role": "in", "nan_at": [5]}
    a = tensors.make(spec)
    assert tensors.digest(a) == tensors.digest(tensors.make(spec))
    finite = a.view(-1)[[i for i in range(24) if i != 5]].float()
    assert bool(a.view(-1)[5].isnan()) and finite.min() >= -3 and finite.max() <= 3
    assert bool((finite == finite.round()).all())


def test_the_exchange_chain_check_accepts_any_order_and_catches_a_lost_update():
    """return_prev values from threads in any order pass; a previous value seen twice (an add that
    was not atomic) or a wrong final value fails, with the lane named."""
    import torch

    from gpu_kit.checks import run

    a = torch.tensor([3.0, 1.0, 2.0, 5.0])
    order = [2, 0, 3, 1]  # the order the threads got to the cell
    prev, total = torch.zeros(4), 0.0
    for i in order:
        prev[i], total = total, total + a[i].item()
    c = torch.tensor([0.0, total])
    check = {"name": "exchange_chain", "addend": "A", "final": ["C", 1]}
    assert run("P", check, {"A": a, "P": prev, "C": c}) is None
    lost = prev.clone()
    lost[3] = lost[0]  # two adds saw the same value
    assert "P lane 0: the previous values do not chain" in run("P", check, {"A": a, "P": lost, "C": c})
    assert "do not chain" in run("P", check, {"A": a, "P": prev, "C": torch.tensor([0.0, total + 1])})
    lanes = torch.stack([prev, prev * 2], 1)  # two lanes, one final cell each
    assert run("Q", {"name": "exchange_chain", "addend": "B", "final": "F"},
               {"B": torch.stack([a, 2 * a], 1), "Q": lanes, "F": torch.tensor([total, 2 * total])}) is None
    assert "unknown kit check" in run("P", {"name": "sorted"}, {})


def test_references_match_the_examples_they_stand_for():
    import torch

    a, b = torch.randn(8, 4), torch.randn(4, 6)
    torch.testing.assert_close(references.call({"name": "matmul"}, [a, b])[0], a @ b)
    p, o = references.call({"name": "copy_edges", "kwargs": {"padded": [16, 8]}}, [a])
    assert p.shape == (16, 8) and p[8:].abs().sum() == 0 and torch.equal(o, 2 * a)
    r0, r1, r2 = references.call({"name": "reduce", "kwargs": {"op": "sum", "accumulate": True}}, [a])
    torch.testing.assert_close(r2, 2 * a.sum(1))
    with pytest.raises(ValueError, match="unknown kit reference 'nope'"):
        references.call({"name": "nope"}, [])


def test_compare_treats_nan_as_equal_only_where_expected():
    import torch

    want = {"O": torch.tensor([1.0, float("nan")])}
    assert compare({"O": torch.tensor([1.0, float("nan")])}, want, 0, 0)[0]
    ok, worst, first = compare({"O": torch.tensor([float("nan"), float("nan")])}, want, 0, 0)
    assert not ok and worst == float("inf") and first.startswith("O:")
    ok, _, first = compare({"O": torch.tensor([1, 2])}, want, 0, 0)
    assert not ok and "torch.int64" in first


def test_architecture_rules():
    assert sass_runs_on("sm_80", "8.6") and sass_runs_on("sm_90", "9.0")
    assert not sass_runs_on("sm_80", "9.0") and not sass_runs_on("sm_90", "8.9") and not sass_runs_on("sm_86", "8.0")
    assert best_arch(["sm_90", "sm_80"], "9.0") == "sm_90"
    assert best_arch(["sm_90", "sm_80"], "8.9") == "sm_80"
    assert best_arch(["sm_90", "sm_80"], "12.0") is None


def test_report_lists_every_kind_of_problem():
    report = {
        "kit": {"exports": [{"id": "k--nvrtc--sm_90", "case": "k", "backend": "nvrtc", "arch": "sm_90"}]},
        "loads": {"k--nvrtc--sm_90": {"loaded": True}},
        "inputs": {"k": {"inputs": "input A differs"}},
        "results": {"k--nvrtc--sm_90": {"id": "k--nvrtc--sm_90", "status": "wrong", "error": "O: mismatch",
                                        "graph": "error: capture"}},
        "status": "failed", "exit_code": 1, "table_arch": "sm_90",
    }
    lines = problems(report)
    assert lines == ["k: input A differs", "k--nvrtc--sm_90: wrong: O: mismatch"]
    report["results"]["k--nvrtc--sm_90"].update(status="ok", timing={"kernel_ms": 0.002, "torch_ms": 0.004, "ratio": 0.5})
    assert problems(report)[-1] == "k--nvrtc--sm_90: CUDA graph: error: capture"
    text = markdown(report)
    assert "| k | ok 2.0 us, 0.50x torch, graph FAILED |" in text


def test_exports_are_loaded_and_run_in_processes_of_bounded_size():
    """Every cython kernel library holds thread-local storage, of which glibc allows a process
    only so many modules: 357 exports loaded in one process stopped in ld.so."""
    assert chunks([], 4) == []
    assert chunks(list("abcdefghij"), 4) == [list("abcd"), list("efg"), list("hij")]
    assert chunks(list("abc"), 64) == [list("abc")]
    exports = [{"id": f"k{i}--{b}--sm_90", "backend": b, "arch": "sm_90"} for b in ("nvrtc", "cython") for i in range(5)]
    groups = group_exports(exports, 2)
    assert [len(g) for g in groups] == [2, 2, 1, 2, 2, 1]
    assert all(len({i.split("--")[1] for i in g}) == 1 for g in groups)
    assert sorted(i for g in groups for i in g) == sorted(e["id"] for e in exports)
