"""The ctypes backend is checked by the core's conformance suite, and by nothing else."""

import pytest

from tilelang_core.conformance import conformance_tests

# ctypes is retired: compiling with it warns (tests/test_ctypes_retirement.py checks that warning)
pytestmark = pytest.mark.filterwarnings("ignore:execution backend 'ctypes' is deprecated:DeprecationWarning")

test_conformance = conformance_tests("ctypes")
