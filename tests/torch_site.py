"""A folder that makes this environment's torch (and only what torch needs) importable elsewhere.

Tests that build a fresh venv put this folder on its path with a ``.pth`` file: the venv then has
this machine's torch, already unpacked and byte-compiled, without installing its 1 GB wheel again.
"""

from __future__ import annotations

import subprocess
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from packaging.requirements import Requirement


def link_torch_site(dest: Path, roots=("torch", "numpy")) -> Path:
    """Fill ``dest`` with symlinks to the distributions ``roots`` and their requirements need.

    numpy is a root by default: torch warns without it, and GPU machines have it.
    """
    dest.mkdir()
    todo, seen = list(roots), set()
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            continue
        seen.add(name)
        base = Path(str(dist.locate_file("")))
        for top in {Path(str(f)).parts[0] for f in dist.files or []}:
            if top in ("..", "bin") or (dest / top).exists() or not (base / top).exists():
                continue
            (dest / top).symlink_to(base / top)
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return dest


def add_to_venv(venv_python: Path, folder: Path, name: str = "torch_only.pth") -> None:
    """Put ``folder`` on the path of the venv of ``venv_python`` (a ``.pth`` file in its purelib)."""
    purelib = subprocess.check_output(
        [str(venv_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip()
    Path(purelib, name).write_text(f"{folder}\n")
