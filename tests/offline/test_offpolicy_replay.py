"""rlpipe.offline.offpolicy_replay: a fresh SAC learner fed a run's stores, without a simulator.

A SAC run replayed with unchanged params ends with the online policy and critics bit for bit; a
PPO run's stores teach SAC to swing the pendulum up; every refusal is one line, before any file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from _offline_fixtures import assert_same_learner, learner, same_leaves
from click.testing import CliRunner

from rlpipe import config
from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.layout import RunLayout
from rlpipe.artifacts.shards import read_any_attrs, read_any_final_obs
from rlpipe.artifacts.store import write_rollout
from rlpipe.cli import cli
from rlpipe.offline.offpolicy_replay import build_learner, load_with_final_obs
from rlpipe.offline.rebuild import spaces_of
from rlpipe.offline.replay import replay_config
from rlpipe.offline.replay_eval import evaluate_replayed
from rlpipe.trainer import Trainer

ROOT = Path(__file__).resolve().parents[2]
SAC = (
    "tracking.backend=none",
    "trainer.device=cpu",
    "trainer.num_envs=4",
    "trainer.buffer_size=25",
    "trainer.iterations=6",
    "trainer.eval_freq=1000000",  # one eval, at the end
    "trainer.num_eval_envs=2",
    "checkpoint.every_iteration=true",
    "env.cfg.max_episode_steps=40",  # truncations inside the run: the stored final observations count
    "algorithm.cfg.learning_starts=100",
    "algorithm.cfg.random_steps=100",
    "algorithm.cfg.batch_size=64",
    "algorithm.cfg.critic.hidden_sizes=[32,32]",
    "policy.actor.network_cfg.hidden_sizes=[32,32]",
)
"""6 iterations of 4 envs × 25 steps; gradient steps from iteration 1 (100 env steps) on."""

PPO = (
    "tracking.backend=none",
    "trainer.device=cpu",
    "trainer.num_envs=16",
    "trainer.buffer_size=64",
    "trainer.iterations=12",
    "trainer.eval_freq=1000000",
    "trainer.num_eval_envs=8",
    "store.keep_last=null",
)
"""12 iterations of 16 envs × 64 steps of the Pendulum PPO config (12,288 transitions)."""

LEARNER = (
    "replay.algorithm={name: sac, cfg: {learning_starts: 0, updates_per_step: 8, learning_rate: 1.0e-3, "
    "critic: {hidden_sizes: [64, 64], activation: relu}}}",
    "replay.policy={name: actor_only, distribution: tanh_gaussian, "
    "actor: {network_cfg: {hidden_sizes: [64, 64], activation: relu}}}",
)
"""SAC with small networks and 512 gradient steps of 256 transitions per stored rollout."""


def cli_run(*args: object) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.output


def sets(*items: str) -> list[str]:
    return [arg for item in items for arg in ("--set", item)]


def train(data_dir: Path, params: str, *overrides: str) -> config.RunConfig:
    cfg = config.load(ROOT / "configs" / params, [f"trainer.data_dir={data_dir}", *overrides])
    Trainer(cfg).train()
    return cfg


@pytest.fixture(scope="module")
def sac_run(tmp_path_factory):
    return train(tmp_path_factory.mktemp("sac"), "sac_pendulum.yaml", *SAC)


@pytest.fixture(scope="module")
def ppo_run(tmp_path_factory):
    return train(tmp_path_factory.mktemp("ppo"), "ppo_pendulum.yaml", *PPO)


# ------------------------------------------------------------------- an off-policy run, replayed


def test_replaying_a_sac_runs_stores_reproduces_its_policy_and_critics_bit_for_bit(sac_run, tmp_path):
    run = sac_run.run_dir
    finals = [read_any_final_obs(p)[2] for p in RunLayout(run).rollout_paths().values()]
    assert any(f is not None and len(f) for f in finals)  # time limits inside: final observations read
    code, out = cli_run("replay", run, "--out", tmp_path, *sets("tracking.backend=none"))
    assert code == 0, out
    for k in (4, 5, 6):  # the online run keeps its last 3 checkpoints
        online, offline = (
            run / "checkpoints" / f"ckpt-{k:06d}.pt",
            tmp_path / "checkpoints" / f"ckpt-{k:06d}.pt",
        )
        assert_same_learner(online, offline)
        assert any("/critics/" in key for key in learner(offline))  # the critics and their targets too
        assert any("/critic_targets/" in key for key in learner(offline))
    summary = json.loads((tmp_path / "metrics.json").read_text())
    assert summary["off_policy"] is True and summary["params_changed"] is False
    assert summary["eval/return_mean"] == summary["online/eval/return_mean"]  # same weights, same episodes


def test_replaying_a_td3_runs_stores_reproduces_its_learner_bit_for_bit(tmp_path):
    td3 = ("algorithm.name=td3", "policy.distribution=tanh_deterministic")  # the same cfg keys
    cfg = train(tmp_path / "run", "sac_pendulum.yaml", *SAC, *td3)
    code, out = cli_run("replay", cfg.run_dir, "--out", tmp_path / "re", *sets("tracking.backend=none"))
    assert code == 0, out
    assert_same_learner(
        cfg.run_dir / "checkpoints" / "ckpt-000006.pt", tmp_path / "re" / "checkpoints" / "ckpt-000006.pt"
    )


def test_a_changed_param_replays_a_different_learner(sac_run, tmp_path):
    code, out = cli_run(
        "replay",
        sac_run.run_dir,
        "--out",
        tmp_path,
        *sets("tracking.backend=none", "replay.algorithm.cfg.tau=0.01"),
    )
    assert code == 0, out
    online = learner(sac_run.run_dir / "checkpoints" / "ckpt-000006.pt")
    assert not same_leaves(online, learner(tmp_path / "checkpoints" / "ckpt-000006.pt"))


# ------------------------------------------------------------------------ SAC from a PPO run's stores


def untrained_return(cfg: config.RunConfig) -> float:
    """The eval return of the fresh SAC learner (before any rollout) on the replay's eval episodes."""
    rcfg = replay_config(cfg)
    stores = RunLayout(cfg.run_dir).rollout_paths()
    algo = build_learner(cfg, rcfg, spaces_of(read_any_attrs(stores[1]), stores[1]))
    return evaluate_replayed(rcfg, algo.policy, algo.device, RunLayout(cfg.run_dir))["eval/return_mean"]


def test_sac_learns_to_swing_up_from_a_ppo_runs_stores(ppo_run, tmp_path):
    run = ppo_run.run_dir
    code, out = cli_run("replay", run, "--out", tmp_path, *sets("tracking.backend=none", *LEARNER))
    assert code == 0, out
    assert (tmp_path / "checkpoints" / "ckpt-000012.pt").is_file()
    state = torch.load(tmp_path / "checkpoints" / "ckpt-000012.pt", weights_only=True)
    assert "critics" in state["algo"] and state["algo"]["ring_newest"] == 12
    curve = (tmp_path / "curve.csv").read_text().splitlines()
    assert len(curve) == 1 + 12
    summary = json.loads((tmp_path / "metrics.json").read_text())
    assert summary["algorithm"] == "sac" and summary["source_algorithm"] == "ppo"
    untrained = untrained_return(config.load(run / "params.yaml", ["tracking.backend=none", *LEARNER]))
    # Pendulum returns: about -1250 hanging down, above -200 swung up and balanced
    assert summary["eval/return_mean"] > untrained + 500, (summary["eval/return_mean"], untrained)


def test_a_ppo_run_storing_every_other_iteration_feeds_the_stored_ones(tmp_path):
    cfg = train(tmp_path, "ppo_pendulum.yaml", *PPO, "trainer.iterations=4", "store.every=2")
    out = tmp_path / "offline"
    fast = "replay.algorithm={name: sac, cfg: {learning_starts: 0, updates_per_step: 0.125}}"
    code, text = cli_run(
        "replay", cfg.run_dir, "--out", out, *sets("tracking.backend=none", fast, LEARNER[1])
    )
    assert code == 0, text
    assert sorted(p.name for p in (out / "checkpoints").glob("*.pt")) == ["ckpt-000002.pt", "ckpt-000004.pt"]
    state = torch.load(out / "checkpoints" / "ckpt-000004.pt", weights_only=True)
    assert state["algo"]["ring_newest"] == 2  # the ring took the 2 stored rollouts


# ------------------------------------------------------------------------------------- refusals


def refused(args: list[object], out: Path, code: int = 2) -> str:
    """The one error line of a refused replay that wrote nothing."""
    got, text = cli_run(*args)
    assert got == code, text
    lines = text.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), text
    assert not out.exists()
    return lines[0]


def test_replay_policy_is_refused_for_an_on_policy_replay(ppo_run, tmp_path):
    line = refused(
        [
            "replay",
            ppo_run.run_dir,
            "--out",
            tmp_path / "o",
            *sets("replay.policy.distribution=tanh_gaussian"),
        ],
        tmp_path / "o",
    )
    assert "replay.policy: only an off-policy replay algorithm (sac, td3) trains a fresh policy" in line


def test_an_unknown_replay_policy_key_is_refused_naming_it(ppo_run, tmp_path):
    line = refused(
        [
            "replay",
            ppo_run.run_dir,
            "--out",
            tmp_path / "o",
            *sets(LEARNER[0], "replay.policy.actor.network_cfg.hiden=1"),
        ],
        tmp_path / "o",
    )
    assert "replay.policy.actor.network_cfg.hiden: unknown key" in line and "accepted: hidden_sizes" in line


def test_a_policy_sac_cannot_train_is_refused_naming_replay_policy(ppo_run, tmp_path):
    # the run's actor-critic: SAC trains its own Q critics beside an actor
    line = refused(["replay", ppo_run.run_dir, "--out", tmp_path / "o", *sets(LEARNER[0])], tmp_path / "o")
    assert line.startswith("Error: replay.policy.name: sac trains its own Q critics"), line
    gaussian = "replay.policy={name: actor_only, distribution: gaussian}"
    line = refused(
        ["replay", ppo_run.run_dir, "--out", tmp_path / "o", *sets(LEARNER[0], gaussian)], tmp_path / "o"
    )
    assert line.startswith("Error: replay.policy.distribution: sac acts through 'tanh_gaussian'"), line


def test_a_start_checkpoint_is_refused_for_a_fresh_learner(sac_run, tmp_path):
    start = sac_run.run_dir / "checkpoints" / "ckpt-000004.pt"
    line = refused(["replay", sac_run.run_dir, "--out", tmp_path / "o", "--from", start], tmp_path / "o")
    assert "--from: an off-policy replay (sac) trains a fresh learner" in line


def test_a_subset_store_is_refused_naming_it(tmp_path):
    cfg = train(tmp_path, "ppo_pendulum.yaml", *PPO, "trainer.iterations=1", "store.envs=3")
    line = refused(["replay", cfg.run_dir, "--out", tmp_path / "o", *sets(*LEARNER)], tmp_path / "o", code=3)
    store = cfg.run_dir / "rollouts" / "iter-000001.zarr"
    assert line.startswith(f"Error: {store}: holds the first 3 of 16 envs (store.envs)"), line
    assert "off-policy learning from the stores needs every env" in line


def test_a_store_with_truncations_but_no_final_observations_is_refused_naming_it(sac_run, tmp_path):
    stores = RunLayout(sac_run.run_dir).rollout_paths()
    rollout, attrs, finals = next(
        read for read in map(read_any_final_obs, stores.values()) if read[2] is not None and len(read[2])
    )  # a rollout in which episodes hit their time limit
    bare = tmp_path / "iter-000001.zarr"
    write_rollout(bare, rollout, {"iteration": attrs["iteration"]})  # without its final observations
    with pytest.raises(StoreError) as refusal:
        load_with_final_obs(bare, torch.device("cpu"), allow_rejected=False)
    assert str(refusal.value).startswith(f"{bare}: episodes hit their time limit here but the store keeps no")
