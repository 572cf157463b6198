"""The core's conformance suite against the cython backend, one test per check (every declared
target; those that cannot run here are skipped with the probe's reason). The tests beside this
file keep only what is specific to this backend."""

from tilelang_core.conformance import conformance_tests

test_conformance = conformance_tests("cython")
