"""A user's own simulator for the examples: CartPole pushed by a wind force that scripts can change.

Nothing here is registered in rlpipe: the examples build it and hand it to ``rlpipe.Trainer``.
"""

from __future__ import annotations

import torch

from rlpipe.envs import CartPole


class WindyCartPole(CartPole):
    """CartPole whose cart feels a constant extra force ``wind`` (newtons; 0 = plain CartPole)."""

    def __init__(self, num_envs: int, device: torch.device | str, wind: float = 0.0) -> None:
        super().__init__(num_envs, device)
        self.wind = wind

    def _dynamics(self, state: torch.Tensor, action: torch.Tensor):
        next_state, reward, terminated = super()._dynamics(state, action)
        # wind accelerates the cart: Δv = τ·F/m with the cart+pole mass of 1.1 kg
        next_state[:, 1] += 0.02 * self.wind / 1.1
        return next_state, reward, terminated
