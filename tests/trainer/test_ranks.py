"""claim_run_dir: a fresh run never inherits an earlier run's files, derived outputs included."""

from __future__ import annotations

import pytest

from rlpipe.artifacts.layout import RunLayout
from rlpipe.config import ConfigError
from rlpipe.runtime.distributed import DistContext
from rlpipe.trainer.ranks import claim_run_dir


def earlier_run(tmp_path):
    layout = RunLayout(tmp_path / "exp")
    for name in ("rollouts/iter-000001.zarr/zarr.json", "checkpoints/ckpt-000001.pt", "eval/metrics.json",
                 "reupdate/metrics.json", "reupdate/curve.csv", "advantages/iter-000001.zarr/zarr.json",
                 "metrics.json", "curve.csv"):
        (layout.root / name).parent.mkdir(parents=True, exist_ok=True)
        (layout.root / name).write_text("{}")
    return layout


def test_overwrite_leaves_no_stale_eval_reupdate_or_advantages(tmp_path):
    layout = earlier_run(tmp_path)
    claim_run_dir(layout, DistContext(), resume=False, overwrite=True)
    assert layout.root.is_dir() and list(layout.root.iterdir()) == []  # dvc metrics cannot mix runs


def test_without_overwrite_nothing_is_touched(tmp_path):
    layout = earlier_run(tmp_path)
    with pytest.raises(ConfigError, match="holds an earlier run; use --resume"):
        claim_run_dir(layout, DistContext(), resume=False, overwrite=False)
    assert (layout.root / "reupdate" / "metrics.json").is_file()
