"""`tilelang` command-line fixes from a bug hunt: plugin output on descriptor 1 with --json, a
closed stdout pipe, odd cache paths, an unsplittable $CC, TILELANG_DISABLE_CACHE, --target auto."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tilelang_core.testkit import plugin_source, spec_dict, subprocess_env, write_distribution

#: Plugin code that writes to file descriptor 1 directly, past ``sys.stdout``.
NOISY_BODY = """
import os, subprocess, sys
os.write(1, b"NOISY fd1 at import\\n")

@hookimpl
def tilelang_backend_probe(target_kind):
    os.write(1, b"NOISY fd1 in probe\\n")
    subprocess.run([sys.executable, "-c", "print('NOISY child process')"])  # inherits fd 1
    return None
"""


def run_cli(*args, roots=(), env=None, **kwargs):
    full_env = subprocess_env(*roots)
    full_env.update(env or {})
    kwargs.setdefault("capture_output", True)
    return subprocess.run([sys.executable, "-m", "tilelang", *args], text=True, env=full_env, **kwargs)


@pytest.fixture
def noisy_site(tmp_path):
    root = tmp_path / "site"
    root.mkdir()
    write_distribution(root, "noisy", plugin_source(spec_dict("noisy"), body=NOISY_BODY))
    return root


# -- 1. what plugins write to descriptor 1 goes to stderr with --json ---------------------------

def test_backends_json_stays_parseable_when_plugin_writes_to_fd1(noisy_site):
    out = run_cli("backends", "--json", roots=[noisy_site])
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert rows["noisy"]["status"] == "ok"
    assert "NOISY fd1 at import" in out.stderr and "NOISY child process" in out.stderr


def test_explain_json_stays_parseable_when_plugin_writes_to_fd1(noisy_site):
    out = run_cli("backends", "explain", "--target", "c", "--json", roots=[noisy_site])
    data = json.loads(out.stdout)
    assert "noisy" in [c["name"] for c in data["candidates"]]
    assert "NOISY fd1 in probe" in out.stderr


# -- 2. a closed stdout pipe ends the command quietly ------------------------------------------

def _run_with_closed_stdout(*args, roots=()):
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the command writes anything
    try:
        return run_cli(*args, roots=roots, stdout=write_end, stderr=subprocess.PIPE, capture_output=False)
    finally:
        os.close(write_end)


def test_closed_pipe_mid_command_exits_quietly(noisy_site):
    # `backends check` flushes its header line at once: the pipe error comes while the command runs
    out = _run_with_closed_stdout("backends", "check", "noisy", "--check", "error:count", roots=[noisy_site])
    assert "Broken pipe" not in out.stderr and "tilelang: error" not in out.stderr
    assert out.returncode == 141


def test_closed_pipe_at_final_flush_exits_quietly():
    out = _run_with_closed_stdout("backends", "schema")  # buffered: fails only when flushed at the end
    assert "Exception ignored" not in out.stderr and "BrokenPipeError" not in out.stderr
    assert out.returncode == 141


# -- 4. a cache path below a file, or with a name too long -------------------------------------

@pytest.fixture
def below_a_file(tmp_path):
    (tmp_path / "afile").write_text("not a folder")
    return tmp_path / "afile" / "sub"


@pytest.mark.parametrize("command", ["clear", "prune"])
def test_cache_below_a_file_is_refused_by_clear_and_prune(below_a_file, command):
    out = run_cli("cache", command, env={"TILELANG_CACHE_DIR": str(below_a_file)})
    assert out.returncode == 1 and "removed" not in out.stdout
    assert f"{below_a_file.parent} is a file, not a folder" in out.stderr


def test_cache_info_warns_of_a_path_below_a_file(below_a_file):
    out = run_cli("cache", "info", env={"TILELANG_CACHE_DIR": str(below_a_file)})
    assert out.returncode == 0
    assert "warning:" in out.stdout and "is a file, not a folder" in out.stdout


@pytest.mark.parametrize("command", ["info", "clear"])
def test_cache_name_too_long_is_a_reason_not_an_errno(tmp_path, command):
    out = run_cli("cache", command, env={"TILELANG_CACHE_DIR": str(tmp_path / ("x" * 300))})
    assert "Errno 36" not in out.stdout + out.stderr
    assert "name too long for this system" in out.stdout + out.stderr
    assert out.returncode == (0 if command == "info" else 1)


def test_the_python_api_names_a_cache_name_too_long_as_the_command_does(tmp_path):
    from tilelang_core.cache.store import get_cache

    cache = get_cache(tmp_path / ("x" * 300))  # Path.is_dir raised [Errno 36] in info, clear and prune
    info = cache.info()
    assert info["exists"] is False and info["entries"] == 0
    assert "name too long for this system" in info["not_a_cache"]
    assert cache.clear() == 0 and cache.prune(0) == {"unused": 0, "not_installed": 0, "unreadable": 0}


# -- 5. cache info shows a world-writable cache folder -----------------------------------------

def test_cache_info_warns_of_a_world_writable_folder(tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o777)
    out = run_cli("cache", "info", env={"TILELANG_CACHE_DIR": str(folder)})
    assert out.returncode == 0
    assert "warning:" in out.stdout and f"chmod 700 {folder}" in out.stdout
    data = json.loads(run_cli("cache", "info", "--json", env={"TILELANG_CACHE_DIR": str(folder)}).stdout)
    assert "chmod 700" in data["not_private"]


# -- 6. a compiler variable that is not a command line -----------------------------------------

def test_unsplittable_compiler_variable_is_reported_as_such(tmp_path):
    root = tmp_path / "site"
    root.mkdir()
    spec = """{"name": "ccuser", "description": "uses $TL_HUNT_CC",
        "targets": {"c": {"priority": 1, "consumes": ["device_source"],
                          "requires": {"executables": [program_from_env("TL_HUNT_CC", "cc")]},
                          "native_compiler": {"program": "cc", "env": "TL_HUNT_CC"}}}}"""
    source = "from tilelang_core.env_commands import program_from_env\n" + plugin_source(spec)
    write_distribution(root, "ccuser", source)
    out = run_cli("backends", "--json", roots=[root], env={"TL_HUNT_CC": '"unbalanced'})
    reason = {r["name"]: r for r in json.loads(out.stdout)}["ccuser"]["targets"]["c"]["reason"]
    assert "not found on PATH" not in reason
    assert "$TL_HUNT_CC='\"unbalanced' is not a command line (No closing quotation)" in reason
    assert "such as 'cc'" in reason


# -- 7. TILELANG_DISABLE_CACHE reads yes/no spellings and refuses others -----------------------

@pytest.mark.parametrize("value, disabled", [("1", True), ("TRUE", True), ("yes", True), ("on", True),
                                             ("0", False), ("false", False), ("No", False), ("off", False),
                                             ("", False), ("  ", False)])
def test_disable_cache_spellings(monkeypatch, value, disabled):
    from tilelang_core.cache.location import cache_disabled

    monkeypatch.setenv("TILELANG_DISABLE_CACHE", value)
    assert cache_disabled() is disabled


@pytest.mark.parametrize("value", ["2", "bogus"])
def test_disable_cache_unknown_value_is_a_setting_error(monkeypatch, tmp_path, value):
    from tilelang_core.cache.location import cache_disabled
    from tilelang_core.errors import SettingError

    monkeypatch.setenv("TILELANG_DISABLE_CACHE", value)
    with pytest.raises(SettingError, match=f"TILELANG_DISABLE_CACHE='{value}' is not a yes/no value"):
        cache_disabled()
    out = run_cli("cache", "info", env={"TILELANG_DISABLE_CACHE": value, "TILELANG_CACHE_DIR": str(tmp_path / "c")})
    assert out.returncode == 1 and "is not a yes/no value" in out.stderr


# -- 8. backends explain --target auto resolves auto as compile does ---------------------------

def test_explain_target_auto_resolves_like_compile(noisy_site):
    out = run_cli("backends", "explain", "--target", "auto", "--json", roots=[noisy_site],
                  env={"TILELANG_DEFAULT_TARGET": "c"})
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["target"] == "auto" and data["kind"] == "c"
    assert "noisy" in [c["name"] for c in data["candidates"]]
    text = run_cli("backends", "explain", "--target", "auto", roots=[noisy_site], env={"TILELANG_DEFAULT_TARGET": "c"})
    assert text.stdout.startswith("target 'auto' (here: 'c'): ")


def test_explain_target_auto_with_a_bad_default_target_says_why(noisy_site):
    out = run_cli("backends", "explain", "--target", "auto", roots=[noisy_site], env={"TILELANG_DEFAULT_TARGET": "{bad"})
    assert out.returncode == 2
    assert "TILELANG_DEFAULT_TARGET='{bad' looks like a JSON object" in out.stderr and "not a TVM target" not in out.stderr
