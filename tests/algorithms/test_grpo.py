import math
import warnings
from pathlib import Path

import gymnasium as gym
import pytest
import torch
from click.testing import CliRunner

from rlpipe.algorithms import GRPO, GRPOCfg, build_algo, get_registered_algo_names
from rlpipe.algorithms.grpo import group_advantages, step_returns_and_mask
from rlpipe.cli import cli
from rlpipe.config import ConfigError
from rlpipe.policies import build_policy
from rlpipe.rollout import allocate_rollout

GRPO_PARAMS = str(Path(__file__).parents[2] / "configs" / "grpo_cartpole.yaml")
OBS_SPACE, ACT_SPACE = gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2)


def make_grpo(**cfg):
    policy = build_policy({"name": "actor_only", "critic": None}, OBS_SPACE, ACT_SPACE, "cpu")
    return build_algo("grpo", {"batch_size": 8, "n_epochs": 1, **cfg}, policy, "cpu")


# ---------------------------------------------------------------- step returns and mask


def test_step_returns_and_mask_by_hand():
    algo = make_grpo(gamma=0.5)
    rewards = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 1.0, 2.0]])
    dones = torch.tensor(
        [[False, True, False, False], [False, False, False, False], [True, False, True, False]]
    )
    returns, mask = algo._compute_step_returns_and_mask(rewards, dones)
    # env 0: R3 = 1; R2 = 1 + .5·1 = 1.5; R1 = 1 + .5·1.5·(1 − done_1) = 1; R0 = 1 + .5·1 = 1.5
    # env 1 (no done, no bootstrap past T): R3 = 4; R2 = 3 + 2 = 5; R1 = 2 + 2.5 = 4.5; R0 = 1 + 2.25
    # env 2: R3 = 2; R2 = 1 (done); R1 = 1 + .5·1 = 1.5; R0 = 1 (done)
    expected = torch.tensor([[1.5, 1.0, 1.5, 1.0], [3.25, 4.5, 5.0, 4.0], [1.0, 1.5, 1.0, 2.0]])
    torch.testing.assert_close(returns, expected)
    # the first done's step is kept, everything after it is masked
    assert mask.tolist() == [[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]]
    assert returns.dtype == mask.dtype == torch.float32


def test_mask_is_all_ones_without_truncate_at_first_done():
    algo = make_grpo(truncate_at_first_done=False)
    dones = torch.tensor([[True, False, True], [False, True, False]])
    returns, mask = algo._compute_step_returns_and_mask(torch.ones(2, 3), dones)
    assert mask.tolist() == [[1, 1, 1], [1, 1, 1]]
    torch.testing.assert_close(returns[:, -1], torch.ones(2))


# ---------------------------------------------------------------- group advantages


def test_group_with_a_dead_member_uses_alive_peers_only():
    algo = make_grpo(group_size=4)
    # one time step, two groups of 4; member 3 of group 0 is dead (its 10 must not count)
    returns = torch.tensor([[1.0], [2.0], [3.0], [10.0], [0.0], [0.0], [4.0], [4.0]])
    mask = torch.tensor([[1.0], [1.0], [1.0], [0.0], [1.0], [1.0], [1.0], [1.0]])
    adv = algo._compute_step_group_advantages(returns, mask).squeeze(1)
    # group 0: mean 2, population std sqrt(((−1)² + 0 + 1²)/3) = sqrt(2/3)
    s = math.sqrt(2 / 3)
    # group 1 (its own block, not mixed with group 0): mean 2, std 2 → (−1, −1, 1, 1)
    expected = torch.tensor([-1 / s, 0.0, 1 / s, 0.0, -1.0, -1.0, 1.0, 1.0])
    torch.testing.assert_close(adv, expected, rtol=1e-6, atol=1e-6)


def test_single_alive_member_and_constant_group_give_zero_not_nan():
    algo = make_grpo(group_size=2)
    # t=0: group 0 constant (5, 5); group 1 only member 0 alive
    # t=1: both groups have only member 0 alive
    returns = torch.tensor([[5.0, 7.0], [5.0, 1.0], [3.0, 2.0], [9.0, 8.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    adv = algo._compute_step_group_advantages(returns, mask)
    assert torch.isfinite(adv).all()
    assert adv.tolist() == [[0.0, 0.0]] * 4


def loop_reference(rewards, dones, gamma, group_size, eps):
    """Plain python loops over envs, steps and groups: the seed's semantics written out."""
    n, t = rewards.shape
    returns = [[0.0] * t for _ in range(n)]
    mask = [[0.0] * t for _ in range(n)]
    for i in range(n):
        running, alive = 0.0, 1.0
        for s in reversed(range(t)):
            running = float(rewards[i, s]) + gamma * running * (0.0 if dones[i, s] else 1.0)
            returns[i][s] = running
        for s in range(t):
            mask[i][s] = alive
            alive = 0.0 if dones[i, s] else alive
    adv = [[0.0] * t for _ in range(n)]
    for g in range(0, n, group_size):
        for s in range(t):
            vals = [returns[i][s] for i in range(g, g + group_size) if mask[i][s]]
            mean = sum(vals) / max(len(vals), 1)
            std = math.sqrt(sum((v - mean) ** 2 for v in vals) / max(len(vals), 1))
            for i in range(g, g + group_size):
                adv[i][s] = (returns[i][s] - mean) / (std + eps) * mask[i][s]
    return torch.tensor(returns), torch.tensor(mask), torch.tensor(adv)


def test_vectorized_maths_matches_plain_loops_on_random_data():
    gen = torch.Generator().manual_seed(3)
    rewards = torch.randn(12, 20, generator=gen)
    dones = torch.rand(12, 20, generator=gen) < 0.15
    returns, mask = step_returns_and_mask(rewards, dones, 0.9, True)
    adv = group_advantages(returns, mask, 3, 1e-8)
    ref_returns, ref_mask, ref_adv = loop_reference(rewards, dones, 0.9, 3, 1e-8)
    torch.testing.assert_close(returns, ref_returns)
    torch.testing.assert_close(mask, ref_mask)
    torch.testing.assert_close(adv, ref_adv, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- rollouts and losses


def random_rollout(n=8, t=6, seed=0):
    gen = torch.Generator().manual_seed(seed)
    ro = allocate_rollout(n, t, (3,), (), torch.int64, "cpu")
    ro["obs"].copy_(torch.randn(n, t + 1, 3, generator=gen))
    ro["action"][:, :-1] = torch.randint(0, 2, (n, t), generator=gen)
    ro["sample_log_prob"][:, :-1] = math.log(0.5)
    ro["reward"][:, :-1] = torch.randn(n, t, generator=gen)
    done = torch.rand(n, t, generator=gen) < 0.2
    ro["terminated"][:, :-1] = done
    ro["done"][:, :-1] = done
    return ro


def test_compute_advantages_writes_padded_keys():
    algo = make_grpo()
    ro = random_rollout()
    assert algo.compute_advantages(ro) == {}
    returns, mask = algo._compute_step_returns_and_mask(ro["reward"][:, :-1], ro["done"][:, :-1])
    for key, value in (
        ("seq_return", returns),
        ("seq_mask", mask),
        ("advantage", algo._compute_step_group_advantages(returns, mask)),
    ):
        assert ro[key].shape == (8, 7)
        torch.testing.assert_close(ro[key][:, :-1], value)
        assert (ro[key][:, -1] == 0).all(), key


def test_masked_loss_on_fixed_batch_matches_hand_computation():
    torch.manual_seed(0)
    algo = make_grpo(clip_coef=0.1, ent_coef=0.05, kl_coef=0.3)
    with torch.no_grad():  # move the policy away from its reference so the KL term is non-zero
        for p in algo.policy.parameters():
            p.add_(0.3 * torch.randn_like(p))
    mb = {
        "obs": torch.randn(8, 3),
        "action": torch.randint(0, 2, (8,)),
        "sample_log_prob": torch.full((8,), math.log(0.5)),
        "advantage": torch.randn(8),
        "seq_mask": torch.tensor([1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0]),
    }
    total, stats = algo.loss(mb)
    dist = torch.distributions.Categorical(logits=algo.policy.actor(mb["obs"]))
    ref = torch.distributions.Categorical(logits=algo.ref_policy.actor(mb["obs"]))
    keep = mb["seq_mask"].bool()
    log_prob = dist.log_prob(mb["action"])[keep]
    ratio = (log_prob - math.log(0.5)).exp()
    adv = mb["advantage"][keep]
    surrogate = -torch.min(ratio * adv, ratio.clamp(0.9, 1.1) * adv).mean()
    entropy = dist.entropy()[keep].mean()
    delta = ref.log_prob(mb["action"])[keep] - log_prob
    kl = (delta.exp() - delta - 1).mean()
    torch.testing.assert_close(total, surrogate - 0.05 * entropy + 0.3 * kl)
    for name, expected in (("policy_loss", surrogate), ("entropy", entropy), ("approx_ref_kl", kl)):
        torch.testing.assert_close(stats[name], expected.detach(), msg=name)
    assert kl > 0
    # masked steps do not count, whatever they hold
    poisoned = {**mb, "advantage": torch.where(keep, mb["advantage"], torch.tensor(1e6))}
    torch.testing.assert_close(algo.loss(poisoned)[0], total)


def test_reference_kl_is_zero_at_start_and_positive_after_an_update():
    torch.manual_seed(0)
    algo = make_grpo(kl_coef=0.02, n_epochs=4, learning_rate=1e-2)
    ro = random_rollout()
    obs, action = ro["obs"][:, :-1].reshape(-1, 3), ro["action"][:, :-1].reshape(-1)
    mask = torch.ones(len(obs))
    assert algo.reference_kl(obs, action, mask).item() == 0.0
    stats = algo.update(ro)
    assert stats["approx_ref_kl"] > 0
    assert algo.reference_kl(obs, action, mask).item() > 0
    # the reference is frozen: it still equals a copy of the initial weights
    assert all(not p.requires_grad for p in algo.ref_policy.parameters())


def test_no_reference_policy_when_kl_coef_is_zero():
    algo = make_grpo(kl_coef=0.0)
    assert algo.ref_policy is None
    assert "ref_policy" not in algo.state_dict()
    stats = algo.update(random_rollout())
    assert stats["approx_ref_kl"] == 0.0


def test_update_changes_parameters_and_reports_metrics():
    torch.manual_seed(0)
    algo = make_grpo(n_epochs=2)
    before = [p.clone() for p in algo.policy.parameters()]
    stats = algo.update(random_rollout())
    assert any(not torch.equal(a, b) for a, b in zip(before, algo.policy.parameters()))
    for key in (
        "policy_loss",
        "entropy",
        "approx_ref_kl",
        "approx_kl",
        "clip_fraction",
        "valid_fraction",
        "learning_rate",
    ):
        assert math.isfinite(stats[key]), key
    assert 0.0 < stats["valid_fraction"] < 1.0


def test_update_never_touches_steps_after_the_first_done():
    torch.manual_seed(0)
    algo = make_grpo(n_epochs=2)
    ro = random_rollout()
    algo.compute_advantages(ro)
    dead = ro["seq_mask"][:, :-1] == 0
    assert dead.any()
    ro["obs"][:, :-1][dead] = float("nan")  # a NaN anywhere in the batch would poison the weights
    algo.update(ro)
    assert all(torch.isfinite(p).all() for p in algo.policy.parameters())


def test_update_is_deterministic_given_generator_seed():
    def run():
        torch.manual_seed(1)
        algo = make_grpo(n_epochs=3, kl_coef=0.02)
        algo.reseed(123)
        algo.update(random_rollout(n=12, t=10))
        return [p.detach().clone() for p in algo.policy.parameters()]

    for a, b in zip(run(), run()):
        assert torch.equal(a, b)


def test_reference_policy_round_trips_through_a_checkpoint(tmp_path):
    torch.manual_seed(0)
    algo = make_grpo(kl_coef=0.02)
    algo.update(random_rollout())
    torch.save(algo.state_dict(), tmp_path / "algo.pt")
    torch.manual_seed(1)  # a fresh algorithm has another initial policy, hence another reference
    fresh = make_grpo(kl_coef=0.02)
    assert not torch.equal(fresh.ref_policy.actor[0].weight, algo.ref_policy.actor[0].weight)
    fresh.load_state_dict(torch.load(tmp_path / "algo.pt", weights_only=True))
    for a, b in zip(fresh.ref_policy.state_dict().values(), algo.ref_policy.state_dict().values()):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="algorithm.cfg.kl_coef: > 0 but the checkpoint holds no"):
        fresh.load_state_dict(make_grpo(kl_coef=0.0).state_dict())


# ---------------------------------------------------------------- config and validation


def test_grpo_cfg_has_the_seed_fields_and_defaults():
    cfg = GRPOCfg()
    assert (
        cfg.n_epochs,
        cfg.clip_coef,
        cfg.ent_coef,
        cfg.kl_coef,
        cfg.group_size,
        cfg.eps,
        cfg.reset_every_rollout,
        cfg.truncate_at_first_done,
    ) == (10, 0.2, 0.0, 0.02, 4, 1e-8, True, True)
    for field in ("device", "learning_rate", "batch_size", "gamma", "gae_lambda", "max_grad_norm"):
        assert field in GRPOCfg.model_fields
    assert cfg.group_reset == "shared" and cfg.reset_group_size == 4
    assert cfg.replace(group_reset="independent").reset_group_size == 1
    assert "grpo" in get_registered_algo_names()
    assert isinstance(make_grpo(), GRPO)


def test_group_size_below_two_is_a_one_line_error():
    with pytest.raises(ConfigError) as info:
        make_grpo(group_size=1)
    assert str(info.value) == (
        "algorithm.cfg.group_size: must be >= 2 for within-group normalization (got 1)"
    )


@pytest.mark.parametrize(
    ("num_envs", "policy_name", "message"),
    [
        (10, "actor_only", "trainer.num_envs: 10 is not divisible by algorithm.cfg.group_size=4"),
        (
            8,
            "actor_critic",
            "policy.name: GRPO needs an actor-only policy (got 'actor_critic'); accepted: actor_only",
        ),
    ],
)
def test_check_run_rejects_impossible_runs(num_envs, policy_name, message):
    with pytest.raises(ConfigError) as info:
        GRPO.check_run(GRPOCfg(), num_envs, policy_name, horizon=500, max_episode_steps=500)
    assert str(info.value) == message


def test_grpo_refuses_a_policy_with_a_critic():
    policy = build_policy({"name": "actor_critic"}, OBS_SPACE, ACT_SPACE, "cpu")
    with pytest.raises(ConfigError, match="policy.name: GRPO needs an actor-only policy"):
        build_algo("grpo", {}, policy, "cpu")


def test_horizon_shorter_than_the_time_limit_warns():
    with pytest.warns(UserWarning, match=r"trainer.buffer_size: 200 is shorter than the env's time limit"):
        GRPO.check_run(GRPOCfg(), 8, "actor_only", horizon=200, max_episode_steps=500)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        GRPO.check_run(GRPOCfg(), 8, "actor_only", horizon=500, max_episode_steps=500)
        GRPO.check_run(GRPOCfg(), 8, "actor_only", horizon=200, max_episode_steps=None)
        GRPO.check_run(
            GRPOCfg(truncate_at_first_done=False), 8, "actor_only", horizon=200, max_episode_steps=500
        )


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("trainer.num_envs=10", "trainer.num_envs: 10 is not divisible by algorithm.cfg.group_size=4"),
        (
            "algorithm.cfg.group_size=1",
            "algorithm.cfg.group_size: must be >= 2 for within-group normalization (got 1)",
        ),
        ("policy.name=actor_critic", "policy.name: GRPO needs an actor-only policy (got 'actor_critic')"),
        ("algorithm.cfg.group_reset=sometimes", "algorithm.cfg.group_reset: Input should be 'shared'"),
    ],
)
def test_cli_bad_grpo_params_exit_2_with_one_line(tmp_path, override, message):
    result = CliRunner().invoke(
        cli,
        [
            "run",
            GRPO_PARAMS,
            "--set",
            f"trainer.data_dir={tmp_path / 'data'}",
            "--set",
            "tracking.backend=none",
            "--set",
            override,
        ],
    )
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.output
    assert not (tmp_path / "data").exists()


def test_a_plug_in_actor_only_policy_is_left_to_its_own_has_critic():
    """A ``module:Class`` policy is not a built-in name: GRPO asks the built policy, not a name list."""
    GRPO.check_run(GRPOCfg(), 8, "mypkg.policies:MyActor", horizon=500, max_episode_steps=500)
    policy = build_policy({"name": "actor_only", "critic": None}, OBS_SPACE, ACT_SPACE, "cpu")
    assert isinstance(build_algo("grpo", {}, policy, "cpu"), GRPO)
