"""Beta and state-dependent-std heads against torch.distributions; how ``policy.distribution`` picks one."""

from __future__ import annotations

import typing

import gymnasium as gym
import pytest
import torch
from torch.distributions import AffineTransform, Beta, Independent, Normal, TransformedDistribution

from rlpipe.config import ConfigError, PolicyCfg
from rlpipe.policies import BetaHead, GaussianHead, StateStdGaussianHead, build_action_head, build_policy
from rlpipe.policies.distributions import BETA_EPS
from rlpipe.policies.heads import DISTRIBUTIONS, LOG_STD_RANGE

LOW, HIGH = torch.tensor([-2.0, 0.0, -1.0]), torch.tensor([2.0, 5.0, 3.0])
OBS = gym.spaces.Box(-1, 1, (4,))


def reference_beta(out: torch.Tensor) -> tuple[Independent, Beta]:
    """torch's Beta on [0, 1] mapped by ``AffineTransform(low, high − low)``; and the Beta alone."""
    alpha, beta = out.chunk(2, -1)
    unit = Beta(torch.nn.functional.softplus(alpha) + 1, torch.nn.functional.softplus(beta) + 1)
    mapped = TransformedDistribution(unit, [AffineTransform(LOW, HIGH - LOW)])
    return Independent(mapped, 1), unit


def test_beta_log_prob_and_entropy_equal_torchs_beta_with_the_affine_map():
    torch.manual_seed(0)
    head = BetaHead(LOW, HIGH)
    out = torch.randn(256, 6) * 3  # α, β from ~1 (flat) to ~10 (peaked)
    mapped, unit = reference_beta(out)
    action = mapped.sample()
    log_prob, entropy = head.evaluate(out, action)
    torch.testing.assert_close(log_prob, mapped.log_prob(action), rtol=1e-5, atol=1e-4)
    jacobian = torch.log(HIGH - LOW).sum()  # TransformedDistribution has no entropy: the Beta's + log|J|
    torch.testing.assert_close(entropy, unit.entropy().sum(-1) + jacobian, rtol=1e-5, atol=1e-5)
    assert jacobian.item() == pytest.approx(1.3863 + 1.6094 + 1.3863, abs=1e-3)  # log 4 + log 5 + log 4
    dist = head.distribution(out)  # the object recurrent policies and GRPO use: the same numbers
    assert torch.equal(dist.log_prob(action), log_prob) and torch.equal(dist.entropy(), entropy)


def test_beta_gradients_equal_torchs():
    torch.manual_seed(1)
    head = BetaHead(LOW, HIGH)
    out = (torch.randn(64, 6) * 2).requires_grad_(True)
    ref_out = out.detach().clone().requires_grad_(True)
    mapped, unit = reference_beta(ref_out)
    action = mapped.sample()
    log_prob, entropy = head.evaluate(out, action)
    (grad,) = torch.autograd.grad((log_prob - 0.1 * entropy).sum(), out)
    (ref_grad,) = torch.autograd.grad((mapped.log_prob(action) - 0.1 * unit.entropy().sum(-1)).sum(), ref_out)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-4, atol=1e-4)


def test_beta_mode_is_the_mapped_mode_and_the_densest_action():
    torch.manual_seed(2)
    head = BetaHead(LOW, HIGH)
    out = torch.randn(32, 6) * 2
    alpha, beta = (torch.nn.functional.softplus(h) + 1 for h in out.chunk(2, -1))
    mode = head.act(out, deterministic=True)
    torch.testing.assert_close(mode, LOW + (HIGH - LOW) * (alpha - 1) / (alpha + beta - 2))
    assert torch.equal(head.sample(out, deterministic=True)[0], mode)
    assert torch.equal(head.mode(head.distribution(out)), mode)
    mapped, _ = reference_beta(out)
    at_mode = mapped.base_dist.log_prob(mode)  # per dim [32, 3]
    for step in (1e-2, -1e-2):  # a step either way along each dim lowers the density
        moved = (mode + step * (HIGH - LOW)).clamp(LOW + 1e-3, HIGH - 1e-3)
        assert (mapped.base_dist.log_prob(moved) <= at_mode + 1e-5).all()


def test_beta_actions_stay_within_bounds_and_average_to_the_mean():
    torch.manual_seed(3)
    head = BetaHead(LOW, HIGH)
    out = torch.tensor([[-4.0, 0.0, 3.0, 2.0, 0.0, -4.0]]).expand(20000, 6)  # skewed both ways
    action, log_prob = head.sample(out)
    assert action.shape == (20000, 3) and log_prob.shape == (20000,)
    assert ((action >= LOW) & (action <= HIGH)).all() and torch.isfinite(log_prob).all()
    mean = head.distribution(out[:1]).mean[0]
    assert torch.allclose(action.mean(0), mean, atol=0.02 * (HIGH - LOW).max().item())
    assert mean[0] < 0 < mean[2] - 1  # the first dim leans to low, the third to high


def test_beta_log_prob_of_the_bounds_is_that_of_the_clamped_point():
    """Actions on a bound (a float32 draw can round there) score as x = eps or 1 − eps, not −inf."""
    head = BetaHead(LOW, HIGH)
    out = torch.randn(2, 6)
    log_prob, _ = head.evaluate(out, torch.stack([LOW, HIGH]))
    _, unit = reference_beta(out)
    clamped = torch.tensor([[BETA_EPS] * 3, [1 - BETA_EPS] * 3])
    expected = unit.log_prob(clamped).sum(-1) - torch.log(HIGH - LOW).sum()
    assert torch.isfinite(expected).all()
    torch.testing.assert_close(log_prob, expected)


def test_state_std_gaussian_shapes_and_log_probs_equal_torchs_normal():
    torch.manual_seed(4)
    head = StateStdGaussianHead(3, log_std_init=-0.5)
    assert head.out_dim == 6 and head.action_dim == 3 and not list(head.parameters())
    out = torch.randn(50, 6) * 4
    out[0, 3:] = torch.tensor([-100.0, 100.0, 0.0])  # clamped to the range's ends
    mean, raw = out.chunk(2, -1)
    std = (raw - 0.5).clamp(*LOG_STD_RANGE).exp()
    assert std[0, 0].item() == pytest.approx(torch.tensor(LOG_STD_RANGE[0]).exp().item())
    assert std[0, 1].item() == pytest.approx(torch.tensor(LOG_STD_RANGE[1]).exp().item())
    ref = Normal(mean, std)
    action, sampled_log_prob = head.sample(out)
    assert action.shape == (50, 3) and sampled_log_prob.shape == (50,)
    log_prob, entropy = head.evaluate(out, action)
    torch.testing.assert_close(log_prob, ref.log_prob(action).sum(-1))
    torch.testing.assert_close(entropy, ref.entropy().sum(-1))
    assert torch.equal(head.act(out, deterministic=True), mean)
    spread = head.sample(torch.cat([torch.zeros(4000, 3), torch.full((4000, 3), 1.0)], 1))[0].std(0)
    assert torch.allclose(spread, torch.full((3,), 0.5).exp(), rtol=0.08)  # exp(1 − 0.5): from the output


def test_distribution_picks_the_head_and_sizes_the_actor():
    box = gym.spaces.Box(-2, 2, (3,))
    expected = {
        "auto": (GaussianHead, 3),
        "gaussian": (GaussianHead, 3),
        "gaussian_state_std": (StateStdGaussianHead, 6),
        "beta": (BetaHead, 6),
    }
    for name, (cls, units) in expected.items():
        block = {"name": "actor_critic", "distribution": name, "action_dim": 3}
        policy = build_policy(block, OBS, box, "cpu")
        assert type(policy.head) is cls and policy.actor[-1].out_features == units
        action, log_prob = policy.sample(torch.randn(5, 4))
        assert action.shape == (5, 3) and log_prob.shape == (5,)
    assert set(DISTRIBUTIONS) == set(typing.get_args(PolicyCfg.model_fields["distribution"].annotation))
    assert PolicyCfg().distribution == "auto"


def test_beta_head_bounds_are_not_in_the_state_dict_and_follow_the_policy():
    policy = build_policy(
        {"name": "actor_critic", "distribution": "beta"}, OBS, gym.spaces.Box(-2, 2, (1,)), "cpu"
    )
    assert not [k for k in policy.state_dict() if k.startswith("head.")]
    assert policy.head.low.tolist() == [-2.0] and policy.head.scale.tolist() == [4.0]
    policy.double()
    assert policy.head.low.dtype == torch.float64


@pytest.mark.parametrize("name", ["gaussian", "gaussian_state_std", "beta"])
def test_a_continuous_distribution_on_a_discrete_space_is_a_config_error(name):
    with pytest.raises(
        ConfigError,
        match=rf"^policy\.distribution: '{name}' needs a Box action space, "
        r"the env's is Discrete\(2\); accepted for Discrete actions: auto",
    ):
        build_action_head(gym.spaces.Discrete(2), distribution=name)


def test_beta_needs_finite_bounds():
    for space in (gym.spaces.Box(-float("inf"), float("inf"), (2,)), gym.spaces.Box(0.0, 0.0, (1,))):
        with pytest.raises(
            ConfigError,
            match=r"^policy\.distribution: 'beta' needs finite action bounds "
            r"with low < high, .*accepted for it: auto, gaussian",
        ):
            build_action_head(space, distribution="beta")
    with pytest.raises(ConfigError, match=r"policy\.distribution: unknown 'gamma'; accepted: auto, gaussian"):
        build_action_head(gym.spaces.Box(-1, 1, (1,)), distribution="gamma")


def test_recurrent_policies_use_the_beta_distribution_object():
    policy = build_policy(
        {
            "name": "recurrent_actor_critic",
            "distribution": "beta",
            "recurrent": {"type": "gru", "hidden_size": 8},
        },
        OBS,
        gym.spaces.Box(-2, 2, (2,)),
        "cpu",
    )
    obs, state = torch.randn(6, 4), policy.initial_state(6)
    action, log_prob, _, _ = policy.sample_step(obs, state)
    assert ((action >= -2) & (action <= 2)).all() and torch.isfinite(log_prob).all()
    seq_log_prob, entropy, _ = policy.evaluate_sequence(
        obs.unsqueeze(1), action.unsqueeze(1), state, torch.zeros(6, 1, dtype=torch.bool)
    )
    torch.testing.assert_close(seq_log_prob[:, 0], log_prob)
    assert entropy.shape == (6, 1) and torch.isfinite(entropy).all()


def test_beta_maths_stay_float32_under_bf16_autocast():
    torch.manual_seed(5)
    head, actor = BetaHead(LOW, HIGH), torch.nn.Linear(4, 6)
    obs = torch.randn(64, 4)
    with torch.no_grad():
        actor.weight.mul_(20)  # peaked Betas: lgamma(α + β) of tens of nats
        action = head.sample(actor(obs))[0]
        expected = head.evaluate(actor(obs), action)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = actor(obs)
            log_prob, entropy = head.evaluate(out, action)
    assert out.dtype == torch.bfloat16 and log_prob.dtype == entropy.dtype == torch.float32
    error = (log_prob - expected[0]).abs().max()  # from the bf16 actor output alone
    assert error < 0.2 and (beta_log_prob_in_bf16(out, action) - expected[0]).abs().max() > 3 * error


def beta_log_prob_in_bf16(out: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """The same formula with every op in bf16: what the clause in ``beta_concentrations`` avoids."""
    alpha, beta = (torch.nn.functional.softplus(h) + 1 for h in out.chunk(2, -1))
    x = ((action.bfloat16() - LOW.bfloat16()) / (HIGH - LOW).bfloat16()).clamp(1e-3, 1 - 1e-3)
    per_dim = (
        torch.xlogy(alpha - 1, x)
        + torch.xlogy(beta - 1, 1 - x)
        + torch.lgamma(alpha + beta)
        - torch.lgamma(alpha)
        - torch.lgamma(beta)
    )
    return (per_dim.sum(-1) - torch.log(HIGH - LOW).sum().bfloat16()).float()
