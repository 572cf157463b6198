"""``python -m tilelang``: the command line."""

import sys

from tilelang_core.cli import main

sys.exit(main())
