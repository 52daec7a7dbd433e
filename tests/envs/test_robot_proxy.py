"""RobotProxy (rlpipe/envs/tasks/robot_proxy.py): sizes, a step worked by hand, falls, time limits, resume."""

from __future__ import annotations

import math

import gymnasium as gym
import pytest
import torch

from rlpipe.envs import build_env
from rlpipe.envs.tasks import robot_proxy as rp
from rlpipe.envs.tasks.robot_proxy import RobotProxy

N = 64


def random_actions(steps: int, seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(N, 12, generator=g) for _ in range(steps)]


def test_the_id_builds_robot_sized_observation_groups_and_actions():
    env = build_env("RobotProxy", N, "cpu")
    assert isinstance(env, RobotProxy)
    assert env.obs_spec == {"policy": (48,), "privileged": (205,)}
    assert env.action_space == gym.spaces.Box(-1.0, 1.0, (12,))
    obs = env.reset(seed=3)
    assert obs.batch_size == torch.Size([N])
    assert obs["policy"].shape == (N, 48) and obs["privileged"].shape == (N, 205)
    assert obs["policy"].dtype == obs["privileged"].dtype == torch.float32
    step = env.step(torch.zeros(N, 12))
    assert step.reward.shape == step.terminated.shape == step.truncated.shape == (N,)
    assert step.reward.dtype == torch.float32 and step.terminated.dtype == torch.bool


def at_rest(env: RobotProxy, cmd: list[float], push: list[float]) -> torch.Tensor:
    """A state ``[N, 50]``: joints at q0 and still, level and still, zero velocity, scales 1."""
    state = torch.zeros(N, rp.STATE_DIM)
    state[:, rp.Q] = torch.tensor(rp.DEFAULT_POSE)
    state[:, rp.CMD], state[:, rp.PUSH] = torch.tensor(cmd), torch.tensor(push)
    state[:, rp.STIFFNESS], state[:, rp.FRICTION] = 1.0, 1.0
    return state


def test_one_step_from_rest_worked_by_hand():
    env = RobotProxy(N, "cpu")
    env.state = at_rest(env, cmd=[0.5, 0.0, 0.0], push=[0.1, 0.0])
    step = env.step(torch.zeros(N, 12))
    # torque 0 → joints stay at q0, posture 0 → velocity stays 0; only the push tilts the body:
    # tilt_rate = dt·push = (0.002, 0), tilt = dt·tilt_rate = (4e-5, 0)
    assert torch.equal(env.state[:, rp.Q], at_rest(env, [0, 0, 0], [0, 0])[:, rp.Q])
    assert torch.allclose(env.state[:, rp.TILT_RATE], torch.tensor([0.002, 0.0]).expand(N, 2))
    assert torch.allclose(env.state[:, rp.TILT], torch.tensor([4e-5, 0.0]).expand(N, 2))
    # reward: exp(−|(0,0) − (0.5,0)|²/0.25) + 0.5·exp(0) − 0.05·0.002² (no action change, no torque)
    expected = math.exp(-1.0) + 0.5 - 0.05 * 0.002**2
    assert torch.allclose(step.reward, torch.full((N,), expected))
    assert not step.terminated.any() and not step.truncated.any()
    assert torch.allclose(step.obs["privileged"][:, 187:189], env.state[:, rp.TILT])
    assert torch.allclose(step.obs["privileged"][:, 189:191], torch.tensor([0.1, 0.0]).expand(N, 2))


def test_actions_are_clipped_to_the_box():
    a, b = RobotProxy(N, "cpu"), RobotProxy(N, "cpu")
    a.reset(seed=0), b.reset(seed=0)
    big = torch.full((N, 12), 5.0)
    assert torch.equal(a.step(big).reward, b.step(torch.ones(N, 12)).reward)
    assert torch.equal(a.state, b.state)


def test_an_idle_body_falls_and_a_time_limit_truncates():
    env = RobotProxy(N, "cpu")
    env.reset(seed=0)
    fell = torch.zeros(N, dtype=torch.bool)
    for _ in range(400):  # 8 s: the unstable tilt takes every idle body down
        step = env.step(torch.zeros(N, 12))
        fell |= step.terminated
        assert not step.truncated.any()
    assert fell.all()
    short = RobotProxy(N, "cpu", max_episode_steps=5)
    short.reset(seed=0)
    steps = [short.step(torch.zeros(N, 12)) for _ in range(5)]
    assert steps[-1].truncated.all() and not any(s.truncated.any() for s in steps[:-1])
    assert torch.equal(short.elapsed, torch.zeros(N, dtype=torch.int64))


def test_state_dict_resumes_bit_for_bit_and_seeds_matter():
    actions = random_actions(40)
    env = RobotProxy(N, "cpu")
    env.reset(seed=7)
    for action in actions[:20]:
        env.step(action)
    saved = env.state_dict()
    first = [env.step(action) for action in actions[20:]]
    resumed = RobotProxy(N, "cpu")
    resumed.load_state_dict(saved)
    again = [resumed.step(action) for action in actions[20:]]
    for x, y in zip(first, again, strict=True):
        assert torch.equal(x.obs["policy"], y.obs["policy"])
        assert torch.equal(x.obs["privileged"], y.obs["privileged"])
        assert torch.equal(x.reward, y.reward) and torch.equal(x.terminated, y.terminated)
    other = RobotProxy(N, "cpu")
    assert not torch.equal(other.reset(seed=8)["policy"], RobotProxy(N, "cpu").reset(seed=7)["policy"])


def test_float64_physics_tracks_float32_closely():
    fast, exact = RobotProxy(N, "cpu"), RobotProxy(N, "cpu", physics_dtype="float64")
    fast.reset(seed=1)
    exact.state = fast.state.double()  # the same start (the two dtypes draw different numbers)
    for action in random_actions(10):
        a, b = fast.step(action), exact.step(action)
        running = ~(a.terminated | a.truncated)
        assert torch.equal(running, ~(b.terminated | b.truncated))
    assert exact.state.dtype == torch.float64 and b.obs["policy"].dtype == torch.float32
    assert running.sum() > N // 2
    assert torch.allclose(a.obs["policy"][running], b.obs["policy"][running], atol=1e-4)


@pytest.mark.parametrize("bad", [{"physics_dtype": "float16"}, {"max_episode_steps": 0}])
def test_bad_arguments_are_one_line_errors(bad: dict[str, object]):
    with pytest.raises(ValueError, match=next(iter(bad))):
        RobotProxy(N, "cpu", **bad)
