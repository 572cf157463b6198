"""The GPU check kit: build every GPU check on a machine without a GPU, run it on one with.

Build half (this repository, no GPU): ``scripts/gpu-kit-build.sh DIR`` -> :mod:`.build_kit`
(case catalogue :mod:`.cases`, wheels :mod:`.wheels`). Run half (any machine with an NVIDIA GPU,
no network): ``scripts/gpu-kit-run.sh DIR`` -> :mod:`.run_kit` (environment :mod:`.environment`,
kernel loading :mod:`.load_stage`, checks :mod:`.worker`, timings :mod:`.timing`, report
:mod:`.report`). :mod:`.tensors` and :mod:`.references` are shared by both halves. See docs/gpu.md.

The run-side modules are copied into every kit folder, so a kit runs with nothing but itself;
they import only the standard library and torch (never TVM, never the build-side modules).
"""

#: Layout version of a kit folder (MANIFEST.json ``kit_format``); the run half refuses others.
#: 2: a case's ``params`` may hold scalar specs (``"role": "scalar"``, :mod:`.tensors`).
KIT_FORMAT = 2

#: Files of this package that travel inside a kit (the run half and what it imports).
RUN_SIDE_MODULES = (
    "__init__.py",
    "tensors.py",
    "references.py",
    "environment.py",
    "load_stage.py",
    "worker.py",
    "checks.py",
    "timing.py",
    "report.py",
    "run_kit.py",
)
