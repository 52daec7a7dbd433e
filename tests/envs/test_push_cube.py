"""PushCube: the BatchedEnv contract, reward and success logic, seeding, exact resume, config errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rlpipe.config import ConfigError
from rlpipe.envs import PushCube, build_env
from rlpipe.envs.tasks.push_cube import task
from rlpipe.envs.tasks.push_cube.scene import CUBE_HALF_SIZE, GOAL_RADIUS

N = 4
ROOT = Path(__file__).resolve().parents[2]


def make(**cfg) -> PushCube:
    env = build_env("PushCube", N, "cpu", {"num_threads": 2, **cfg})
    assert isinstance(env, PushCube)
    return env


def random_actions(steps: int, dim: int, seed: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.rand(N, dim, generator=gen) * 2 - 1 for _ in range(steps)]


def put_cube(env: PushCube, xy: torch.Tensor) -> None:
    """Teleport every cube to ``xy [N, 2]`` (at rest on the table)."""
    qpos = env.physics.qpos.clone()
    qpos[:, env.ids.cube_qpos : env.ids.cube_qpos + 3] = torch.cat(
        (xy.double(), torch.full((N, 1), CUBE_HALF_SIZE, dtype=torch.float64)), -1
    )
    env.physics.reset_where(torch.ones(N, dtype=torch.bool), qpos, torch.zeros_like(env.physics.qvel))


def test_spaces_shapes_and_dtypes():
    env = make()
    obs = env.reset(seed=0)
    assert env.obs_shape == (41,) and env.action_shape == (8,)
    assert obs.shape == (N, 41) and obs.dtype == torch.float32
    step = env.step(torch.zeros(N, 8))
    assert step.obs.shape == step.final_obs.shape == (N, 41)
    assert step.reward.shape == (N,) and step.reward.dtype == torch.float32
    for flag in (step.terminated, step.truncated, step.info["success"], step.info["is_grasped"]):
        assert flag.shape == (N,) and flag.dtype == torch.bool
    assert make(control="ee_delta").action_shape == (4,)


def test_observation_parts_agree():
    """tool→cube and cube→goal columns are the differences of the pose columns."""
    obs = make().reset(seed=3)
    tcp, cube, goal = obs[:, 18:21], obs[:, 25:28], obs[:, 32:35]
    torch.testing.assert_close(obs[:, 35:38], cube - tcp)
    torch.testing.assert_close(obs[:, 38:41], goal - cube)
    assert torch.allclose(cube[:, 2], torch.tensor(CUBE_HALF_SIZE), atol=1e-6)
    assert (cube[:, :2].abs() <= 0.1).all()
    torch.testing.assert_close(goal[:, 0] - cube[:, 0], torch.full((N,), 0.2))


def test_reward_is_normalized_over_random_play():
    env = make()
    env.reset(seed=1)
    rewards = torch.stack([env.step(a).reward for a in random_actions(60, 8, 0)])
    assert rewards.min() >= 0 and rewards.max() <= 1
    assert rewards.std() > 0


def test_staged_reward_stages():
    goal = torch.tensor([[0.3, 0.0, 0.001]])
    cube = torch.tensor([[0.1, 0.0, 0.02]])
    at_push_point = cube - torch.tensor([[task.PUSH_OFFSET, 0.0, 0.0]])
    far = torch.tensor([[-0.3, 0.3, 0.3]])
    no = torch.tensor([False])
    reach_only = task.staged_reward(far, cube, goal, no)
    reached = task.staged_reward(at_push_point, cube, goal, no)
    place = 1 - torch.tanh(torch.tensor(5 * 0.2))
    torch.testing.assert_close(reached, (1 + place).reshape(1) / 3)
    assert 0 < reach_only < 1 / 3
    assert task.staged_reward(far, cube, goal, torch.tensor([True])).item() == 1.0


def test_success_terminates_with_full_reward():
    env = make(terminate_on_success=True)
    env.reset(seed=2)
    put_cube(env, env.goal[:, :2] + torch.tensor([GOAL_RADIUS * 0.5, 0.0]))
    step = env.step(torch.zeros(N, 8))
    assert step.info["success"].all() and step.terminated.all() and not step.truncated.any()
    assert torch.equal(step.reward, torch.ones(N))
    # the terminated envs restarted: their cubes are back at the spawn area
    assert (step.obs[:, 25:27].abs() <= 0.1).all()


def test_success_without_termination_and_outside_radius():
    env = make()
    env.reset(seed=2)
    offsets = torch.tensor([[0.5, 0.0], [0.0, -0.9], [1.1, 0.0], [0.0, 1.5]]) * GOAL_RADIUS
    put_cube(env, env.goal[:, :2] + offsets)
    step = env.step(torch.zeros(N, 8))
    assert step.info["success"].tolist() == [True, True, False, False]
    assert not step.terminated.any()


def test_truncation_after_max_episode_steps():
    env = make(max_episode_steps=7)
    env.reset(seed=4)
    for t in range(1, 8):
        step = env.step(torch.zeros(N, 8))
        assert step.truncated.all() == (t == 7) and not step.truncated[:].any() or t == 7
    assert not torch.equal(step.obs, step.final_obs)
    assert env.elapsed.eq(0).all()


def test_seeded_reset_is_deterministic_and_groups_share_starts():
    a, b = make(), make()
    assert torch.equal(a.reset(seed=11), b.reset(seed=11))
    assert not torch.equal(a.reset(seed=11), a.reset(seed=12))
    actions = random_actions(12, 8, 1)
    a.reset(seed=5), b.reset(seed=5)
    for action in actions:
        sa, sb = a.step(action), b.step(action)
        assert torch.equal(sa.obs, sb.obs) and torch.equal(sa.reward, sb.reward)
    grouped = a.reset(seed=3, group_size=2)
    assert torch.equal(grouped[0], grouped[1]) and torch.equal(grouped[2], grouped[3])
    assert not torch.equal(grouped[0], grouped[2])


def test_state_dict_round_trip_is_bit_exact_across_auto_resets():
    env = make(max_episode_steps=5)
    env.reset(seed=9)
    actions = random_actions(16, 8, 2)
    for action in actions[:4]:
        env.step(action)
    state = env.state_dict()
    expected = [env.step(action) for action in actions[4:]]
    other = make(max_episode_steps=5)
    other.reset(seed=123)
    other.load_state_dict(state)
    for action, want in zip(actions[4:], expected, strict=True):
        got = other.step(action)
        for field in ("obs", "reward", "terminated", "truncated", "final_obs"):
            assert torch.equal(getattr(got, field), getattr(want, field)), field
    assert torch.equal(other.goal, env.goal)


def test_ee_delta_moves_the_tool_where_commanded():
    env = make(control="ee_delta")
    obs = env.reset(seed=0)
    start = obs[:, 18:21].clone()
    action = torch.zeros(N, 4)
    action[:, 2] = 1.0  # up
    action[:, 1] = -0.5  # and to -y
    for _ in range(3):
        obs = env.step(action).obs
    moved = obs[:, 18:21] - start
    assert (moved[:, 2] > 0.1).all() and (moved[:, 1] < -0.05).all()
    # the arm lags its targets, so the path bends a little; it still goes where it was sent
    assert (moved[:, 0].abs() < 0.5 * moved[:, 2]).all()


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        ({"control": "torque"}, "env.cfg.control: got 'torque'; accepted: joint_delta, ee_delta"),
        ({"engine": "physx"}, "env.cfg.engine: got 'physx'; accepted: mujoco, warp"),
        ({"max_episode_steps": 0}, "env.cfg.max_episode_steps: got 0; accepted: an int >= 1"),
        ({"render_size": [240]}, "env.cfg.render_size: got [240]; accepted: [height, width]"),
        ({"colour": "red"}, "env.cfg.colour: unknown argument of PushCube; accepted: control"),
    ],
)
def test_bad_env_cfg_is_a_config_error(cfg, message):
    with pytest.raises(ConfigError) as info:
        build_env("PushCube", 2, "cpu", cfg)
    assert str(info.value).startswith(message)


def test_render_frames(tmp_path):
    """Offscreen frames through EGL in a subprocess (MUJOCO_GL must be set before mujoco loads)."""
    code = (
        "import numpy as np, torch\n"
        "from rlpipe.envs import build_env\n"
        "env = build_env('PushCube', 3, 'cpu', {'render_size': [60, 80]})\n"
        "env.reset(seed=0)\n"
        "frames = env.render([0, 2])\n"
        "assert frames.shape == (2, 60, 80, 3) and frames.dtype == np.uint8, frames.shape\n"
        "assert frames.std() > 10\n"
        "assert not np.array_equal(frames[0], frames[1])  # different cube positions\n"
        "print('ok')\n"
    )
    env = {**os.environ, "MUJOCO_GL": "egl", "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    if "cannot open an offscreen GL context" in result.stderr:
        pytest.skip("no EGL on this machine")
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr


def test_push_cube_config_runs_two_iterations(tmp_path):
    data = tmp_path / "data"
    sets = {
        "trainer.data_dir": str(data),
        "trainer.iterations": 2,
        "trainer.num_envs": 4,
        "trainer.buffer_size": 10,
        "trainer.num_eval_envs": 2,
        "trainer.eval_freq": 40,
        "tracking.backend": "none",
        "algorithm.cfg.num_mini_batches": 2,
        "eval.video": "false",
        "policy.actor.network_cfg.hidden_sizes": "[16]",
        "policy.critic.network_cfg.hidden_sizes": "[16]",
    }
    args = [arg for key, value in sets.items() for arg in ("--set", f"{key}={value}")]
    result = subprocess.run(
        [sys.executable, "-m", "rlpipe", "run", str(ROOT / "configs" / "push_cube.yaml"), *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    metrics = json.loads((data / "push_cube_ppo" / "metrics.json").read_text())
    assert metrics["iterations"] == 2 and metrics["env_steps"] == 2 * 4 * 10
    curve = (data / "push_cube_ppo" / "curve.csv").read_text().splitlines()
    assert "eval/success_rate" in curve[0] and "eval/success_at_end" in curve[0]
    assert len(curve) == 3


@pytest.mark.slow
def test_push_cube_ppo_learns_to_push(tmp_path):
    """A shortened configs/push_cube.yaml (28 of its iterations, 358k env steps, ~3 min on 2 idle
    cores) already pushes the cube into the goal in at least 40% of deterministic eval episodes
    (the full run of 2026-11-23: 0.71 at any step, 0.70 at the episode's end after these 28
    iterations; success at the end first ≥ 0.9 at 857k env steps)."""
    data = tmp_path / "data"
    sets = {
        "trainer.data_dir": str(data),
        "trainer.iterations": 28,
        "trainer.stop_when": "[]",
        "tracking.backend": "none",
        "eval.video": "false",
    }
    args = [arg for key, value in sets.items() for arg in ("--set", f"{key}={value}")]
    result = subprocess.run(
        [sys.executable, "-m", "rlpipe", "run", str(ROOT / "configs" / "push_cube.yaml"), *args],
        capture_output=True,
        text=True,
        timeout=3600,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    metrics = json.loads((data / "push_cube_ppo" / "metrics.json").read_text())
    assert metrics["env_steps"] == 28 * 256 * 50
    assert metrics["eval/success_rate"] >= 0.4, metrics
    assert metrics["eval/success_at_end"] >= 0.3, metrics
    assert metrics["train/success_rate"] > 0.3, metrics
