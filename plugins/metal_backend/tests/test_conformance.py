"""The core's conformance suite against the metal backend, one test per check.

Without MPS (every machine of this project) the checks that run kernels are skipped with the
probe's reason ("macOS only", "torch has no MPS"); what runs is the declaration (a cheap import in
a fresh interpreter) and ``metal:build_only``: the reference kernels build, their calls refuse with
BackendUnavailableError, they export, and a fresh process loads the exports without importing
TVM and gets them from the disk cache (the float64 reference kernel is left out: Metal has no
float64). On a Mac with MPS every check runs.
"""

from tilelang_core.conformance import conformance_tests

test_conformance = conformance_tests("metal")
