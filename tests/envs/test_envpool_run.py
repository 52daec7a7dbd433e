"""Smoke: ``rlpipe run`` on envpool's CheetahRun-v1 (dict obs), Playground PandaPickCube-v1 and
Pong-v5 (uint8 frame stacks) — run, store, resume bit for bit, replay bit for bit (CPU, few envs
and iterations)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from _offline_fixtures import assert_same_learner, leaves, same_leaves, tiny_cfg

from rlpipe.artifacts.checkpoints import load_checkpoint
from rlpipe.artifacts.zarr_read import read_rollout
from rlpipe.offline.replay import replay
from rlpipe.trainer import Trainer

pytest.importorskip("envpool")

STEPS = 4 * 16
SMALL = (
    "trainer.num_envs=4",
    "trainer.buffer_size=16",
    f"trainer.save_freq={STEPS}",
    "trainer.iterations=2",
    "env.cfg.max_episode_steps=12",
)
"""2 iterations of 4 envs × 16 steps, a checkpoint after each; episodes of 12 steps (truncations)."""
CASES = {
    "CheetahRun-v1": (
        "env.id=CheetahRun-v1",
        "policy.obs_normalization=true",
        "policy.actor.obs_keys=[position]",
        "policy.critic.obs_keys=[position,velocity]",
    ),
    "PandaPickCube-v1": ("env.id=PandaPickCube-v1",),
    "Pong-v5": (
        "env.id=Pong-v5",
        "policy.actor.encoders={pixels: {channels: [8, 8], kernel_sizes: [8, 4], "
        "strides: [4, 2], features: 32}}",  # uint8 [4, 84, 84] frame stacks: the image group pixels
        "trainer.num_envs=2",
        "trainer.save_freq=32",
    ),  # 2 Atari emulators: half the start-up
}


def cfg(data_dir: Path, env_id: str, *extra: str):
    return tiny_cfg(data_dir, *SMALL, *CASES[env_id], *extra)


def rollout(run_dir: Path, k: int):
    return read_rollout(run_dir / "rollouts" / f"iter-{k:06d}.zarr")


@pytest.mark.parametrize("env_id", list(CASES))
def test_run_store_resume_and_replay_bit_for_bit(env_id: str, tmp_path: Path) -> None:
    whole = cfg(tmp_path / "whole", env_id)
    Trainer(whole).train()
    stored, attrs = rollout(whole.run_dir, 2)
    assert attrs["env_backend"] == "EnvpoolEnv" and attrs["bootstrap"] == "exact"
    envs = whole.trainer.num_envs
    assert stored["truncated"][:, :-1].sum() == envs  # every env hit the 12-step limit once
    assert (stored["final_value"][:, :-1] != 0).sum() == envs  # bootstrapped from the true last obs
    if env_id == "CheetahRun-v1":
        assert set(stored["obs"].keys()) == {"position", "velocity"}  # one Zarr array per key
        assert attrs["actor_obs_keys"] == ["position"]
        assert (whole.run_dir / "rollouts" / "iter-000002.zarr" / "obs" / "velocity").is_dir()

    Trainer(cfg(tmp_path / "split", env_id, "trainer.iterations=1")).train()
    split = cfg(tmp_path / "split", env_id)
    Trainer(split, resume=True).train()
    for k in (1, 2):
        a, b = rollout(whole.run_dir, k)[0], rollout(split.run_dir, k)[0]
        assert all(torch.equal(a[key], b[key]) for key in a.keys(True, True)), k
    ckpt = "checkpoints/ckpt-000002.pt"
    state_a = dict(leaves(load_checkpoint(whole.run_dir / ckpt)))
    state_b = dict(leaves(load_checkpoint(split.run_dir / ckpt)))
    drop = ("/wall_s", "/params_hash")
    assert same_leaves(
        {k: v for k, v in state_a.items() if k not in drop},
        {k: v for k, v in state_b.items() if k not in drop},
    )

    out = tmp_path / "replayed"
    summary = replay(whole, whole.run_dir / "rollouts", out)
    assert summary["iterations"] == 2 and summary["rebuilt_updates"] == 0
    assert_same_learner(whole.run_dir / ckpt, out / ckpt)


def test_halfcheetah_envpool_config_is_1m_steps_and_runs(tmp_path: Path) -> None:
    """configs/ppo_halfcheetah_envpool.yaml (the SB3 benchmark's rlpipe settings): 1M steps, envpool, runs."""
    from rlpipe import config

    path = Path(__file__).parents[2] / "configs" / "ppo_halfcheetah_envpool.yaml"
    full = config.load(path)
    per_iteration = full.trainer.num_envs * full.trainer.buffer_size
    iterations = full.trainer.iterations
    assert (iterations - 1) * per_iteration < 1_000_000 <= iterations * per_iteration
    short = config.load(
        path,
        [
            f"trainer.data_dir={tmp_path}",
            "trainer.num_envs=4",
            "trainer.buffer_size=16",
            "trainer.iterations=2",
            "trainer.num_eval_envs=2",
            "trainer.eval_freq=64",
            "algorithm.cfg.batch_size=32",
            "store.enabled=true",
        ],
    )
    metrics = Trainer(short).train()
    assert metrics["env_steps"] == 2 * 4 * 16
    stored, attrs = rollout(short.run_dir, 2)
    assert attrs["env_backend"] == "EnvpoolEnv" and stored["action"].shape[-1] == 6
    assert torch.isfinite(torch.tensor(metrics["eval/return_mean"]))
