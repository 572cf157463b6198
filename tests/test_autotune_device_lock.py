"""The autotuner's per-device timing lock (tilelang_core/autotuner/device_lock.py) across real
processes: a timing waits for another process's timing on the same device, a killed holder frees
the device, and a hung holder delays a waiter only ``wait_s`` seconds (with a warning)."""

from __future__ import annotations

import logging
import subprocess
import sys
import time

import pytest

from tilelang_core.autotuner.device_lock import device_slot, exclusive_timing, lock_dir

HOLDER = """
import sys, time
from tilelang_core.autotuner.device_lock import exclusive_timing
with exclusive_timing("cpu"):
    print("held", flush=True)
    time.sleep(float(sys.argv[1]))
    print("releasing", flush=True)
"""


def start_holder(seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_timing_waits_while_another_process_times_on_the_same_device():
    holder = start_holder(1.0)
    try:
        with exclusive_timing("cpu", wait_s=60) as waited:
            assert holder.stdout.readline().strip() == "releasing"  # its timing ended before this one began
        assert waited > 0.3
    finally:
        holder.kill()
        holder.wait()


def test_a_killed_holder_frees_the_device_at_once():
    holder = start_holder(600)
    holder.kill()
    holder.wait()
    start = time.monotonic()
    with exclusive_timing("cpu", wait_s=60) as waited:
        pass
    assert waited < 5 and time.monotonic() - start < 5


def test_a_hung_holder_delays_a_timing_only_wait_s_and_says_so(caplog):
    holder = start_holder(600)
    try:
        with caplog.at_level(logging.WARNING, logger="tilelang.autotuner"):
            with exclusive_timing("cpu", wait_s=0.5) as waited:
                assert holder.poll() is None
        assert 0.5 <= waited < 10
        assert "another process has been timing on device cpu" in caplog.text
    finally:
        holder.kill()
        holder.wait()


def test_lock_files_are_private_and_named_after_the_device():
    assert device_slot("cpu") == "cpu"
    with exclusive_timing("cpu"):
        pass
    assert (lock_dir() / "cpu.lock").stat().st_mode & 0o077 == 0
    assert lock_dir().stat().st_mode & 0o077 == 0
    with pytest.raises(Exception, match="no torch device"):
        device_slot("vulkan")


def test_a_lock_directory_others_can_write_to_is_not_used(tmp_path, monkeypatch, caplog):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    shared = lock_dir()
    shared.chmod(0o777)
    with caplog.at_level(logging.WARNING, logger="tilelang.autotuner"):
        with exclusive_timing("cpu") as waited:
            assert waited == 0.0
    assert "is not a private directory" in caplog.text
    assert not (shared / "cpu.lock").exists()


def test_a_gpu_family_names_a_slot_with_or_without_a_gpu():
    # without a CUDA device the timing itself reports that: the lock must not fail first
    slot = device_slot("cuda")
    assert slot.startswith("cuda-") and "/" not in slot


def test_a_nested_timing_on_the_holding_thread_runs_at_once_and_other_threads_still_wait(caplog):
    """A ref_prog timed under the lock that tunes another kernel on its first call times inside
    the holder's lock: it used to wait for its own thread's lock (300 s) and then warn."""
    import threading

    with caplog.at_level(logging.WARNING, logger="tilelang.autotuner"):
        with exclusive_timing("cpu", wait_s=60):
            start = time.monotonic()
            with exclusive_timing("cpu", wait_s=5) as waited:
                assert waited == 0.0
            assert time.monotonic() - start < 1.0
            box = {}

            def other():  # another thread of this process is another timing: it waits
                with exclusive_timing("cpu", wait_s=0.3) as other_waited:
                    box["waited"] = other_waited

            thread = threading.Thread(target=other)
            thread.start()
            thread.join(30)
        assert box["waited"] >= 0.3
    assert "timing this candidate alongside it" in caplog.text  # the other thread's, not the nested one's
    assert caplog.text.count("alongside it") == 1
