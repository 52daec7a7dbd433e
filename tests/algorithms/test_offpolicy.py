"""SAC and TD3 updates as ``rlpipe.build`` builds them on Pendulum's spaces: steps, targets, α, state."""

from __future__ import annotations

import copy
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from rlpipe import config
from rlpipe.algorithms.offpolicy import OffPolicyAlgorithm
from rlpipe.build import build_algorithm
from rlpipe.rollout import gather_final_obs

ROOT = Path(__file__).resolve().parents[2]
SAC_PARAMS = ROOT / "configs" / "sac_pendulum.yaml"
OBS = gym.spaces.Box(-8.0, 8.0, (3,), np.float32)
ACTION = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
N, T = 4, 4
CPU = torch.device("cpu")


def make_algo(name: str = "sac", *extra: str, seed: int = 0) -> OffPolicyAlgorithm:
    """A small ``name`` learner for Pendulum's spaces from ``configs/sac_pendulum.yaml``."""
    overrides = [
        f"trainer.num_envs={N}",
        f"trainer.buffer_size={T}",
        "trainer.device=cpu",
        "tracking.backend=none",
        "store.enabled=false",
        "policy.actor.network_cfg.hidden_sizes=[16]",
        f"algorithm.name={name}",
        "algorithm.cfg.critic.hidden_sizes=[16]",
        "algorithm.cfg.batch_size=32",
        "algorithm.cfg.learning_starts=0",
        "algorithm.cfg.random_steps=0",
    ]
    if name == "td3":
        overrides.append("policy.distribution=tanh_deterministic")
    cfg = config.load(SAC_PARAMS, [*overrides, *extra])
    torch.manual_seed(seed)
    algo = build_algorithm(cfg, OBS, ACTION, CPU)
    assert isinstance(algo, OffPolicyAlgorithm) and algo.name == name
    return algo


def make_rollout(seed: int, truncations: bool = True) -> tuple[TensorDict, TensorDict]:
    """A random Pendulum-like ``[N, T+1]`` rollout with terminations and truncations, and its final obs."""
    gen = torch.Generator().manual_seed(seed)
    obs = torch.randn(N, T + 1, 3, generator=gen)
    done = torch.rand(N, T + 1, generator=gen) < 0.15
    done[:, T] = False
    terminated = done & (torch.rand(N, T + 1, generator=gen) < 0.5)
    truncated = done & ~terminated if truncations else torch.zeros_like(done)
    rollout = TensorDict(
        {
            "obs": obs,
            "action": torch.rand(N, T + 1, 1, generator=gen) * 4 - 2,
            "reward": -(obs[..., 0] ** 2) - 0.1 * torch.rand(N, T + 1, generator=gen),
            "terminated": terminated,
            "truncated": truncated,
        },
        batch_size=[N, T + 1],
    )
    final = torch.randn(N, T, 3, generator=gen)
    return rollout, gather_final_obs(final, (terminated | truncated)[:, :T])


def update(algo: OffPolicyAlgorithm, iteration: int, seed: int | None = None) -> dict[str, float]:
    """The iteration-th update (from 1), positioned after ``iteration − 1`` rollouts of N × T steps."""
    algo.set_progress((iteration - 1) * N * T, 100 * N * T)
    rollout, final_obs = make_rollout(iteration if seed is None else seed)
    return algo.update(rollout, iteration, final_obs)


def params(module: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("name", ["sac", "td3"])
def test_no_gradient_step_before_learning_starts_then_buffer_size_times_updates_per_step(name):
    algo = make_algo(name, f"algorithm.cfg.learning_starts={2 * N * T}", "algorithm.cfg.updates_per_step=1.5")
    actor, critics = params(algo.policy), params(algo.critics)
    metrics = update(algo, 1)  # 0 + N·T env steps < 2·N·T
    assert metrics["gradient_steps"] == 0 and algo.critic_steps == 0
    assert same(params(algo.policy), actor) and same(params(algo.critics), critics)
    assert metrics["replay_transitions"] == N * T
    metrics = update(algo, 2)  # N·T + N·T >= 2·N·T
    assert metrics["gradient_steps"] == T * 1.5 == algo.critic_steps
    assert not same(params(algo.policy), actor) and not same(params(algo.critics), critics)
    assert metrics["replay_transitions"] == 2 * N * T
    assert np.isfinite(metrics["value_loss"]) and np.isfinite(metrics["policy_loss"])


@pytest.mark.parametrize("name", ["sac", "td3"])
def test_target_networks_move_by_polyak_tau_after_each_actor_step(name):
    tau = 0.25
    algo = make_algo(name, f"algorithm.cfg.tau={tau}", "algorithm.cfg.policy_frequency=1")
    update(algo, 1)
    for _ in range(3):
        before = [params(target) for _, target in algo.target_pairs()]
        algo.gradient_step()
        assert len(before) == (2 if name == "td3" else 1)
        for (online, target), old in zip(algo.target_pairs(), before):
            for now, was, live in zip(params(target), old, params(online)):
                torch.testing.assert_close(now, was + tau * (live - was), rtol=1e-6, atol=1e-7)
                assert not torch.equal(now, was)


def test_td3_steps_its_actor_and_targets_every_policy_frequency_th_critic_step():
    algo = make_algo("td3", "algorithm.cfg.policy_frequency=3")
    update(algo, 1)  # T critic steps
    assert algo.critic_steps == T
    stepped = []
    for _ in range(7):
        actor, critics, targets = params(algo.policy), params(algo.critics), params(algo.critic_targets)
        algo.gradient_step()
        assert not same(params(algo.critics), critics)  # the critics step every time
        moved = not same(params(algo.policy), actor)
        assert moved == (not same(params(algo.critic_targets), targets))
        stepped.append(moved)
    assert [T + k + 1 for k, moved in enumerate(stepped) if moved] == [
        s for s in range(T + 1, T + 8) if s % 3 == 0
    ]
    assert sum(stepped) >= 2
    metrics = update(algo, 2)
    assert "policy_loss" in metrics and metrics["gradient_steps"] == T


def test_sac_tunes_alpha_under_auto_and_keeps_a_fixed_one():
    auto = make_algo("sac", "algorithm.cfg.ent_coef_init=0.5")
    first = update(auto, 1)["ent_coef"]
    second = update(auto, 2)["ent_coef"]
    assert first != 0.5 and second != first and auto.alpha_optimizer is not None
    fixed = make_algo("sac", "algorithm.cfg.ent_coef=0.2")
    assert fixed.alpha_optimizer is None
    for iteration in (1, 2):
        assert update(fixed, iteration)["ent_coef"] == pytest.approx(0.2)
    off = make_algo("sac", "algorithm.cfg.ent_coef=0.0")
    assert update(off, 1)["ent_coef"] == 0.0


@pytest.mark.parametrize("name", ["sac", "td3"])
@pytest.mark.parametrize(
    "options",
    [
        ("algorithm.cfg.distributional={v_min: -50, v_max: 0, num_atoms: 21}",),
        ("algorithm.cfg.amp=bf16",),
        (
            "algorithm.cfg.distributional={v_min: -50, v_max: 0, num_atoms: 21}",
            "algorithm.cfg.amp=bf16",
            "algorithm.cfg.critic_reduce=mean",
            "algorithm.cfg.n_step=3",
        ),
    ],
    ids=["distributional", "bf16", "distributional-bf16-mean-3step"],
)
def test_distributional_and_bf16_updates_give_finite_losses(name, options):
    algo = make_algo(name, *options, "algorithm.cfg.policy_frequency=1")
    critics = params(algo.critics)
    for iteration in (1, 2) if "amp=bf16" not in options[-1] else (1,):  # CPU bf16 is slow
        metrics = update(algo, iteration)
        for key in ("value_loss", "policy_loss", "q_mean"):
            assert np.isfinite(metrics[key]), (key, metrics)
    assert not same(params(algo.critics), critics)
    if "distributional" in options[0]:
        assert algo.critics.nets[0][-1].out_features == 21
        assert -50.0 <= metrics["q_mean"] <= 0.0  # an expectation over the atoms


def tensors(obj) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, TensorDict):
        return [t for value in obj.values(True, True) for t in tensors(value)]
    if isinstance(obj, dict):
        return [t for value in obj.values() for t in tensors(value)]
    if isinstance(obj, list | tuple):
        return [t for value in obj for t in tensors(value)]
    return []


@pytest.mark.parametrize("name", ["sac", "td3"])
def test_state_round_trips_without_the_ring_and_a_refilled_ring_updates_alike(name):
    extra = (f"algorithm.cfg.replay_size={3 * N * T}", "algorithm.cfg.policy_frequency=2")  # 3 rollouts
    online = make_algo(name, *extra)
    for iteration in (1, 2, 3, 4):
        update(online, iteration)
    state, policy_state = copy.deepcopy(online.state_dict()), copy.deepcopy(online.policy.state_dict())
    assert online.ring is not None and online.ring.transitions == 3 * N * T
    ring = online.ring.capacity
    for tensor in tensors(state):  # neither the ring's [R, N, T] transitions nor its [R, N, T+1] obs
        assert tuple(tensor.shape[:3]) not in ((ring, N, T), (ring, N, T + 1)), tensor.shape
    expected = update(online, 5)

    resumed = make_algo(name, *extra, seed=1)  # other start weights, all overwritten
    resumed.policy.load_state_dict(policy_state)
    resumed.load_state_dict(state)
    assert resumed.ring is None and resumed.ring_newest == 4 and resumed.held_rollouts(N, T) == 3
    for key, value in resumed.state_dict().items():
        if isinstance(value, dict) and key != "scaler":
            assert [t.shape for t in tensors(value)] == [t.shape for t in tensors(state[key])], key
    resumed.refill([make_rollout(p) for p in (2, 3, 4)])
    assert resumed.ring is not None and resumed.ring.transitions == 3 * N * T
    got = update(resumed, 5)
    assert got == expected
    assert same(params(resumed.policy), params(online.policy))
    assert same(params(resumed.critics), params(online.critics))


def test_a_ring_not_refilled_after_a_load_refuses_to_sample():
    extra = (f"algorithm.cfg.replay_size={3 * N * T}",)
    online = make_algo("td3", *extra)
    for iteration in (1, 2, 3, 4):
        update(online, iteration)
    resumed = make_algo("td3", *extra)
    resumed.load_state_dict(online.state_dict())
    with pytest.raises(RuntimeError, match="replay ring"):
        update(resumed, 5)


def test_a_rollout_with_truncations_but_no_final_obs_is_refused():
    algo = make_algo("sac")
    rollout, _ = make_rollout(0)
    assert bool(rollout["truncated"].any())
    with pytest.raises(ValueError, match="truncations but no final observations"):
        algo.update(rollout, 1, None)
    terminal_only, _ = make_rollout(0, truncations=False)
    assert algo.update(terminal_only, 1, None)["gradient_steps"] == T


@pytest.mark.parametrize("name", ["sac", "td3"])
def test_random_start_acts_uniformly_before_random_steps_and_with_the_policy_after(name):
    algo = make_algo(name, "algorithm.cfg.random_steps=1000")
    acting = algo.acting_policy
    obs = torch.randn(4000, 3)
    algo.set_progress(999, 10_000)
    action, log_prob = acting.sample(obs)
    assert action.shape == (4000, 1) and torch.equal(log_prob, torch.zeros(4000))
    assert float(action.min()) >= -2.0 and float(action.max()) <= 2.0
    counts = torch.histc(action, bins=4, min=-2.0, max=2.0)
    assert (counts > 800).all() and (counts < 1200).all()  # uniform over the bounds
    with torch.no_grad():
        mode = algo.policy.sample(obs, deterministic=True)[0]
    assert torch.equal(acting.sample(obs, deterministic=True)[0], mode)  # evaluation never acts at random
    algo.set_progress(1000, 10_000)
    torch.manual_seed(3)
    with torch.no_grad():
        acted = acting.sample(obs)[0]
        torch.manual_seed(3)
        expected = algo.policy.sample(obs)[0]
    assert torch.equal(acted, expected)
    if name == "td3":  # exploration noise around the mode, not uniform
        assert not torch.equal(acted, mode) and float((acted - mode).abs().mean()) < 0.5
