"""Make this directory's helper modules (_tvmffi_helpers, _tvmffi_kernels) importable under
pytest's importlib import mode, whichever directory the suite is started from."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
