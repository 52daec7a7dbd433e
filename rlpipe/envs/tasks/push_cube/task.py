"""PushCube's task logic as pure batched torch functions.

Start states, controllers, observation, ManiSkill's staged dense reward and success. No simulator
calls here; shapes use N envs.

References: ManiSkill ``mani_skill/envs/tasks/tabletop/push_cube.py`` (PushCube-v1: reset
distribution, ``compute_dense_reward``, ``evaluate``) and its ``pd_joint_delta_pos`` /
``pd_ee_delta_pos`` controllers (±0.1 rad / ±0.1 m per control step).
"""

from __future__ import annotations

import torch

from rlpipe.envs.tasks.push_cube.kinematics import SiteKinematics, matrix_to_quat
from rlpipe.envs.tasks.push_cube.scene import CUBE_HALF_SIZE, GOAL_RADIUS

__all__ = [
    "JOINT_DELTA_SCALE",
    "EE_DELTA_SCALE",
    "OBS_DIM",
    "PRIVILEGED_COLUMNS",
    "PROPRIO_COLUMNS",
    "ee_delta_targets",
    "gripper_target",
    "joint_delta_targets",
    "observe",
    "split_groups",
    "staged_reward",
    "success",
]

JOINT_DELTA_SCALE = 0.1
"""Radians per control step at action ±1 (``joint_delta``)."""
EE_DELTA_SCALE = 0.1
"""Metres per control step at action ±1 (``ee_delta``)."""
REST_NOISE = 0.02
"""Std of the Gaussian noise added to the arm's rest joints at reset (ManiSkill's default)."""
CUBE_SPAWN = 0.1
"""Cube centre spawns uniformly in ``[-0.1, 0.1]^2`` (x, y)."""
GOAL_OFFSET = 0.1 + GOAL_RADIUS
"""The goal lies this far in +x from the cube's start."""
PUSH_OFFSET = CUBE_HALF_SIZE + 0.005
"""Where the tool should be to push: behind the cube (−x) by this much."""
DLS_DAMPING = 0.05
"""Damping λ of the damped-least-squares IK of ``ee_delta``."""
IK_ITERATIONS = 3
"""Newton steps of the ``ee_delta`` IK (one linearization drifts by centimetres per 0.1 m)."""
OBS_DIM = 9 + 9 + 7 + 7 + 3 + 3 + 3
"""qpos 9, qvel 9, tcp pose 7, cube pose 7, goal 3, tcp→cube 3, cube→goal 3."""
PROPRIO_COLUMNS = (*range(0, 25), *range(32, 35))
"""The 28 columns of :func:`observe` a real robot knows: qpos 9, qvel 9, tool pose 7 (its own
kinematics) and the goal 3 (the command it is given)."""
PRIVILEGED_COLUMNS = (*range(25, 32), *range(35, 41))
"""The 13 columns only a simulator knows: cube pose 7, tool→cube 3, cube→goal 3."""


def sample_start(
    n: int,
    template: torch.Tensor,
    ids: dict[str, torch.Tensor],
    rest: torch.Tensor,
    joint_range: torch.Tensor,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw ``n`` start states: ``qpos [n, nq]`` and the goal ``[n, 3]``.

    The arm at rest + N(0, 0.02²) noise, open fingers, the cube upright at a uniform xy on the
    table, the goal 0.2 m in front of the cube.
    """
    # drawn in float64 whatever the engine's dtype, so both engines start from the same states
    dev, dtype = template.device, torch.float64
    noise = torch.randn(n, 7, generator=generator, device=dev, dtype=dtype) * REST_NOISE
    low, high = joint_range[:, 0].to(dtype), joint_range[:, 1].to(dtype)
    arm = torch.minimum(torch.maximum(rest[:7].to(dtype) + noise, low), high).to(template.dtype)
    xy = (torch.rand(n, 2, generator=generator, device=dev, dtype=dtype) * 2 - 1) * CUBE_SPAWN
    xy = xy.to(template.dtype)
    qpos = template.expand(n, -1).clone()
    qpos[:, ids["arm"]] = arm
    qpos[:, ids["fingers"]] = rest[7:]
    cube = torch.cat(
        (xy, xy.new_full((n, 1), CUBE_HALF_SIZE), xy.new_tensor([1.0, 0.0, 0.0, 0.0]).expand(n, 4)), dim=-1
    )
    qpos[:, ids["cube"]] = cube
    goal = torch.cat((xy[:, :1] + GOAL_OFFSET, xy[:, 1:], xy.new_full((n, 1), 1e-3)), dim=-1)
    return qpos, goal


def gripper_target(action: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """Last action column in [-1, 1] → finger target ``[N]`` in ``[low, high]`` (−1 closed)."""
    return low + (action[:, -1] + 1) * 0.5 * (high - low)


def joint_delta_targets(
    arm_qpos: torch.Tensor, action: torch.Tensor, ctrl_range: torch.Tensor
) -> torch.Tensor:
    """``pd_joint_delta_pos``: arm targets ``[N, 7]`` = current joints + 0.1 rad × action."""
    target = arm_qpos + JOINT_DELTA_SCALE * action[:, :7]
    return torch.minimum(torch.maximum(target, ctrl_range[:, 0]), ctrl_range[:, 1])


def ee_delta_targets(
    kin: SiteKinematics,
    qpos: torch.Tensor,
    arm: torch.Tensor,
    action: torch.Tensor,
    target_rot: torch.Tensor,
    ctrl_range: torch.Tensor,
) -> torch.Tensor:
    """``pd_ee_delta_pos``: arm targets ``[N, 7]`` moving the tool by 0.1 m × ``action[:, :3]``.

    The tool's orientation is held at ``target_rot [3, 3]``.

    Inverse kinematics by ``IK_ITERATIONS`` damped-least-squares Newton steps on the ``[N, 6, 7]``
    Jacobian (``dq = Jᵀ (J Jᵀ + λ² I)⁻¹ e``) from the current joints ``qpos [N, nq]``, whose arm
    joints sit at the qpos addresses ``arm [7]``.
    """
    q = qpos.clone()
    target_pos = kin.forward(q)[0] + EE_DELTA_SCALE * action[:, :3]
    eye = torch.eye(6, dtype=q.dtype, device=q.device)
    for _ in range(IK_ITERATIONS):
        tcp_pos, tcp_rot, jac = kin.jacobian(q)
        rot_err = target_rot @ tcp_rot.transpose(1, 2)
        skew = 0.5 * (rot_err - rot_err.transpose(1, 2))
        omega = torch.stack((skew[:, 2, 1], skew[:, 0, 2], skew[:, 1, 0]), dim=-1)
        err = torch.cat((target_pos - tcp_pos, omega), dim=-1).unsqueeze(-1)
        jjt = jac @ jac.transpose(1, 2) + DLS_DAMPING**2 * eye
        dq = (jac.transpose(1, 2) @ torch.linalg.solve(jjt, err)).squeeze(-1)
        q[:, arm] = torch.minimum(torch.maximum(q[:, arm] + dq, ctrl_range[:, 0]), ctrl_range[:, 1])
    return q[:, arm]


def observe(
    robot_qpos: torch.Tensor,
    robot_qvel: torch.Tensor,
    tcp_pos: torch.Tensor,
    tcp_rot: torch.Tensor,
    cube_pose: torch.Tensor,
    goal: torch.Tensor,
    rest_rot: torch.Tensor,
) -> torch.Tensor:
    """State observation ``[N, 41]`` float32.

    Robot qpos ``[N, 9]`` and qvel ``[N, 9]``, tool position + quaternion ``[N, 7]``, cube
    position + quaternion ``[N, 7]``, goal ``[N, 3]``, tool→cube ``[N, 3]``, cube→goal ``[N, 3]``.
    The tool's quaternion is its rotation relative to the rest orientation ``rest_rot [3, 3]``
    (pointing down): the world quaternion of a down-pointing tool has w ≈ 0, where the sign
    convention w ≥ 0 would flip the observation between ±q from one step to the next.
    """
    cube_pos = cube_pose[:, :3]
    relative = rest_rot.transpose(0, 1) @ tcp_rot
    parts = (
        robot_qpos,
        robot_qvel,
        tcp_pos,
        matrix_to_quat(relative),
        cube_pose,
        goal,
        cube_pos - tcp_pos,
        goal - cube_pos,
    )
    return torch.cat([p.to(torch.float32) for p in parts], dim=-1)


def split_groups(obs: torch.Tensor) -> dict[str, torch.Tensor]:
    """Observation ``[N, 41]`` → ``proprio [N, 28]`` and ``privileged [N, 13]`` (new tensors).

    ``proprio`` = columns :data:`PROPRIO_COLUMNS` in order, ``privileged`` =
    :data:`PRIVILEGED_COLUMNS`: together a permutation of the 41 columns.
    """
    return {
        "proprio": torch.cat((obs[:, 0:25], obs[:, 32:35]), dim=-1),
        "privileged": torch.cat((obs[:, 25:32], obs[:, 35:41]), dim=-1),
    }


def success(cube_pos: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
    """``[N]`` bool: the cube centre lies within ``GOAL_RADIUS`` of the goal in the table plane."""
    return (cube_pos[:, :2] - goal[:, :2]).norm(dim=-1) < GOAL_RADIUS


def staged_reward(
    tcp_pos: torch.Tensor, cube_pos: torch.Tensor, goal: torch.Tensor, solved: torch.Tensor
) -> torch.Tensor:
    """ManiSkill PushCube-v1's normalized dense reward ``[N]`` float32 in [0, 1].

    reach = 1 − tanh(5 · |tool − push point|), the push point being 2.5 cm behind the cube;
    once the tool is within 1 cm of it, + place = 1 − tanh(5 · |cube − goal|_xy); 3 on success;
    everything divided by 3.
    """
    push_point = cube_pos.clone()
    push_point[:, 0] -= PUSH_OFFSET
    reach_dist = (push_point - tcp_pos).norm(dim=-1)
    reward = 1 - torch.tanh(5 * reach_dist)
    place = 1 - torch.tanh(5 * (cube_pos[:, :2] - goal[:, :2]).norm(dim=-1))
    reward = reward + place * (reach_dist < 0.01)
    reward = torch.where(solved, torch.full_like(reward, 3.0), reward)
    return (reward / 3).to(torch.float32)
