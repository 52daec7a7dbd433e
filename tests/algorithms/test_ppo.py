import math

import gymnasium as gym
import pytest
import torch

from rlpipe.algorithms import PPO, PPOCfg, build_algo
from rlpipe.algorithms.ppo_loss import approx_kl, clip_fraction, clipped_surrogate, explained_variance
from rlpipe.config import ConfigError
from rlpipe.policies import build_policy
from rlpipe.rollout import allocate_rollout


def test_clipped_surrogate_by_hand():
    # ratios e^0.5≈1.6487 (A=+1: clipped to 1.2), e^-0.5≈0.6065 (A=-2: min(−1.213, −1.6) = −1.6),
    # e^0.1≈1.1052 (A=+3: unclipped 3.3155)
    log_prob = torch.tensor([0.5, -0.5, 0.1])
    old = torch.zeros(3)
    adv = torch.tensor([1.0, -2.0, 3.0])
    loss, log_ratio = clipped_surrogate(log_prob, old, adv, 0.2)
    expected = -(1.2 * 1.0 + 0.8 * -2.0 + math.exp(0.1) * 3.0) / 3
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert clip_fraction(log_ratio, 0.2).item() == pytest.approx(2 / 3)
    kl = sum(math.exp(x) - 1 - x for x in (0.5, -0.5, 0.1)) / 3
    assert approx_kl(log_ratio).item() == pytest.approx(kl, rel=1e-6)


def test_explained_variance_bounds():
    returns = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert explained_variance(returns, returns).item() == pytest.approx(1.0)
    assert explained_variance(torch.full((4,), 2.5), returns).item() == pytest.approx(0.0)


def make_ppo(**cfg):
    obs_space = gym.spaces.Box(-1, 1, (3,))
    policy = build_policy({"name": "actor_critic"}, obs_space, gym.spaces.Discrete(2), "cpu")
    return build_algo("ppo", {"batch_size": 8, "n_epochs": 1, **cfg}, policy, "cpu")


def test_ppo_loss_on_fixed_batch_matches_hand_computation():
    torch.manual_seed(0)
    algo = make_ppo(clip_coef=0.1, vf_coef=0.7, ent_coef=0.05)
    mb = {
        "obs": torch.randn(8, 3),
        "action": torch.randint(0, 2, (8,)),
        "sample_log_prob": torch.full((8,), math.log(0.5)),
        "advantage": torch.randn(8),
        "return": torch.randn(8),
    }
    total, stats = algo.loss(mb)
    logits = algo.policy.actor(mb["obs"])
    dist = torch.distributions.Categorical(logits=logits)
    ratio = (dist.log_prob(mb["action"]) - mb["sample_log_prob"]).exp()
    surr = torch.min(ratio * mb["advantage"], ratio.clamp(0.9, 1.1) * mb["advantage"])
    value = algo.policy.critic(mb["obs"]).squeeze(-1)
    expected = -surr.mean() + 0.7 * ((value - mb["return"]) ** 2).mean() - 0.05 * dist.entropy().mean()
    torch.testing.assert_close(total, expected)
    torch.testing.assert_close(stats[2], dist.entropy().mean())


def random_rollout(n=4, t=8):
    ro = allocate_rollout(n, t, (3,), (), torch.int64, "cpu")
    ro["obs"].normal_()
    ro["action"][:, :-1] = torch.randint(0, 2, (n, t))
    ro["sample_log_prob"][:, :-1] = math.log(0.5)
    ro["reward"][:, :-1] = torch.randn(n, t)
    ro["value"].normal_()
    return ro


def test_update_changes_parameters_and_reports_metrics():
    torch.manual_seed(0)
    algo = make_ppo(n_epochs=2)
    before = [p.clone() for p in algo.policy.parameters()]
    stats = algo.update(random_rollout())
    assert any(not torch.equal(a, b) for a, b in zip(before, algo.policy.parameters()))
    for key in ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction",
                "explained_variance", "learning_rate"):
        assert math.isfinite(stats[key]), key
    assert 0.0 <= stats["clip_fraction"] <= 1.0


def test_update_is_deterministic_given_generator_seed():
    def run():
        torch.manual_seed(1)
        algo = make_ppo(n_epochs=3)
        algo.reseed(123)
        algo.update(random_rollout())
        return [p.detach().clone() for p in algo.policy.parameters()]

    for a, b in zip(run(), run()):
        assert torch.equal(a, b)


def test_ppo_cfg_defaults_and_errors():
    cfg = PPOCfg()
    assert (cfg.n_epochs, cfg.clip_coef, cfg.ent_coef, cfg.vf_coef) == (10, 0.2, 0.01, 0.5)
    assert cfg.replace(clip_coef=0.3).clip_coef == 0.3
    with pytest.raises(ConfigError, match=r"algorithm.cfg.batch_size"):
        make_ppo(batch_size=0)
    with pytest.raises(ConfigError, match=r"algorithm.cfg.clip_cof: unknown key"):
        make_ppo(clip_cof=0.1)
    with pytest.raises(ConfigError, match="unknown algorithm 'sac'; accepted: .*ppo"):
        build_algo("sac", {}, None, "cpu")


def test_ppo_instance_is_registered_class():
    assert isinstance(make_ppo(), PPO)
