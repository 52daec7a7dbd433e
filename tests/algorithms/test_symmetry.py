"""Symmetry: mirrors are involutions, a symmetric policy has zero mirror loss, augmentation pairs rows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest
import torch
from torch import nn

from rlpipe.algorithms import build_algo
from rlpipe.algorithms.symmetry import Symmetry
from rlpipe.config import ConfigError
from rlpipe.config.algorithms import PPOCfg, SymmetryCfg
from rlpipe.envs.tasks.symmetry import cartpole_mirror, pendulum_mirror
from rlpipe.policies import build_policy

PENDULUM = "rlpipe.envs.tasks.symmetry:pendulum_mirror"
CARTPOLE = "rlpipe.envs.tasks.symmetry:cartpole_mirror"


def _mirror_once(fn, obs, actions):
    """The mirrored half of ``fn``'s output."""
    m_obs, m_act = fn(obs=obs, actions=actions)
    return m_obs[obs.shape[0] :], m_act[actions.shape[0] :]


@pytest.mark.parametrize(
    "fn, obs, actions",
    [
        (pendulum_mirror, torch.randn(5, 3), torch.randn(5, 1)),
        (cartpole_mirror, torch.randn(5, 4), torch.randint(0, 2, (5,))),
    ],
)
def test_mirror_twice_is_the_identity_and_originals_come_first(fn, obs, actions):
    all_obs, all_act = fn(obs=obs, actions=actions)
    assert all_obs.shape[0] == 10 and all_act.shape[0] == 10
    assert torch.equal(all_obs[:5], obs) and torch.equal(all_act[:5], actions)
    once_obs, once_act = _mirror_once(fn, obs, actions)
    assert not torch.equal(once_obs, obs)
    twice_obs, twice_act = _mirror_once(fn, once_obs, once_act)
    assert torch.equal(twice_obs, obs) and torch.equal(twice_act, actions)
    assert fn(obs=None, actions=actions)[0] is None and fn(obs=obs, actions=None)[1] is None


def test_pendulum_mirror_is_the_reflection_of_the_angle():
    theta, thdot = torch.tensor([0.3, -1.2]), torch.tensor([2.0, -0.5])
    obs = torch.stack([theta.cos(), theta.sin(), thdot], -1)
    mirrored, torque = _mirror_once(pendulum_mirror, obs, torch.tensor([[1.5], [-0.2]]))
    expected = torch.stack([(-theta).cos(), (-theta).sin(), -thdot], -1)
    assert torch.allclose(mirrored, expected) and torch.equal(torque, torch.tensor([[-1.5], [0.2]]))


def _linear_policy(
    obs_dim: int, action_space: gym.Space, weight: torch.Tensor, bias: torch.Tensor | None = None
):
    """An actor_critic whose actor is one Linear ``weight``·obs (+ ``bias``): a policy affine in obs."""
    policy = build_policy({"name": "actor_critic"}, gym.spaces.Box(-1, 1, (obs_dim,)), action_space, "cpu")
    linear = nn.Linear(obs_dim, weight.shape[0], bias=bias is not None)
    linear.weight.data.copy_(weight)
    if bias is not None:
        linear.bias.data.copy_(bias)
    policy.actor = linear
    return policy


def test_a_policy_that_commutes_with_the_mirror_has_zero_mirror_loss():
    # Pendulum: mean = W·obs is equivariant iff W·diag(1, -1, -1) = -W, i.e. W = [0, a, b].
    symmetry = Symmetry(SymmetryCfg(function=PENDULUM, mirror_loss=True, mirror_loss_coef=1.0))
    obs = torch.randn(32, 3)
    torque = gym.spaces.Box(-2, 2, (1,))
    symmetric = _linear_policy(3, torque, torch.tensor([[0.0, 0.7, -1.3]]))
    assert symmetry.mirror_loss(symmetric, obs).item() == pytest.approx(0.0, abs=1e-12)
    asymmetric = _linear_policy(3, torque, torch.tensor([[0.5, 0.7, -1.3]]))
    # mean(M s) − M mean(s) = 0.5·cos + 0.5·cos: the loss is mean((cos θ)²) exactly
    assert symmetry.mirror_loss(asymmetric, obs).item() == pytest.approx(obs[:, 0].square().mean().item())


def test_categorical_mirror_loss_permutes_probabilities():
    # CartPole: the logit gap d(s) = logit1 − logit0 of a bias-free W·obs is odd, d(−s) = −d(s), so
    # π(1 − a | −s) = π(a | s); a bias on one logit breaks that.
    symmetry = Symmetry(SymmetryCfg(function=CARTPOLE, mirror_loss=True, mirror_loss_coef=1.0))
    obs = torch.randn(16, 4)
    row = torch.tensor([0.3, -1.0, 2.0, 0.5])
    symmetric = _linear_policy(4, gym.spaces.Discrete(2), torch.stack([row, -row]))
    assert symmetry.mirror_loss(symmetric, obs).item() == pytest.approx(0.0, abs=1e-12)
    asymmetric = _linear_policy(4, gym.spaces.Discrete(2), torch.stack([row, -row]), torch.tensor([1.0, 0.0]))
    assert symmetry.mirror_loss(asymmetric, obs).item() > 1e-3
    probs = torch.tensor([[0.2, 0.8]])
    assert torch.equal(symmetry.mirror_probs(probs), torch.tensor([[0.2, 0.8], [0.8, 0.2]]))


def test_mirror_loss_is_detached_unless_enabled():
    obs = torch.randn(8, 3)
    policy = _linear_policy(3, gym.spaces.Box(-2, 2, (1,)), torch.tensor([[0.5, 0.7, -1.3]]))
    logged = Symmetry(SymmetryCfg(function=PENDULUM)).mirror_loss(policy, obs)
    trained = Symmetry(SymmetryCfg(function=PENDULUM, mirror_loss=True)).mirror_loss(policy, obs)
    assert not logged.requires_grad and trained.requires_grad
    assert logged.item() == pytest.approx(trained.item())


def test_augmentation_doubles_the_minibatch_with_the_right_pairing():
    symmetry = Symmetry(SymmetryCfg(function=PENDULUM, data_augmentation=True))
    mb = {
        "obs": torch.randn(4, 3),
        "action": torch.randn(4, 1),
        "sample_log_prob": torch.randn(4),
        "advantage": torch.randn(4),
        "return": torch.randn(4),
        "value": torch.randn(4),
    }
    out = symmetry.augment(mb)
    assert out.batch_size == torch.Size([8])
    for i in range(4):  # row i + 4 is row i mirrored, with row i's log-prob, advantage, return, value
        assert torch.equal(out["obs"][i + 4], mb["obs"][i] * torch.tensor([1.0, -1.0, -1.0]))
        assert torch.equal(out["action"][i + 4], -mb["action"][i])
        for key in ("sample_log_prob", "advantage", "return", "value"):
            assert out[key][i + 4] == mb[key][i] == out[key][i]
    assert Symmetry(SymmetryCfg(function=PENDULUM)).augment(mb) is mb


def _pendulum_ppo(symmetry: dict | None):
    torch.manual_seed(0)
    policy = build_policy(
        {"name": "actor_critic"}, gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-2, 2, (1,)), "cpu"
    )
    cfg = {"batch_size": 16, "n_epochs": 1, "normalize_advantage": "minibatch"}
    return build_algo("ppo", {**cfg, **({"symmetry": symmetry} if symmetry else {})}, policy, "cpu")


def _minibatch():
    g = torch.Generator().manual_seed(1)
    return {
        "obs": torch.randn(16, 3, generator=g),
        "action": torch.randn(16, 1, generator=g),
        "sample_log_prob": torch.randn(16, generator=g) - 1.0,
        "advantage": torch.randn(16, generator=g),
        "return": torch.randn(16, generator=g),
        "value": torch.randn(16, generator=g),
    }


def test_ppo_loss_adds_the_weighted_mirror_loss_and_reports_it():
    mb = _minibatch()
    plain_total, plain = _pendulum_ppo(None).loss(mb)
    off_total, logged = _pendulum_ppo({"function": PENDULUM}).loss(mb)
    on_total, stats = _pendulum_ppo(
        {"function": PENDULUM, "mirror_loss": True, "mirror_loss_coef": 2.0}
    ).loss(mb)
    assert off_total.item() == pytest.approx(plain_total.item(), rel=1e-6)
    assert stats["symmetry_loss"].item() == pytest.approx(logged["symmetry_loss"].item())
    assert stats["symmetry_loss"].item() > 0
    expected = plain_total.item() + 2.0 * stats["symmetry_loss"].item()
    assert on_total.item() == pytest.approx(expected, rel=1e-5)
    assert stats["approx_kl"].item() == pytest.approx(plain["approx_kl"].item(), rel=1e-5)


def test_ppo_with_augmentation_trains_on_the_mirrored_rows_too():
    mb = _minibatch()
    _, plain = _pendulum_ppo(None).loss(mb)
    total, stats = _pendulum_ppo({"function": PENDULUM, "data_augmentation": True}).loss(mb)
    total.backward()
    assert stats["policy_loss"].item() != pytest.approx(plain["policy_loss"].item())
    assert stats["approx_kl"].item() == pytest.approx(plain["approx_kl"].item(), rel=1e-5)  # originals only
    assert stats["entropy"].item() == pytest.approx(plain["entropy"].item(), rel=1e-6)


def test_symmetry_config_checks_the_form_and_imports_at_build(monkeypatch):
    key = r"^algorithm\.cfg\.symmetry\.function: "
    with pytest.raises(ConfigError, match=key + "expected package.module:function"):
        PPOCfg.from_dict({"symmetry": {"function": "mirror.py"}}, "algorithm.cfg")
    monkeypatch.delitem(sys.modules, "this", raising=False)
    cfg = PPOCfg.from_dict({"symmetry": {"function": "this:s"}}, "algorithm.cfg")  # the Zen of Python
    assert cfg.symmetry.function == "this:s" and "this" not in sys.modules  # loading imported nothing
    with pytest.raises(ConfigError, match=key + "cannot import module 'no_such_mod'.*PYTHONPATH"):
        Symmetry(SymmetryCfg(function="no_such_mod:mirror"))
    with pytest.raises(ConfigError, match=key + ".*not a function"):
        Symmetry(SymmetryCfg(function="math:pi"))


def test_cli_refuses_a_bad_mirror_function_with_exit_2_before_writing(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlpipe",
            "run",
            "params.yaml",
            "--set",
            "tracking.backend=none",
            "--set",
            "trainer.num_envs=4",
            "--set",
            f"trainer.data_dir={tmp_path}",
            "--set",
            "algorithm.cfg.symmetry.function=os:system",
        ],
        capture_output=True,
        text=True,
        cwd=str(Path(__file__).resolve().parents[2]),
    )
    assert proc.returncode == 2
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith(
        "Error: algorithm.cfg.symmetry.function: os:system takes (command), "
        "not obs=, actions=, env=; accepted: "
    )
    assert list(tmp_path.iterdir()) == []
