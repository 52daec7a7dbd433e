"""Offline replay (rlpipe/offline/replay.py) and the one-line errors for bad stored data."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
import torch
import zarr
from _offline_fixtures import PARAMS, assert_same_learner, learner, same_leaves, set_args, tiny_cfg
from click.testing import CliRunner

from rlpipe.artifacts.checkpoints import load_checkpoint
from rlpipe.artifacts.store import StoreError
from rlpipe.artifacts.zarr_read import read_rollout
from rlpipe.cli import cli
from rlpipe.collector import Collector
from rlpipe.config import ConfigError
from rlpipe.offline.commands import update_from_rollout
from rlpipe.offline.replay import replay
from rlpipe.rollout import SCHEMA_VERSION
from rlpipe.trainer import Trainer


@pytest.fixture(scope="module")
def online(tmp_path_factory):
    """4 online iterations, rollouts 1–4 stored, checkpoints at iterations 2 and 4 only."""
    cfg = tiny_cfg(tmp_path_factory.mktemp("online"))
    Trainer(cfg).train()
    return cfg


def ckpt(directory: Path, k: int) -> Path:
    return directory / f"ckpt-{k:06d}.pt"


def online_ckpt(cfg, k: int) -> Path:
    return ckpt(cfg.run_dir / "checkpoints", k)


def curve(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


# ---------------------------------------------------------------------------------------- replay


def test_stored_rollouts_hold_the_collected_keys_and_their_origin(online):
    assert sorted(p.name for p in (online.run_dir / "checkpoints").glob("ckpt-*.pt")) == [
        "ckpt-000002.pt",
        "ckpt-000004.pt",
    ]
    rollout, attrs = read_rollout(online.run_dir / "rollouts" / "iter-000003.zarr")
    assert set(rollout.keys()) == set(Collector.writes)  # not last iteration's stale advantages
    assert attrs["iteration"] == 3 and attrs["checkpoint"] == "ckpt-000002.pt"
    assert attrs["training_hash"] == load_checkpoint(online_ckpt(online, 2))["training_hash"]


def test_replay_with_unchanged_params_reproduces_the_online_checkpoints(online, tmp_path):
    summary = replay(online, online.run_dir / "rollouts", tmp_path)
    assert (summary["iterations"], summary["transitions"]) == (4, 4 * 128)
    assert summary["rebuilt_updates"] == 0 and not summary["params_changed"]
    for k in (2, 4):
        assert_same_learner(online_ckpt(online, k), ckpt(tmp_path / "checkpoints", k))
    assert {p.name for p in (tmp_path / "checkpoints").glob("ckpt-*.pt")} == {
        f"ckpt-{k:06d}.pt" for k in (1, 2, 3, 4)
    }
    assert json.loads((tmp_path / "metrics.json").read_text())["last_iteration"] == 4
    losses = ("iteration", "env_steps", "update/policy_loss", "update/value_loss", "update/approx_kl")
    offline_rows = [{k: row[k] for k in losses} for row in curve(tmp_path / "curve.csv")]
    assert offline_rows == [{k: row[k] for k in losses} for row in curve(online.run_dir / "curve.csv")]


def test_replay_of_one_rollout_rebuilds_the_missing_checkpoint(online, tmp_path):
    summary = replay(online, online.run_dir / "rollouts", tmp_path, iterations=(4, 4))
    assert summary["rebuilt_updates"] == 1  # no ckpt 3: ckpt 2, then rollout 3 re-updated
    assert_same_learner(online_ckpt(online, 4), ckpt(tmp_path / "checkpoints", 4))


def test_chain_replay_equals_the_online_run(online, tmp_path):
    replay(
        online,
        online.run_dir / "rollouts",
        tmp_path / "a",
        iterations=(3, 4),
        chain=True,
        start=online_ckpt(online, 2),
    )
    assert_same_learner(online_ckpt(online, 4), ckpt(tmp_path / "a" / "checkpoints", 4))
    replay(online, online.run_dir / "rollouts", tmp_path / "b", chain=True)  # from initial weights
    assert_same_learner(online_ckpt(online, 4), ckpt(tmp_path / "b" / "checkpoints", 4))
    # --from is where the chain starts, even when it is not the checkpoint before A:
    replay(
        online,
        online.run_dir / "rollouts",
        tmp_path / "c",
        iterations=(4, 4),
        chain=True,
        start=online_ckpt(online, 2),
    )
    skipped, _ = update_from_rollout(
        online, online.run_dir / "rollouts" / "iter-000004.zarr", online_ckpt(online, 2), tmp_path / "d"
    )
    assert_same_learner(skipped, ckpt(tmp_path / "c" / "checkpoints", 4))
    assert not same_leaves(learner(skipped), learner(online_ckpt(online, 4)))


def test_changed_params_start_each_update_from_the_online_weights(online, tmp_path):
    data = online.trainer.data_dir
    changed = tiny_cfg(data, "replay.algorithm.cfg.learning_rate=0.01")
    summary = replay(changed, online.run_dir / "rollouts", tmp_path / "changed", iterations=(3, 4))
    assert summary["params_changed"] and summary["rebuilt_updates"] == 1
    got = ckpt(tmp_path / "changed" / "checkpoints", 4)
    assert not same_leaves(learner(got), learner(online_ckpt(online, 4)))
    assert load_checkpoint(got)["algo"]["optimizer"]["param_groups"][0]["lr"] == 0.01
    # Update 4 started from the online weights after 3 (rebuilt), not from the changed update 3:
    replay(online, online.run_dir / "rollouts", tmp_path / "same", iterations=(3, 3))
    path, metrics = update_from_rollout(
        tiny_cfg(data, "algorithm.cfg.learning_rate=0.01"),
        online.run_dir / "rollouts" / "iter-000004.zarr",
        ckpt(tmp_path / "same" / "checkpoints", 3),
        tmp_path / "one",
    )
    assert metrics["update/learning_rate"] == 0.01
    assert_same_learner(path, got)
    chained = replay(changed, online.run_dir / "rollouts", tmp_path / "chain", iterations=(3, 4), chain=True)
    assert chained["chain"]
    assert not same_leaves(learner(ckpt(tmp_path / "chain" / "checkpoints", 4)), learner(got))


def test_replay_without_checkpoint_or_rollouts_to_rebuild_from(online, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(
        online.run_dir / "rollouts" / "iter-000004.zarr", run_dir / "rollouts" / "iter-000004.zarr"
    )
    (run_dir / "checkpoints").mkdir()
    shutil.copy(online_ckpt(online, 2), run_dir / "checkpoints")
    with pytest.raises(
        StoreError,
        match=r"iter-000003\.zarr: missing; replaying iteration 4 needs "
        r"the weights after iteration 3, and there is no checkpoint",
    ):
        replay(online, run_dir / "rollouts", tmp_path / "out", iterations=(4, 4))
    with pytest.raises(StoreError, match=r"iter-000002\.zarr: missing; replaying iterations 2:4"):
        replay(online, run_dir / "rollouts", tmp_path / "out", iterations=(2, 4))
    with pytest.raises(ConfigError, match="add --chain"):
        replay(online, run_dir / "rollouts", tmp_path / "out", start=online_ckpt(online, 2))
    with pytest.raises(StoreError, match="would overwrite the run's own checkpoints"):
        replay(online, run_dir / "rollouts", run_dir)


def test_rebuilding_needs_the_runs_own_params(online, tmp_path):
    other = tiny_cfg(online.trainer.data_dir, "algorithm.cfg.clip_coef=0.1")
    with pytest.raises(
        StoreError,
        match=r"iter-000004\.zarr: .*no checkpoint of iteration 3.*"
        r"training hash .*replay\.algorithm",
    ):
        replay(other, online.run_dir / "rollouts", tmp_path, iterations=(4, 4))
    with pytest.raises(ConfigError, match=r"replay\.algorithm\.cfg\.clip_coef"):
        replay(
            tiny_cfg(online.trainer.data_dir, "replay.algorithm.cfg.clip_coef=-1"),
            online.run_dir / "rollouts",
            tmp_path,
        )


# ---------------------------------------------------------------------- bad input: one line, exit 2


def one_line_error(result, *fragments: str, code: int = 2) -> str:
    assert result.exit_code == code, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def invoke(*args: str):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture
def copied(online, tmp_path) -> Path:
    """A copy of rollout 3 that a test may damage."""
    path = tmp_path / "rollouts" / "iter-000003.zarr"
    shutil.copytree(online.run_dir / "rollouts" / "iter-000003.zarr", path)
    return path


def test_missing_store_and_folder(online, tmp_path):
    one_line_error(
        invoke("inspect", tmp_path / "iter-000009.zarr"), "iter-000009.zarr: no rollout store here"
    )
    one_line_error(
        invoke("replay", PARAMS, *set_args(tmp_path), "--rollouts", tmp_path / "none"),
        f"{tmp_path / 'none'}: no rollout stores",
    )


def test_truncated_chunk(online, copied):
    chunk = copied / "obs" / "c.0.0.0"
    chunk.write_bytes(chunk.read_bytes()[:100])
    for args in (
        ("inspect", copied),
        ("advantage", PARAMS, copied, *set_args(copied.parent)),
        (
            "replay",
            PARAMS,
            *set_args(copied.parent),
            "--rollouts",
            copied.parent,
            "--from",  # a replay that could run but for the damage (rollouts 1–2 are not there)
            online.run_dir / "checkpoints" / "ckpt-000002.pt",
            "--out",
            copied.parent.parent / "out",
        ),
    ):
        # every chunk carries a CRC32C: a cut chunk fails it (refused data, exit 3)
        one_line_error(invoke(*args), f"{copied}: key 'obs': checksum mismatch in chunk obs/c.0.0.0", code=3)


def test_foreign_zarr_group(tmp_path):
    group = zarr.open_group(tmp_path / "foreign.zarr", mode="w", attributes={"owner": "someone"})
    group.create_array("obs", shape=(2, 3), dtype="f4")
    one_line_error(
        invoke("inspect", tmp_path / "foreign.zarr"),
        "foreign.zarr: not an rlpipe rollout store (no schema_version attribute)",
    )


def test_other_schema_version(online, copied):
    zarr.open_group(copied, mode="r+").attrs["schema_version"] = SCHEMA_VERSION + 1
    for args in (("inspect", copied), ("update", PARAMS, copied, *set_args(copied.parent))):
        one_line_error(
            invoke(*args),
            f"{copied}: rollout schema version {SCHEMA_VERSION + 1}, "
            f"this rlpipe reads version {SCHEMA_VERSION}",
        )


def test_non_finite_rollout_names_file_key_and_index(online, copied):
    reward = zarr.open_group(copied, mode="r+")["reward"]
    reward[2, 5] = float("nan")
    one_line_error(
        invoke("advantage", PARAMS, copied, *set_args(copied.parent)),
        f"{copied}: rollout (iteration 3): key 'reward' is not finite at [2, 5]",
        code=3,
    )


def test_checkpoint_of_another_policy(online, tmp_path):
    wider = set_args(online.trainer.data_dir, "policy.actor.network_cfg.hidden_sizes=[32,32]")
    path = online_ckpt(online, 2)
    rollout = online.run_dir / "rollouts" / "iter-000003.zarr"
    for args in (
        ("eval", PARAMS, *wider, "--checkpoint", path, "--out", tmp_path / "m.json"),
        ("update", PARAMS, rollout, *wider, "--out", tmp_path),
        ("collect", PARAMS, *wider, "--checkpoint", path, "--out", tmp_path),
    ):
        one_line_error(invoke(*args), f"{path}: checkpoint does not match the policy", "size mismatch for")
    assert not list(tmp_path.iterdir())


def test_truncated_or_foreign_checkpoint(online, tmp_path):
    cut = tmp_path / "ckpt-000002.pt"
    cut.write_bytes(online_ckpt(online, 2).read_bytes()[:2000])
    one_line_error(
        invoke("eval", PARAMS, *set_args(tmp_path), "--checkpoint", cut),
        f"{cut}: truncated or not a checkpoint",
    )
    foreign = tmp_path / "weights.pt"
    torch.save({"weights": torch.zeros(3)}, foreign)
    one_line_error(
        invoke(
            "update",
            PARAMS,
            online.run_dir / "rollouts" / "iter-000003.zarr",
            *set_args(tmp_path),
            "--checkpoint",
            foreign,
        ),
        f"{foreign}: not an rlpipe checkpoint (no 'policy' entry)",
    )


@pytest.mark.parametrize("span", ["5:2", "0:3", "a:b", "3:"])
def test_bad_iterations_option_is_named(tmp_path, span):
    result = invoke("replay", PARAMS, *set_args(tmp_path), "--iterations", span)
    assert result.exit_code == 2
    assert "Invalid value for '--iterations'" in result.output and "A:B" in result.output
