"""The build gate (tilelang_core/autotuner/build_gate.py): a process's builds pause while one of
its threads times a candidate, with real threads.

Tuning on a thread pool, a candidate timed while another built lost to a slower one: lowering
holds the GIL for up to 150 ms at a time and the timed calls counted the wait (CI chose the 5 ms
candidate over the 1 ms one). test_autotune.py checks the whole run; these check the gate's rules.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time

from tilelang_core.autotuner.build_gate import build_slot, marked_building, quiet_for_timing


def _in_thread(body) -> tuple[threading.Thread, dict]:
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = body()
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box


def test_a_timing_waits_for_the_build_under_way_and_a_new_build_waits_for_the_timing():
    events: list[str] = []
    building, release_build = threading.Event(), threading.Event()

    def build() -> None:
        with build_slot(wait_s=30):
            events.append("build starts")
            building.set()
            release_build.wait(30)
            events.append("build ends")

    def timing() -> float:
        with quiet_for_timing(wait_s=30) as waited:
            events.append("timing starts")
            time.sleep(0.3)
            events.append("timing ends")
        return waited

    def later_build() -> float:
        with build_slot(wait_s=30) as waited:
            events.append("later build starts")
        return waited

    builder, _ = _in_thread(build)
    assert building.wait(30)
    timer, timed = _in_thread(timing)
    time.sleep(0.2)  # the timing waits for the build
    later, later_box = _in_thread(later_build)
    time.sleep(0.2)  # the later build waits, as the timing does: timings go first
    assert events == ["build starts"]
    release_build.set()
    for thread in (builder, timer, later):
        thread.join(30)
    assert events == ["build starts", "build ends", "timing starts", "timing ends", "later build starts"]
    assert timed["value"] >= 0.3 and later_box["value"] >= 0.5


def test_a_wait_past_its_bound_goes_on_and_says_so(caplog):
    caplog.set_level(logging.WARNING, logger="tilelang.autotuner")
    entered, leave = threading.Event(), threading.Event()

    def stuck_build() -> None:
        with build_slot(wait_s=30):
            entered.set()
            leave.wait(30)

    thread, _ = _in_thread(stuck_build)
    assert entered.wait(30)
    start = time.monotonic()
    with quiet_for_timing(wait_s=0.3) as waited:
        assert waited >= 0.3
    assert time.monotonic() - start < 5
    assert "candidates have been building in this process for over 0 s; timing alongside them" in caplog.text
    leave.set()
    thread.join(30)

    def stuck_timing() -> None:
        with quiet_for_timing(wait_s=30):
            entered.set()
            leave.wait(30)

    entered.clear()
    leave.clear()
    thread, _ = _in_thread(stuck_timing)
    assert entered.wait(30)
    with build_slot(wait_s=0.3) as waited:
        assert waited >= 0.3
    assert "a candidate has been timed in this process for over 0 s; building alongside it" in caplog.text
    leave.set()
    thread.join(30)


def test_a_thread_never_waits_for_itself():
    """A ref_prog timed under the gate that tunes another kernel on its first call times (and
    builds) inside its own thread's timing; a build's thread that times does not wait for its
    own build. Each would otherwise wait the full bound, here 30 s."""
    start = time.monotonic()
    with quiet_for_timing(wait_s=30):
        with quiet_for_timing(wait_s=30) as waited:
            assert waited == 0.0
        with build_slot(wait_s=30) as waited:
            assert waited == 0.0
    with build_slot(wait_s=30):
        with marked_building():
            with quiet_for_timing(wait_s=30) as waited:
                assert waited == 0.0
    assert time.monotonic() - start < 5


    def another_timing() -> float:
        with quiet_for_timing(wait_s=30) as waited:
            return waited

    thread, box = _in_thread(another_timing)  # every block has left the gate: nothing to wait for
    thread.join(30)
    assert box["value"] < 1


def test_a_fork_child_starts_with_a_free_gate():
    """A child made while another thread of the parent built must not wait for that build."""
    code = (
        "import os, sys, threading, time\n"
        "from tilelang_core.autotuner.build_gate import build_slot, quiet_for_timing\n"
        "entered, leave = threading.Event(), threading.Event()\n"
        "def build():\n"
        "    with build_slot(wait_s=30):\n"
        "        entered.set(); leave.wait(30)\n"
        "t = threading.Thread(target=build); t.start(); entered.wait(30)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    start = time.monotonic()\n"
        "    with quiet_for_timing(wait_s=20):\n"
        "        pass\n"
        "    os._exit(0 if time.monotonic() - start < 5 else 3)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "leave.set(); t.join(30)\n"
        "print(os.waitstatus_to_exitcode(status))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0"
