"""EnvpoolEnv: the hidden extra reset step, seeds, dict observations, success info, exact resume."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from rlpipe.config import ConfigError
from rlpipe.envs import build_env
from rlpipe.envs.backends.envpool_env import EnvpoolEnv

envpool = pytest.importorskip("envpool")

LIMIT = 5
"""Episode length of the HalfCheetah envs below: dones at steps 5, 10, … with no extra step."""


def cheetah(num_envs: int = 4, **cfg) -> EnvpoolEnv:
    return EnvpoolEnv("HalfCheetah-v5", num_envs, "cpu", max_episode_steps=LIMIT, **cfg)


def actions(count: int, num_envs: int = 4, seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.rand(num_envs, 6, generator=g) * 2 - 1 for _ in range(count)]


def test_spaces_are_flat_float32_and_the_time_limit_is_read() -> None:
    env = cheetah()
    assert env.obs_shape == (17,) and env.action_shape == (6,) and env.max_episode_steps == LIMIT
    assert env.action_space.dtype == np.float32 and env.action_space.high.max() == 1.0


def test_the_extra_reset_step_is_hidden_no_transition_is_wasted() -> None:
    env = cheetah()
    env.reset(seed=3)
    raw = envpool.make(
        "HalfCheetah-v5", env_type="gymnasium", num_envs=4, seed=[3, 4, 5, 6], max_episode_steps=LIMIT
    )
    raw.reset()
    steps = [env.step(a) for a in actions(2 * LIMIT)]
    dones = [bool((s.terminated | s.truncated).all()) for s in steps]
    assert dones == [False] * (LIMIT - 1) + [True] + [False] * (LIMIT - 1) + [True]
    for a in actions(LIMIT):
        raw_obs, *_ = raw.step(a.numpy())
    done_step = steps[LIMIT - 1]
    np.testing.assert_array_equal(done_step.final_obs.numpy(), raw_obs.astype(np.float32))
    assert done_step.truncated.all() and not done_step.terminated.any()
    reset_obs, reward, *_ = raw.step(actions(1)[0].numpy())  # envpool's own extra reset step
    assert (reward == 0).all()
    torch.testing.assert_close(done_step.obs, torch.from_numpy(reset_obs.astype(np.float32)), rtol=0, atol=0)
    assert not torch.equal(done_step.obs, done_step.final_obs)
    assert torch.equal(steps[0].obs, steps[0].final_obs)  # not done: the same observation


def test_seed_decides_every_env_and_groups_start_identically() -> None:
    a, b = cheetah().reset(seed=11), cheetah().reset(seed=11)
    assert torch.equal(a, b) and not torch.equal(a[0], a[1])
    grouped = cheetah().reset(seed=11, group_size=2)
    assert torch.equal(grouped[0], grouped[1]) and torch.equal(grouped[2], grouped[3])
    assert torch.equal(grouped[0], a[0]) and torch.equal(grouped[2], a[1])


def test_async_mode_steps_the_same_trajectories() -> None:
    sync, double = cheetah(), cheetah(mode="async")
    sync.reset(seed=2), double.reset(seed=2)
    for a in actions(2 * LIMIT):
        s, d = sync.step(a), double.step(a)
        assert torch.equal(s.obs, d.obs) and torch.equal(s.final_obs, d.final_obs)
        assert torch.equal(s.reward, d.reward) and torch.equal(s.truncated, d.truncated)


def test_async_act_and_step_samples_each_half() -> None:
    env = cheetah(mode="async")
    obs = env.reset(seed=0)
    calls = []

    def policy(o: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        calls.append(o.shape[0])
        return torch.zeros(o.shape[0], 6), torch.zeros(o.shape[0])

    action, log_prob, step = env.act_and_step(policy, obs)
    assert calls == [2, 2] and action.shape == (4, 6) and log_prob.shape == (4,)
    assert step.obs.shape == (4, 17)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_replay_resume_continues_bit_for_bit(mode: str) -> None:
    acts = actions(3 * LIMIT + 2)
    env = cheetah(mode=mode)
    env.reset(seed=5)
    for a in acts[:7]:
        env.step(a)
    buffer = io.BytesIO()
    torch.save(env.state_dict(), buffer)
    expected = [env.step(a) for a in acts[7:]]
    buffer.seek(0)
    resumed = cheetah(mode=mode)
    resumed.load_state_dict(torch.load(buffer, weights_only=True))
    assert resumed.last_obs is None  # the collector keeps its own carried observation
    for a, want in zip(acts[7:], expected, strict=True):
        got = resumed.step(a)
        assert torch.equal(got.obs, want.obs) and torch.equal(got.final_obs, want.final_obs)
        assert torch.equal(got.reward, want.reward) and torch.equal(got.truncated, want.truncated)


def test_replay_that_diverges_is_refused() -> None:
    env = cheetah()
    env.reset(seed=5)
    env.step(actions(1)[0])
    state = env.state_dict()
    state["obs"] = state["obs"] + 1
    with pytest.raises(RuntimeError, match="did not reproduce"):
        cheetah().load_state_dict(state)


def test_restart_resume_keeps_no_log_and_starts_fresh_episodes() -> None:
    env = cheetah(resume="restart")
    env.reset(seed=5)
    for a in actions(3):
        env.step(a)
    state = env.state_dict()
    assert "actions" not in state and state["steps"] == 3
    resumed = cheetah(resume="restart")
    resumed.load_state_dict(state)
    assert resumed.last_obs is not None and resumed.last_obs.shape == (4, 17)
    assert resumed.step(actions(1)[0]).obs.shape == (4, 17)


def test_dict_observations_become_a_tensordict() -> None:
    env = EnvpoolEnv("CheetahRun-v1", 2, "cpu", max_episode_steps=3)
    assert env.obs_spec == {"position": (8,), "velocity": (9,)}
    assert env.observation_space["position"].high[0] == np.inf  # dm_control's bogus bounds dropped
    obs = env.reset(seed=0)
    assert isinstance(obs, TensorDict) and obs["velocity"].shape == (2, 9)
    step = [env.step(torch.zeros(2, 6)) for _ in range(3)][-1]
    assert step.truncated.all() and isinstance(step.final_obs, TensorDict)
    assert not torch.equal(step.final_obs["position"], step.obs["position"])


def test_success_info_reaches_the_step_result() -> None:
    env = EnvpoolEnv("MetaWorld/Push-v3", 2, "cpu", max_episode_steps=3)
    env.reset(seed=0)
    step = env.step(torch.zeros(2, 4))
    assert set(step.info) == {"success"} and step.info["success"].dtype == torch.bool
    assert step.info["success"].shape == (2,)


def test_backend_auto_picks_envpool_and_bad_cfg_is_one_line() -> None:
    assert isinstance(build_env("HalfCheetah-v5", 2, "cpu"), EnvpoolEnv)
    with pytest.raises(ConfigError, match=r"^env\.cfg\.mode: got 'fast'; accepted: sync, async$"):
        build_env("HalfCheetah-v5", 2, "cpu", {"mode": "fast"})
    with pytest.raises(ConfigError, match=r"^env\.cfg: .*frame_skipp.*envpool\.make\('HalfCheetah-v5'\)"):
        build_env("HalfCheetah-v5", 2, "cpu", {"frame_skipp": 2})
    with pytest.raises(ConfigError, match="mode: async needs an even num_envs"):
        build_env("HalfCheetah-v5", 3, "cpu", {"mode": "async"})


def test_from_pixels_that_cannot_render_is_one_line_naming_the_key(tmp_path) -> None:
    """envpool's MuJoCo renderer needs its own GL context: where it has none, a ValueError, no crash.

    Where it can render (a machine with a GPU driver), the env's observation is the image group.
    """
    from rlpipe.envs.backends.envpool_env import check_pixels_render

    try:
        check_pixels_render("HalfCheetah-v5", (("from_pixels", True),))
    except ValueError as exc:
        message = str(exc)
        assert message.startswith("env.cfg.from_pixels: envpool cannot render HalfCheetah-v5 on this machine")
        assert "\n" not in message and "accepted: false here" in message
    else:
        env = EnvpoolEnv("HalfCheetah-v5", 2, "cpu", from_pixels=True)
        try:
            assert env.observation_space["pixels"].dtype == np.uint8
            assert env.reset(seed=0)["pixels"].dtype == torch.uint8
        finally:
            env.close()


@pytest.mark.parametrize(
    ("env_id", "dt"),
    [
        ("HalfCheetah-v5", 0.05),
        ("Hopper-v4", 0.008),
        ("Humanoid-v4", 0.015),
        ("InvertedPendulum-v4", 0.04),
        ("CartPole-v1", None),
    ],
)
def test_mujoco_tasks_record_their_control_step_and_others_none(env_id, dt):
    env = EnvpoolEnv(env_id, 2, "cpu")  # gymnasium's dt for the same tasks: frame_skip × model timestep
    assert env.control_dt == pytest.approx(dt) if dt else env.control_dt is None
