"""A script whose kernel TVMScript refuses shows the error, not only TVM's note (language/uncaught_diagnostics.py).

TVM's ``sys.excepthook`` prints only ``note: run with `TVM_BACKTRACE=1` ...`` for an uncaught
``DiagnosticError``; TVM 0.27's parser no longer prints the diagnostic before raising it, so the
user saw no message at all. The scripts run in a real interpreter, outside pytest (whose
``PYTEST_CURRENT_TEST`` makes TVM print the traceback instead).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """\
    import tilelang.language as T

    @T.prim_func
    def typo(X: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=1):
            for i in T.serial(8):
                X[i] = undefined_name + 1
    """
)


def _run(tmp_path, **env_changes):
    script = tmp_path / "kernel_with_a_typo.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_CURRENT_TEST", "TVM_BACKTRACE")}
    env.update(env_changes)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    return script, proc


def test_the_message_and_the_kernel_line_are_shown(tmp_path):
    script, proc = _run(tmp_path)
    assert proc.returncode == 1
    assert "tvm.error.DiagnosticError: error: Undefined variable: undefined_name" in proc.stderr, proc.stderr
    assert f"--> {script}:7:" in proc.stderr
    assert "X[i] = undefined_name + 1" in proc.stderr
    assert "Traceback" not in proc.stderr  # the diagnostic, as TVM means it, rather than a traceback
    assert "TVM_BACKTRACE=1" in proc.stdout  # TVM's own note is still printed


def test_with_tvm_backtrace_tvm_prints_the_traceback_and_nothing_is_added(tmp_path):
    _, proc = _run(tmp_path, TVM_BACKTRACE="1")
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr
    assert not proc.stderr.startswith("tvm.error.DiagnosticError")
    assert "Undefined variable: undefined_name" in proc.stderr


def test_the_hook_wraps_once(tmp_path):
    code = (
        "import sys, tilelang.language, tilelang_core.language.uncaught_diagnostics as u\n"
        "hook = sys.excepthook\nu.install(); u.install()\nassert sys.excepthook is hook\nprint('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
