"""The run half's Python environment: a fresh venv that sees the machine's torch, filled from the
kit alone (``pip --no-index``). Standard library only: it runs under the machine's own Python.

Why not ``python -m venv --system-site-packages``: on many GPU machines (the lent ones too) the
``python3`` that holds the CUDA build of torch is itself a venv, and a venv made from it sees the
*base* interpreter's packages, not torch. So the new venv is made plain, and a ``.pth`` file puts
every package folder of the machine's Python on its path, after its own. pip then treats what the
machine has as installed: a requirement the machine satisfies is used as it is, a missing or too
old one comes from the kit's wheels into the venv (the machine's folders are never written to).

Install order (``MANIFEST.json`` ``wheels``): the project's own pure-Python wheels with
``--no-deps`` (tilelang-core declares apache-tvm, which loading kernels does not need), each
compiled plugin on its own (from its wheel, or built from its sdist with the machine's C compiler
when no wheel fits this Python; the build tools come from the kit's wheels), then the
requirements the kit lists.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

PTH_NAME = "_gpu_kit_machine_site.pth"


class SetupError(Exception):
    """The environment could not be made (the report says why; exit status 3)."""


def _run(cmd: list[str], what: str, *, timeout: float = 600, env: Optional[dict] = None) -> str:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise SetupError(f"{what}: no answer after {timeout:.0f} s ({' '.join(cmd)})") from None
    except OSError as exc:
        raise SetupError(f"{what}: cannot run {cmd[0]}: {exc}") from None
    if proc.returncode != 0:
        raise SetupError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n{(proc.stdout + proc.stderr)[-3000:]}")
    return proc.stdout


def offline_env() -> dict[str, str]:
    """The environment for pip: no index, no version check, no configuration of this machine's
    (its ``PIP_*`` variables and config files could add other package sources)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_CONFIG_FILE=os.devnull,
               PIP_NO_INPUT="1", PYTHONNOUSERSITE="1")
    return env


PROBE = r"""
import json, sys
info = {"python": sys.version.split()[0], "executable": sys.executable, "path": [p for p in sys.path if p]}
try:
    import torch
    info["torch"] = torch.__version__
    info["torch_cuda"] = torch.version.cuda
    info["cuda_available"] = bool(torch.cuda.is_available())
    if info["cuda_available"]:
        p = torch.cuda.get_device_properties(0)
        info["device"] = {"name": p.name, "capability": "%d.%d" % (p.major, p.minor),
                          "memory_gib": round(p.total_memory / 2**30, 1), "count": torch.cuda.device_count(),
                          "multiprocessors": p.multi_processor_count}
except Exception as exc:
    info["torch_error"] = "%s: %s" % (type(exc).__name__, exc)
print(json.dumps(info))
"""


def probe_python(python: str) -> dict[str, Any]:
    """What ``python`` is: version, sys.path, torch, CUDA device (one short subprocess)."""
    out = _run([python, "-c", PROBE], f"asking {python} about itself and torch", timeout=300)
    return json.loads(out.strip().splitlines()[-1])


def make_venv(work: Path, machine_python: str, machine_path: list[str]) -> Path:
    """A fresh venv in ``work/venv`` whose path ends with the machine Python's package folders."""
    venv = work / "venv"
    _run([machine_python, "-m", "venv", "--without-pip", str(venv)], "creating a venv")
    python = venv / "bin" / "python"
    own = json.loads(_run([str(python), "-c", "import sys, json, sysconfig; "
                                             "print(json.dumps([sys.path, sysconfig.get_paths()['purelib']]))"],
                          "asking the new venv for its path"))
    extra = [p for p in machine_path if p not in own[0] and os.path.isdir(p)]
    Path(own[1]).mkdir(parents=True, exist_ok=True)
    (Path(own[1]) / PTH_NAME).write_text("".join(f"{p}\n" for p in extra))
    try:
        _run([str(python), "-m", "pip", "--version"], "finding pip")
    except SetupError:
        _run([str(python), "-m", "ensurepip", "--default-pip"], "installing pip with ensurepip (offline)")
    return python


def pip_install(python: Path, wheels: Path, args: list[str], what: str, timeout: float = 900) -> str:
    cmd = [str(python), "-m", "pip", "install", "--no-index", "--find-links", str(wheels), "--no-cache-dir",
           "--disable-pip-version-check", *args]
    return _run(cmd, what, timeout=timeout, env=offline_env())


def install_kit(python: Path, kit: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """Install the kit's project wheels and requirements into the venv; what was installed."""
    wheels = kit / "wheels"
    info = manifest.get("wheels") or {}
    if not info.get("included") or not wheels.is_dir():
        raise SetupError(f"{kit} carries no wheels (built with --no-wheels); build the kit again without it")
    result: dict[str, Any] = {"notes": []}
    projects = list(info.get("projects") or [])
    compiled = [p for p in info.get("compiled") or [] if p in projects]
    pure = [p for p in projects if p not in compiled]
    if not pure:
        raise SetupError(f"{kit}/MANIFEST.json lists no project wheels; build the kit again")
    pip_install(python, wheels, ["--no-deps", "--ignore-installed", *pure], "installing the project's wheels")
    for project in compiled:
        try:  # a wheel for this Python if there is one, else the sdist, built in isolation from the kit's wheels
            out = pip_install(python, wheels, ["--no-deps", "--ignore-installed", project], f"installing {project}")
            built = "Building wheel" in out or "Created wheel" in out
            result["notes"].append(f"{project}: installed" + (" (built here from its sdist)" if built else ""))
        except SetupError as exc:
            result["notes"].append(f"{project}: not installed, its kernels cannot load: {exc}")
    requirements = info.get("requirements") or []
    if requirements:
        out = pip_install(python, wheels, requirements, "installing the requirements from the kit")
        result["from_kit"] = sorted({name for line in out.splitlines() if line.startswith("Successfully installed")
                                     for name in line.split()[2:]})
    listed = _run([str(python), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
                  "listing the venv", env=offline_env())
    wanted = {*projects, "torch", *(_requirement_name(r) for r in requirements)}
    result["versions"] = {p["name"].lower(): p["version"] for p in json.loads(listed)
                          if p["name"].lower().replace("_", "-") in wanted}
    return result


def _requirement_name(text: str) -> str:
    """``pydantic`` of ``pydantic>=2.5`` (names as the kit writes them: normalised, no extras)."""
    for i, char in enumerate(text):
        if char in "<>=!~;[ ":
            return text[:i]
    return text


def main(argv: Optional[list[str]] = None) -> int:  # pragma: no cover - debugging aid
    print(json.dumps(probe_python(argv[0] if argv else sys.executable), indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
