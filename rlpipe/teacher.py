"""The frozen teacher of a distillation run, rebuilt from its own run directory.

``algorithm.cfg.teacher`` names a run directory (its newest checkpoint) or one checkpoint of a run.
The teacher's policy is built from that run's ``params.yaml`` (network, observation keys,
normalizer) for the spaces its checkpoint records, its weights loaded and frozen. It must act in
the student's env: the same action space and, for each observation key it reads, the same shape.
The teacher's weights never enter the student's checkpoints; its path and sha256 do.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch

from rlpipe import config as config_mod
from rlpipe.artifacts.checkpoints import checkpoint_fits, latest_checkpoint, load_checkpoint
from rlpipe.artifacts.fs import AnyPath, as_path
from rlpipe.artifacts.layout import RunLayout
from rlpipe.config import ConfigError
from rlpipe.envs import space_from_dict, space_to_dict
from rlpipe.policies import TrainablePolicy, build_policy

__all__ = ["KEY", "Teacher", "load_student_init", "load_teacher", "teacher_checkpoint"]

KEY = "algorithm.cfg.teacher"


@dataclass(frozen=True)
class Teacher:
    """A frozen teacher policy and where it came from."""

    policy: TrainablePolicy
    checkpoint: AnyPath
    """The checkpoint file its weights came from."""
    sha256: str
    """Hex digest of that file."""

    def record(self) -> dict[str, str]:
        """``{path, sha256}``: what a student's checkpoint keeps of its teacher."""
        return {"path": str(self.checkpoint), "sha256": self.sha256}


def teacher_checkpoint(ref: str | AnyPath | None) -> tuple[AnyPath, RunLayout]:
    """``(checkpoint file, teacher run)`` of ``ref``: a run directory or a checkpoint inside one.

    Every problem is a one-line ``ConfigError`` naming ``algorithm.cfg.teacher``.
    """
    if ref is None:
        raise ConfigError(f"{KEY}: required: the teacher's run directory or one of its checkpoints")
    path = as_path(ref)
    if path.is_dir():
        layout = RunLayout(path)
        if not layout.params.is_file():
            raise ConfigError(f"{KEY}: {path} is not a run directory (no params.yaml)")
        found = latest_checkpoint(layout.checkpoints) if layout.checkpoints.is_dir() else None
        if found is None:
            raise ConfigError(f"{KEY}: {path} holds no checkpoint (under {layout.checkpoints})")
        return found, layout
    if not path.is_file():
        raise ConfigError(f"{KEY}: {path}: no such run directory or checkpoint")
    layout = RunLayout(path.parent.parent)  # <run>/checkpoints/ckpt-NNNNNN.pt
    if not layout.params.is_file():
        raise ConfigError(f"{KEY}: {path} is not a checkpoint of a run (no params.yaml in {layout.root})")
    return path, layout


def load_teacher(
    ref: str | Path | None, obs_space: gym.Space, action_space: gym.Space, device: torch.device
) -> Teacher:
    """The teacher ``ref`` names, frozen on ``device``, checked against the student's spaces.

    Built under a forked RNG, so the student's run draws the same numbers with or without it.
    """
    path, layout = teacher_checkpoint(ref)
    state = load_checkpoint(path)
    spaces = state.get("spaces")
    if "policy" not in state or not isinstance(spaces, dict):
        raise ConfigError(f"{KEY}: {path} is not a training checkpoint (no policy or spaces)")
    cfg = config_mod.load(layout.params)
    t_obs, t_action = space_from_dict(spaces["observation"]), space_from_dict(spaces["action"])
    with torch.random.fork_rng(devices=[]):
        policy = build_policy(cfg.policy, t_obs, t_action, device)
    with checkpoint_fits(path):
        policy.load_state_dict(state["policy"])
    if policy.is_recurrent:
        raise ConfigError(f"{KEY}: {path} holds a recurrent policy; a teacher must be feedforward")
    _check_fits(policy, t_obs, t_action, obs_space, action_space, path)
    policy.eval()
    for param in policy.parameters():
        param.requires_grad_(False)
    return Teacher(policy, path, hashlib.sha256(path.read_bytes()).hexdigest())


def load_student_init(ref: str, policy: TrainablePolicy) -> None:
    """Load checkpoint ``ref``'s policy weights into the student (``algorithm.cfg.student_init``)."""
    path = as_path(ref)
    if not path.is_file():
        raise ConfigError(f"algorithm.cfg.student_init: {path}: no such checkpoint")
    state = load_checkpoint(path)
    if "policy" not in state:
        raise ConfigError(f"algorithm.cfg.student_init: {path} holds no policy weights")
    with checkpoint_fits(path):
        policy.load_state_dict(state["policy"])


def _check_fits(
    policy: TrainablePolicy,
    t_obs: gym.Space,
    t_action: gym.Space,
    obs_space: gym.Space,
    action_space: gym.Space,
    path: AnyPath,
) -> None:
    """``ConfigError`` unless the teacher reads observations the student's env has and acts in its space."""
    if space_to_dict(t_action) != space_to_dict(action_space):
        raise ConfigError(
            f"{KEY}: {path} acts in {space_to_dict(t_action)}, the env in {space_to_dict(action_space)}"
        )
    keys = policy.actor_obs_keys
    if keys is None:
        wanted: dict[str, Any] = {"obs": space_to_dict(t_obs)}
        have = {"obs": space_to_dict(obs_space)}
    else:
        assert isinstance(t_obs, gym.spaces.Dict), t_obs  # a policy with obs keys reads a Dict
        wanted = {k: space_to_dict(t_obs[k])["shape"] for k in keys}
        have = (
            {k: space_to_dict(s)["shape"] for k, s in obs_space.spaces.items()}
            if isinstance(obs_space, gym.spaces.Dict)
            else {}
        )
    for key, shape in wanted.items():
        if have.get(key) != shape:
            accepted = ", ".join(sorted(have)) or "none (flat observations)"
            raise ConfigError(
                f"{KEY}: {path} reads observation {key!r} {shape}, which the env does not "
                f"have alike (its groups: {accepted})"
            )
