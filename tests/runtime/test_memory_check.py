"""The memory check: the estimate worked out by hand, and refusals naming the key with tiny fake limits."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlpipe.config import ConfigError, load
from rlpipe.runtime.memory import check_memory, estimate

OBS = gym.spaces.Box(-1, 1, (4,), np.float32)
ACT = gym.spaces.Discrete(2)
SMALL = [
    "trainer.num_envs=4",
    "trainer.buffer_size=8",
    "trainer.num_eval_envs=2",
    "algorithm.cfg.batch_size=16",
]


def _cfg(*extra: str):
    return load("params.yaml", [*SMALL, *extra])


def _free(nbytes: int, gpu: int | None = None):
    return lambda device: gpu if gpu is not None and device.type == "cuda" else nbytes


def test_the_estimate_by_hand():
    """N=4, T=8, obs 4 float32 (16 B), Discrete action (int64, 8 B): a step is 16 + 3·8 + 32 = 72 B."""
    needs = {need.what: need.bytes for need in estimate(_cfg(), OBS, ACT)}
    assert needs["rollout"] == 2 * 4 * 9 * 72
    assert needs["store staging"] == 1 * 4 * 9 * 72  # store.queue_size 1
    assert needs["eval envs"] == 2 * 2 * 72
    # actor [64, 64] from 4 inputs to 2 logits: 5·64 + 65·64 + 65·2 parameters, 16 B each
    assert needs["actor"] == 16 * (5 * 64 + 65 * 64 + 65 * 2)
    assert needs["critic"] == 16 * (5 * 64 + 65 * 64 + 65 * 1)
    # rows = max(N, minibatch) = max(4, min(16, 32)) = 16; widest layers 64 (actor) + 64 (critic)
    assert needs["activations"] == 4 * 2 * 16 * 64 * 2


def test_num_envs_beyond_memory_is_refused_before_the_env_exists():
    with pytest.raises(ConfigError) as info:
        check_memory(_cfg("trainer.num_envs=1000000000"), available=_free(10**9))
    message = str(info.value)
    assert message.startswith("trainer.num_envs: the run needs about ")
    assert message.endswith(" but 1.0 GB is available; lower trainer.num_envs")
    assert "rollout " in message and "\n" not in message


def test_a_store_queue_beyond_memory_names_store_queue_size():
    with pytest.raises(
        ConfigError, match=r"^store\.queue_size: the run needs about .* lower store\.queue_size$"
    ):
        check_memory(_cfg("store.queue_size=100000000000000000000"), OBS, ACT, available=_free(24 * 10**9))


def test_rnd_widths_beyond_memory_name_the_rnd_key():
    cfg = _cfg("algorithm.cfg.rnd={hidden_sizes: [1000000000]}")
    # predictor: (4 + 1)·1e9 + (1e9 + 1)·16 parameters of 16 B: 336 GB
    with pytest.raises(
        ConfigError,
        match=r"^algorithm.cfg.rnd.hidden_sizes: the run needs about .*RND "
        r"predictor 336.0 GB",
    ):
        check_memory(cfg, OBS, ACT, available=_free(24 * 10**9))


def test_policy_widths_name_the_policy_key():
    cfg = _cfg("policy.critic.network_cfg.hidden_sizes=[100000, 100000]")
    with pytest.raises(
        ConfigError,
        match=r"^policy.critic.network_cfg.hidden_sizes: .* lower "
        r"policy.critic.network_cfg.hidden_sizes$",
    ):
        check_memory(cfg, OBS, ACT, available=_free(10**9))


def test_observation_size_counts_once_the_env_is_known():
    """64×64 RGB frames: the same N and T fit with one float but not with the frames."""
    cfg = _cfg("trainer.num_envs=4096", "trainer.buffer_size=64")
    frames = gym.spaces.Dict({"pixels": gym.spaces.Box(0, 255, (3, 64, 64), np.uint8)})
    check_memory(cfg, available=_free(2 * 10**9))
    with pytest.raises(ConfigError, match=r"^trainer.num_envs: the run needs about 9\.9 GB"):
        check_memory(cfg, frames, ACT, available=_free(2 * 10**9))


def test_on_cuda_the_device_terms_meet_the_gpu_memory():
    cfg = _cfg("trainer.num_envs=100000", "trainer.buffer_size=100")
    check_memory(cfg, OBS, ACT, torch.device("cpu"), available=_free(10**12))
    with pytest.raises(ConfigError, match=r" but 1.0 GB is free on the GPU; lower trainer.num_envs$"):
        check_memory(cfg, OBS, ACT, torch.device("cuda"), available=_free(10**12, gpu=10**9))


def test_the_default_run_fits():
    check_memory(load("params.yaml"), OBS, ACT, available=_free(2 * 10**9))
