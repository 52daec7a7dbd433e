"""Mirror functions of the symmetric tasks, for ``algorithm.cfg.symmetry.function``.

Each follows rsl_rl's contract: ``mirror(obs=None, actions=None, env=None)`` returns
``(obs, actions)`` with the originals first and their mirrored copies after them (``[2·B, ...]``);
a ``None`` input gives a ``None`` output. Every mirror here is an involution (mirroring twice is
the identity).

* Pendulum (rlpipe's ``Pendulum`` and gymnasium's ``Pendulum-v1``): the reflection θ → −θ.
  Observation ``[B, 3]`` ``(cos θ, sin θ, θ̇)`` → ``(cos θ, −sin θ, −θ̇)``; torque ``[B, 1]`` → −torque.
* CartPole (rlpipe's ``CartPole`` and gymnasium's ``CartPole-v1``): left ↔ right. Observation
  ``[B, 4]`` ``(x, ẋ, θ, θ̇)`` → its negation; action ``[B]`` push left (0) ↔ push right (1).
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["cartpole_mirror", "pendulum_mirror"]

PENDULUM_OBS_SIGNS = (1.0, -1.0, -1.0)
"""Sign of each observation entry under θ → −θ: cos θ is even, sin θ and θ̇ are odd."""


def pendulum_mirror(
    obs: torch.Tensor | None = None, actions: torch.Tensor | None = None, env: Any = None
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Pendulum's reflection θ → −θ: obs ``[B, 3]`` → ``[2B, 3]``, torque ``[B, 1]`` → ``[2B, 1]``."""
    mirrored_obs = None
    if obs is not None:
        signs = obs.new_tensor(PENDULUM_OBS_SIGNS)
        mirrored_obs = torch.cat([obs, obs * signs])
    mirrored_actions = None if actions is None else torch.cat([actions, -actions])
    return mirrored_obs, mirrored_actions


def cartpole_mirror(
    obs: torch.Tensor | None = None, actions: torch.Tensor | None = None, env: Any = None
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """CartPole's left ↔ right: obs ``[B, 4]`` → ``[2B, 4]`` negated, actions ``[B]`` 0 ↔ 1 → ``[2B]``."""
    mirrored_obs = None if obs is None else torch.cat([obs, -obs])
    mirrored_actions = None if actions is None else torch.cat([actions, 1 - actions])
    return mirrored_obs, mirrored_actions
