"""The tanh-squashed heads of SAC and TD3: log-probabilities, bounds, modes, gradients, export."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlpipe.config import ConfigError
from rlpipe.envs import build_env
from rlpipe.policies import build_policy
from rlpipe.policies.export import MODES, DeployedActor, export_onnx
from rlpipe.policies.export_metadata import export_metadata
from rlpipe.policies.exported import ExportedModel
from rlpipe.policies.heads import build_action_head
from rlpipe.policies.squashed import TanhDeterministicHead, TanhGaussianHead

LOW, HIGH = np.array([-2.0, 0.1, -0.3], np.float32), np.array([2.0, 0.7, 5.0], np.float32)
"""Asymmetric, unequal bounds: the affine map is not the identity in any dim."""


def gaussian(dtype: torch.dtype = torch.float64) -> TanhGaussianHead:
    return TanhGaussianHead(LOW, HIGH).to(dtype)


def outputs(batch: int, dims: int, scale: float = 1.0, dtype=torch.float64, seed: int = 0) -> torch.Tensor:
    return torch.randn(batch, dims, generator=torch.Generator().manual_seed(seed), dtype=dtype) * scale


def in_bounds(action: torch.Tensor) -> bool:
    """Every action inside the float32 bounds the env declares."""
    low, high = torch.as_tensor(LOW, dtype=action.dtype), torch.as_tensor(HIGH, dtype=action.dtype)
    return bool(((action >= low) & (action <= high)).all())


def well_conditioned(head: TanhGaussianHead, action: torch.Tensor) -> torch.Tensor:
    """Rows whose every squashed dim is off the saturated edge, where torch's ``atanh`` inverse is exact."""
    return head.from_bounds(action).abs().amax(-1) < 0.999


def test_sample_draws_the_distributions_actions():
    head, out = gaussian(), outputs(512, 6)
    torch.manual_seed(1)
    action, _ = head.sample(out)
    torch.manual_seed(1)
    expected = head.distribution(out).sample()  # unclamped: it may round one float32 ulp past a bound
    torch.testing.assert_close(action, expected, rtol=0, atol=1e-6)


def test_sample_evaluate_and_rsample_log_probs_equal_torchs_transformed_distribution():
    head, out = gaussian(), outputs(512, 6)
    dist = head.distribution(out)
    torch.manual_seed(1)
    action, log_prob = head.sample(out)
    drawn, drawn_log_prob = head.rsample(out, torch.Generator().manual_seed(2))
    own = dist.sample()
    for act, lp in ((action, log_prob), (drawn, drawn_log_prob), (own, head.evaluate(out, own)[0])):
        rows = well_conditioned(head, act)
        assert lp.shape == (512,) and int(rows.sum()) > 300
        expected = dist.log_prob(act)
        torch.testing.assert_close(lp[rows], expected[rows], rtol=1e-9, atol=1e-9)
        torch.testing.assert_close(head.evaluate(out, act)[0][rows], expected[rows], rtol=1e-9, atol=1e-9)
    evaluated, entropy = head.evaluate(out, action)
    torch.testing.assert_close(entropy, -evaluated)  # the one-sample entropy estimate


def test_float32_log_probs_stay_close_to_the_distribution():
    head, out = gaussian(torch.float32), outputs(512, 6, dtype=torch.float32)
    action, log_prob = head.sample(out)
    rows = well_conditioned(head, action)
    expected = head.distribution(out).log_prob(action)
    torch.testing.assert_close(log_prob[rows], expected[rows], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_actions_stay_inside_the_bounds_for_extreme_outputs(dtype):
    head = gaussian(dtype)
    out = outputs(4096, 6, scale=1e4, dtype=dtype)
    action, log_prob = head.sample(out)
    drawn, drawn_log_prob = head.rsample(out)
    mode = head.act(out, deterministic=True)
    for act in (action, drawn, mode):
        assert act.dtype == dtype and in_bounds(act)
    assert torch.isfinite(log_prob).all() and torch.isfinite(drawn_log_prob).all()
    assert torch.isfinite(head.evaluate(out, action)[0]).all()  # the bounds themselves score finitely
    hit = torch.as_tensor(HIGH, dtype=dtype)
    assert (mode == hit).any()  # the extremes are reached, so the check above was tested at the edge


def test_the_mode_is_the_squashed_mean():
    head, out = gaussian(), outputs(64, 6, scale=2.0)
    mean = out[:, :3]
    low, high = torch.as_tensor(LOW), torch.as_tensor(HIGH)
    expected = low + (high - low) * (torch.tanh(mean) + 1) / 2  # the form the export metadata states
    for mode in (head.act(out, True), head.sample(out, True)[0], head.mode(head.distribution(out))):
        torch.testing.assert_close(mode, expected, rtol=0, atol=1e-6)


def test_rsample_carries_gradients_to_both_halves_of_the_output():
    head = gaussian()
    out = outputs(32, 6).requires_grad_(True)
    action, log_prob = head.rsample(out, torch.Generator().manual_seed(0))
    (action.sum() + log_prob.sum()).backward()
    assert out.grad is not None and torch.isfinite(out.grad).all()
    assert (out.grad[:, :3].abs() > 0).all() and (out.grad[:, 3:].abs() > 0).any()
    plain = outputs(32, 6).requires_grad_(True)
    assert not head.sample(plain)[0].requires_grad  # collection draws carry none


def test_the_same_generator_seed_draws_the_same_actions():
    head, out = gaussian(), outputs(128, 6)
    first = head.rsample(out, torch.Generator().manual_seed(7))
    again = head.rsample(out, torch.Generator().manual_seed(7))
    other = head.rsample(out, torch.Generator().manual_seed(8))
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    assert not torch.equal(first[0], other[0])


def test_deterministic_head_adds_noise_only_while_exploring():
    head = TanhDeterministicHead(LOW, HIGH).double()
    out = outputs(256, 3, scale=3.0)
    squashed = head.squash(out)
    assert head.out_dim == 3 and in_bounds(squashed)
    assert torch.equal(head.act(out), squashed)  # noise_std 0: no noise even when sampling
    with pytest.raises(ValueError, match="no density"):
        head.distribution(out)
    head.noise_std = 0.3
    assert torch.equal(head.act(out, deterministic=True), squashed)
    torch.manual_seed(1)  # not seed 0: outputs() drew the same normals
    noisy, log_prob = head.sample(out)
    assert not torch.equal(noisy, squashed) and in_bounds(noisy)
    assert torch.equal(log_prob, torch.zeros(256)) and torch.equal(head.evaluate(out, noisy)[0], log_prob)
    scaled = head.from_bounds(noisy) - head.from_bounds(squashed)  # the noise in [-1, 1] units
    assert 0.15 < float(scaled.std()) < 0.35
    extreme = head.sample(out * 1e4)[0]
    assert in_bounds(extreme)
    assert torch.equal(head.mode(head.distribution(out)), squashed)


@pytest.mark.parametrize("name", ["tanh_gaussian", "tanh_deterministic"])
def test_build_action_head_refuses_unbounded_and_discrete_spaces_in_one_line(name):
    head = build_action_head(gym.spaces.Box(LOW, HIGH, dtype=np.float32), distribution=name)
    assert isinstance(head, TanhGaussianHead if name == "tanh_gaussian" else TanhDeterministicHead)
    for space in (
        gym.spaces.Box(-np.inf, np.inf, (2,), np.float32),
        gym.spaces.Box(np.array([-1.0, -np.inf]), np.array([1.0, 1.0]), dtype=np.float32),
        gym.spaces.Discrete(3),
    ):
        with pytest.raises(ConfigError) as info:
            build_action_head(space, distribution=name)
        message = str(info.value)
        assert message.startswith("policy.distribution:") and name in message and "\n" not in message


@pytest.mark.parametrize("name", ["tanh_gaussian", "tanh_deterministic"])
def test_onnx_export_acts_like_the_policys_deterministic_action(name, tmp_path):
    env = build_env("Pendulum", 2, "cpu")
    torch.manual_seed(0)
    block = {
        "name": "actor_only",
        "distribution": name,
        "obs_normalization": True,
        "actor": {"network_cfg": {"hidden_sizes": [16]}},
    }
    policy = build_policy(block, env.observation_space, env.action_space, "cpu")
    policy.update_normalization(torch.randn(256, *env.obs_shape) * 2 + 1)
    with torch.no_grad():
        policy.actor[-1].weight.mul_(10)  # some actions saturate at the bounds
    policy.eval()
    assert type(policy.head) in MODES
    actor = DeployedActor(policy, env.observation_space, env.action_space)
    path = export_onnx(
        actor,
        tmp_path / "policy.onnx",
        export_metadata(actor, env.observation_space, env.action_space, policy),
    )
    model = ExportedModel(path)
    obs = torch.randn(64, *env.obs_shape) * 3
    with torch.no_grad():
        expected = policy.sample(obs, deterministic=True)[0]
    got = model(obs.numpy(), None)[0]
    assert got.shape == tuple(expected.shape) and got.dtype == np.float32
    assert np.abs(got - expected.numpy()).max() <= 1e-5
    assert (np.abs(expected.numpy()) > 1.99).any() and (np.abs(expected.numpy()) < 1.9).any()
