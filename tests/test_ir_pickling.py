"""Pickling or copying a TVM IR object: a ``TypeError`` that says what pickles instead
(language/ir_pickling.py). TVM 0.27's serializer killed the process with a segmentation fault
(a ``multiprocessing`` pool given a ``T.prim_func`` crashed its parent), so each case runs in a
fresh Python: a crash fails the test instead of ending the test run."""

from __future__ import annotations

import subprocess
import sys
import textwrap


SCRIPT = textwrap.dedent("""
    import copy, pickle
    import tilelang.language as T

    @T.prim_func
    def store(A: T.Tensor((8,), "float32")):
        with T.Kernel(1):
            A[0] = 1.0

    n = T.dynamic("n")
    objects = {"prim_func": store, "symbol": n, "expression": n * 2 + 1}
    actions = {"pickle": pickle.dumps, "copy": copy.copy, "deepcopy": copy.deepcopy}
    for what, obj in objects.items():
        for name, action in actions.items():
            try:
                action(obj)
                print(what, name, "no error", flush=True)
            except TypeError as exc:
                print(what, name, "TypeError:", exc, flush=True)
""")


def test_pickling_or_copying_an_ir_object_raises_a_clear_type_error(tmp_path):
    script = tmp_path / "pickle_ir.py"
    script.write_text(SCRIPT)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"exit status {proc.returncode} (-11: the segmentation fault) after:\n{proc.stdout}"
    lines = proc.stdout.splitlines()
    assert len(lines) == 9, proc.stdout
    for line in lines:
        what, action, text = line.split(" ", 2)
        assert text.startswith("TypeError: cannot pickle or copy a TVM IR object (tvm.") and \
            "Pickle the compiled kernel" in text, line
