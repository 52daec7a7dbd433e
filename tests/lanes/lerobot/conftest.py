"""The LeRobot lane: rlpipe's exports read, checked and edited by lerobot itself, in lerobot's own venv.

``make test-lerobot`` makes the exports with rlpipe's venv (``make_exports.py``) and runs these tests
with the lane venv's Python, ``RLPIPE_LEROBOT_EXPORTS`` naming the folder. lerobot is imported inside
the fixtures and tests only, so the default suite (which deselects the ``lane`` marker) collects these
files without it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

EXPORTS_ENV = "RLPIPE_LEROBOT_EXPORTS"


@pytest.fixture(scope="session")
def exports() -> Path:
    """The folder ``make_exports.py`` wrote (``$RLPIPE_LEROBOT_EXPORTS``)."""
    folder = os.environ.get(EXPORTS_ENV)
    if not folder or not (Path(folder) / "pixels-png/meta/info.json").is_file():
        pytest.fail(f"{EXPORTS_ENV}: no exports at {folder!r}; run `make test-lerobot`")
    return Path(folder)


@pytest.fixture(scope="session")
def load(exports: Path) -> Callable[..., Any]:
    """``load(name, **kwargs)``: the export ``name`` as a ``LeRobotDataset`` (kwargs go to it)."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    def _load(name: str, **kwargs: Any) -> LeRobotDataset:
        return LeRobotDataset(f"rlpipe/{name}", root=exports / name, **kwargs)

    return _load


@pytest.fixture(scope="session")
def stored(exports: Path) -> Callable[[str], dict[str, np.ndarray]]:
    """``stored(name)``: the export's episodes as the run's stores hold them (``<name>.npz``)."""

    def _stored(name: str) -> dict[str, np.ndarray]:
        with np.load(exports / f"{name}.npz") as data:
            return dict(data)

    return _stored
