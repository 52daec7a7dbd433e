"""claim_run_dir: a fresh run never inherits an earlier run's files, derived outputs included."""

from __future__ import annotations

import pytest

from rlpipe.artifacts.layout import RunLayout
from rlpipe.config import ConfigError
from rlpipe.runtime.distributed import DistContext
from rlpipe.trainer.ranks import claim_run_dir


def earlier_run(tmp_path):
    layout = RunLayout(tmp_path / "exp")
    for name in (
        "rollouts/iter-000001.zarr/zarr.json",
        "checkpoints/ckpt-000001.pt",
        "eval/metrics.json",
        "reupdate/metrics.json",
        "reupdate/curve.csv",
        "advantages/iter-000001.zarr/zarr.json",
        "metrics.json",
        "curve.csv",
    ):
        (layout.root / name).parent.mkdir(parents=True, exist_ok=True)
        (layout.root / name).write_text("{}")
    return layout


def test_overwrite_leaves_no_stale_eval_reupdate_or_advantages(tmp_path):
    layout = earlier_run(tmp_path)
    claim_run_dir(layout, DistContext(), resume=False, overwrite=True)
    assert layout.root.is_dir() and list(layout.root.iterdir()) == []  # dvc metrics cannot mix runs


def test_without_overwrite_nothing_is_touched(tmp_path):
    layout = earlier_run(tmp_path)
    with pytest.raises(ConfigError, match="holds an earlier run; use --resume") as info:
        claim_run_dir(layout, DistContext(), resume=False, overwrite=False)
    assert "from Python: Trainer(..., resume=True) or overwrite=True" in str(info.value)
    assert (layout.root / "reupdate" / "metrics.json").is_file()


def test_overwrite_refuses_a_run_dir_that_is_a_link_and_leaves_its_target_alone(tmp_path):
    victim = earlier_run(tmp_path).root  # a run written through the link, beside the user's own files
    (victim / "thesis.tex").write_text("mine")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "v").symlink_to(victim, target_is_directory=True)
    before = sorted(str(p.relative_to(victim)) for p in victim.rglob("*"))
    with pytest.raises(
        ConfigError,
        match=r"data/v: is a symbolic link \(to .*/exp\); --overwrite never "
        r"deletes through a link: remove the link",
    ):
        claim_run_dir(RunLayout(tmp_path / "data" / "v"), DistContext(), resume=False, overwrite=True)
    assert sorted(str(p.relative_to(victim)) for p in victim.rglob("*")) == before
    assert (tmp_path / "data" / "v").is_symlink()


def test_overwrite_unlinks_links_inside_the_run_dir_and_keeps_what_rlpipe_did_not_write(tmp_path, capsys):
    layout = earlier_run(tmp_path)
    elsewhere = tmp_path / "big-disk" / "eval"
    elsewhere.mkdir(parents=True)
    (elsewhere / "metrics.json").write_text("{}")
    (layout.root / "eval").rename(tmp_path / "old-eval")
    (layout.root / "eval").symlink_to(elsewhere, target_is_directory=True)
    (layout.root / "notes.md").write_text("the user's")
    claim_run_dir(layout, DistContext(), resume=False, overwrite=True)
    assert sorted(p.name for p in layout.root.iterdir()) == ["notes.md"]
    assert (elsewhere / "metrics.json").is_file()  # the link went, not what it points at
    assert f"--overwrite kept 1 entries of {layout.root} that rlpipe did not write: notes.md" in (
        capsys.readouterr().err
    )
