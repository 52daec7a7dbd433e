"""The runner's env: rlpipe's rsl_rl ``VecEnv`` adapter that can start episodes at random lengths."""

from __future__ import annotations

from typing import Protocol

import torch
from tensordict import TensorDict

from rlpipe.envs.backends.rsl_rl_env import RslRlEnv

__all__ = ["RslRlRunnerEnv", "randomize_episode_lengths"]


class EpisodeClock(Protocol):
    """An rsl_rl ``VecEnv``'s step counters: ``episode_length_buf`` ``[N]`` and its limit."""

    episode_length_buf: torch.Tensor
    max_episode_length: int | float


def randomize_episode_lengths(env: EpisodeClock) -> None:
    """Draw each env's ``episode_length_buf`` uniformly below ``max_episode_length`` (rsl_rl's way).

    Time-outs then fall at different steps instead of all together. Uses torch's seeded global RNG.
    """
    env.episode_length_buf = torch.randint_like(env.episode_length_buf, high=int(env.max_episode_length))


class RslRlRunnerEnv(RslRlEnv):
    """:class:`RslRlEnv` whose next :meth:`reset` can be followed by random episode lengths.

    The collector resets every env before its first rollout; rsl_rl's ``init_at_random_ep_len``
    draws the lengths after that reset, so that the reset (which zeroes them in Isaac Lab and mjlab)
    does not undo the draw.
    """

    random_lengths_after_reset = False
    """Set by ``learn(init_at_random_ep_len=True)``; cleared once applied."""

    def reset(self, seed: int | None = None, group_size: int = 1) -> TensorDict:
        """:meth:`RslRlEnv.reset`, then the random lengths when asked."""
        obs = super().reset(seed, group_size)
        if self.random_lengths_after_reset:
            randomize_episode_lengths(self.env)
            self.random_lengths_after_reset = False
        return obs
