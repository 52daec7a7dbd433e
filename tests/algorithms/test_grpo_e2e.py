"""GRPO end to end: group resets on the collector and the pipeline, and learning torch CartPole."""

from pathlib import Path

import pytest
import torch

from rlpipe import config
from rlpipe.collector import Collector
from rlpipe.envs import build_env
from rlpipe.policies import build_policy
from rlpipe.trainer import Trainer

GRPO_PARAMS = Path(__file__).parents[2] / "configs" / "grpo_cartpole.yaml"
QUIET = ["tracking.backend=none", "store.enabled=false"]


def collect_initial_obs(env_id: str, group_size: int, rollouts: int = 2) -> list[torch.Tensor]:
    """``obs[:, 0]`` ``[8, 4]`` of successive rollouts of a GRPO-style collector (reset every rollout)."""
    env = build_env(env_id, 8, "cpu")
    policy = build_policy(
        {"name": "actor_only", "critic": None}, env.observation_space, env.action_space, "cpu"
    )
    collector = Collector(env, policy, horizon=4, seed=7, reset_every_rollout=True, group_size=group_size)
    firsts = [collector()[0]["obs"][:, 0].clone() for _ in range(rollouts)]
    env.close()
    return firsts


def distinct_rows(obs: torch.Tensor) -> int:
    return len({tuple(row.tolist()) for row in obs})


@pytest.mark.parametrize("env_id", ["CartPole", "CartPole-v1"])
def test_shared_group_resets_start_each_group_from_one_state(env_id):
    for obs in collect_initial_obs(env_id, group_size=4):
        groups = obs.view(2, 4, -1)
        assert (groups == groups[:, :1]).all(), "members of a group must start identically"
        assert not torch.equal(groups[0, 0], groups[1, 0]), "groups must start differently"
    first, second = collect_initial_obs(env_id, group_size=4)
    assert not torch.equal(first, second), "each rollout resets to new states"


@pytest.mark.parametrize("env_id", ["CartPole", "CartPole-v1"])
def test_independent_group_resets_start_every_env_on_its_own(env_id):
    for obs in collect_initial_obs(env_id, group_size=1):
        assert distinct_rows(obs) == 8


@pytest.mark.parametrize(("group_reset", "expected"), [("shared", 4), ("independent", 1)])
def test_pipeline_passes_group_reset_to_the_collector(tmp_path, group_reset, expected):
    cfg = config.load(
        GRPO_PARAMS,
        [
            *QUIET,
            f"trainer.data_dir={tmp_path}",
            "trainer.num_envs=8",
            f"algorithm.cfg.group_reset={group_reset}",
        ],
    )
    exp = Trainer(cfg).parts
    assert exp.collector.resets.group_size == expected and exp.collector.resets.reset_every_rollout
    assert exp.algo.ref_policy is None  # kl_coef: 0 in the example config
    rollout, _ = exp.collector()
    assert distinct_rows(rollout["obs"][:, 0]) == 8 // expected


def test_grpo_learns_torch_cartpole_from_the_example_config(tmp_path):
    # A random (or untrained, deterministic) policy balances ~10–25 steps; 4 iterations of the
    # example config (64 envs × 500 steps each, ~15 s on 2 idle cores) reach ~250 with seed 42.
    cfg = config.load(
        GRPO_PARAMS,
        [
            *QUIET,
            f"trainer.data_dir={tmp_path}",
            "trainer.iterations=4",
            "trainer.eval_freq=10000000",
            "trainer.num_eval_envs=8",
        ],
    )
    summary = Trainer(cfg).train()
    assert summary["iterations"] == 4 and summary["env_steps"] == 4 * 64 * 500
    assert summary["eval/return_mean"] >= 100, summary
    assert summary["train/episode_return_mean"] > 30, summary
    assert (tmp_path / "cartpole_grpo" / "checkpoints" / "latest").exists()


@pytest.mark.parametrize("distribution", ["beta", "gaussian_state_std"])
def test_grpo_with_a_frozen_reference_takes_the_bounded_and_state_std_distributions(tmp_path, distribution):
    """GRPO's actor-only policy with a Beta or state-dependent Gaussian: a reference KL measured against
    the frozen start, a resumed run equal to an uninterrupted one, Beta's actions inside the bounds."""
    pendulum = Path(__file__).resolve().parents[2] / "configs" / "ppo_pendulum.yaml"
    overrides = [
        *QUIET,
        "algorithm.name=grpo",
        "algorithm.cfg={group_size: 4, n_epochs: 2, kl_coef: 0.05}",
        "policy.name=actor_only",
        f"policy.distribution={distribution}",
        "trainer.num_envs=16",
        "trainer.buffer_size=32",
        "trainer.eval_freq=10000000",
        "trainer.save_freq=512",
    ]
    whole = Trainer(
        config.load(pendulum, [*overrides, f"trainer.data_dir={tmp_path / 'a'}", "trainer.iterations=2"])
    )
    summary = whole.train()
    assert summary["update/approx_ref_kl"] > 0 and torch.isfinite(torch.tensor(summary["update/policy_loss"]))
    half = Trainer(
        config.load(pendulum, [*overrides, f"trainer.data_dir={tmp_path / 'b'}", "trainer.iterations=1"])
    )
    half.train()
    resumed = Trainer(
        config.load(pendulum, [*overrides, f"trainer.data_dir={tmp_path / 'b'}", "trainer.iterations=2"]),
        resume=True,
    )
    resumed.train()
    for key, value in whole.policy.state_dict().items():
        assert torch.equal(value, resumed.policy.state_dict()[key]), key
    actions = whole.collect()["action"]
    assert bool(torch.isfinite(actions).all())
    if distribution == "beta":  # sampled inside the torque bounds, never clipped
        assert bool((actions.abs() < 2.0).all())
