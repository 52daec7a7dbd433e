"""PushCube: a Franka Panda pushes a 4 cm cube into a goal disc on a table (ManiSkill PushCube-v1).

Scene: :mod:`~rlpipe.envs.tasks.push_cube.scene` (menagerie's Panda attached with MjSpec). Physics:
N copies stepped by ``mujoco.rollout``'s thread pool (``engine: mujoco``) or by MuJoCo Warp
(``engine: warp``), see :mod:`~rlpipe.envs.tasks.push_cube.physics`. Task maths:
:mod:`~rlpipe.envs.tasks.push_cube.task`.

* Control at 20 Hz (``sim_substeps=5`` × ``timestep=0.01``, ManiSkill's 100 Hz simulation).
  ``joint_delta`` (default): action ``[N, 8]`` in [-1, 1] = arm joint targets relative to the
  current joints (±0.1 rad) + gripper (−1 closed, +1 open). ``ee_delta``: action ``[N, 4]`` =
  tool displacement (±0.1 m in x, y, z; orientation held pointing down) + gripper.
* Observation ``[N, 41]`` float32 (see :func:`~rlpipe.envs.tasks.push_cube.task.observe`).
  ``obs_groups=True``: a TensorDict ``[N]`` of ``proprio`` ``[N, 28]`` (robot qpos 9, qvel 9, tool
  pose 7, goal 3: what the robot knows) and ``privileged`` ``[N, 13]`` (cube pose 7, tool→cube 3,
  cube→goal 3: what only a simulator knows), see :func:`~.task.split_groups`. ``camera`` (a
  mapping, :class:`~.policy_camera.CameraCfg`) implies the groups and adds ``camera`` uint8
  ``[N, 3·frame_stack, H, W]``: the last ``frame_stack`` RGB frames of the policy camera
  (:mod:`~.policy_camera`), oldest first, kept in the env's state; a fresh episode starts with its
  first frame repeated.
* Reward: the staged dense reward normalized to [0, 1] (1 on every step the cube is in the goal);
  ``info["success"]`` when the cube centre is within 0.1 m of the goal, ``info["is_grasped"]``
  when both fingers touch the cube. Episodes last 50 control steps; rlpipe's ``success_rate``
  counts an episode whose flag was set at any step (ManiSkill's ``success_once``).
  ``terminate_on_success=True`` ends episodes on success instead (ManiSkill's env default); with a
  short discount that makes hovering next to the cube worth more than the terminal success reward
  (0.5/step for ever vs 1 once at γ = 0.8), and PPO learns to avoid succeeding.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict

from rlpipe.envs.backends.torch_native import DEFAULT_SEED, num_groups
from rlpipe.envs.base import BatchedEnv, Obs, StepResult
from rlpipe.envs.registry import register_env
from rlpipe.envs.tasks.push_cube import task
from rlpipe.envs.tasks.push_cube.camera import StateRenderer
from rlpipe.envs.tasks.push_cube.kinematics import SiteKinematics
from rlpipe.envs.tasks.push_cube.physics import MujocoBatch, PhysicsBatch
from rlpipe.envs.tasks.push_cube.policy_camera import CameraCfg, PolicyCamera
from rlpipe.envs.tasks.push_cube.scene import REST_QPOS, ROBOT_BASE, build_model, scene_ids

__all__ = ["CONTROLS", "ENGINES", "PushCube"]

CONTROLS = ("joint_delta", "ee_delta")
ENGINES = ("mujoco", "warp")


@register_env("PushCube")
class PushCube(BatchedEnv):
    """N PushCube envs; see the module docstring. Constructor arguments are ``env.cfg`` keys."""

    max_episode_steps: int

    def __init__(
        self,
        num_envs: int,
        device: torch.device | str,
        control: str = "joint_delta",
        engine: str = "mujoco",
        max_episode_steps: int = 50,
        terminate_on_success: bool = False,
        sim_substeps: int = 5,
        timestep: float = 0.01,
        num_threads: int | None = None,
        render_size: tuple[int, int] | list[int] = (240, 320),
        robot_base_x: float = ROBOT_BASE[0],
        obs_groups: bool = False,
        camera: dict[str, Any] | None = None,
    ) -> None:
        _check_args(
            num_envs,
            control,
            engine,
            max_episode_steps,
            sim_substeps,
            timestep,
            num_threads,
            render_size,
            obs_groups,
        )
        self.camera_cfg = CameraCfg.parse(camera)
        self.obs_groups = obs_groups or self.camera_cfg is not None
        self.num_envs, self.device = num_envs, torch.device(device)
        self.control, self.engine = control, engine
        self.max_episode_steps, self.terminate_on_success = max_episode_steps, terminate_on_success
        if not isinstance(robot_base_x, float | int) or not -0.8 <= robot_base_x <= -0.4:
            raise ValueError(f"robot_base_x: got {robot_base_x!r}; accepted: metres in [-0.8, -0.4]")
        self.robot_base_x = float(robot_base_x)
        self.control_dt = sim_substeps * timestep
        self.model = build_model(timestep, visual=False, robot_base_x=self.robot_base_x)
        self.ids = scene_ids(self.model)
        self.physics = self._make_physics(sim_substeps, num_threads)
        self.dtype = self.physics.dtype
        self._setup_task_tensors()
        self._render_size = (int(render_size[0]), int(render_size[1]))
        self._renderer: StateRenderer | None = None
        self.action_space = gym.spaces.Box(
            -1.0, 1.0, (8 if control == "joint_delta" else 4,), dtype=np.float32
        )
        self.observation_space = self._space()
        self._camera = (
            None if self.camera_cfg is None else PolicyCamera(timestep, self.camera_cfg, self.robot_base_x)
        )
        self._frames: torch.Tensor | None = None
        """``uint8 [N, frame_stack, 3, H, W]``: the camera frames of the current observation."""
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(DEFAULT_SEED)
        self.elapsed = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self.goal = torch.zeros(num_envs, 3, dtype=self.dtype, device=self.device)
        self.reset()

    def _space(self) -> gym.spaces.Box | gym.spaces.Dict:
        if not self.obs_groups:
            return gym.spaces.Box(-np.inf, np.inf, (task.OBS_DIM,), dtype=np.float32)
        spaces: dict[str, gym.spaces.Space] = {
            key: gym.spaces.Box(-np.inf, np.inf, (len(columns),), dtype=np.float32)
            for key, columns in (("proprio", task.PROPRIO_COLUMNS), ("privileged", task.PRIVILEGED_COLUMNS))
        }
        if self.camera_cfg is not None:
            self.frame_channels = {"camera": 3}  # RGB: three channels per stacked frame
            spaces["camera"] = gym.spaces.Box(
                0, 255, (self.camera_cfg.channels, *self.camera_cfg.size), dtype=np.uint8
            )
        return gym.spaces.Dict(spaces)

    def _make_physics(self, substeps: int, num_threads: int | None) -> PhysicsBatch:
        if self.engine == "warp":
            from rlpipe.envs.tasks.push_cube.warp_physics import WarpBatch

            return WarpBatch(self.model, self.num_envs, substeps, self.device)
        return MujocoBatch(self.model, self.num_envs, substeps, num_threads)

    def _setup_task_tensors(self) -> None:
        ids, dev, dt = self.ids, self.device, self.dtype
        self.kin = SiteKinematics(self.model, ids.tcp_site, dev, dt)
        as_t = lambda a: torch.as_tensor(np.asarray(a), device=dev)  # noqa: E731
        self._qidx = {
            "arm": as_t(ids.arm_qpos),
            "fingers": as_t(ids.finger_qpos),
            "cube": torch.arange(ids.cube_qpos, ids.cube_qpos + 7, device=dev),
        }
        self._robot_dof = as_t(ids.robot_dof)
        self._template = as_t(self.model.qpos0).to(dt)
        self._rest = as_t(REST_QPOS).to(dt)
        self._ctrl_range = as_t(ids.arm_ctrl_range).to(dt)
        rest_qpos = self._template.clone().unsqueeze(0)
        rest_qpos[:, self._qidx["arm"]] = self._rest[:7]
        self._down = self.kin.forward(rest_qpos)[1][0]  # tool orientation at rest: pointing down

    # ------------------------------------------------------------------ BatchedEnv API

    def reset(self, seed: int | None = None, group_size: int = 1) -> Obs:
        """Fresh episodes everywhere (``group_size`` envs share a start); obs ``[N, 41]`` or groups."""
        groups = num_groups(self.num_envs, group_size)
        if seed is not None:
            self.generator.manual_seed(seed)
        qpos, goal = self._sample_start(groups)
        qpos, goal = qpos.repeat_interleave(group_size, 0), goal.repeat_interleave(group_size, 0)
        everyone = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        self.physics.reset_where(everyone, qpos, torch.zeros_like(self.physics.qvel))
        self.goal = goal
        self.elapsed = torch.zeros(self.num_envs, dtype=torch.int64, device=self.device)
        if self._camera is not None:
            self._frames = self._restart_frames(None, everyone)
        return self._package(self._observe()[0], self._frames)

    def step(self, action: torch.Tensor) -> StepResult:
        """Apply ``action [N, A]`` (clipped to [-1, 1]) for one control step; auto-reset."""
        action = self._check_action(action)
        self.physics.step(self._ctrl(action))
        final_flat, tcp_pos, cube_pos = self._observe()
        final_frames = self._advance_frames()
        solved = task.success(cube_pos, self.goal)
        reward = task.staged_reward(tcp_pos, cube_pos, self.goal, solved)
        grasp = self.physics.sensordata[:, list(self.ids.grasp_sensors)].to(self.device)
        info = {"success": solved, "is_grasped": (grasp > 0).all(dim=-1)}
        terminated = solved & self.terminate_on_success
        self.elapsed = self.elapsed + 1
        truncated = self.elapsed >= self.max_episode_steps
        done = terminated | truncated
        fresh_qpos, fresh_goal = self._sample_start(self.num_envs)
        self.physics.reset_where(done, fresh_qpos, torch.zeros_like(self.physics.qvel))
        self.goal = torch.where(done.unsqueeze(-1), fresh_goal, self.goal)
        self.elapsed = self.elapsed.masked_fill(done, 0)
        final_obs = self._package(final_flat, final_frames)
        if not self._any(done):
            self._frames = final_frames
            return StepResult(final_obs, reward, terminated, truncated, final_obs, info)
        self._frames = final_frames if self._camera is None else self._restart_frames(final_frames, done)
        obs = self._package(self._observe()[0], self._frames)
        return StepResult(obs, reward, terminated, truncated, final_obs, info)

    def state_dict(self) -> dict[str, Any]:
        """Physics (time, qpos, qvel, ctrl, sensors), goals, step counters, generator, camera frames."""
        state = {
            "physics": self.physics.get_state(),
            "goal": self.goal.cpu().clone(),
            "elapsed": self.elapsed.cpu().clone(),
            "generator": self.generator.get_state(),
        }
        if self._frames is not None:
            state["camera_frames"] = self._frames.cpu().clone()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; the following steps equal the original run bit for bit."""
        if tuple(state["goal"].shape) != (self.num_envs, 3):
            raise ValueError(
                f"state_dict holds {tuple(state['goal'].shape)[0]} envs; this PushCube has {self.num_envs}"
            )
        self.physics.set_state(state["physics"])
        self.goal = state["goal"].to(self.device, self.dtype).clone()
        self.elapsed = state["elapsed"].to(self.device, torch.int64).clone()
        self.generator.set_state(state["generator"].cpu())
        if self._frames is not None:
            frames = state.get("camera_frames")
            if frames is None or frames.shape != self._frames.shape:
                shape = None if frames is None else tuple(frames.shape)
                raise ValueError(
                    f"state_dict holds camera frames of shape {shape}; this PushCube "
                    f"needs {tuple(self._frames.shape)} (same camera and num_envs)"
                )
            self._frames = frames.to(self.device).clone()

    def render(self, env_ids: list[int] | torch.Tensor | None = None) -> np.ndarray:
        """Frames of ``env_ids`` (default: all) as ``uint8 [k, H, W, 3]`` (``render_size``)."""
        if self._renderer is None:
            height, width = self._render_size
            self._renderer = StateRenderer(
                build_model(self.model.opt.timestep, visual=True, robot_base_x=self.robot_base_x),
                width=width,
                height=height,
            )
        rows = torch.arange(self.num_envs) if env_ids is None else torch.as_tensor(env_ids).cpu()
        qpos = self.physics.qpos.cpu()[rows]
        return self._renderer.render(qpos, self.goal.cpu()[rows].unsqueeze(1))

    def close(self) -> None:
        """Stop the physics threads and free the GL contexts."""
        self.physics.close()
        if self._renderer is not None:
            self._renderer.close()
        if self._camera is not None:
            self._camera.close()

    # ------------------------------------------------------------------ pieces

    def _any(self, done: torch.Tensor) -> bool:
        """Whether observations must be recomputed after resets.

        The C engine has synced with the host already (its state is a numpy array), so asking
        costs nothing there and saves a forward-kinematics pass on most steps; elsewhere always
        recompute (no host sync) unless the camera, which renders on the host, syncs anyway.
        """
        if self._camera is None and (self.engine != "mujoco" or self.device.type != "cpu"):
            return True
        return bool(done.any())

    def _package(self, flat: torch.Tensor, frames: torch.Tensor | None) -> Obs:
        """The flat observation ``[N, 41]``, or its groups (+ ``camera`` from ``frames``)."""
        if not self.obs_groups:
            return flat
        fields = task.split_groups(flat)
        if frames is not None:
            fields["camera"] = frames.flatten(1, 2)
        return TensorDict(fields, batch_size=[self.num_envs], device=self.device)

    def _advance_frames(self) -> torch.Tensor | None:
        """The frame history with the current state's frame appended (every env drawn once)."""
        if self._camera is None or self._frames is None:
            return None
        frame = self._camera.render(self.physics.qpos, self.goal).to(self.device)
        return torch.cat((self._frames[:, 1:], frame.unsqueeze(1)), dim=1)

    def _restart_frames(self, frames: torch.Tensor | None, done: torch.Tensor) -> torch.Tensor:
        """``frames`` where the episode goes on; where ``done``, the fresh state's frame repeated.

        Called only with the camera on; ``frames=None`` (at reset) needs ``done`` everywhere.
        """
        camera = self._camera
        assert camera is not None
        rows = done.nonzero().squeeze(-1)
        fresh = camera.render(self.physics.qpos[rows.to(self.physics.device)], self.goal[rows])
        fresh = fresh.to(self.device).unsqueeze(1).expand(-1, camera.cfg.frame_stack, -1, -1, -1)
        if frames is None:
            return fresh.contiguous()
        frames = frames.clone()
        frames[rows] = fresh
        return frames

    def _sample_start(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        return task.sample_start(n, self._template, self._qidx, self._rest, self._ctrl_range, self.generator)

    def _observe(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Observation ``[N, 41]``, tool position ``[N, 3]`` and cube position ``[N, 3]``."""
        qpos = self.physics.qpos.to(self.device, copy=True)
        qvel = self.physics.qvel.to(self.device, copy=True)
        tcp_pos, tcp_rot, _, _ = self.kin.forward(qpos)
        robot_q = torch.cat((qpos[:, self._qidx["arm"]], qpos[:, self._qidx["fingers"]]), -1)
        cube = qpos[:, self._qidx["cube"]]
        obs = task.observe(robot_q, qvel[:, self._robot_dof], tcp_pos, tcp_rot, cube, self.goal, self._down)
        return obs, tcp_pos, cube[:, :3]

    def _ctrl(self, action: torch.Tensor) -> torch.Tensor:
        """Actuator targets ``[N, 8]``: 7 arm joint targets, then the finger target."""
        qpos = self.physics.qpos.to(self.device, self.dtype)
        arm = qpos[:, self._qidx["arm"]]
        action = action.to(self.dtype)
        if self.control == "joint_delta":
            targets = task.joint_delta_targets(arm, action, self._ctrl_range)
        else:
            targets = task.ee_delta_targets(
                self.kin, qpos, self._qidx["arm"], action, self._down, self._ctrl_range
            )
        gripper = task.gripper_target(action, *self.ids.gripper_range)
        return torch.cat((targets, gripper.unsqueeze(-1)), dim=-1)

    def _check_action(self, action: torch.Tensor) -> torch.Tensor:
        expected = (self.num_envs, *self.action_shape)
        if tuple(action.shape) != expected:
            raise ValueError(f"action of shape {tuple(action.shape)}; PushCube needs {expected}")
        return action.to(self.device).clamp(-1.0, 1.0)


def _check_args(
    num_envs: int,
    control: str,
    engine: str,
    max_episode_steps: int,
    sim_substeps: int,
    timestep: float,
    num_threads: int | None,
    render_size: tuple[int, int] | list[int],
    obs_groups: bool,
) -> None:
    """ValueError ``"<argument>: got X; accepted: …"`` for the first invalid argument."""

    def positive_int(value: object) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 1

    checks = (
        ("num_envs", num_envs, positive_int(num_envs), "an int >= 1"),
        ("control", control, control in CONTROLS, ", ".join(CONTROLS)),
        ("engine", engine, engine in ENGINES, ", ".join(ENGINES)),
        ("max_episode_steps", max_episode_steps, positive_int(max_episode_steps), "an int >= 1"),
        ("sim_substeps", sim_substeps, positive_int(sim_substeps), "an int >= 1"),
        (
            "timestep",
            timestep,
            isinstance(timestep, float | int) and 0 < timestep <= 0.05,
            "seconds in (0, 0.05]",
        ),
        ("num_threads", num_threads, num_threads is None or positive_int(num_threads), "an int >= 1 or null"),
        (
            "render_size",
            render_size,
            isinstance(render_size, list | tuple)
            and len(render_size) == 2
            and all(positive_int(v) for v in render_size),
            "[height, width] in pixels",
        ),
        ("obs_groups", obs_groups, isinstance(obs_groups, bool), "true, false"),
    )
    for name, value, ok, accepted in checks:
        if not ok:
            raise ValueError(f"{name}: got {value!r}; accepted: {accepted}")
