"""Suite-wide set-up: one intra-op thread per test process while pytest-xdist runs two side by side.

``make test`` runs ``-n 2`` on CI's two cores; two workers that each start torch with one thread per
core (and subprocesses that inherit it) would oversubscribe the machine, which collapses torch's
intra-op thread pool. Subprocesses inherit ``OMP_NUM_THREADS``; a params file's
``trainer.num_threads`` still wins.
"""

from __future__ import annotations

import os
import sys

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Pin one thread per process before torch starts (workers import it only after this hook)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["MKL_NUM_THREADS"] = "1"
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
