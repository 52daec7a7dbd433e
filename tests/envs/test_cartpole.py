"""CartPole against gymnasium's CartPole-v1, plus the TorchEnv machinery it inherits."""

from __future__ import annotations

import io
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlpipe.envs import CartPole, StepResult
from rlpipe.envs.tasks.cartpole import THETA_THRESHOLD, X_THRESHOLD

Policy = Callable[[np.ndarray, int], int]


def balance(obs: np.ndarray, t: int) -> int:
    """Push towards the side the pole falls to; keeps CartPole up for 500 steps."""
    return int(obs[2] + 0.5 * obs[3] > 0)


def random_actions(seed: int) -> Policy:
    actions = np.random.default_rng(seed).integers(0, 2, size=1000)
    return lambda obs, t: int(actions[t])


def gym_twin(env: CartPole, index: int = 0) -> gym.Env:
    """A gymnasium CartPole-v1 placed in the state of env ``index`` (float64)."""
    ref = gym.make("CartPole-v1")
    ref.reset(seed=0)
    ref.unwrapped.state = env.state[index].to(torch.float64).numpy().copy()
    return ref


def run_against_gymnasium(physics_dtype: str, policy: Policy, steps: int, seed: int) -> tuple:
    """Step both envs with the same actions; return (steps taken, how the episode ended)."""
    env = CartPole(1, "cpu", physics_dtype=physics_dtype)
    obs = env.reset(seed=seed)
    ref = gym_twin(env)
    for t in range(steps):
        action = policy(obs[0].numpy(), t)
        result = env.step(torch.tensor([action]))
        ref_obs, ref_reward, ref_term, ref_trunc, _ = ref.step(action)
        np.testing.assert_allclose(result.final_obs[0].numpy(), ref_obs, atol=1e-5, rtol=0)
        assert result.reward[0].item() == ref_reward
        flags = (bool(result.terminated[0]), bool(result.truncated[0]))
        assert flags == (ref_term, ref_trunc), f"step {t + 1}"
        if ref_term or ref_trunc:
            return t + 1, "terminated" if ref_term else "truncated"
        assert torch.equal(result.obs, result.final_obs)
        obs = result.obs
    return steps, "running"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_float64_matches_gymnasium_up_to_the_500_step_truncation(seed: int) -> None:
    assert run_against_gymnasium("float64", balance, 600, seed) == (500, "truncated")


@pytest.mark.parametrize("seed", [0, 1])
def test_float64_matches_gymnasium_up_to_termination(seed: int) -> None:
    steps, end = run_against_gymnasium("float64", random_actions(seed), 600, seed)
    assert end == "terminated" and steps < 100


def test_float32_matches_gymnasium_over_a_short_horizon() -> None:
    assert run_against_gymnasium("float32", balance, 50, seed=3) == (50, "running")
    steps, end = run_against_gymnasium("float32", random_actions(3), 50, seed=3)
    assert end == "terminated"


def test_spaces_shapes_and_dtypes_match_gymnasium() -> None:
    ref = gym.make("CartPole-v1")
    env = CartPole(5, "cpu", physics_dtype="float64")
    assert env.action_space == ref.action_space
    assert env.observation_space == ref.observation_space
    assert env.max_episode_steps == ref.spec.max_episode_steps == 500
    assert env.action_dtype == torch.int64 and env.action_shape == ()
    obs = env.reset(seed=0)
    assert obs.shape == (5, 4) and obs.dtype == torch.float32
    assert env.state.dtype == torch.float64
    assert obs.abs().max() < 0.05
    result = env.step(torch.ones(5, dtype=torch.int64))
    assert result.obs.shape == result.final_obs.shape == (5, 4)
    assert result.obs.dtype == result.final_obs.dtype == torch.float32
    assert result.reward.dtype == torch.float32 and result.reward.shape == (5,)
    assert result.terminated.dtype == result.truncated.dtype == torch.bool


def test_auto_reset_gives_fresh_obs_and_the_true_final_obs() -> None:
    env = CartPole(8, "cpu", physics_dtype="float64")
    env.reset(seed=4)
    twins = [gym_twin(env, i) for i in range(8)]
    finished = torch.zeros(8, dtype=torch.bool)
    for _ in range(30):
        result = env.step(torch.ones(8, dtype=torch.int64))
        for i in np.flatnonzero(~finished.numpy()):
            ref_obs, _, ref_term, _, _ = twins[i].step(1)
            np.testing.assert_allclose(result.final_obs[i].numpy(), ref_obs, atol=1e-5, rtol=0)
            assert bool(result.terminated[i]) == ref_term
        done = result.terminated | result.truncated
        check_reset_rows(env, result, done & ~finished)
        finished |= done
    assert finished.all()


def check_reset_rows(env: CartPole, result: StepResult, fresh: torch.Tensor) -> None:
    """Rows that just ended start afresh; rows that did not have ``final_obs == obs``."""
    keep = ~(result.terminated | result.truncated)
    assert torch.equal(result.obs[keep], result.final_obs[keep])
    if fresh.any():
        last = result.final_obs[fresh]
        assert ((last[:, 0].abs() > X_THRESHOLD) | (last[:, 2].abs() > THETA_THRESHOLD)).all()
        assert result.obs[fresh].abs().max() < 0.05
        assert (env.elapsed[fresh] == 0).all()


def test_time_limit_truncates_and_restarts() -> None:
    env = CartPole(4, "cpu", max_episode_steps=3)
    env.reset(seed=0)
    truncations = []
    for t in range(6):
        result = env.step(torch.full((4,), t % 2, dtype=torch.int64))
        assert not result.terminated.any()
        assert result.truncated.all() == result.truncated.any()
        truncations.append(bool(result.truncated.all()))
        if t == 2:
            assert not torch.equal(result.obs, result.final_obs)
    assert truncations == [False, False, True, False, False, True]


def test_group_reset_shares_start_states_within_groups_only() -> None:
    env = CartPole(12, "cpu")
    obs = env.reset(seed=7, group_size=4)
    groups = obs.reshape(3, 4, 4)
    assert torch.equal(groups, groups[:, :1].expand_as(groups))
    assert not torch.equal(groups[0, 0], groups[1, 0])
    assert not torch.equal(groups[1, 0], groups[2, 0])
    assert torch.equal(env.reset(seed=7, group_size=4), obs)
    with pytest.raises(ValueError, match="group_size"):
        env.reset(seed=7, group_size=5)


def test_seeds_reproduce_and_differ() -> None:
    env = CartPole(16, "cpu")
    first = env.reset(seed=1)
    assert torch.equal(env.reset(seed=1), first)
    assert not torch.equal(env.reset(seed=2), first)
    assert not torch.equal(env.reset(), env.reset())


def rollout(env: CartPole, actions: torch.Tensor) -> list[torch.Tensor]:
    out = []
    for action in actions:
        out.extend(env.step(action)[:5])  # the tensors; info is a mapping
    return out


def test_state_dict_round_trip_continues_bit_for_bit() -> None:
    actions = torch.randint(0, 2, (80, 64), generator=torch.Generator().manual_seed(0))
    env = CartPole(64, "cpu", max_episode_steps=20)
    env.reset(seed=3)
    rollout(env, actions[:15])
    buffer = io.BytesIO()
    torch.save(env.state_dict(), buffer)
    expected = rollout(env, actions[15:])
    buffer.seek(0)
    resumed = CartPole(64, "cpu", max_episode_steps=20)
    resumed.reset(seed=99)
    resumed.load_state_dict(torch.load(buffer, weights_only=True))
    got = rollout(resumed, actions[15:])
    assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))


def test_load_state_dict_refuses_a_different_shape() -> None:
    state = CartPole(4, "cpu").state_dict()
    with pytest.raises(ValueError, match="shape"):
        CartPole(8, "cpu").load_state_dict(state)


def test_4096_envs_step_with_auto_resets() -> None:
    env = CartPole(4096, "cpu")
    env.reset(seed=0)
    generator = torch.Generator().manual_seed(0)
    episodes = 0
    for _ in range(100):
        result = env.step(torch.randint(0, 2, (4096,), generator=generator))
        episodes += int(result.terminated.sum())
    assert result.obs.shape == (4096, 4)
    assert episodes > 4096


def test_step_makes_no_host_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    env = CartPole(32, "cpu", max_episode_steps=5)
    env.reset(seed=0)
    actions = torch.ones(32, dtype=torch.int64)

    def host_sync(*args: object, **kwargs: object) -> None:
        raise AssertionError("step() synchronised with the host")

    for name in ("__bool__", "item", "tolist", "nonzero", "__int__", "__float__", "numpy"):
        monkeypatch.setattr(torch.Tensor, name, host_sync)
    for _ in range(20):
        env.step(actions)


def test_bad_arguments_name_the_argument() -> None:
    with pytest.raises(ValueError, match="physics_dtype: got 'float16'; accepted: float32"):
        CartPole(2, "cpu", physics_dtype="float16")
    with pytest.raises(ValueError, match="max_episode_steps"):
        CartPole(2, "cpu", max_episode_steps=0)
    with pytest.raises(ValueError, match=r"action of shape \(3,\)"):
        CartPole(2, "cpu").step(torch.ones(3, dtype=torch.int64))
