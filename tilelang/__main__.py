"""``python -m tilelang``: the command line."""

import sys

from tilelang_core.cli import console_main

sys.exit(console_main())
