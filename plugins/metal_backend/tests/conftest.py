import os
import sys

sys.path.insert(0, os.path.dirname(__file__))


def pytest_configure(config):
    config.addinivalue_line("markers", "mps: needs macOS with torch's MPS device (skipped elsewhere)")
    config.addinivalue_line("markers", "slow: takes more than a few seconds")
