"""The rendering contract: torch envs draw their state, others raise a one-line RenderUnavailable."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
import torch

from rlpipe.envs import CartPole, Pendulum, RenderUnavailable, build_env, build_eval_env

POLE, ROD = (202, 152, 101), (204, 77, 77)


def centroid(frame: np.ndarray, color: tuple[int, int, int]) -> np.ndarray:
    """Mean ``(row, col)`` of the pixels painted ``color``."""
    rows, cols = np.nonzero((frame == np.array(color, dtype=np.uint8)).all(-1))
    assert rows.size > 0, f"no pixel of colour {color}"
    return np.array([rows.mean(), cols.mean()])


def black_centroid(frame: np.ndarray) -> np.ndarray:
    rows, cols = np.nonzero((frame[:-1] == 0).all(-1))  # the cart (and the track line)
    return np.array([rows.mean(), cols.mean()])


def test_cartpole_frames_follow_the_cart_and_the_pole_and_leave_the_env_untouched():
    env = CartPole(3, "cpu")
    env.reset(seed=0)
    env.state[:] = torch.tensor([[0.0, 0, 0, 0], [1.5, 0, 0, 0], [0.0, 0, 0.2, 0]])
    before = env.state_dict()
    frames = env.render([0, 1, 2])
    assert isinstance(frames, np.ndarray) and frames.shape == (3, 240, 320, 3) and frames.dtype == np.uint8
    pole = [centroid(f, POLE) for f in frames]
    assert pole[1][1] - pole[0][1] == pytest.approx(1.5 * 320 / 4.8, abs=1.0)  # 1.5 m to the right
    assert pole[2][1] > pole[0][1] + 5 and pole[2][0] > pole[0][0]  # tilted right, so its middle drops
    assert np.array_equal(env.render([1]), frames[1:2])  # a frame depends on the state only
    after = env.state_dict()
    assert torch.equal(before["state"], after["state"])
    assert torch.equal(before["generator"], after["generator"])


def test_pendulum_rod_points_up_at_zero_and_down_at_pi():
    env = Pendulum(2, "cpu")
    env.reset(seed=0)
    env.state[:, 0] = torch.tensor([0.0, math.pi])
    up, down = (centroid(f, ROD) for f in env.render([0, 1]))
    assert up[0] < 120 - 20 and down[0] > 120 + 20  # pivot at the centre row 120
    assert abs(up[1] - 120) < 2 and abs(down[1] - 120) < 2


def test_env_without_a_renderer_raises_render_unavailable():
    env = build_env("RepeatFirst", 2, "cpu")
    with pytest.raises(RenderUnavailable, match="RepeatFirst cannot render"):
        env.render([0])
    assert issubclass(RenderUnavailable, NotImplementedError)


def test_gymnasium_env_needs_rgb_array_mode_and_build_eval_env_asks_for_it():
    plain = build_env("CartPole-v1", 2, "cpu", {"vectorization_mode": "async"}, "gymnasium")
    try:
        with pytest.raises(RenderUnavailable, match="render_mode"):
            plain.render([0])
    finally:
        plain.close()
    env, problem = build_eval_env(
        "CartPole-v1", 2, "cpu", {"vectorization_mode": "async"}, video=True, backend="gymnasium"
    )
    try:
        assert problem is None and env.vec_env.render_mode == "rgb_array"
        assert type(env.vec_env).__name__ == "SyncVectorEnv"  # workers never open GL contexts
        try:
            frames = env.render([1])
        except RenderUnavailable as exc:  # classic-control drawing needs pygame
            assert "pygame" in str(exc)
        else:
            assert frames.shape[0] == 1 and frames.dtype == np.uint8
    finally:
        env.close()


MUJOCO = """
import numpy as np
from rlpipe.envs import RenderUnavailable, build_eval_env
env, problem = build_eval_env("HalfCheetah-v5", 2, "cpu", {}, video=True, backend="gymnasium")
try:
    if problem is not None:
        raise problem
    env.reset(seed=0)
    frames = env.render([1])
    print("OK", frames.shape, frames.dtype, int(frames.std() > 0))
except RenderUnavailable as exc:
    print("UNAVAILABLE", exc)
"""


@pytest.mark.parametrize("gl", ["egl", None])
def test_mujoco_envs_render_with_egl_and_name_the_variable_without_gl(gl):
    pytest.importorskip("mujoco")
    env = {"PYTHONPATH": ":".join(sys.path), **({"MUJOCO_GL": gl} if gl else {})}  # no DISPLAY either
    out = (
        subprocess.run([sys.executable, "-c", MUJOCO], env=env, capture_output=True, text=True, timeout=180)
        .stdout.strip()
        .splitlines()[-1]
    )
    if gl == "egl":
        if out.startswith("UNAVAILABLE"):
            pytest.skip(f"no EGL on this machine: {out}")
        assert out == "OK (1, 480, 480, 3) uint8 1"
    else:  # unset: MuJoCo tries GLFW, which needs a display
        if out.startswith("OK"):
            pytest.skip("MuJoCo's default OpenGL works on this machine")
        assert out.startswith("UNAVAILABLE ") and "no working OpenGL (MUJOCO_GL unset" in out
        assert out.endswith("set MUJOCO_GL=egl (or MUJOCO_GL=osmesa) for headless offscreen rendering")


def test_envpool_envs_cannot_draw_and_say_so():
    pytest.importorskip("envpool")
    env, problem = build_eval_env("CartPole-v1", 2, "cpu", {}, video=True, backend="envpool")
    try:
        assert problem is None
        with pytest.raises(RenderUnavailable, match="cannot render"):
            env.render([0])
    finally:
        env.close()
