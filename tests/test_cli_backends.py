"""`tilelang backends ...` in a fresh interpreter: text, JSON and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tilelang_core.testkit import plugin_source, spec_dict, subprocess_env, write_distribution


def run_cli(*args, roots=()):
    return subprocess.run(
        [sys.executable, "-m", "tilelang", *args], capture_output=True, text=True, env=subprocess_env(*roots)
    )


@pytest.fixture
def site(tmp_path):
    root = tmp_path / "site"
    root.mkdir()
    write_distribution(
        root,
        "good",
        plugin_source(
            spec_dict(
                "good",
                {"c": {"priority": 7000, "consumes": ["device_source"]}, "cuda": {"priority": 3, "consumes": ["device_source"]}},
                deprecated={"since": "1.0", "replacement": "better"},
            ),
            body="""
            @hookimpl
            def tilelang_backend_probe(target_kind):
                if target_kind == "cuda":
                    return {"available": False, "reason": "no CUDA driver"}
            """,
        ),
    )
    return root


def test_list_text(site):
    out = run_cli("backends", roots=[site])
    assert out.returncode == 0, out.stderr
    assert "good  (tilelang-backend-good 1.0.0)" in out.stdout
    assert "c        priority 7000 available" in out.stdout
    assert "cuda     priority 3    unavailable: no CUDA driver" in out.stdout
    assert "DEPRECATED since 1.0, use better" in out.stdout


def test_list_json_and_broken_exit_code(site):
    # a part of the plugin's own package that is missing: a broken install, not a missing dependency
    write_distribution(site, "bad", plugin_source(spec_dict("bad"), body="import tilelang_backend_bad.no_such_part"))
    out = run_cli("backends", "--json", roots=[site])
    assert out.returncode == 1
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert rows["bad"]["status"] == "broken" and "no_such_part" in rows["bad"]["reason"]
    assert rows["good"]["targets"]["c"] == {"priority": 7000, "available": True, "can_build": True, "reason": ""}
    text = run_cli("backends", roots=[site])
    assert "bad  (tilelang-backend-bad 1.0.0)  BROKEN: importing" in text.stdout


def test_explain_text_and_json(site):
    out = run_cli("backends", "explain", "--target", "cuda", roots=[site])
    assert out.returncode == 0
    good = [line for line in out.stdout.splitlines() if line.split()[:1] == ["good"]]
    assert len(good) == 1 and "unavailable" in good[0] and "no CUDA driver" in good[0]
    data = json.loads(run_cli("backends", "explain", "--target", "c", "--json", roots=[site]).stdout)
    assert data["chosen"] == "good"
    assert data["candidates"][0]["verdict"] == "chosen"


def test_schema_is_json_schema_of_backend_spec():
    out = run_cli("backends", "schema")
    schema = json.loads(out.stdout)
    assert schema["title"] == "BackendSpec"
    assert {"name", "targets", "plugin_api_version"} <= set(schema["properties"])


def test_usage_error_exit_code_2():
    assert run_cli("frobnicate").returncode == 2
    assert run_cli("backends", "explain").returncode == 2  # --target missing


def test_explain_keeps_its_columns_for_long_backend_names(site):
    write_distribution(site, "a_rather_long_backend_name",
                       plugin_source(spec_dict("a_rather_long_backend_name", {"c": {"priority": 1, "consumes": ["device_source"]}})))
    out = run_cli("backends", "explain", "--target", "c", roots=[site])
    rows = [line for line in out.stdout.splitlines() if line.startswith("  ")]
    verdict_columns = {line.index(line.split()[1], len(line.split()[0]) + 2) for line in rows}
    assert len(rows) >= 2 and len(verdict_columns) == 1, out.stdout
