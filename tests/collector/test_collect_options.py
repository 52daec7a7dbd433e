"""Collector options: ``trainer.horizons_per_env_reset`` (rl8) and ``trainer.deterministic_collect``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rlpipe import config
from rlpipe.collector import Collector
from rlpipe.envs import build_env
from rlpipe.policies import build_policy
from rlpipe.trainer import Trainer

PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"
T = 6


def make_collector(num_envs: int = 4, **options) -> Collector:
    torch.manual_seed(0)
    env = build_env("CartPole", num_envs, "cpu")
    policy = build_policy({"name": "actor_critic"}, env.observation_space, env.action_space, "cpu")
    return Collector(env, policy, horizon=T, seed=7, **options)


def first_obs_of_reset(k: int, num_envs: int = 4) -> torch.Tensor:
    """What the collector's k-th env reset (0-based) returns: it seeds ``seed + k``."""
    return build_env("CartPole", num_envs, "cpu").reset(seed=7 + k)


@pytest.mark.parametrize(("every", "resets"), [(-1, 1), (1, 5), (2, 3), (3, 2)])
def test_envs_reset_before_every_kth_rollout(every, resets):
    collector = make_collector(horizons_per_env_reset=every)
    starts = []
    for _ in range(5):
        rollout, _ = collector()
        starts.append(rollout["obs"][:, 0].clone())
    assert collector.resets.num_resets == resets
    if every > 0:
        for call in range(0, 5, every):
            assert torch.equal(starts[call], first_obs_of_reset(call // every))


def test_without_periodic_resets_the_last_observation_carries_over():
    collector = make_collector()
    first, _ = collector()
    last = first["obs"][:, T].clone()
    second, _ = collector()
    assert torch.equal(second["obs"][:, 0], last)


def test_reset_every_rollout_wins_over_a_negative_period():
    collector = make_collector(horizons_per_env_reset=-1, reset_every_rollout=True)
    for _ in range(3):
        collector()
    assert collector.resets.num_resets == 3


def test_the_reset_period_survives_a_state_dict_round_trip():
    collector = make_collector(horizons_per_env_reset=2)
    collector()
    restored = make_collector(horizons_per_env_reset=2)
    restored.load_state_dict(collector.state_dict())
    restored()  # call 2 of 2: no reset
    assert restored.resets.num_resets == 1 and restored.resets.num_collects == 2
    restored()
    assert restored.resets.num_resets == 2


def test_deterministic_collection_takes_the_mode_action():
    collector = make_collector(num_envs=16, deterministic=True)
    rollout, _ = collector()
    obs, action = rollout["obs"][:, :T], rollout["action"][:, :T]
    with torch.no_grad():
        mode = collector.policy.actor(obs).argmax(-1)
    assert torch.equal(action, mode)
    sampled, _ = make_collector(num_envs=16)()
    with torch.no_grad():
        sampled_mode = collector.policy.actor(sampled["obs"][:, :T]).argmax(-1)
    assert not torch.equal(sampled["action"][:, :T], sampled_mode)


def test_the_pipeline_passes_the_trainer_options_to_the_collector(tmp_path):
    cfg = config.load(
        PARAMS,
        [
            "trainer.device=cpu",
            "trainer.num_envs=4",
            "tracking.backend=none",
            f"trainer.data_dir={tmp_path}",
            "trainer.horizons_per_env_reset=3",
            "trainer.deterministic_collect=true",
            "store.enabled=false",
        ],
    )
    exp = Trainer(cfg).parts
    assert exp.collector.resets.horizons_per_env_reset == 3 and exp.collector.deterministic
    defaults = config.TrainerCfg()
    assert defaults.horizons_per_env_reset == -1 and not defaults.deterministic_collect
