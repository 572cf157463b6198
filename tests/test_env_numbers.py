"""The time settings and ``tilelang cache prune --days`` read their number with one function
(tilelang_core/env_numbers.py) and refuse a wrong one with the same message: the setting, the
range it takes, the text given, what to do. Each keeps its own range: the compile time limit and
the cache lock wait take 0 (no limit; build without waiting), the plugin time limit does not.
"""

from __future__ import annotations

import pytest

from tilelang_core.backends.isolation import plugin_timeout
from tilelang_core.cache.store import lock_wait_s
from tilelang_core.compiler_process import compile_timeout_s
from tilelang_core.errors import SettingError

#: variable -> (its reader, the range in the message, the example, the default, the value 0 reads as)
SETTINGS = {
    "TILELANG_COMPILE_TIMEOUT_SECONDS": (compile_timeout_s, "from 0 to 1000000 (0: no limit)", "120", "600", None),
    "TILELANG_PLUGIN_TIMEOUT": (plugin_timeout, "greater than 0 and at most 1000000", "30", "60", "refused"),
    "TILELANG_CACHE_LOCK_TIMEOUT": (lock_wait_s, "from 0 to 1000000 (0: build without waiting)", "1200", "600", 0.0),
}


@pytest.mark.parametrize("variable", list(SETTINGS))
@pytest.mark.parametrize("given", ["soon", "-1", "1e300", "nan", "inf"])
def test_a_wrong_time_setting_names_the_variable_range_value_and_remedy(monkeypatch, variable, given):
    read, words, example, default, _ = SETTINGS[variable]
    monkeypatch.setenv(variable, f" {given} ")
    with pytest.raises(SettingError) as info:
        read()
    assert str(info.value) == (f"{variable} must be a number of seconds {words}, got '{given}'; set it to such a "
                               f"number (for example {example}), or unset it for the default of {default} s")


@pytest.mark.parametrize("variable", list(SETTINGS))
def test_each_time_setting_keeps_its_range_and_default(monkeypatch, variable):
    read, _, _, default, zero = SETTINGS[variable]
    monkeypatch.delenv(variable, raising=False)
    assert read() == float(default)
    monkeypatch.setenv(variable, "  ")
    assert read() == float(default)
    for text, value in (("2.5", 2.5), ("1e6", 1e6), ("0.001", 0.001)):
        monkeypatch.setenv(variable, text)
        assert read() == value
    monkeypatch.setenv(variable, "0")
    if zero == "refused":
        with pytest.raises(SettingError, match=f"{variable} must be a number of seconds greater than 0"):
            read()
    else:
        assert read() == zero


def test_cache_prune_days_is_refused_with_the_same_message(capsys):
    from tilelang_core.cli import main

    with pytest.raises(SystemExit) as info:
        main(["cache", "prune", "--days", "-1"])
    assert info.value.code == 2
    assert ("argument --days: --days must be a number of days >= 0, got '-1'; pass such a number, for example "
            "--days 30 (the default)") in capsys.readouterr().err
