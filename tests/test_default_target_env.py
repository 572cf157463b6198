"""``TILELANG_DEFAULT_TARGET``: the target ``target="auto"`` means, as in TileLang."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import tvm

import tilelang
from tilelang_core.errors import TargetError
from tilelang_core.lowering import lower, resolve_target

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stub_backends import add_one  # noqa: E402


def _add(n=64):
    return add_one(n)


def test_a_target_string_is_what_auto_compiles_for(monkeypatch):
    monkeypatch.setenv("TILELANG_DEFAULT_TARGET", "llvm")
    kernel = tilelang.compile(_add())
    assert kernel.target == "llvm"
    a = torch.randn(64)
    torch.testing.assert_close(_run(kernel, a), a + 1)


def _run(kernel, a):
    b = torch.empty_like(a)
    kernel(a, b)
    return b


def test_a_json_object_with_an_arch(monkeypatch):
    monkeypatch.setenv("TILELANG_DEFAULT_TARGET", '{"kind": "cuda", "arch": "sm_80"}')
    art = lower(_add())
    assert art.target == "cuda -arch=sm_80" and art.device_language == "cuda"


def test_an_explicit_target_and_an_enclosing_target_win(monkeypatch):
    monkeypatch.setenv("TILELANG_DEFAULT_TARGET", "llvm")
    assert resolve_target("c").kind.name == "c"
    with tvm.target.Target("c"):
        assert resolve_target("auto").kind.name == "c"
    assert resolve_target("auto").kind.name == "llvm"


@pytest.mark.parametrize("value", ["", "auto"])
def test_unset_or_auto_is_the_automatic_choice(monkeypatch, value):
    monkeypatch.setenv("TILELANG_DEFAULT_TARGET", value)
    expected = "cuda" if torch.cuda.is_available() else "c"
    assert resolve_target("auto").kind.name in (expected, "metal")


@pytest.mark.parametrize(
    "value,match",
    [('{"kind": "cuda"', "does not parse"), ('{"arch": "sm_80"}', 'needs a "kind" string'), ("no-such-target", "cannot understand")],
)
def test_a_bad_value_is_a_target_error_naming_the_variable(monkeypatch, value, match):
    monkeypatch.setenv("TILELANG_DEFAULT_TARGET", value)
    with pytest.raises(TargetError, match=match) as info:
        resolve_target("auto")
    assert "TILELANG_DEFAULT_TARGET" in str(info.value)


def test_tilelang_env_reads_and_writes_it(monkeypatch):
    from tilelang.env import env

    monkeypatch.delenv("TILELANG_DEFAULT_TARGET", raising=False)
    assert env.TILELANG_DEFAULT_TARGET == "auto"
    env.TILELANG_DEFAULT_TARGET = "llvm"
    try:
        assert resolve_target("auto").kind.name == "llvm"
    finally:
        env.TILELANG_DEFAULT_TARGET = None


@pytest.mark.parametrize(
    "value,expected",
    [
        (None, "auto"),
        ("auto", "auto"),
        ("llvm", "llvm"),
        ('{"kind": "cuda", "arch": "sm_100f", "code": ["sm_100a"]}', {"kind": "cuda", "arch": "sm_100f", "code": ["sm_100a"]}),
    ],
)
def test_get_default_target_returns_what_auto_means(monkeypatch, value, expected):
    import tilelang

    if value is None:
        monkeypatch.delenv("TILELANG_DEFAULT_TARGET", raising=False)
    else:
        monkeypatch.setenv("TILELANG_DEFAULT_TARGET", value)
    assert tilelang.env.get_default_target() == expected
    assert tilelang.env.env.get_default_target() == expected


def test_get_default_target_asks_for_json_syntax_for_unquoted_keys(monkeypatch):
    import tilelang

    monkeypatch.setenv("TILELANG_DEFAULT_TARGET", '{kind: "cuda", arch: "sm_100f"}')
    with pytest.raises(ValueError, match="Use JSON syntax") as info:
        tilelang.env.get_default_target()
    assert isinstance(info.value, TargetError) and "TILELANG_DEFAULT_TARGET" in str(info.value)


@pytest.mark.parametrize(
    "target,message",
    [
        ({"kind": "cuda", "arch": "sm_100f", "code": ["sm_100a", "sm_103a"]},
         r"'code' \(TileLang's list of architectures one build covers\) is not an option of TVM 0.27's cuda target; "
         r"compile once per architecture"),
        ({"kind": "cuda", "arch": "compute_90"},
         r"'arch' must be a real GPU architecture 'sm_<major><minor>' .*got 'compute_90'; for the virtual "
         r"architecture 'compute_90' give 'sm_90'$"),
        ("cuda -arch=compute_80", r"got 'compute_80'; for the virtual architecture 'compute_80' give 'sm_80'$"),
        ({"kind": "cuda", "arch": "gfx90a"}, r"got 'gfx90a'$"),
    ],
)
def test_cuda_targets_tvm_cannot_build_are_refused_in_our_words(target, message):
    """Before, the first was TVM's list of every option it knows, the second a failed C++ check."""
    from tilelang_core.errors import TargetError
    from tilelang_core.lowering.target import resolve_target

    with pytest.raises(TargetError, match=r"^cannot understand target .*" + message):
        resolve_target(target)
    assert str(resolve_target({"kind": "cuda", "arch": "sm_100f"}).attrs["arch"]) == "sm_100f"
