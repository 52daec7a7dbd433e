"""The runner's env adapter draws random episode lengths after the collector's first reset."""

from __future__ import annotations

import torch
from _rsl_rl_fixtures import LENGTH, ReachVecEnv

from rlpipe.rsl_rl.env import RslRlRunnerEnv


class ResettingReach(ReachVecEnv):
    """A ``reset()`` that restarts every episode, as Isaac Lab's and mjlab's wrappers do."""

    def reset(self) -> tuple:
        self.episode_length_buf.zero_()
        return self.get_observations(), {}


def test_random_lengths_survive_the_first_reset_and_are_drawn_once() -> None:
    torch.manual_seed(0)
    env = RslRlRunnerEnv(ResettingReach(num_envs=64))
    env.random_lengths_after_reset = True
    env.reset(seed=1)
    lengths = env.env.episode_length_buf
    assert lengths.unique().numel() > 1 and int(lengths.max()) < LENGTH
    env.reset(seed=2)  # later resets are the env's own
    assert not env.env.episode_length_buf.any() and not env.random_lengths_after_reset
