"""The whole life of a backend: pip install it, use it, pip uninstall it, and be told what to do."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tilelang_core.testkit import pip, plugin_source, spec_dict, subprocess_env, write_distribution, write_project

pytestmark = pytest.mark.exclusive  # installs and uninstalls a backend in the venv

USE_IT = textwrap.dedent(
    """
    import json, sys
    from tilelang_core.backends import get_registry, select_backend
    from tilelang_core.errors import BackendNotInstalledError
    try:
        record = select_backend("retiree", "c")
    except BackendNotInstalledError as exc:
        print(json.dumps({"error": str(exc)}))
    else:
        print(json.dumps({"chosen": record.name, "answer": record.call("tilelang_backend_probe", target_kind="c")}))
    """
)


def _python(code, env):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)


# not marked slow: CI checks that retiring a backend is uninstalling its package
def test_install_use_uninstall_retired_backend(tmp_path):
    successor_site = tmp_path / "site"
    write_distribution(successor_site, "heir", plugin_source(spec_dict("heir", supersedes=["retiree"])))
    env = subprocess_env(successor_site)
    body = """
    @hookimpl
    def tilelang_backend_probe(target_kind):
        return {"available": True, "reason": "retiree says hello"}
    """
    project = write_project(tmp_path / "src", "retiree", plugin_source(spec_dict("retiree"), body=body))
    pip("install", "--no-deps", "--no-build-isolation", "--no-index", str(project))
    try:
        listed = json.loads(subprocess.run([sys.executable, "-m", "tilelang", "backends", "--json"],
                                           capture_output=True, text=True, env=env).stdout)
        assert "retiree" in {r["name"] for r in listed}
        used = json.loads(_python(USE_IT, env).stdout)
        assert used == {"chosen": "retiree", "answer": {"available": True, "reason": "retiree says hello"}}
    finally:
        pip("uninstall", "-y", "tilelang-backend-retiree")

    listing = subprocess.run([sys.executable, "-m", "tilelang", "backends"], capture_output=True, text=True, env=env)
    assert "retiree" not in listing.stdout.replace("supersedes: retiree", "")
    error = json.loads(_python(USE_IT, env).stdout)["error"]
    assert error.startswith("execution backend 'retiree' is retired: the installed backend 'heir' supersedes it; "
                            "use execution_backend='heir'")
    assert error.index("execution_backend='heir'") < error.index("pip install tilelang-backend-retiree")
