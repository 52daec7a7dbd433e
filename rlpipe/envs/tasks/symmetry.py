"""Mirror functions of the symmetric tasks, for ``algorithm.cfg.symmetry.function``.

Each follows rsl_rl's contract: ``mirror(obs=None, actions=None, env=None)`` returns
``(obs, actions)`` with the originals first and their mirrored copies after them (``[2·B, ...]``);
a ``None`` input gives a ``None`` output. Every mirror here is an involution (mirroring twice is
the identity).

* Pendulum (rlpipe's ``Pendulum`` and gymnasium's ``Pendulum-v1``): the reflection θ → −θ.
  Observation ``[B, 3]`` ``(cos θ, sin θ, θ̇)`` → ``(cos θ, −sin θ, −θ̇)``; torque ``[B, 1]`` → −torque.
* CartPole (rlpipe's ``CartPole`` and gymnasium's ``CartPole-v1``): left ↔ right. Observation
  ``[B, 4]`` ``(x, ẋ, θ, θ̇)`` → its negation; action ``[B]`` push left (0) ↔ push right (1).
* Ant (gymnasium's and envpool's ``Ant-v5``): the reflection y → −y through the sagittal plane (the
  ant walks along +x), read off ``ant.xml``. Legs 1 (+x, +y) ↔ 4 (+x, −y) and 2 (−x, +y) ↔ 3 (−x, −y)
  swap. A reflection reverses the sense of a rotation: a hip's axis z is its own image, so a hip
  angle changes sign; ankle 1's axis (−1, 1, 0) reflects to (−1, −1, 0), ankle 4's axis (1, 1, 0)
  reversed, so the two reversals cancel and an ankle angle keeps its sign. The torso's position
  ``(x, y, z)`` → ``(x, −y, z)``, its quaternion ``(w, x, y, z)`` → ``(w, −x, y, −z)``, its linear
  velocity ``(vx, vy, vz)`` → ``(vx, −vy, vz)``, its angular velocity (a pseudo-vector) ``(ωx, ωy,
  ωz)`` → ``(−ωx, ωy, −ωz)``; each body's ``cfrc_ext`` (torque, force) goes to its mirror body with
  the torque's signs ``(−, +, −)`` and the force's ``(+, −, +)``. Observation ``[B, 27 | 29 | 105
  | 107]``, action ``[B, 8]``: see :func:`ant_mirror`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from rlpipe.envs.base import BatchedEnv

__all__ = ["ant_mirror", "cartpole_mirror", "pendulum_mirror"]

PENDULUM_OBS_SIGNS = (1.0, -1.0, -1.0)
"""Sign of each observation entry under θ → −θ: cos θ is even, sin θ and θ̇ are odd."""


def pendulum_mirror(
    obs: torch.Tensor | None = None, actions: torch.Tensor | None = None, env: BatchedEnv | None = None
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Pendulum's reflection θ → −θ: obs ``[B, 3]`` → ``[2B, 3]``, torque ``[B, 1]`` → ``[2B, 1]``."""
    mirrored_obs = None
    if obs is not None:
        signs = obs.new_tensor(PENDULUM_OBS_SIGNS)
        mirrored_obs = torch.cat([obs, obs * signs])
    mirrored_actions = None if actions is None else torch.cat([actions, -actions])
    return mirrored_obs, mirrored_actions


def cartpole_mirror(
    obs: torch.Tensor | None = None, actions: torch.Tensor | None = None, env: BatchedEnv | None = None
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """CartPole's left ↔ right: obs ``[B, 4]`` → ``[2B, 4]`` negated, actions ``[B]`` 0 ↔ 1 → ``[2B]``."""
    mirrored_obs = None if obs is None else torch.cat([obs, -obs])
    mirrored_actions = None if actions is None else torch.cat([actions, 1 - actions])
    return mirrored_obs, mirrored_actions


# Ant-v5. qpos = (x, y, z, qw, qx, qy, qz, hip_1, ankle_1, hip_2, ankle_2, hip_3, ankle_3, hip_4, ankle_4)
# and qvel = (vx, vy, vz, ωx, ωy, ωz, the 8 joint rates in the same order); actuators drive
# (hip_4, ankle_4, hip_1, ankle_1, hip_2, ankle_2, hip_3, ankle_3). A table holds (source, sign) per
# entry: entry i of the mirrored vector is sign · entry source of the original.
ANT_JOINTS = ((6, -1.0), (7, 1.0), (4, -1.0), (5, 1.0), (2, -1.0), (3, 1.0), (0, -1.0), (1, 1.0))
"""The 8 joints in qpos order: leg k ↔ leg 5 − k, hip angles negated, ankle angles kept."""
ANT_ACTIONS = ((2, -1.0), (3, 1.0), (0, -1.0), (1, 1.0), (6, -1.0), (7, 1.0), (4, -1.0), (5, 1.0))
"""The 8 actuators in ``ant.xml``'s order (hip_4, ankle_4, hip_1, …): the joints' rule."""
ANT_FREE_POS = ((0, 1.0), (1, -1.0), (2, 1.0), (3, 1.0), (4, -1.0), (5, 1.0), (6, -1.0))
"""The free joint's qpos ``(x, y, z, qw, qx, qy, qz)``: y, qx and qz negated."""
ANT_FREE_VEL = ((0, 1.0), (1, -1.0), (2, 1.0), (3, -1.0), (4, 1.0), (5, -1.0))
"""The free joint's qvel ``(vx, vy, vz, ωx, ωy, ωz)``: vy negated; ω is a pseudo-vector, ωx and ωz negated."""
ANT_BODIES = (0, 10, 11, 12, 7, 8, 9, 4, 5, 6, 1, 2, 3)
"""The mirror of bodies 1..13, counted from the torso (0): leg 1's three bodies ↔ leg 4's, 2's ↔ 3's."""
ANT_CFRC_SIGNS = (-1.0, 1.0, -1.0, 1.0, -1.0, 1.0)
"""A body's ``cfrc_ext`` ``(torque, force)``: the torque is a pseudo-vector, the force a vector."""


def _shifted(table: tuple[tuple[int, float], ...], offset: int) -> list[tuple[int, float]]:
    """``table`` for a vector placed ``offset`` entries further on."""
    return [(source + offset, sign) for source, sign in table]


def _ant_obs_table(positions: bool, contact_forces: bool) -> tuple[tuple[int, float], ...]:
    """``(source, sign)`` per entry of Ant-v5's observation, with or without x, y and ``cfrc_ext[1:]``."""
    skipped = 0 if positions else 2
    qpos = _shifted(ANT_FREE_POS[skipped:], -skipped) + _shifted(ANT_JOINTS, 7 - skipped)
    qvel = [*ANT_FREE_VEL, *_shifted(ANT_JOINTS, 6)]
    table = qpos + _shifted(tuple(qvel), len(qpos))
    if contact_forces:
        cfrc = tuple((6 * body + k, sign) for body in ANT_BODIES for k, sign in enumerate(ANT_CFRC_SIGNS))
        table += _shifted(cfrc, len(table))
    return tuple(table)


ANT_OBS_TABLES = {len(t): t for t in (_ant_obs_table(p, c) for p in (False, True) for c in (False, True))}
"""Observation width → its table: 27 (``qpos[2:]``, ``qvel``), 29 (x, y kept), 105, 107 (``cfrc_ext[1:]``)."""


def _apply(values: torch.Tensor, table: tuple[tuple[int, float], ...]) -> torch.Tensor:
    """``values`` ``[..., W]`` → ``[..., W]`` with entry i = sign_i · ``values[..., source_i]``."""
    index = torch.tensor([source for source, _ in table], device=values.device)
    signs = torch.tensor([sign for _, sign in table], dtype=values.dtype, device=values.device)
    return values[..., index] * signs


def ant_mirror(
    obs: torch.Tensor | None = None, actions: torch.Tensor | None = None, env: BatchedEnv | None = None
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Ant-v5's reflection y → −y: obs ``[B, W]`` → ``[2B, W]``, actions ``[B, 8]`` → ``[2B, 8]``.

    ``W`` is 105 for the default observation (``qpos[2:]`` 13, ``qvel`` 14, ``cfrc_ext[1:]`` 78),
    27 without contact forces (``include_cfrc_ext_in_observation=False``, envpool's
    ``use_contact_force=False``), 107 and 29 with x, y kept
    (``exclude_current_positions_from_observation=False``). Another width is a ``ValueError``.
    """
    mirrored_obs = None
    if obs is not None:
        table = ANT_OBS_TABLES.get(obs.shape[-1])
        if table is None or obs.dim() < 2:
            raise ValueError(
                f"ant_mirror: observation of shape {tuple(obs.shape)} (width {obs.shape[-1]}); "
                f"accepted: [B, W] with W in {sorted(ANT_OBS_TABLES)}"
            )
        mirrored_obs = torch.cat([obs, _apply(obs, table)])
    mirrored_actions = None
    if actions is not None:
        if actions.dim() < 2 or actions.shape[-1] != len(ANT_ACTIONS):
            raise ValueError(
                f"ant_mirror: actions of shape {tuple(actions.shape)} "
                f"(width {actions.shape[-1]}); accepted: [B, {len(ANT_ACTIONS)}]"
            )
        mirrored_actions = torch.cat([actions, _apply(actions, ANT_ACTIONS)])
    return mirrored_obs, mirrored_actions
