"""The core's conformance suite against the nvrtc backend, one test per check (without a GPU every
check is skipped with the probe's reason, but ``cuda:build_only``: build, export and load from the
disk cache without a device)."""

from tilelang_core.conformance import conformance_tests

test_conformance = conformance_tests("nvrtc")
