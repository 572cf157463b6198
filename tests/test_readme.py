"""The README's example really runs (in a fresh interpreter, with the installed backends)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_example_runs(tmp_path):
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)
    env = {"TILELANG_CACHE_DIR": str(tmp_path / "cache")}
    import os

    script = tmp_path / "readme_example.py"  # TVMScript reads the kernel's source: it must live in a file
    script.write_text(code)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env={**os.environ, **env}, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "BackendInfo(name=" in proc.stdout


def test_readme_has_exactly_the_two_commands():
    text = README.read_text()
    block = re.search(r"## The two commands.*?```bash\n(.*?)```", text, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert commands == ["bash scripts/main.sh", "bash scripts/test.sh"]
    assert "bash scripts/test.sh" in (README.parent / ".ci" / "run").read_text().replace("scripts/test.sh -q", "scripts/test.sh")
