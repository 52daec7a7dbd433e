"""Batched forward kinematics and Jacobian of one MuJoCo site, in torch.

MuJoCo computes kinematics one ``MjData`` at a time; an env stepping N copies needs the tool pose
of all N at once (for observations, rewards and end-effector control), on the env's device and for
either engine. :class:`SiteKinematics` reads the serial chain from the world to a site out of an
``MjModel`` (body offsets, hinge axes and anchors, ``qpos0``) and evaluates it for a batch
``qpos [N, nq]`` with MuJoCo's own conventions (``mj_kinematics``: a hinge rotates its body by
``qpos - qpos0`` about its axis through its anchor), so the result equals ``site_xpos`` /
``site_xmat`` to float rounding.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np
import torch

__all__ = ["SiteKinematics", "matrix_to_quat"]


@dataclass(frozen=True)
class _Link:
    """One body of the chain: its offset from the parent and its hinge joints (in body frame)."""

    pos: torch.Tensor  # [3]
    rot: torch.Tensor  # [3, 3]
    hinges: tuple[tuple[int, int, torch.Tensor, torch.Tensor, float], ...]
    """(qpos address, dof column, axis [3], anchor [3], qpos0) per hinge joint."""


class SiteKinematics:
    """World pose and Jacobian of ``site`` for batches of ``qpos``.

    Only hinge joints (and fixed bodies) may lie between the world and the site; anything else
    raises ValueError. ``dofs`` lists the chain's hinge qpos addresses in root-to-tip order; the
    Jacobian's columns follow it.
    """

    def __init__(
        self, model: mujoco.MjModel, site: int, device: torch.device | str, dtype: torch.dtype = torch.float64
    ) -> None:
        self.device, self.dtype = torch.device(device), dtype
        chain, body = [], int(model.site_bodyid[site])
        while body != 0:
            chain.append(self._link(model, body))
            body = int(model.body_parentid[body])
        self.links = chain[::-1]
        self.dofs = [h[0] for link in self.links for h in link.hinges]
        self.site_pos = self._tensor(model.site_pos[site])
        self.site_rot = self._tensor(_quat_to_matrix_np(model.site_quat[site]))

    def _tensor(self, array: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.asarray(array, dtype=np.float64), device=self.device).to(self.dtype)

    def _link(self, model: mujoco.MjModel, body: int) -> _Link:
        hinges = []
        start, count = int(model.body_jntadr[body]), int(model.body_jntnum[body])
        for joint in range(start, start + count):
            if model.jnt_type[joint] != mujoco.mjtJoint.mjJNT_HINGE:
                raise ValueError(f"joint {model.joint(joint).name!r} on the chain is not a hinge")
            adr = int(model.jnt_qposadr[joint])
            hinges.append(
                (
                    adr,
                    len(hinges),
                    self._tensor(model.jnt_axis[joint]),
                    self._tensor(model.jnt_pos[joint]),
                    float(model.qpos0[adr]),
                )
            )
        return _Link(
            self._tensor(model.body_pos[body]),
            self._tensor(_quat_to_matrix_np(model.body_quat[body])),
            tuple(hinges),
        )

    def forward(self, qpos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Site pose and hinge frames of ``qpos [N, nq]``.

        Returns site position ``[N, 3]``, rotation ``[N, 3, 3]``, and per chain dof the world
        axis ``[N, D, 3]`` and anchor ``[N, D, 3]`` (D = ``len(self.dofs)``).
        """
        qpos = qpos.to(self.device, self.dtype)
        n = qpos.shape[0]
        pos = torch.zeros(n, 3, device=self.device, dtype=self.dtype)
        rot = torch.eye(3, device=self.device, dtype=self.dtype).repeat(n, 1, 1)
        axes, anchors = [], []
        for link in self.links:
            pos = pos + _matvec(rot, link.pos)
            rot = _matmul(rot, link.rot)
            for adr, _, axis, anchor, ref in link.hinges:
                world_anchor = pos + _matvec(rot, anchor)
                axes.append(_matvec(rot, axis))
                anchors.append(world_anchor)
                rot = _matmul(rot, _axis_angle(axis, qpos[:, adr] - ref))
                pos = world_anchor - _matvec(rot, anchor)
        site_pos = pos + _matvec(rot, self.site_pos)
        empty = pos.new_zeros(n, 0, 3)
        return (
            site_pos,
            _matmul(rot, self.site_rot),
            torch.stack(axes, 1) if axes else empty,
            torch.stack(anchors, 1) if anchors else empty,
        )

    def jacobian(self, qpos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Site pose and Jacobian of ``qpos [N, nq]``.

        Returns site position ``[N, 3]``, rotation ``[N, 3, 3]`` and the Jacobian ``[N, 6, D]``
        (rows: linear velocity, then angular velocity, as ``mj_jacSite``).
        """
        site_pos, site_rot, axes, anchors = self.forward(qpos)
        linear = torch.linalg.cross(axes, site_pos.unsqueeze(1) - anchors, dim=-1)
        return site_pos, site_rot, torch.cat((linear, axes), dim=-1).transpose(1, 2)


def _matvec(rot: torch.Tensor, vec: torch.Tensor) -> torch.Tensor:
    """``rot [N, 3, 3]`` times ``vec [3]`` or ``[N, 3]`` → ``[N, 3]``.

    Elementwise: tiny matrices are far faster this way than through batched GEMM.
    """
    return (rot * vec.unsqueeze(-2)).sum(-1)


def _matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a [N, 3, 3]`` times ``b [3, 3]`` or ``[N, 3, 3]`` → ``[N, 3, 3]`` (elementwise)."""
    return (a.unsqueeze(-1) * b.unsqueeze(-3)).sum(-2)


def _axis_angle(axis: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """Rotation matrices ``[N, 3, 3]`` about the unit ``axis [3]`` by ``angle [N]`` (Rodrigues)."""
    x, y, z = axis.unbind()
    zero = torch.zeros((), dtype=axis.dtype, device=axis.device)
    k = torch.stack((zero, -z, y, z, zero, -x, -y, x, zero)).view(3, 3)
    s, c = torch.sin(angle).view(-1, 1, 1), torch.cos(angle).view(-1, 1, 1)
    return torch.eye(3, dtype=axis.dtype, device=axis.device) + s * k + (1 - c) * (k @ k)


def _quat_to_matrix_np(quat: np.ndarray) -> np.ndarray:
    out = np.zeros(9)
    mujoco.mju_quat2Mat(out, np.asarray(quat, dtype=np.float64))
    return out.reshape(3, 3)


def matrix_to_quat(rot: torch.Tensor) -> torch.Tensor:
    """Rotation matrices ``[N, 3, 3]`` → unit quaternions ``[N, 4]`` (w, x, y, z) with ``w >= 0``.

    Uses the largest-diagonal branch of Shepperd's method for every row without a host sync.
    """
    m = rot
    trace = m[:, 0, 0] + m[:, 1, 1] + m[:, 2, 2]
    candidates = torch.stack(
        (
            torch.stack(
                (1 + trace, m[:, 2, 1] - m[:, 1, 2], m[:, 0, 2] - m[:, 2, 0], m[:, 1, 0] - m[:, 0, 1]), -1
            ),
            torch.stack(
                (
                    m[:, 2, 1] - m[:, 1, 2],
                    1 + m[:, 0, 0] - m[:, 1, 1] - m[:, 2, 2],
                    m[:, 0, 1] + m[:, 1, 0],
                    m[:, 0, 2] + m[:, 2, 0],
                ),
                -1,
            ),
            torch.stack(
                (
                    m[:, 0, 2] - m[:, 2, 0],
                    m[:, 0, 1] + m[:, 1, 0],
                    1 - m[:, 0, 0] + m[:, 1, 1] - m[:, 2, 2],
                    m[:, 1, 2] + m[:, 2, 1],
                ),
                -1,
            ),
            torch.stack(
                (
                    m[:, 1, 0] - m[:, 0, 1],
                    m[:, 0, 2] + m[:, 2, 0],
                    m[:, 1, 2] + m[:, 2, 1],
                    1 - m[:, 0, 0] - m[:, 1, 1] + m[:, 2, 2],
                ),
                -1,
            ),
        ),
        1,
    )  # [N, 4 branches, 4]
    diag = torch.stack((trace, m[:, 0, 0], m[:, 1, 1], m[:, 2, 2]), -1)
    best = diag.argmax(-1)
    quat = candidates.gather(1, best.view(-1, 1, 1).expand(-1, 1, 4)).squeeze(1)
    quat = quat / quat.norm(dim=-1, keepdim=True)
    return torch.where(quat[:, :1] < 0, -quat, quat)
