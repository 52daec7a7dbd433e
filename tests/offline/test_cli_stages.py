"""One stage against stored data through the CLI: collect, advantage, update, eval, inspect."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
import zarr
from _offline_fixtures import PARAMS, assert_same_learner, set_args, tiny_cfg
from click.testing import CliRunner

from rlpipe.algorithms.gae import compute_gae
from rlpipe.artifacts.checkpoints import load_checkpoint
from rlpipe.artifacts.zarr_read import read_rollout
from rlpipe.cli import cli
from rlpipe.trainer import Trainer


@pytest.fixture(scope="module")
def online(tmp_path_factory):
    """4 online iterations, rollouts 1–4 stored, checkpoints at iterations 2 and 4."""
    cfg = tiny_cfg(tmp_path_factory.mktemp("online"))
    Trainer(cfg).train()
    return cfg


def ok(*args: object) -> str:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


def rollout_path(cfg, k: int) -> Path:
    return cfg.run_dir / "rollouts" / f"iter-{k:06d}.zarr"


def digest(folder: Path) -> str:
    """Hash of every file name and byte under ``folder``."""
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        h.update(str(path.relative_to(folder)).encode())
        if path.is_file():
            h.update(path.read_bytes())
    return h.hexdigest()


def test_collect_from_an_online_checkpoint_reproduces_the_next_rollout(online, tmp_path):
    out = ok(
        "collect",
        PARAMS,
        *set_args(online.trainer.data_dir),
        "--checkpoint",
        online.run_dir / "checkpoints" / "ckpt-000002.pt",
        "--out",
        tmp_path,
    )
    path = tmp_path / "iter-000003.zarr"
    assert str(path) in out
    got, attrs = read_rollout(path)
    want, online_attrs = read_rollout(rollout_path(online, 3))
    assert set(got.keys()) == set(want.keys())
    for key in want.keys():
        assert torch.equal(got[key], want[key]), key
    assert attrs["iteration"] == 3 and attrs["env_steps"] == online_attrs["env_steps"] == 3 * 128
    assert attrs["checkpoint"] == "ckpt-000002.pt"


def test_collect_defaults_to_the_latest_checkpoint(online):
    ok("collect", PARAMS, *set_args(online.trainer.data_dir))
    assert (online.run_dir / "collected" / "iter-000005.zarr" / "zarr.json").is_file()


def test_advantage_writes_outside_rollouts_and_never_touches_the_rollout(online):
    rollout = rollout_path(online, 3)
    before = digest(rollout)
    out = ok("advantage", PARAMS, rollout, *set_args(online.trainer.data_dir))
    beside = online.run_dir / "advantages" / "iter-000003.zarr"
    assert str(beside) in out and digest(rollout) == before
    assert sorted(p.name for p in rollout.parent.iterdir()) == [f"iter-{k:06d}.zarr" for k in range(1, 5)]
    group = zarr.open_group(beside, mode="r")
    assert sorted(group.array_keys()) == ["advantage", "return"]
    assert group.attrs["rollout"] == "iter-000003.zarr" and group.attrs["iteration"] == 3
    data, _ = read_rollout(rollout)
    advantage, returns = compute_gae(data, online.algorithm.cfg.gamma, online.algorithm.cfg.gae_lambda)
    assert group["advantage"].shape == (8, 17)
    assert group["advantage"].metadata.dimension_names == ("env", "time")
    assert torch.equal(torch.from_numpy(group["advantage"][:, :-1]), advantage)
    assert torch.equal(torch.from_numpy(group["return"][:, :-1]), returns)
    assert not group["advantage"][:, -1].any()
    ok("advantage", PARAMS, rollout, *set_args(online.trainer.data_dir, "algorithm.cfg.gamma=0.5"))
    assert not torch.equal(torch.from_numpy(zarr.open_group(beside, mode="r")["return"][:, :-1]), returns)
    assert digest(rollout) == before


def test_update_steps_chain_into_the_online_checkpoint(online, tmp_path):
    args = set_args(online.trainer.data_dir)
    out = ok("update", PARAMS, rollout_path(online, 3), *args, "--out", tmp_path)  # from ckpt 2
    assert "update/policy_loss" in out and "update/value_loss" in out
    ok(
        "update",
        PARAMS,
        rollout_path(online, 4),
        *args,
        "--checkpoint",
        tmp_path / "ckpt-000003.pt",
        "--out",
        tmp_path,
    )
    assert_same_learner(online.run_dir / "checkpoints" / "ckpt-000004.pt", tmp_path / "ckpt-000004.pt")
    state = load_checkpoint(tmp_path / "ckpt-000004.pt")
    assert state["iteration"] == 4 and state["env_steps"] == 4 * 128
    assert state["origin"]["start"] == str(tmp_path / "ckpt-000003.pt")


def test_update_without_the_collecting_checkpoint_says_what_to_do(online, tmp_path):
    result = CliRunner().invoke(
        cli,
        [
            "update",
            str(PARAMS),
            str(rollout_path(online, 4)),
            *set_args(online.trainer.data_dir),
            "--out",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 2
    assert "no checkpoint of iteration 3" in result.output and "rlpipe replay" in result.output


def test_eval_writes_metrics_and_is_repeatable(online, tmp_path):
    args = (*set_args(online.trainer.data_dir), "--out", tmp_path / "m.json")
    first = ok("eval", PARAMS, *args)
    assert "eval/return_mean" in first
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert metrics["iteration"] == 4 and metrics["eval/episodes"] == 2  # eval.num_envs × num_episodes
    assert metrics["checkpoint"].endswith("ckpt-000004.pt")
    ok("eval", PARAMS, *args)
    assert json.loads((tmp_path / "m.json").read_text()) == metrics
    ok(
        "eval",
        PARAMS,
        *set_args(online.trainer.data_dir),
        "--checkpoint",
        online.run_dir / "checkpoints" / "ckpt-000002.pt",
    )
    assert json.loads((online.run_dir / "eval" / "metrics.json").read_text())["iteration"] == 2


def test_inspect_prints_layout_attrs_and_episodes(online):
    out = ok("inspect", rollout_path(online, 2))
    for text in (
        "obs",
        "[8, 17, 4]",
        "float32",
        "sample_log_prob",
        "true",
        "schema version 1",
        "iteration=2",
        "checkpoint=None",
        "episodes: finished=",
    ):
        assert text in out, text
    info = json.loads(ok("inspect", rollout_path(online, 2), "--json"))
    assert info["attrs"]["iteration"] == 2 and info["keys"]["obs"]["shape"] == [8, 17, 4]
    assert info["episodes"]["finished"] == info["keys"]["done"]["stats"]["true"]
