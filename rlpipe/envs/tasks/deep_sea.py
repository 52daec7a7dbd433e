"""DeepSea: bsuite's deep-exploration task (Osband et al. 2019, arXiv:1908.03568), deterministic.

An ``size × size`` grid; every episode starts at the top-left cell and descends one row per step, so
it lasts exactly ``size`` steps. One action moves one column right, the other one column left (both
clipped to the grid): with ``randomize_actions`` (bsuite's default) which of 0/1 means right is drawn
per cell, once, from ``mapping_seed``, so no single action is right everywhere and each cell must be
learned; without it action 1 is always right. Moving right costs ``move_cost / size``; moving right
from the last column —
possible only on the last row, after ``size − 1`` moves right in a row — finds the treasure (+1).
The treasure path is the only one worth taking (return ``1 − move_cost``), and the only one that
pays anything at all: every other episode returns ``−(rights · move_cost / size) ≤ 0``, so left is
the locally best action everywhere. A policy that dithers (an ε-greedy or Gaussian-noise policy, or
PPO's sampling from a near-uniform softmax) finds it with probability 2^−size per episode and learns
to go left; exploration that seeks novel cells reaches it (RND: ``algorithm.cfg.rnd``).

As bsuite's ``deep_sea`` with ``deterministic=True`` (no reward noise, no slipping).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from rlpipe.envs.backends.torch_native import TorchEnv
from rlpipe.envs.registry import register_env

__all__ = ["DeepSea"]


@register_env("DeepSea")
class DeepSea(TorchEnv):
    """``size`` steps down a ``size × size`` grid; the treasure waits right of the bottom-right cell.

    State ``[N, 2]``: row and column. Observation ``[N, size·size]`` float32: the one-hot cell
    ``row·size + column`` (all zeros once the episode ended). Action ``[N]`` int64 in {0, 1}: right where
    it equals ``right_action[row, column]`` (all ones without ``randomize_actions``), else left.
    Reward ``[N]`` float32: ``−move_cost/size`` for a move right, +1 more for a move right from the
    last column. Terminated after ``size`` steps; never truncated.
    """

    state_dim = 2
    action_space = gym.spaces.Discrete(2)

    def __init__(
        self,
        num_envs: int,
        device: torch.device | str,
        size: int = 10,
        move_cost: float = 0.01,
        randomize_actions: bool = True,
        mapping_seed: int = 0,
    ) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 2:
            raise ValueError(f"size: got {size!r}; accepted: an int >= 2")
        if isinstance(move_cost, bool) or not isinstance(move_cost, int | float) or move_cost < 0:
            raise ValueError(f"move_cost: got {move_cost!r}; accepted: a number >= 0")
        if not isinstance(randomize_actions, bool):
            raise ValueError(f"randomize_actions: got {randomize_actions!r}; accepted: true or false")
        if isinstance(mapping_seed, bool) or not isinstance(mapping_seed, int):
            raise ValueError(f"mapping_seed: got {mapping_seed!r}; accepted: an int")
        self.size, self.move_cost = size, float(move_cost)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (size * size,), dtype=np.float32)
        right = torch.ones(size, size, dtype=torch.int64)
        if randomize_actions:  # a CPU generator: every device draws the same mapping
            right = torch.randint(0, 2, (size, size), generator=torch.Generator().manual_seed(mapping_seed))
        self.right_action = right.to(device)
        """``[size, size]`` int64: the action that moves right in each cell (row, column)."""
        super().__init__(num_envs, device, max_episode_steps=None)

    def _initial_state(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``[n, 2]`` zeros: the top-left cell (no randomness)."""
        return torch.zeros(n, 2, dtype=self.dtype, device=self.device)

    def _dynamics(
        self, state: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One row down, one column right or left; the move cost and the treasure."""
        row, col = state.unbind(-1)
        last = self.size - 1
        right = action == self.right_action[row.long().clamp(max=last), col.long()]
        reward = right.float() * (-self.move_cost / self.size) + (right & (col == last)).float()
        col = torch.where(right, (col + 1).clamp(max=last), (col - 1).clamp(min=0))
        row = row + 1
        return torch.stack((row, col), dim=-1), reward, row >= self.size

    def _observe(self, state: torch.Tensor) -> torch.Tensor:
        """``[N, size·size]``: the one-hot cell, zeros past the last row."""
        row, col = state.long().unbind(-1)
        inside = row < self.size
        cell = torch.where(inside, row * self.size + col, torch.zeros_like(row))
        one_hot = torch.nn.functional.one_hot(cell, self.size * self.size).float()
        return one_hot * inside.unsqueeze(-1)
