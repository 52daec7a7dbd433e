"""rlpipe.offline.replay: the replay overrides; thinned stores are replayed or refused in one line."""

from __future__ import annotations

import pytest
from _offline_fixtures import assert_same_learner, tiny_cfg
from click.testing import CliRunner

from rlpipe.cli import cli
from rlpipe.offline.replay import replay_config
from rlpipe.trainer import Trainer


def test_a_null_override_keeps_the_runs_value_so_sweeps_replay_bit_exact(tmp_path):
    # params.yaml lists replay.algorithm.cfg.clip_coef: null so that `dvc exp run -S` can set it.
    cfg = tiny_cfg(tmp_path, "algorithm.cfg.clip_coef=0.1", "replay.algorithm={cfg: {clip_coef: null}}")
    assert replay_config(cfg).algorithm == cfg.algorithm
    changed = tiny_cfg(tmp_path, "algorithm.cfg.clip_coef=0.1", "replay.algorithm={cfg: {clip_coef: 0.3}}")
    assert replay_config(changed).algorithm.cfg.clip_coef == 0.3


# ------------------------------------------------------------------------- stores a policy thinned


def cli_run(*args: object) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def thinned(tmp_path_factory):
    """Three 4-iteration runs: the first 3 of 8 envs, obs as float16, every 2nd iteration."""
    root = tmp_path_factory.mktemp("thinned")
    runs = {
        name: tiny_cfg(root / name, *extra)
        for name, extra in (
            ("subset", ("store.envs=3",)),
            ("lossy", ("store.precision={obs: float16}",)),
            ("gap", ("store.every=2",)),
            ("gap_ckpt", ("store.every=2", "checkpoint.every_iteration=true")),
        )
    }
    for cfg in runs.values():
        Trainer(cfg).train()
    return runs


def test_replay_refuses_a_subset_store_in_one_line_naming_it(thinned, tmp_path):
    code, out = cli_run("replay", thinned["subset"].run_dir, "--out", tmp_path)
    store = thinned["subset"].run_dir / "rollouts" / "iter-000001.zarr"
    assert code == 3
    assert out.strip().splitlines() == [
        f"Error: {store}: holds the first 3 of 8 envs (store.envs), not the "
        "whole iteration; replay (the online update) needs every env, so it "
        "is refused"
    ]
    assert not list(tmp_path.glob("checkpoints/*.pt"))


def test_update_and_advantage_refuse_a_lower_precision_store(thinned, tmp_path):
    cfg = thinned["lossy"]
    store = cfg.run_dir / "rollouts" / "iter-000003.zarr"
    for command in (["update", cfg.run_dir, store, "--out", tmp_path], ["advantage", cfg.run_dir, store]):
        code, out = cli_run(*command)
        assert code == 3, out
        assert out.startswith(f"Error: {store}: stores obs as float16 (store.precision)"), out
    assert not (cfg.run_dir / "advantages").exists()


def test_replay_across_a_gap_names_the_missing_store_and_store_every(thinned, tmp_path):
    cfg = thinned["gap"]
    assert sorted(p.name for p in (cfg.run_dir / "rollouts").glob("iter-*")) == [
        "iter-000002.zarr",
        "iter-000004.zarr",
    ]
    code, out = cli_run("replay", cfg.run_dir, "--out", tmp_path)
    assert code == 2
    assert out.startswith(
        f"Error: {cfg.run_dir / 'rollouts' / 'iter-000001.zarr'}: not stored (the run "
        "stores the iterations that are multiples of 2, store.every: 2"
    ), out


def test_replay_of_every_kth_store_with_its_checkpoints_is_bit_exact(thinned, tmp_path):
    cfg = thinned["gap_ckpt"]
    code, out = cli_run("replay", cfg.run_dir, "--out", tmp_path)
    assert code == 0, out
    for k in (2, 4):
        assert_same_learner(
            tmp_path / "checkpoints" / f"ckpt-{k:06d}.pt", cfg.run_dir / "checkpoints" / f"ckpt-{k:06d}.pt"
        )
