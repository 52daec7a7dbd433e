"""The uninterrupted reference run every fault case is compared with (built once per session)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _fault_harness import EXP, FAST
from _offline_fixtures import PARAMS

from rlpipe import config


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run dir of the fast params trained without any fault (in this process)."""
    from rlpipe.trainer import Trainer

    data_dir = tmp_path_factory.mktemp("reference")
    Trainer(config.load(PARAMS, [*FAST, f"trainer.data_dir={data_dir}", f"trainer.exp_name={EXP}"])).train()
    return data_dir / EXP
