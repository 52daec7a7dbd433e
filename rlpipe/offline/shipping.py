"""Ship a trained policy: ``rlpipe export`` (verified ONNX/TorchScript) and ``rlpipe eval --policy``.

:func:`export_run` loads a checkpoint of a run, writes its deterministic actor
(:mod:`rlpipe.policies.export`) with a metadata JSON beside it, runs the written file on a batch of
observations — the run's latest stored rollout, or fresh env observations when the run stored
none — and publishes the files only if every action equals the checkpoint's deterministic action
within :data:`TOLERANCE`; otherwise :class:`ExportMismatch` and no file is left. Dict observations
are fed group by group as stored (image groups uint8), as a deployment would feed them.

:func:`evaluate_policy_file` scores an exported file in the env like ``rlpipe eval`` scores a
checkpoint (same eval envs, seeds and metrics).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict

from rlpipe.artifacts.atomic import atomic_write_json, staged_files
from rlpipe.artifacts.checkpoints import checkpoint_fits, load_checkpoint
from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.fs import AnyPath, as_path
from rlpipe.artifacts.layout import EXPORT_FILES, RunLayout
from rlpipe.artifacts.shards import read_any
from rlpipe.artifacts.video import recorder_for
from rlpipe.config import RunConfig, params_hash, training_hash
from rlpipe.envs import BatchedEnv, build_env, build_eval_env
from rlpipe.evaluation import EVAL_SEED_OFFSET, Evaluator
from rlpipe.offline.commands import latest_of
from rlpipe.policies import TrainablePolicy, build_policy
from rlpipe.policies.export import DeployedActor, export_onnx, export_torchscript
from rlpipe.policies.export_metadata import export_metadata
from rlpipe.policies.exported import ExportedModel, ExportedPolicy
from rlpipe.policies.obs_keys import space_shape
from rlpipe.runtime.distributed import resolve_device
from rlpipe.runtime.seeding import seed_everything
from rlpipe.tracking import log_single_run, source_run_id
from rlpipe.version import __version__

__all__ = [
    "TOLERANCE",
    "ExportMismatch",
    "ExportResult",
    "evaluate_policy_file",
    "export_run",
    "resolve_checkpoint",
]

TOLERANCE = 1e-5
"""Largest accepted |exported action − checkpoint action|, per action component."""
VERIFY_ENVS, VERIFY_STEPS = 64, 32
"""The verification batch: up to this many envs × time steps of observations."""


class ExportMismatch(Exception):
    """The exported file's actions differ from the checkpoint's (the CLI exits with code 3)."""


@dataclass(frozen=True)
class ExportResult:
    """What :func:`export_run` wrote and how it was verified."""

    path: AnyPath
    metadata_path: AnyPath
    observations: int
    source: str
    max_abs_diff: float


def resolve_checkpoint(cfg: RunConfig, checkpoint: AnyPath | int | None) -> AnyPath:
    """A checkpoint file: ``None`` → the run's latest, an int N → ``ckpt-N``, else the path given."""
    layout = RunLayout(cfg.run_dir)
    if checkpoint is None:
        return latest_of(layout)
    path = layout.checkpoint(checkpoint) if isinstance(checkpoint, int) else as_path(checkpoint)
    if not path.is_file():
        raise StoreError(f"{path}: checkpoint not found")
    return path


def _trained_policy(cfg: RunConfig, path: AnyPath, env: BatchedEnv) -> tuple[TrainablePolicy, dict[str, Any]]:
    state = load_checkpoint(path)
    if "policy" not in state:
        raise StoreError(f"{path}: not an rlpipe checkpoint (no 'policy' entry)")
    policy = build_policy(cfg.policy, env.observation_space, env.action_space, "cpu")
    with checkpoint_fits(path):
        policy.load_state_dict(state["policy"])
    return policy.eval(), state


# ---------------------------------------------------------------------------------- verification


Observations = torch.Tensor | TensorDict
"""A verification batch ``[n, L]``: flat ``[n, L, obs_dim]`` float32, or a TensorDict of groups as stored."""


def _stored_observations(cfg: RunConfig) -> tuple[Observations, torch.Tensor, str] | None:
    """``(obs [n, L], done [n, L], source)`` from the latest stored rollout, or ``None``.

    Dict observations keep every group in its stored dtype (image groups uint8).
    """
    stored = RunLayout(cfg.run_dir).rollout_paths()
    if not stored:
        return None
    path = stored[max(stored)]
    rollout, _ = read_any(path)
    n, steps = min(VERIFY_ENVS, rollout.shape[0]), min(VERIFY_STEPS, rollout.shape[1] - 1)
    obs = rollout.get("obs")[:n, :steps]
    obs = obs if isinstance(obs, TensorDict) else obs.flatten(2).float()
    done = rollout.get("done")[:n, :steps].bool()
    return obs, done, f"stored rollout {path.name}"


def _env_observations(
    policy: TrainablePolicy, env: BatchedEnv, seed: int
) -> tuple[Observations, torch.Tensor, str]:
    """``(obs [N, L], done [N, L], source)`` from the policy acting in ``env`` (store off)."""
    obs, observations, dones = env.reset(seed=seed), [], []
    state = policy.initial_state(env.num_envs) if policy.is_recurrent else None
    with torch.inference_mode():
        for _ in range(VERIFY_STEPS):
            flat = not isinstance(obs, TensorDict)
            observations.append(obs.flatten(1).float().cpu() if flat else obs.cpu().clone())
            if state is not None:
                action, _, _, state = policy.sample_step(obs, state, deterministic=True)
            else:
                action = policy.act(obs, deterministic=True)
            result = env.step(action)
            done = result.terminated | result.truncated
            if state is not None:
                state = state * (~done).unsqueeze(-1).to(state.dtype)
            dones.append(done.cpu())
            obs = result.obs
    source = f"{env.num_envs} fresh envs (no stored rollout)"
    return torch.stack(observations, 1), torch.stack(dones, 1), source


def _host(obs: Observations) -> np.ndarray | dict[str, np.ndarray]:
    """What :class:`ExportedModel` takes: one array, or one per observation group."""
    if isinstance(obs, TensorDict):
        return {str(key): obs[key].numpy() for key in obs.keys()}  # groups: every key is a str
    return obs.numpy()


def _max_difference(
    policy: TrainablePolicy, actor: DeployedActor, model: ExportedModel, obs: Observations, done: torch.Tensor
) -> float:
    """Max |action of the file − checkpoint's deterministic action| over ``obs`` ``[n, L]``.

    Recurrent policies run each env's L steps in order from a zero state (reset after ``done``),
    the file carrying its own state, so the file is checked the way a robot runs it.
    """
    bounds = actor.action_bounds

    def reference(action: torch.Tensor) -> np.ndarray:
        action = action if bounds is None else torch.minimum(torch.maximum(action, bounds[0]), bounds[1])
        return action.double().numpy()

    with torch.inference_mode():
        if not policy.is_recurrent:
            flat = obs.flatten(0, 1)
            return float(
                np.abs(
                    model(_host(flat))[0].astype(np.float64) - reference(policy.act(flat, deterministic=True))
                ).max()
            )
        worst = 0.0
        ref_state = policy.initial_state(obs.shape[0])
        file_state = ref_state.numpy().copy()
        for t in range(obs.shape[1]):
            expected, _, _, ref_state = policy.sample_step(obs[:, t], ref_state, deterministic=True)
            got, file_state = model(_host(obs[:, t]), file_state)
            worst = max(worst, float(np.abs(got.astype(np.float64) - reference(expected)).max()))
            keep = (~done[:, t]).unsqueeze(-1)
            ref_state, file_state = ref_state * keep, file_state * keep.numpy()
        return worst


# ---------------------------------------------------------------------------------------- export


def export_run(
    cfg: RunConfig, checkpoint: AnyPath | int | None, fmt: str, out: AnyPath | None
) -> ExportResult:
    """Export, verify and publish a checkpoint's deterministic actor; see the module docstring.

    Writes ``out/policy.onnx`` (or ``policy.pt``) and ``<file>.json`` (default ``out``:
    ``<run_dir>/export``). Raises :class:`ExportMismatch` when verification fails.
    """
    if fmt not in EXPORT_FILES:
        raise ValueError(f"--format: got {fmt!r}; accepted: {', '.join(EXPORT_FILES)}")
    path = resolve_checkpoint(cfg, checkpoint)
    seed_everything(cfg.trainer.seed)
    env = build_env(cfg.env.id, min(cfg.eval.num_envs, VERIFY_ENVS), "cpu", cfg.env.cfg, cfg.env.backend)
    try:
        policy, state = _trained_policy(cfg, path, env)
        actor = DeployedActor(policy, env.observation_space, env.action_space)
        batch = _stored_observations(cfg) if cfg.store.enabled else None
        obs, done, source = batch or _env_observations(policy, env, cfg.trainer.seed + EVAL_SEED_OFFSET)
        metadata = export_metadata(
            actor,
            env.observation_space,
            env.action_space,
            policy,
            format=fmt,
            env_id=cfg.env.id,
            policy_name=cfg.policy.name,
            checkpoint=path.name,
            iteration=int(state.get("iteration", 0)),
            env_steps=int(state.get("env_steps", 0)),
            params_hash=params_hash(cfg),
            training_hash=training_hash(cfg),
            rlpipe_version=__version__,
            torch_version=torch.__version__,
        )
    finally:
        env.close()
    target = RunLayout(cfg.run_dir).exported(fmt, out)
    return _write_verified(policy, actor, metadata, obs, done, source, target)


def _write_verified(
    policy: TrainablePolicy,
    actor: DeployedActor,
    metadata: dict[str, Any],
    obs: Observations,
    done: torch.Tensor,
    source: str,
    target: AnyPath,
) -> ExportResult:
    """Write into a temporary folder beside ``target``, verify, then move both files into place."""
    sidecar = RunLayout.export_metadata(target)
    with staged_files(target.parent, target.name) as tmp:
        written = tmp / target.name
        write = export_onnx if metadata["format"] == "onnx" else export_torchscript
        write(actor, written, metadata)
        diff = _max_difference(policy, actor, ExportedModel(written), obs, done)
        count = int(obs.shape[0] * obs.shape[1])
        if not diff <= TOLERANCE:
            raise ExportMismatch(
                f"{target.name}: exported actions differ from the checkpoint's by up to "
                f"{diff:.3g} (> {TOLERANCE:g}) on {count} observations of {source}; "
                "nothing written"
            )
        verified = {
            "observations": count,
            "source": source,
            "max_abs_diff": diff,
            "tolerance": TOLERANCE,
            "runtime": "onnxruntime" if metadata["format"] == "onnx" else "torch.jit",
        }
        atomic_write_json(
            tmp / sidecar.name, {"file": target.name, **metadata, "verified": verified}, fsync=False
        )
    return ExportResult(target, sidecar, count, source, diff)


# ------------------------------------------------------------------------------------------ eval


def evaluate_policy_file(cfg: RunConfig, policy_file: Path, out: Path | None = None) -> dict[str, float]:
    """Score an exported file with the ``eval`` params (as ``rlpipe eval`` scores a checkpoint).

    Writes ``out`` (default ``<run_dir>/eval/policy-metrics.json``); with ``eval.video`` also films
    the first ``eval.video_envs`` envs to ``<run_dir>/eval/video-<file stem>-iter-NNNNNN.mp4``.
    Logged as an MLflow run of kind ``eval`` (the video as an artifact under ``eval/``).
    """
    layout = RunLayout(cfg.run_dir)
    model = ExportedModel(policy_file)
    device = resolve_device(cfg.trainer.device)
    seed_everything(cfg.trainer.seed)
    env, problem = build_eval_env(
        cfg.env.id, cfg.eval.num_envs, device, cfg.env.cfg, cfg.eval.video, cfg.env.backend
    )
    iteration, env_steps = int(model.metadata.get("iteration", 0)), int(model.metadata.get("env_steps", 0))
    try:
        _check_spaces(model, env)
        seed = cfg.eval.seed if cfg.eval.seed is not None else cfg.trainer.seed + EVAL_SEED_OFFSET
        evaluator = Evaluator(
            env,
            ExportedPolicy(model, device),
            cfg.eval.num_episodes,
            seed,
            video=recorder_for(cfg.eval, problem),
        )
        metrics = evaluator(layout.eval_video(iteration, model.path.name))
    finally:
        env.close()
    metrics |= {"iteration": float(iteration), "env_steps": float(env_steps)}
    run_id = log_single_run(
        cfg,
        metrics,
        run_dir=layout.root,
        kind="eval",
        step=env_steps,
        run_name=f"eval-{model.path.name}",
        parent_run_id=source_run_id(layout.root),
        artifacts={"eval": evaluator.last_video} if evaluator.last_video else None,
    )
    atomic_write_json(
        as_path(out) if out else layout.policy_eval_metrics,
        {**metrics, "policy": str(model.path), "mlflow_run_id": run_id},
    )
    return metrics


def _check_spaces(model: ExportedModel, env: BatchedEnv) -> None:
    """One-line error when the file was exported for other observation groups, sizes or actions."""
    _check_observations(model, env.observation_space)
    action = model.metadata["action"]
    env_action = (
        {"n": int(env.action_space.n)}
        if env.action_dtype == torch.int64
        else {"shape": list(env.action_shape)}
    )
    file_action = {key: action[key] for key in env_action if key in action}
    if file_action != env_action:
        raise StoreError(f"{model.path}: exported for action {file_action}; the env's {env_action} differs")


def _check_observations(model: ExportedModel, space: gym.Space) -> None:
    groups = space.spaces if isinstance(space, gym.spaces.Dict) else None
    if model.obs_keys is None:
        if groups is not None or model.obs_dim != int(np.prod(space_shape(space))):
            given = f"groups {', '.join(groups)}" if groups is not None else f"shape {space_shape(space)}"
            raise StoreError(
                f"{model.path}: exported for flat observations of size {model.obs_dim}; "
                f"the env's observation ({given}) differs"
            )
        return
    for key, group in model.groups.items():
        if groups is None or key not in groups:
            has = ", ".join(groups) if groups is not None else "one flat observation"
            raise StoreError(f"{model.path}: reads observation group {key!r}; the env has {has}")
        env_group = (list(space_shape(groups[key])), str(np.dtype(groups[key].dtype)))
        if env_group != (group["shape"], group["dtype"]):
            raise StoreError(
                f"{model.path}: observation group {key!r} exported as {group['dtype']} "
                f"{group['shape']}; the env gives {env_group[1]} {env_group[0]}"
            )
