"""Pendulum against gymnasium's Pendulum-v1: dynamics, rewards, clipping, the 200-step limit."""

from __future__ import annotations

import io
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlpipe.envs import Pendulum


def torques(seed: int, steps: int) -> np.ndarray:
    """``[steps, 1]`` float32 torques in [-3, 3]: some beyond ±2 to exercise the clipping."""
    return np.random.default_rng(seed).uniform(-3, 3, size=(steps, 1)).astype(np.float32)


def gym_twin(env: Pendulum, index: int = 0, **make_kwargs: float) -> gym.Env:
    """A gymnasium Pendulum-v1 placed in the state of env ``index`` (float64)."""
    ref = gym.make("Pendulum-v1", **make_kwargs)
    ref.reset(seed=0)
    ref.unwrapped.state = env.state[index].to(torch.float64).numpy().copy()
    return ref


def run_against_gymnasium(
    physics_dtype: str, steps: int, seed: int, g: float = 10.0, actions: np.ndarray | None = None
) -> tuple[int, str]:
    """Step both envs with the same torques; return (steps taken, how the episode ended)."""
    env = Pendulum(1, "cpu", physics_dtype=physics_dtype, g=g)
    env.reset(seed=seed)
    ref = gym_twin(env, g=g)
    for t, action in enumerate(torques(seed, steps) if actions is None else actions):
        result = env.step(torch.from_numpy(action[None]))
        ref_obs, ref_reward, ref_term, ref_trunc, _ = ref.step(action)
        np.testing.assert_allclose(result.final_obs[0].numpy(), ref_obs, atol=1e-5, rtol=0)
        np.testing.assert_allclose(result.reward[0].item(), ref_reward, atol=1e-5, rtol=0)
        flags = (bool(result.terminated[0]), bool(result.truncated[0]))
        assert flags == (ref_term, ref_trunc), f"step {t + 1}"
        if ref_term or ref_trunc:
            return t + 1, "terminated" if ref_term else "truncated"
        assert torch.equal(result.obs, result.final_obs)
    return steps, "running"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_float64_matches_gymnasium_up_to_the_200_step_truncation(seed: int) -> None:
    assert run_against_gymnasium("float64", 300, seed) == (200, "truncated")


def test_float64_matches_gymnasium_at_the_speed_limit() -> None:
    spin = np.full((300, 1), 2.5, dtype=np.float32)
    assert run_against_gymnasium("float64", 300, seed=0, actions=spin) == (200, "truncated")
    env = Pendulum(1, "cpu")
    env.reset(seed=0)
    for action in spin[:100]:
        env.step(torch.from_numpy(action[None]))
    assert env.state[0, 1].item() == pytest.approx(8.0)


def test_float32_matches_gymnasium_over_a_short_horizon() -> None:
    assert run_against_gymnasium("float32", 50, seed=5) == (50, "running")


def test_gravity_argument_matches_gymnasium_g() -> None:
    assert run_against_gymnasium("float64", 300, seed=0, g=9.81) == (200, "truncated")
    assert not torch.equal(step_once(Pendulum(4, "cpu", g=9.81)), step_once(Pendulum(4, "cpu")))


def step_once(env: Pendulum) -> torch.Tensor:
    env.reset(seed=0)
    return env.step(torch.zeros(4, 1)).obs


def test_spaces_shapes_and_dtypes_match_gymnasium() -> None:
    ref = gym.make("Pendulum-v1")
    env = Pendulum(6, "cpu")
    assert env.action_space == ref.action_space
    assert env.observation_space == ref.observation_space
    assert env.max_episode_steps == ref.spec.max_episode_steps == 200
    assert env.action_dtype == torch.float32 and env.action_shape == (1,)
    obs = env.reset(seed=0)
    assert obs.shape == (6, 3) and obs.dtype == torch.float32
    result = env.step(torch.zeros(6, 1))
    assert result.reward.shape == (6,) and result.reward.dtype == torch.float32
    assert (result.reward <= 0).all()
    assert result.terminated.dtype == result.truncated.dtype == torch.bool


def test_initial_states_cover_the_gymnasium_ranges() -> None:
    env = Pendulum(4096, "cpu")
    env.reset(seed=0)
    th, thdot = env.state.unbind(-1)
    assert th.min() >= -math.pi and th.max() < math.pi and th.abs().max() > 3.1
    assert thdot.min() >= -1 and thdot.max() < 1 and thdot.abs().max() > 0.99


def test_truncation_auto_resets_with_the_true_final_obs() -> None:
    env = Pendulum(8, "cpu", physics_dtype="float64")
    env.reset(seed=2)
    twins = [gym_twin(env, i) for i in range(8)]
    actions = torques(2, 200)
    for t, action in enumerate(actions):
        result = env.step(torch.from_numpy(np.repeat(action[None], 8, axis=0)))
        refs = [twin.step(action) for twin in twins]
        assert not result.terminated.any()
        assert bool(result.truncated.all()) == (t == 199) == bool(result.truncated.any())
    np.testing.assert_allclose(result.final_obs.numpy(), np.stack([r[0] for r in refs]), atol=1e-5)
    assert not torch.allclose(result.obs, result.final_obs)
    assert result.obs[:, 2].abs().max() <= 1
    assert (env.elapsed == 0).all()
    assert not env.step(torch.zeros(8, 1)).truncated.any()


def test_group_reset_shares_start_states_within_groups_only() -> None:
    env = Pendulum(6, "cpu")
    obs = env.reset(seed=3, group_size=3)
    assert torch.equal(obs[0], obs[1]) and torch.equal(obs[0], obs[2])
    assert torch.equal(obs[3], obs[5]) and not torch.equal(obs[0], obs[3])
    with pytest.raises(ValueError, match="group_size"):
        env.reset(group_size=4)


def test_state_dict_round_trip_continues_bit_for_bit() -> None:
    actions = torch.rand(60, 16, 1, generator=torch.Generator().manual_seed(0)) * 4 - 2
    env = Pendulum(16, "cpu", max_episode_steps=7)
    env.reset(seed=1)
    for action in actions[:10]:
        env.step(action)
    buffer = io.BytesIO()
    torch.save(env.state_dict(), buffer)
    expected = [tensor for action in actions[10:] for tensor in env.step(action)[:5]]
    buffer.seek(0)
    resumed = Pendulum(16, "cpu", max_episode_steps=7)
    resumed.load_state_dict(torch.load(buffer, weights_only=True))
    got = [tensor for action in actions[10:] for tensor in resumed.step(action)[:5]]
    assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))


def test_bad_arguments_name_the_argument() -> None:
    with pytest.raises(ValueError, match="physics_dtype"):
        Pendulum(2, "cpu", physics_dtype="bfloat16")
    with pytest.raises(ValueError, match="g: got 'strong'"):
        Pendulum(2, "cpu", g="strong")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="action of shape"):
        Pendulum(2, "cpu").step(torch.zeros(2))
