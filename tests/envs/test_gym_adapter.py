"""GymnasiumEnv: gymnasium ids behind the BatchedEnv contract, SAME_STEP autoreset semantics."""

from __future__ import annotations

import io

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlpipe.config import ConfigError
from rlpipe.envs import GymnasiumEnv


def reference_envs(env_id: str, seeds: list[int], **make_kwargs: int) -> list[gym.Env]:
    envs = [gym.make(env_id, **make_kwargs) for _ in seeds]
    for env, seed in zip(envs, seeds, strict=True):
        env.reset(seed=seed)
    return envs


def test_cartpole_discrete_shapes_and_dtypes() -> None:
    env = GymnasiumEnv("CartPole-v1", 4, "cpu")
    assert isinstance(env.action_space, gym.spaces.Discrete)
    assert env.obs_shape == (4,) and env.max_episode_steps == 500
    obs = env.reset(seed=0)
    assert obs.shape == (4, 4) and obs.dtype == torch.float32
    result = env.step(torch.ones(4, dtype=torch.int64))
    assert result.obs.shape == result.final_obs.shape == (4, 4)
    assert result.reward.dtype == torch.float32 and result.reward.shape == (4,)
    assert result.terminated.dtype == result.truncated.dtype == torch.bool
    assert all(t.device == torch.device("cpu") for t in result[:5]) and not result.info
    env.close()


def test_pendulum_box_shapes_and_dtypes() -> None:
    env = GymnasiumEnv("Pendulum-v1", 3, "cpu")
    assert isinstance(env.action_space, gym.spaces.Box)
    assert env.action_shape == (1,) and env.action_dtype == torch.float32
    assert env.max_episode_steps == 200
    assert env.reset(seed=0).shape == (3, 3)
    result = env.step(torch.full((3, 1), 0.5))
    assert result.obs.shape == (3, 3) and result.obs.dtype == torch.float32
    assert (result.reward < 0).all()


def test_reset_seeds_each_env_with_seed_plus_index() -> None:
    obs = GymnasiumEnv("CartPole-v1", 3, "cpu").reset(seed=10)
    expected = [gym.make("CartPole-v1").reset(seed=10 + i)[0] for i in range(3)]
    np.testing.assert_array_equal(obs.numpy(), np.stack(expected))


def test_group_seeds_give_identical_obs_within_a_group() -> None:
    env = GymnasiumEnv("CartPole-v1", 6, "cpu")
    obs = env.reset(seed=5, group_size=3)
    assert torch.equal(obs[0], obs[1]) and torch.equal(obs[0], obs[2])
    assert torch.equal(obs[3], obs[4]) and not torch.equal(obs[0], obs[3])
    expected = gym.make("CartPole-v1").reset(seed=6)[0]
    np.testing.assert_array_equal(obs[3].numpy(), expected)
    unseeded = env.reset(group_size=2)
    assert torch.equal(unseeded[0], unseeded[1]) and not torch.equal(unseeded[1], unseeded[2])
    with pytest.raises(ValueError, match="group_size"):
        env.reset(seed=0, group_size=4)


def test_termination_final_obs_follows_same_step_semantics() -> None:
    env = GymnasiumEnv("CartPole-v1", 2, "cpu")
    env.reset(seed=0)
    refs = reference_envs("CartPole-v1", [0, 1])
    terminations = 0
    for _ in range(40):
        result = env.step(torch.ones(2, dtype=torch.int64))
        for i, ref in enumerate(refs):
            ref_obs, ref_reward, ref_term, ref_trunc, _ = ref.step(1)
            np.testing.assert_array_equal(result.final_obs[i].numpy(), ref_obs)
            assert (bool(result.terminated[i]), bool(result.truncated[i])) == (ref_term, ref_trunc)
            if ref_term or ref_trunc:
                terminations += 1
                ref_obs, _ = ref.reset()
                assert not torch.equal(result.obs[i], result.final_obs[i])
            np.testing.assert_array_equal(result.obs[i].numpy(), ref_obs)
    assert terminations >= 4


def test_truncation_final_obs_follows_same_step_semantics() -> None:
    env = GymnasiumEnv("Pendulum-v1", 2, "cpu", max_episode_steps=5)
    assert env.max_episode_steps == 5
    env.reset(seed=3)
    refs = reference_envs("Pendulum-v1", [3, 4], max_episode_steps=5)
    action = np.array([1.0], dtype=np.float32)
    for _ in range(5):
        result = env.step(torch.ones(2, 1))
        steps = [ref.step(action) for ref in refs]
    assert result.truncated.all() and not result.terminated.any()
    np.testing.assert_array_equal(result.final_obs.numpy(), np.stack([s[0] for s in steps]))
    np.testing.assert_array_equal(result.obs.numpy(), np.stack([ref.reset()[0] for ref in refs]))
    assert not env.step(torch.ones(2, 1)).truncated.any()


def test_state_dict_restores_the_rngs_and_re_resets() -> None:
    env = GymnasiumEnv("CartPole-v1", 3, "cpu")
    env.reset(seed=0)
    for _ in range(3):
        env.step(torch.zeros(3, dtype=torch.int64))
    buffer = io.BytesIO()
    torch.save(env.state_dict(), buffer)
    env.reset(seed=123)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    env.load_state_dict(state)
    first = env.last_obs.clone()
    other = GymnasiumEnv("CartPole-v1", 3, "cpu")
    other.load_state_dict(state)
    assert torch.equal(other.last_obs, first)
    actions = torch.ones(3, dtype=torch.int64)
    assert torch.equal(env.step(actions).obs, other.step(actions).obs)
    with pytest.raises(ValueError, match="sub-env RNGs"):
        GymnasiumEnv("CartPole-v1", 2, "cpu").load_state_dict(state)


def test_async_mode_steps_and_checkpoints() -> None:
    env = GymnasiumEnv("CartPole-v1", 2, "cpu", vectorization_mode="async")
    try:
        obs = env.reset(seed=0)
        expected = [gym.make("CartPole-v1").reset(seed=i)[0] for i in range(2)]
        np.testing.assert_array_equal(obs.numpy(), np.stack(expected))
        assert env.step(torch.zeros(2, dtype=torch.int64)).obs.shape == (2, 4)
        state = env.state_dict()
        env.load_state_dict(state)
        assert env.state_dict()["np_random"] != state["np_random"]  # advanced by the re-reset
    finally:
        env.close()


def test_unsupported_vectorization_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="vectorization_mode: got 'threads'"):
        GymnasiumEnv("CartPole-v1", 2, "cpu", vectorization_mode="threads")


def test_non_box_observation_space_is_refused() -> None:
    with pytest.raises(ConfigError, match="Discrete observation space; accepted: Box"):
        GymnasiumEnv("FrozenLake-v1", 2, "cpu")


def test_a_wrapped_vector_env_checkpoints() -> None:
    vec = gym.make_vec(
        "CartPole-v1",
        2,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
    )
    env = GymnasiumEnv.from_vector_env(gym.wrappers.vector.RecordEpisodeStatistics(vec), "cpu")
    env.reset(seed=0)
    state = env.state_dict()
    assert len(state["np_random"]) == 2
    env.load_state_dict(state)
    assert env.state_dict()["np_random"] != state["np_random"]  # advanced by the re-reset
    env.close()
