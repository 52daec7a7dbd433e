"""PushCube's observation groups and policy camera: the split, the frames, exact resumes, bad input.

The camera needs an offscreen OpenGL context, and ``MUJOCO_GL`` must be set before mujoco loads:
those checks (the ``_check_*`` functions) run in one fresh interpreter with ``MUJOCO_GL=egl``, started
once for the module, which reports each check's outcome to the test that asserts it.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
import torch

from rlpipe import config
from rlpipe.config import ConfigError
from rlpipe.envs import PushCube, build_env
from rlpipe.envs.tasks.push_cube import task
from rlpipe.envs.tasks.push_cube.policy_camera import PolicyCamera
from rlpipe.trainer import Trainer

N = 4
ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def make(n: int = N, **cfg) -> PushCube:
    env = build_env("PushCube", n, "cpu", {"num_threads": 1, **cfg})
    assert isinstance(env, PushCube)
    return env


def actions(steps: int, seed: int, n: int = N) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.rand(n, 8, generator=gen) * 2 - 1 for _ in range(steps)]


CHECKS = ("_check_frames", "_check_round_trip", "_check_student")
"""The EGL checks, run in this order in one interpreter (``_check_student`` takes the work folder)."""


@pytest.fixture(scope="module")
def egl(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """``{check: "" or its traceback, "work": folder}`` of :data:`CHECKS` run with ``MUJOCO_GL=egl``."""
    work = tmp_path_factory.mktemp("egl")
    module = Path(__file__).stem
    code = (
        f"import sys; sys.path.insert(0, {str(HERE)!r}); import {module}; {module}._run_checks({str(work)!r})"
    )
    env = {**os.environ, "MUJOCO_GL": "egl", "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600, cwd=work
    )
    report = work / "report.json"
    if not report.is_file() and "camera: no working OpenGL" in result.stderr:
        pytest.skip("no EGL on this machine")
    assert result.returncode == 0 and report.is_file(), result.stderr[-3000:]
    return {**json.loads(report.read_text()), "work": work}


def passed(egl: dict[str, object], check: str) -> None:
    """Assert ``check`` passed in the EGL interpreter (skip where the machine has no EGL)."""
    outcome = egl[check]
    if "camera: no working OpenGL" in outcome:
        pytest.skip("no EGL on this machine")
    assert outcome == "", outcome[-3000:]


def _run_checks(work: str) -> None:
    """Run :data:`CHECKS`, each to its end or its first failure; the outcomes go to ``work/report.json``."""
    outcomes = {}
    for name in CHECKS:
        try:
            check = globals()[name]
            check(Path(work)) if name == "_check_student" else check()
            outcomes[name] = ""
        except BaseException:  # noqa: BLE001  # a failed assert, an error or an exit: the test reports it
            outcomes[name] = traceback.format_exc()
    (Path(work) / "report.json").write_text(json.dumps(outcomes))


# ---------------------------------------------------------------- groups (no rendering)


def test_groups_are_a_permutation_of_the_flat_observation():
    assert sorted(task.PROPRIO_COLUMNS + task.PRIVILEGED_COLUMNS) == list(range(task.OBS_DIM))
    flat, grouped = make(max_episode_steps=3), make(max_episode_steps=3, obs_groups=True)
    assert grouped.obs_spec == {"proprio": (28,), "privileged": (13,)} and grouped.obs_dtypes == {}
    assert flat.obs_spec == (41,)

    def check(obs_flat: torch.Tensor, obs: object) -> None:
        assert obs["proprio"].dtype == obs["privileged"].dtype == torch.float32
        assert torch.equal(obs["proprio"], obs_flat[:, list(task.PROPRIO_COLUMNS)])
        assert torch.equal(obs["privileged"], obs_flat[:, list(task.PRIVILEGED_COLUMNS)])

    check(flat.reset(seed=4), grouped.reset(seed=4))
    for t, action in enumerate(actions(4, 0), start=1):  # crosses the auto-reset at step 3
        a, b = flat.step(action), grouped.step(action)
        check(a.obs, b.obs)
        check(a.final_obs, b.final_obs)
        assert torch.equal(a.reward, b.reward)
        assert b.truncated.all() == (t == 3) and (b.final_obs is b.obs) == (t != 3)


def test_proprio_holds_the_robot_and_the_goal_privileged_the_cube():
    env = make(obs_groups=True)
    obs = env.reset(seed=1)
    proprio, privileged = obs["proprio"], obs["privileged"]
    torch.testing.assert_close(proprio[:, 25:28], env.goal.float())  # the command
    cube = env.physics.qpos[:, env.ids.cube_qpos : env.ids.cube_qpos + 7].float()
    torch.testing.assert_close(privileged[:, :7], cube)
    torch.testing.assert_close(privileged[:, 7:10], cube[:, :3] - proprio[:, 18:21])  # tool → cube
    torch.testing.assert_close(privileged[:, 10:13], env.goal.float() - cube[:, :3])  # cube → goal


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        ({"obs_groups": "yes"}, "env.cfg.obs_groups: got 'yes'; accepted: true, false"),
        ({"camera": "front"}, "env.cfg.camera: got 'front'; accepted: null or a mapping of size, frame_"),
        ({"camera": {"size": [64]}}, "env.cfg.camera.size: got [64]; accepted: [height, width], ints fro"),
        ({"camera": {"size": [8, 64]}}, "env.cfg.camera.size: got [8, 64]; accepted: [height, width]"),
        ({"camera": {"frame_stack": 0}}, "env.cfg.camera.frame_stack: got 0; accepted: an int from 1 to 8"),
        ({"camera": {"frame_stack": 2.0}}, "env.cfg.camera.frame_stack: got 2.0; accepted: an int from 1"),
        ({"camera": {"fovy": 170}}, "env.cfg.camera.fovy: got 170; accepted: degrees from 10 to 120"),
        ({"camera": {"eye": [1, 2]}}, "env.cfg.camera.eye: got [1, 2]; accepted: [x, y, z] in metres"),
        ({"camera": {"zoom": 2}}, "env.cfg.camera.zoom: unknown key; accepted: size, frame_stack, eye"),
    ],
)
def test_bad_groups_or_camera_cfg_is_one_line_naming_the_key(cfg, message):
    with pytest.raises(ConfigError) as info:
        build_env("PushCube", 2, "cpu", cfg)
    assert str(info.value).startswith(message), str(info.value)
    assert "\n" not in str(info.value)


def test_the_teacher_config_trains_on_proprio_and_privileged(tmp_path):
    cfg = config.load(ROOT / "configs" / "push_cube_teacher.yaml", teacher_sets(tmp_path))
    assert cfg.env.cfg["obs_groups"] is True and "camera" not in cfg.env.cfg
    summary = Trainer(cfg).train()
    assert Path(summary["checkpoint"]).is_file()
    metrics = json.loads((cfg.run_dir / "metrics.json").read_text())
    assert metrics["iterations"] == 2 and metrics["env_steps"] == 2 * 4 * 10


def teacher_sets(data_dir: Path) -> list[str]:
    """A 2-iteration teacher of 4 envs × 10 steps without eval, tracking or videos."""
    return [
        f"trainer.data_dir={data_dir}",
        "trainer.iterations=2",
        "trainer.num_envs=4",
        "trainer.buffer_size=10",
        "trainer.enable_eval=false",
        "trainer.stop_when=[]",
        "tracking.backend=none",
        "eval.video=false",
        "algorithm.cfg.num_mini_batches=2",
        "policy.actor.network_cfg.hidden_sizes=[16]",
        "policy.critic.network_cfg.hidden_sizes=[16]",
    ]


# ---------------------------------------------------------------- the camera (EGL)


def test_camera_frames_show_cube_goal_and_gripper(egl):
    passed(egl, "_check_frames")


def test_camera_frames_are_deterministic_and_resume_bit_for_bit(egl):
    passed(egl, "_check_round_trip")


def test_camera_student_config_distills_two_iterations(egl):
    """configs/push_cube_camera_student.yaml (CNN on the camera + proprio) from a tiny teacher."""
    passed(egl, "_check_student")
    from rlpipe.artifacts.zarr_read import read_rollout

    run_dir = egl["work"] / "push_cube_camera_student"
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["iterations"] == 2 and metrics["env_steps"] == 2 * 2 * 5
    assert "eval/success_at_end" in metrics
    rollout, attrs = read_rollout(run_dir / "rollouts" / "iter-000002.zarr")
    camera = rollout["obs", "camera"]
    assert camera.dtype == torch.uint8 and camera.shape == (2, 6, 6, 64, 64)
    assert attrs["actor_obs_keys"] == ["camera", "proprio"]
    # the bootstrap frame of rollout 1 is the first frame of rollout 2 (the carried observation)
    first, _ = read_rollout(run_dir / "rollouts" / "iter-000001.zarr")
    assert torch.equal(first["obs", "camera"][:, -1], camera[:, 0])


def _check_student(work: Path) -> None:
    """``rlpipe run`` of the camera student config, distilling a 2-iteration teacher trained here first."""
    from rlpipe.cli import cli

    teacher = config.load(ROOT / "configs" / "push_cube_teacher.yaml", teacher_sets(work))
    Trainer(teacher).train()
    sets = {
        "trainer.data_dir": work,
        "trainer.iterations": 2,
        "trainer.num_envs": 2,
        "trainer.buffer_size": 5,
        "trainer.num_eval_envs": 2,
        "trainer.eval_freq": 10,
        "trainer.stop_when": "[]",
        "tracking.backend": "none",
        "eval.num_envs": 2,
        "eval.num_episodes": 1,
        "algorithm.cfg.teacher": teacher.run_dir,
        "algorithm.cfg.batch_size": 5,
        "env.cfg.camera.frame_stack": 2,
        "policy.actor.network_cfg.hidden_sizes": "[16]",
        "policy.critic.network_cfg.hidden_sizes": "[16]",
    }
    args = [arg for key, value in sets.items() for arg in ("--set", f"{key}={value}")]
    student = ROOT / "configs" / "push_cube_camera_student.yaml"
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            cli.main(["run", str(student), *args], prog_name="rlpipe")
    except SystemExit as exc:
        assert exc.code in (0, None), stderr.getvalue()[-3000:]


def _red(frames: torch.Tensor) -> torch.Tensor:
    """``[k, 64, 64]`` bool: cube-red pixels of the newest frame of ``camera [k, C, H, W]``."""
    r, g, b = frames[:, -3:].int().unbind(1)
    return (r > 120) & (g < 60) & (b < 60)


def _green(frames: torch.Tensor) -> torch.Tensor:
    r, g, b = frames[:, -3:].int().unbind(1)
    return (g > 120) & (r < 90) & (b < 120)


def _centroid(mask: torch.Tensor) -> torch.Tensor:
    """``[k, 2]`` mean (row, column) of the set pixels of ``mask [k, H, W]``."""
    rows, cols = torch.meshgrid(torch.arange(mask.shape[1]), torch.arange(mask.shape[2]), indexing="ij")
    weight = mask.float()
    count = weight.sum((1, 2))
    return torch.stack(((weight * rows).sum((1, 2)) / count, (weight * cols).sum((1, 2)) / count), -1)


def _check_frames() -> None:
    env = make(camera={"frame_stack": 2}, robot_base_x=-0.515)
    obs = env.reset(seed=0)
    camera = obs["camera"]
    assert env.obs_spec["camera"] == (6, 64, 64) and env.obs_dtypes == {"camera": torch.uint8}
    assert camera.shape == (N, 6, 64, 64) and camera.dtype == torch.uint8
    assert torch.equal(camera[:, :3], camera[:, 3:])  # a fresh episode repeats its first frame
    assert (_red(camera).sum((1, 2)) >= 4).all() and (_green(camera).sum((1, 2)) >= 100).all()
    robot_grey = (camera[:, 3:].int().min(1).values > 140).sum((1, 2))  # the arm and the hand
    assert (robot_grey >= 100).all()
    # the cube is where the state says: +y is to the camera's right, +x towards it (down the image)
    cube = env.physics.qpos[:, env.ids.cube_qpos : env.ids.cube_qpos + 2]
    where = _centroid(_red(camera))
    assert torch.equal(where[:, 1].argsort(), cube[:, 1].argsort())
    assert torch.equal(where[:, 0].argsort(), cube[:, 0].argsort())
    # the stack holds the previous frame, oldest first
    step = env.step(torch.zeros(N, 8))
    assert torch.equal(step.obs["camera"][:, :3], camera[:, 3:])
    # a camera of its own (another GL context) draws the env's newest frame from the state alone
    camera = PolicyCamera(env.model.opt.timestep, env.camera_cfg, env.robot_base_x)
    qpos = env.physics.qpos.clone()
    before = camera.render(qpos, env.goal)
    assert torch.equal(before, step.obs["camera"][:, 3:])
    # moving the cube 6 cm in +y moves its pixels right, and only a few pixels change
    qpos[:, env.ids.cube_qpos + 1] += 0.06
    after = camera.render(qpos, env.goal)
    moved = _centroid(_red(after)) - _centroid(_red(before))
    assert (moved[:, 1] > 2).all() and (moved[:, 0].abs() < 1.5).all()
    changed = (before != after).any(1).sum((1, 2))
    assert (changed > 0).all() and (changed < 80).all()
    assert torch.equal(camera.render(qpos, env.goal), after)  # same state → same frame
    # the gripper is visible: closing the fingers, and bending the elbow, change the frame
    closed, bent = qpos.clone(), qpos.clone()
    closed[:, torch.as_tensor(env.ids.finger_qpos)] = 0.0
    bent[:, int(env.ids.arm_qpos[3])] += 0.3
    assert ((camera.render(closed, env.goal) != after).any(1).sum((1, 2)) > 0).all()
    assert ((camera.render(bent, env.goal) != after).any(1).sum((1, 2)) > 30).all()
    # dropping another camera (its GL objects share names with these) leaves this one intact
    other = make(camera={})
    other.step(torch.zeros(N, 8))
    del other
    gc.collect()
    assert torch.equal(camera.render(qpos, env.goal), after)
    camera.close()
    env.close()


def _check_round_trip() -> None:
    cfg = {"camera": {"frame_stack": 3, "size": [48, 56]}, "max_episode_steps": 5}
    env, twin = make(**cfg), make(**cfg)
    first = env.reset(seed=9)
    assert first["camera"].shape == (N, 9, 48, 56)
    assert torch.equal(first["camera"], twin.reset(seed=9)["camera"])  # same seed → same frames
    plan = actions(14, 2)
    for action in plan[:4]:
        env.step(action), twin.step(action)
    state = env.state_dict()
    assert state["camera_frames"].shape == (N, 3, 3, 48, 56)
    expected = [env.step(action) for action in plan[4:]]  # crosses auto-resets at steps 5 and 10
    assert any(step.truncated.all() for step in expected)
    other = make(**cfg)
    other.reset(seed=123)
    other.load_state_dict(state)
    for action, want in zip(plan[4:], expected, strict=True):
        got = other.step(action)
        for field in ("obs", "final_obs"):
            for key in ("camera", "proprio", "privileged"):
                assert torch.equal(getattr(got, field)[key], getattr(want, field)[key]), (field, key)
    done = next(step for step in expected if step.truncated.all())
    # final_obs holds the last frames of the finished episode, obs the fresh episode's first frame
    assert not torch.equal(done.final_obs["camera"], done.obs["camera"])
    assert torch.equal(done.obs["camera"][:, :3], done.obs["camera"][:, 6:])
    # a state without frames (or of another camera) is refused, one line
    flat_state = make(max_episode_steps=5).state_dict()
    try:
        other.load_state_dict(flat_state)
    except ValueError as exc:
        assert "camera frames of shape None" in str(exc)
    else:
        raise AssertionError("a state without camera frames was accepted")
    for e in (env, twin, other):
        e.close()
