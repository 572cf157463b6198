"""The kernel cache key includes a content hash of the core's own files: a checkout (or editable
install) whose lowering code changed between two commits, at the same version, never loads kernels
the old code built."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import tilelang_core
from tilelang_core.cache.key import core_files_hash

CORE_DIR = Path(tilelang_core.__file__).resolve().parent

PRINT_HASH = "import tilelang_core, tilelang_core.cache.key as k; print(tilelang_core.__file__); print(k.core_files_hash())"


def hash_of_core_at(root: Path) -> tuple[str, str]:
    """(imported file, core files hash) of a fresh process importing the core found under ``root``."""
    env = dict(os.environ, PYTHONPATH=str(root))
    out = subprocess.run([sys.executable, "-c", PRINT_HASH], env=env, cwd=str(root), capture_output=True,
                         text=True, timeout=120, check=True).stdout.split()
    return out[0], out[1]


def copy_core(dest: Path) -> Path:
    shutil.copytree(CORE_DIR, dest / "tilelang_core", ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def test_core_files_hash_is_stable_within_a_process():
    assert core_files_hash() == core_files_hash()
    assert len(core_files_hash()) == 64


def test_an_edited_core_gives_other_keys_and_identical_files_give_the_same_key(tmp_path):
    same = copy_core(tmp_path / "same")
    edited = copy_core(tmp_path / "edited")
    module = edited / "tilelang_core" / "lowering" / "passes.py"
    module.write_text(module.read_text() + "\n# a changed pass pipeline, same version\n")

    same_file, same_hash = hash_of_core_at(same)
    edited_file, edited_hash = hash_of_core_at(edited)
    assert same_file.startswith(str(same)) and edited_file.startswith(str(edited)), "the copies were imported"
    assert same_hash == core_files_hash(), "identical core files: the same key as this process"
    assert edited_hash != same_hash, "the core's code changed at the same version: kernels must be rebuilt"
