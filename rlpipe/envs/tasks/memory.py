"""RepeatFirst: a memory task — repeat at the last step the cue shown only at the first.

Only a policy with memory can beat chance: every observation after the first is identical for
both cues, so a feedforward policy scores 0.5 at best while a recurrent one can score 1.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from rlpipe.envs.backends.torch_native import TorchEnv
from rlpipe.envs.registry import register_env

__all__ = ["RepeatFirst"]


@register_env("RepeatFirst")
class RepeatFirst(TorchEnv):
    """Episodes of ``length`` steps; the reward is 1 when the last action equals the first cue.

    State ``[N, 2]``: cue in {0, 1} and the step index t. Observation ``[N, 3]``: the cue as ±1
    at t = 0 (else 0), a "first step" flag and a "answer now" flag (t = length − 1). Action ``[N]``
    int64 in {0, 1}. Reward ``[N]``: 1.0 at the last step when the action equals the cue, else 0;
    the episode then terminates, so the return of an episode is its success (0 or 1).
    """

    state_dim = 2
    action_space = gym.spaces.Discrete(2)
    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), dtype=np.float32)

    def __init__(self, num_envs: int, device: torch.device | str, length: int = 4) -> None:
        if isinstance(length, bool) or not isinstance(length, int) or length < 2:
            raise ValueError(f"length: got {length!r}; accepted: an int >= 2")
        self.length = length
        super().__init__(num_envs, device, max_episode_steps=None)

    def _initial_state(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """Cue ~ Bernoulli(0.5), t = 0: ``[n, 2]``."""
        cue = torch.randint(0, 2, (n,), generator=generator, device=self.device).to(self.dtype)
        return torch.stack((cue, torch.zeros_like(cue)), dim=-1)

    def _dynamics(
        self, state: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Advance t; reward a correct answer at the last step, which ends the episode."""
        cue, t = state.unbind(-1)
        last = t == self.length - 1
        correct = action.to(self.dtype) == cue
        reward = (last & correct).to(torch.float32)
        return torch.stack((cue, t + 1), dim=-1), reward, last

    def _observe(self, state: torch.Tensor) -> torch.Tensor:
        """``[N, 3]``: (cue as ±1 at t = 0, t == 0, t == length − 1) as float32."""
        cue, t = state.unbind(-1)
        first = t == 0
        signal = torch.where(first, 2.0 * cue - 1.0, torch.zeros_like(cue))
        return torch.stack((signal, first.to(cue.dtype), (t == self.length - 1).to(cue.dtype)), -1).float()
