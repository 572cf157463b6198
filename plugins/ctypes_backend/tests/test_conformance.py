"""The ctypes backend is checked by the core's conformance suite, and by nothing else."""

from tilelang_core.conformance import conformance_tests

test_conformance = conformance_tests("ctypes")
