"""RND: reward shapes and sign, fading novelty, a frozen target, state and resume round-trips."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch
from _offline_fixtures import STEPS, leaves, same_leaves, tiny_cfg
from tensordict import TensorDict

from rlpipe.algorithms import build_algo
from rlpipe.algorithms.minibatches import minibatch_indices
from rlpipe.algorithms.rnd import RND
from rlpipe.artifacts.checkpoints import load_checkpoint
from rlpipe.config import ConfigError
from rlpipe.config.algorithms import PPOCfg, RNDCfg
from rlpipe.policies import build_policy
from rlpipe.trainer import Trainer

N, T, D = 4, 6, 3


def _rollout(obs: torch.Tensor | None = None, seed: int = 0) -> TensorDict:
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(N, T + 1, D, generator=g) if obs is None else obs
    done = torch.zeros(N, T + 1, dtype=torch.bool)
    done[0, 2] = True
    return TensorDict({"obs": obs, "done": done}, batch_size=[N, T + 1])


def _epochs(rows: int, epochs: int, size: int = 8):
    g = torch.Generator().manual_seed(3)
    return (minibatch_indices(rows, size, torch.device("cpu"), g) for _ in range(epochs))


def test_intrinsic_reward_is_nonnegative_n_by_t_and_weighted():
    rnd = RND(RNDCfg(hidden_sizes=[32], weight=2.0), torch.device("cpu"))
    reward, stats = rnd.intrinsic_reward(_rollout(), seed=0, env_steps=0, total_env_steps=None)
    assert reward.shape == (N, T) and (reward >= 0).all() and reward.sum() > 0
    assert stats["intrinsic_reward_mean"] == pytest.approx(reward.mean().item())
    assert stats["rnd_weight"] == 2.0
    unweighted = RND(RNDCfg(hidden_sizes=[32], weight=1.0), torch.device("cpu"))
    half, _ = unweighted.intrinsic_reward(_rollout(), seed=0, env_steps=0, total_env_steps=None)
    assert torch.allclose(reward, 2.0 * half)


def test_weight_follows_its_schedule():
    cfg = RNDCfg(hidden_sizes=[8], weight=1.0, weight_schedule=[[0, 1.0], [100, 0.25]])
    rnd = RND(cfg, torch.device("cpu"))
    assert rnd.intrinsic_reward(_rollout(), 0, 50, None)[1]["rnd_weight"] == 1.0
    assert rnd.intrinsic_reward(_rollout(), 0, 150, None)[1]["rnd_weight"] == 0.25


def test_reward_reads_the_next_observation_of_each_step():
    cfg = RNDCfg(hidden_sizes=[16], reward_normalization=False, state_normalization=False)
    rnd = RND(cfg, torch.device("cpu"))
    rollout = _rollout()
    reward, _ = rnd.intrinsic_reward(rollout, 0, 0, None)
    assert torch.allclose(reward, rnd.error(rollout["obs"][:, 1:]))


def test_novelty_of_repeatedly_seen_states_decreases_and_the_target_stays_frozen():
    rnd = RND(RNDCfg(hidden_sizes=[64], learning_rate=1e-2, reward_normalization=False),
              torch.device("cpu"))
    seen = _rollout(seed=1)
    before, _ = rnd.intrinsic_reward(seen, 0, 0, None)
    target = [p.clone() for p in rnd.target.parameters()]
    assert all(not p.requires_grad for p in rnd.target.parameters())
    losses = [rnd.fit(seen, _epochs(N * T, 1)).item() for _ in range(40)]
    after = rnd.error(rnd.inputs(seen["obs"][:, 1:]))
    novel = rnd.error(rnd.inputs(_rollout(seed=2)["obs"][:, 1:] * 3.0))
    assert after.mean() < 0.2 * before.mean() and losses[-1] < losses[0]
    assert novel.mean() > 5 * after.mean()  # unseen states keep their novelty
    assert all(torch.equal(a, b) for a, b in zip(target, rnd.target.parameters()))


def test_state_dict_round_trips_and_building_leaves_the_global_rng_alone():
    cfg = RNDCfg(hidden_sizes=[16])
    rnd = RND(cfg, torch.device("cpu"))
    assert rnd.state_dict() == {"in_dim": None}
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    rnd.intrinsic_reward(_rollout(), seed=0, env_steps=0, total_env_steps=None)
    assert torch.equal(torch.rand(3), expected)
    rnd.fit(_rollout(), _epochs(N * T, 2))
    copy = RND(cfg, torch.device("cpu"))
    copy.load_state_dict(rnd.state_dict())
    assert same_leaves(dict(leaves(rnd.state_dict())), dict(leaves(copy.state_dict())))
    nxt = _rollout(seed=4)
    a, _ = rnd.intrinsic_reward(nxt, 0, 0, None)
    b, _ = copy.intrinsic_reward(nxt, 0, 0, None)
    assert torch.equal(a, b)


def test_ppo_adds_intrinsic_reward_to_gae_and_trains_the_predictor():
    def ppo(rnd: dict | None):
        torch.manual_seed(0)
        obs_space, action_space = gym.spaces.Box(-1, 1, (D,)), gym.spaces.Discrete(2)
        policy = build_policy({"name": "actor_critic"}, obs_space, action_space, "cpu")
        extra = {"rnd": rnd} if rnd else {}
        return build_algo("ppo", {"batch_size": 8, "n_epochs": 2, **extra}, policy, "cpu")

    rollout = _rollout()
    rollout.update({"reward": torch.zeros(N, T + 1), "value": torch.zeros(N, T + 1),
                    "truncated": torch.zeros(N, T + 1, dtype=torch.bool),
                    "action": torch.zeros(N, T + 1).long(), "terminated": rollout["done"].clone(),
                    "sample_log_prob": torch.full((N, T + 1), -0.69)})
    plain, curious = ppo(None), ppo({"hidden_sizes": [16]})
    assert "obs" in curious.advantage_reads and "obs" not in plain.advantage_reads
    assert plain.compute_advantages(rollout.clone()) == {}
    with_rnd = rollout.clone()
    stats = curious.compute_advantages(with_rnd)
    assert stats["intrinsic_reward_mean"] > 0 and with_rnd["return"][:, :T].gt(0).all()
    predictor = [p.clone() for p in curious.rnd.predictor.parameters()]
    metrics = curious.update(with_rnd, iteration=1)
    assert metrics["rnd_loss"] > 0
    assert not all(torch.equal(a, b) for a, b in zip(predictor, curious.rnd.predictor.parameters()))
    assert "rnd" in curious.state_dict() and "rnd" not in plain.state_dict()


def test_rnd_config_errors_name_the_key():
    with pytest.raises(ConfigError, match=r"^algorithm\.cfg\.rnd\.weight_schedule: "):
        PPOCfg.from_dict({"rnd": {"weight_schedule": [[10, 1.0], [5, 0.0]]}}, "algorithm.cfg")
    with pytest.raises(ConfigError, match=r"^algorithm\.cfg\.rnd\.hidden_sizes: "):
        PPOCfg.from_dict({"rnd": {"hidden_sizes": [0]}}, "algorithm.cfg")


def test_a_resumed_curious_run_equals_the_uninterrupted_one(tmp_path):
    rnd = ("algorithm.cfg.rnd={hidden_sizes: [16], weight: 0.5}", f"trainer.save_freq={2 * STEPS}")
    whole = tiny_cfg(tmp_path / "whole", "trainer.iterations=4", *rnd)
    Trainer(whole).train()
    Trainer(tiny_cfg(tmp_path / "split", "trainer.iterations=2", *rnd)).train()
    split = tiny_cfg(tmp_path / "split", "trainer.iterations=4", *rnd)
    Trainer(split, resume=True).train()
    a, b = (load_checkpoint(cfg.run_dir / "checkpoints" / "ckpt-000004.pt") for cfg in (whole, split))
    assert a["algo"]["rnd"]["in_dim"] == 4
    state_a = {k: v for k, v in leaves(a) if k not in ("/wall_s", "/params_hash")}
    state_b = {k: v for k, v in leaves(b) if k not in ("/wall_s", "/params_hash")}
    assert same_leaves(state_a, state_b)
