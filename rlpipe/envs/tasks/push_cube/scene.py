"""The PushCube scene as MJCF built with MjSpec: table, cube, goal marker and menagerie's Panda.

The geometry follows ManiSkill's ``PushCube-v1``: the robot base stands on the table top (z = 0)
at x = -0.615 m, the cube (half-size 2 cm) starts within ±0.1 m of the origin and the goal disc
(radius 0.1 m) lies 0.2 m in front of it. The robot is never written by hand: menagerie's Panda
(:func:`.assets.panda_spec`) is attached into the scene under the prefix ``robot/``.

Two models are compiled from the same spec: the *physics* model drops every visual-only geom
(meshes, goal disc, floor) — the Panda's bodies carry explicit inertials, so its dynamics equal
the full model's while kinematics and collision broad-phase skip ~70 geoms — and the *render*
model keeps them. Both have the same ``qpos``/``qvel``/``mocap`` layout, so one state vector drives
either.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from rlpipe.envs.tasks.push_cube.assets import panda_spec

__all__ = [
    "CUBE_HALF_SIZE",
    "GOAL_RADIUS",
    "REST_QPOS",
    "ROBOT_BASE",
    "SceneIds",
    "build_model",
    "scene_ids",
    "scene_spec",
]

ROBOT_BASE = (-0.615, 0.0, 0.0)
"""Position of the Panda's base (link0) in the world, as in ManiSkill's table scene."""
CUBE_HALF_SIZE = 0.02
"""Half edge of the cube in metres."""
GOAL_RADIUS = 0.1
"""Radius of the goal region: success when the cube centre is closer (in xy) to the goal."""
REST_QPOS = (0.0, np.pi / 8, 0.0, -5 * np.pi / 8, 0.0, 3 * np.pi / 4, np.pi / 4, 0.04, 0.04)
"""ManiSkill's Panda rest keyframe: 7 arm joints then the two finger joints (open)."""
VISUAL_GROUP = 2
"""Geom group of menagerie's visual meshes (``class="visual"``)."""
PREFIX = "robot/"
TABLE_HALF = (0.65, 0.6, 0.02)
TABLE_CENTRE = (-0.15, 0.0, -0.02)


@dataclass(frozen=True)
class SceneIds:
    """Addresses into ``qpos``/``qvel``/``ctrl``/``sensordata`` of a compiled PushCube model."""

    arm_qpos: np.ndarray
    """``[7]`` qpos addresses of the arm joints."""
    finger_qpos: np.ndarray
    """``[2]`` qpos addresses of the finger joints."""
    robot_dof: np.ndarray
    """``[9]`` qvel addresses of the arm and finger joints."""
    cube_qpos: int
    """First qpos address of the cube's free joint (position 3, then quaternion 4)."""
    cube_dof: int
    """First qvel address of the cube's free joint."""
    arm_ctrl_range: np.ndarray
    """``[7, 2]`` control range of the arm's position actuators (radians)."""
    gripper_ctrl: int
    """Actuator index of the gripper (finger target in metres)."""
    gripper_range: tuple[float, float]
    """Control range of the gripper actuator."""
    tcp_site: int
    """Site id of the tool centre point (between the fingertips)."""
    goal_mocap: int
    """Mocap index of the goal marker."""
    grasp_sensors: tuple[int, int]
    """sensordata addresses of the left/right finger ↔ cube contact flags."""


def build_model(timestep: float, visual: bool, robot_base_x: float = ROBOT_BASE[0]) -> mujoco.MjModel:
    """Compile the PushCube scene; ``visual=False`` gives the stripped physics model.

    ``robot_base_x`` moves the Panda's base along x (ManiSkill: -0.615 m).
    """
    return scene_spec(timestep, visual, robot_base_x).compile()


def scene_spec(timestep: float, visual: bool, robot_base_x: float = ROBOT_BASE[0]) -> mujoco.MjSpec:
    """The uncompiled scene of :func:`build_model`, for variants that add geoms (same state layout)."""
    scene = mujoco.MjSpec()
    scene.modelname = "push_cube"
    opt = scene.option
    opt.timestep = timestep
    opt.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    opt.iterations, opt.ls_iterations = 10, 10
    world = scene.worldbody
    world.add_geom(
        name="table",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=TABLE_HALF,
        pos=TABLE_CENTRE,
        rgba=[0.62, 0.5, 0.38, 1],
    )
    frame = world.add_frame(pos=[robot_base_x, *ROBOT_BASE[1:]])
    robot = panda_spec()
    for body in robot.bodies:  # the joint controllers balance gravity, as ManiSkill's do
        body.gravcomp = 1.0
    scene.attach(robot, frame=frame, prefix=PREFIX)
    cube = world.add_body(name="cube", pos=[0, 0, CUBE_HALF_SIZE])
    cube.add_freejoint(name="cube")
    # contype 3: touches the table and the fingertip pads (conaffinity 3) and the hand capsule
    cube.add_geom(
        name="cube",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=[CUBE_HALF_SIZE] * 3,
        rgba=[0.85, 0.15, 0.1, 1],
        contype=3,
        conaffinity=1,
        condim=3,
    )
    goal = world.add_body(name="goal", mocap=True, pos=[0.2, 0, 1e-3])
    for side in ("left", "right"):
        scene.add_sensor(
            name=f"{side}_grasp",
            type=mujoco.mjtSensor.mjSENS_CONTACT,
            objtype=mujoco.mjtObj.mjOBJ_BODY,
            objname=f"{PREFIX}{side}_finger",
            reftype=mujoco.mjtObj.mjOBJ_BODY,
            refname="cube",
            intprm=[1, 1, 1],
        )
    if visual:
        _add_visuals(scene, goal)
    else:
        _strip_visuals(scene)
    return scene


def _add_visuals(scene: mujoco.MjSpec, goal: mujoco.MjsBody) -> None:
    """Goal target (red/white discs, no collision), a floor, lights and a skybox."""
    for radius, height, rgba in (
        (GOAL_RADIUS, 1e-3, [0.9, 0.1, 0.1, 1]),
        (GOAL_RADIUS * 0.8, 1.5e-3, [1, 1, 1, 1]),
        (GOAL_RADIUS * 0.6, 2e-3, [0.9, 0.1, 0.1, 1]),
        (GOAL_RADIUS * 0.4, 2.5e-3, [1, 1, 1, 1]),
        (GOAL_RADIUS * 0.2, 3e-3, [0.9, 0.1, 0.1, 1]),
    ):
        goal.add_geom(
            type=mujoco.mjtGeom.mjGEOM_CYLINDER,
            size=[radius, height, 0],
            rgba=rgba,
            contype=0,
            conaffinity=0,
            group=VISUAL_GROUP,
        )
    world = scene.worldbody
    world.add_geom(
        name="floor",
        type=mujoco.mjtGeom.mjGEOM_PLANE,
        size=[3, 3, 0.1],
        pos=[0, 0, -0.75],
        rgba=[0.35, 0.4, 0.45, 1],
        contype=0,
        conaffinity=0,
        group=VISUAL_GROUP,
    )
    world.add_light(pos=[0, 0, 2.0], dir=[0, 0, -1], type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL)
    world.add_light(pos=[1.0, 1.0, 1.5], dir=[-1, -1, -1.5])
    scene.visual.headlight.ambient = [0.35, 0.35, 0.35]
    scene.visual.headlight.diffuse = [0.5, 0.5, 0.5]


def _strip_visuals(scene: mujoco.MjSpec) -> None:
    """Delete the visual-only geoms (and the meshes only they used) from ``scene``."""
    for geom in list(scene.geoms):
        if geom.group == VISUAL_GROUP and geom.contype == 0 and geom.conaffinity == 0:
            scene.delete(geom)
    used = {geom.meshname for geom in scene.geoms if geom.type == mujoco.mjtGeom.mjGEOM_MESH}
    for mesh in list(scene.meshes):
        if mesh.name not in used:
            scene.delete(mesh)


def scene_ids(model: mujoco.MjModel) -> SceneIds:
    """Resolve joint, actuator, site, mocap and sensor addresses of a compiled PushCube model."""
    arm = [model.joint(f"{PREFIX}joint{i}") for i in range(1, 8)]
    fingers = [model.joint(f"{PREFIX}finger_joint{i}") for i in (1, 2)]
    arm_act = [model.actuator(f"{PREFIX}actuator{i}") for i in range(1, 8)]
    gripper = model.actuator(f"{PREFIX}actuator8")
    cube = model.joint("cube")
    goal_body = model.body("goal")
    return SceneIds(
        arm_qpos=np.array([int(j.qposadr[0]) for j in arm]),
        finger_qpos=np.array([int(j.qposadr[0]) for j in fingers]),
        robot_dof=np.array([int(j.dofadr[0]) for j in arm + fingers]),
        cube_qpos=int(cube.qposadr[0]),
        cube_dof=int(cube.dofadr[0]),
        arm_ctrl_range=np.stack([a.ctrlrange for a in arm_act]).astype(np.float64),
        gripper_ctrl=int(gripper.id),
        gripper_range=(float(gripper.ctrlrange[0]), float(gripper.ctrlrange[1])),
        tcp_site=int(model.site(f"{PREFIX}gripper").id),
        goal_mocap=int(goal_body.mocapid[0]),
        grasp_sensors=(int(model.sensor("left_grasp").adr[0]), int(model.sensor("right_grasp").adr[0])),
    )
