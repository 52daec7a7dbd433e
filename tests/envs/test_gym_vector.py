"""gymnasium's own vectorized CartPole behind the BatchedEnv contract: same-step resets, exact resume."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch

from rlpipe.config import ConfigError
from rlpipe.envs import build_env
from rlpipe.envs.backends.envpool_env import EnvpoolEnv
from rlpipe.envs.backends.gym_adapter import GymnasiumEnv
from rlpipe.envs.backends.gym_vector import GymnasiumVectorEnv, native_vector_class
from rlpipe.envs.registry import build_eval_env
from rlpipe.envs.rendering import RenderUnavailable


def _actions(steps: int, num_envs: int, seed: int = 0) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).integers(0, 2, size=(steps, num_envs)))


def test_one_env_sees_gymnasiums_own_trajectory_without_the_wasted_reset_step() -> None:
    """gymnasium's CartPoleVectorEnv resets one step late; ours resets in the same step, same draws."""
    raw = gymnasium.make_vec("CartPole-v1", num_envs=1, vectorization_mode="vector_entry_point")
    ours = GymnasiumVectorEnv("CartPole-v1", 1, "cpu")
    assert np.array_equal(ours.reset(seed=7).numpy(), raw.reset(seed=7)[0])
    episodes = 0
    for action in _actions(400, 1):
        obs, reward, terminated, truncated, _ = raw.step(action.numpy())
        step = ours.step(action)
        assert step.reward.item() == reward[0] and step.terminated.item() == terminated[0]
        assert step.truncated.item() == truncated[0]
        assert np.array_equal(step.final_obs.numpy(), obs)  # the true last observation
        if terminated[0] or truncated[0]:  # gymnasium's extra step: action ignored, reward 0, next start
            obs, reward, *_ = raw.step(1 - action.numpy())
            assert reward[0] == 0.0
            episodes += 1
        assert np.array_equal(step.obs.numpy(), obs)
    assert episodes >= 5


def test_reset_rows_draw_what_gymnasiums_next_step_would_draw() -> None:
    raw = gymnasium.make_vec("CartPole-v1", num_envs=6, vectorization_mode="vector_entry_point")
    ours = GymnasiumVectorEnv("CartPole-v1", 6, "cpu")
    raw.reset(seed=3)
    ours.reset(seed=3)
    for action in _actions(60, 6, seed=1):
        obs, _, terminated, truncated, _ = raw.step(action.numpy())
        step = ours.step(action)
        done = terminated | truncated
        assert np.array_equal(step.final_obs.numpy(), obs)
        assert np.array_equal(step.terminated.numpy(), terminated)
        if done.any():  # gymnasium resets them in its next step, whatever the actions: look there
            after = raw.step(np.zeros(6, dtype=np.int64))[0]
            assert np.array_equal(step.obs.numpy()[done], after[done])
            return
    pytest.fail("no episode ended in 60 random steps")


def test_done_envs_restart_in_the_same_step() -> None:
    env = GymnasiumVectorEnv("CartPole-v1", 8, "cpu", max_episode_steps=20)
    env.reset(seed=0)
    ends = 0
    for action in _actions(100, 8):
        step = env.step(action)
        done = step.terminated | step.truncated
        ends += int(done.sum())
        assert torch.equal(step.obs[~done], step.final_obs[~done])
        assert (step.obs[done].abs() <= 0.05).all()  # a fresh start: every coordinate in ±0.05
        assert step.obs.dtype == step.reward.dtype == torch.float32 and step.obs.shape == (8, 4)
    assert ends >= 40  # at most 20 steps an episode: every env finished at least 5 times
    assert env.max_episode_steps == 20


def test_state_dict_resumes_the_same_episodes_bit_for_bit() -> None:
    env = GymnasiumVectorEnv("CartPole-v1", 4, "cpu")
    env.reset(seed=11)
    actions = _actions(300, 4, seed=2)
    for action in actions[:50]:
        env.step(action)
    state = env.state_dict()
    first = [env.step(action) for action in actions[50:]]
    other = GymnasiumVectorEnv("CartPole-v1", 4, "cpu")
    other.load_state_dict(state)
    second = [other.step(action) for action in actions[50:]]
    assert sum(int(s.terminated.sum()) for s in first) > 0  # resets happened after the snapshot
    for a, b in zip(first, second, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(a[:5], b[:5], strict=True))
    with pytest.raises(ValueError, match="state_dict holds 4 envs; this env has 2"):
        GymnasiumVectorEnv("CartPole-v1", 2, "cpu").load_state_dict(state)


def test_group_reset_starts_each_group_identically() -> None:
    env = GymnasiumVectorEnv("CartPole-v1", 6, "cpu")
    obs = env.reset(seed=5, group_size=3)
    assert torch.equal(obs[0], obs[1]) and torch.equal(obs[0], obs[2]) and torch.equal(obs[3], obs[5])
    assert not torch.equal(obs[0], obs[3])
    again = GymnasiumVectorEnv("CartPole-v1", 6, "cpu").reset(seed=5, group_size=3)
    assert torch.equal(obs, again)


def test_auto_prefers_gymnasiums_vectorized_class_over_envpool() -> None:
    assert native_vector_class("CartPole-v1") == "gymnasium.envs.classic_control.cartpole:CartPoleVectorEnv"
    assert native_vector_class("Pendulum-v1") is None
    assert isinstance(build_env("CartPole-v1", 2, "cpu"), GymnasiumVectorEnv)
    assert isinstance(build_env("CartPole-v1", 2, "cpu", backend="gymnasium"), GymnasiumVectorEnv)
    limited = build_env("CartPole-v1", 2, "cpu", {"max_episode_steps": 9})
    assert isinstance(limited, GymnasiumVectorEnv) and limited.max_episode_steps == 9
    sync = build_env("CartPole-v1", 2, "cpu", {"vectorization_mode": "sync"})
    assert isinstance(sync, GymnasiumEnv)
    assert isinstance(build_env("CartPole-v1", 2, "cpu", backend="envpool"), EnvpoolEnv)
    # a key only envpool takes keeps auto on envpool
    assert isinstance(build_env("CartPole-v1", 2, "cpu", {"num_threads": 1}), EnvpoolEnv)


def test_bad_settings_are_one_line_config_errors() -> None:
    with pytest.raises(ConfigError) as bad_mode:
        build_env("CartPole-v1", 2, "cpu", {"vectorization_mode": "gpu"})
    assert str(bad_mode.value) == (
        "env.cfg.vectorization_mode: got 'gpu'; accepted: vector_entry_point, sync, async"
    )
    with pytest.raises(ConfigError) as unsupported:
        build_env("Pendulum-v1", 2, "cpu", {"vectorization_mode": "vector_entry_point"}, "gymnasium")
    assert str(unsupported.value).startswith(
        "env.cfg.vectorization_mode: vector_entry_point is not available for 'Pendulum-v1'; "
        "accepted for CartPole-v0, CartPole-v1"
    )
    with pytest.raises(ConfigError) as unknown:
        build_env("CartPole-v1", 2, "cpu", {"pole_length": 2.0}, "gymnasium")
    assert str(unknown.value).startswith("env.cfg.pole_length: unknown argument of CartPole-v1")
    assert "accepted: max_episode_steps, render_mode, sutton_barto_reward" in str(unknown.value)
    with pytest.raises(ConfigError, match=r"^env.cfg.num_envs: set by trainer.num_envs, not env.cfg$"):
        build_env("CartPole-v1", 2, "cpu", {"num_envs": 3}, "gymnasium")


def test_video_keeps_the_vectorized_env_and_says_how_to_film() -> None:
    """The eval env is the same with video on or off (same episodes); the video itself is refused."""
    env, problem = build_eval_env("CartPole-v1", 2, "cpu", {}, video=True)
    assert isinstance(env, GymnasiumVectorEnv) and problem is None
    with pytest.raises(RenderUnavailable, match="env.cfg.vectorization_mode: sync draws each env"):
        env.render([0])
    sync, _ = build_eval_env("CartPole-v1", 2, "cpu", {"vectorization_mode": "sync"}, video=True)
    assert isinstance(sync, GymnasiumEnv) and sync.vec_env.render_mode == "rgb_array"
