"""One stage against stored data: what ``rlpipe advantage``, ``update``, ``eval`` and ``inspect`` run.

Each rebuilds the run's algorithm (and its policy) from the run's params (and the spaces its artifacts
record), reads what it needs from the run directory and writes only its own outputs; every problem
with a file is a one-line ``StoreError`` naming it.

=======================  ==========================================================================
``compute_advantages``   rollout → ``<run_dir>/advantages/iter-NNNNNN.zarr`` (the rollout is untouched)
``update_from_rollout``  rollout + the checkpoint it was collected with → ``out/ckpt-NNNNNN.pt``
``evaluate_checkpoint``  checkpoint → ``<run_dir>/eval/metrics.json``
``inspect_rollout``      rollout → schema, layout, per-key and episode statistics
=======================  ==========================================================================
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import torch

from rlpipe.algorithms.finite import first_nonfinite_tensor, named_weights, weights_finite
from rlpipe.artifacts.atomic import atomic_write_json
from rlpipe.artifacts.checkpoints import checkpoint_fits, latest_checkpoint, load_checkpoint
from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.fs import AnyPath, as_path
from rlpipe.artifacts.layout import RunLayout
from rlpipe.artifacts.lock import RunLock
from rlpipe.artifacts.removal import output_folder
from rlpipe.artifacts.video import recorder_for
from rlpipe.artifacts.zarr_write import write_group
from rlpipe.config import ConfigError, RunConfig, params_hash
from rlpipe.config.offpolicy import OffPolicyCfg
from rlpipe.envs import build_eval_env
from rlpipe.evaluation import EVAL_SEED_OFFSET, Evaluator
from rlpipe.offline.describe import describe_rollout
from rlpipe.offline.rebuild import (
    load_algorithm_state,
    load_rollout,
    rebuild_algorithm,
    save_algorithm,
    spaces_of,
)
from rlpipe.offline.replay import iteration_of, update_once
from rlpipe.offline.replay_plan import missing_words, rebuild_start
from rlpipe.policies import build_policy
from rlpipe.rollout_checks import NonFiniteError
from rlpipe.runtime.distributed import resolve_device
from rlpipe.runtime.seeding import seed_everything
from rlpipe.tracking import log_single_run, source_run_id

__all__ = [
    "advantage_path",
    "compute_advantages",
    "evaluate_checkpoint",
    "inspect_rollout",
    "latest_of",
    "update_from_rollout",
]


def latest_of(layout: RunLayout) -> AnyPath:
    """The run's newest checkpoint; a ``StoreError`` naming the folder when there is none."""
    found = latest_checkpoint(layout.checkpoints) if layout.checkpoints.is_dir() else None
    if found is None:
        raise StoreError(f"{layout.checkpoints}: no checkpoint here")
    return found


def advantage_path(cfg: RunConfig, rollout_path: AnyPath) -> AnyPath:
    """Where ``compute_advantages`` writes by default: ``<run_dir>/advantages/iter-NNNNNN.zarr``."""
    return RunLayout(cfg.run_dir).advantages / as_path(rollout_path).name


def compute_advantages(cfg: RunConfig, rollout_path: AnyPath, out: AnyPath | None = None) -> AnyPath:
    """Run the advantage stage on a stored rollout; write its keys as a separate Zarr group.

    The group (default :func:`advantage_path`, outside ``rollouts/``) holds one ``[N, T+1]`` float32
    array per key the algorithm writes (PPO: ``advantage``, ``return``; padding slot T zero), chunked
    like the rollout, with attributes naming the rollout, its iteration and the algorithm block. An
    existing group is replaced atomically; the rollout itself is only read. Returns the group's path.
    """
    refuse_off_policy(
        cfg, "rlpipe advantage", "computes no advantages: its n-step targets are drawn per batch"
    )
    rollout_path = as_path(rollout_path)
    target = as_path(out) if out else advantage_path(cfg, rollout_path)
    if target.resolve() == rollout_path.resolve():
        raise StoreError(f"{target}: would overwrite the rollout; advantages go beside it")
    rollout, attrs = load_rollout(rollout_path, purpose="rlpipe advantage (the online advantages)")
    algo = rebuild_algorithm(cfg, spaces_of(attrs, rollout_path))
    algo.compute_advantages(rollout.to(algo.device))
    arrays = {key: rollout.get(key) for key in algo.advantage_keys}
    meta = {
        "kind": "advantage",
        "rollout": rollout_path.name,
        "iteration": iteration_of(attrs, rollout_path),
        "algorithm": cfg.algorithm.to_dict(),
        "params_hash": params_hash(cfg),
    }
    with RunLock(target.parent, "rlpipe advantage"):
        write_group(target, arrays, meta, cfg.store.chunk_envs, replace=True)
    return target


def update_from_rollout(
    cfg: RunConfig, rollout_path: AnyPath, checkpoint: Path | None, out: AnyPath, allow_rejected: bool = False
) -> tuple[AnyPath, dict[str, float]]:
    """Advantage + update of one stored rollout; write ``out/ckpt-NNNNNN.pt``; return it and the losses.

    NNNNNN is the rollout's iteration k, and the minibatch shuffle is that of online update k.
    ``checkpoint=None``: the weights the rollout was collected with — checkpoint k−1 in the run's
    ``checkpoints/`` beside the rollouts' folder, or the initial weights for k = 1 (otherwise the
    refusal names the command that works: ``replay``, which rebuilds it, or ``--checkpoint``).
    Advantages are recomputed from the rollout. A rejected rollout is refused unless
    ``allow_rejected``. Every refusal comes before ``out`` is created; ``out`` is locked while written.
    """
    refuse_off_policy(cfg, "rlpipe update", "updates from a replay ring of many rollouts, not from one")
    rollout_path = as_path(rollout_path)
    rollout, attrs = load_rollout(
        rollout_path, allow_rejected=allow_rejected, purpose="rlpipe update (the online update)"
    )
    algo = rebuild_algorithm(cfg, spaces_of(attrs, rollout_path))
    k = iteration_of(attrs, rollout_path)
    start = as_path(checkpoint) if checkpoint else _collected_with(rollout_path, k)
    if start is not None:
        load_algorithm_state(algo, start)
    metrics = update_once(algo, rollout.to(algo.device), attrs, k, cfg.trainer.iterations)
    origin = {"rollout": str(rollout_path), "start": str(start) if start else None}
    with output_folder(out), RunLock(out, "rlpipe update"):
        path = save_algorithm(
            algo, cfg, as_path(out), k, int(attrs.get("env_steps", 0)), origin, attrs.get("spaces")
        )
    return path, metrics


def refuse_off_policy(cfg: RunConfig, command: str, why: str) -> None:
    """A one-line ``ConfigError`` when ``cfg``'s algorithm is off-policy, which ``command`` cannot serve."""
    if isinstance(cfg.algorithm.cfg, OffPolicyCfg):
        raise ConfigError(
            f"algorithm.name: {cfg.algorithm.name} {why}; {command} serves on-policy algorithms "
            "(ppo, grpo, distillation); `rlpipe replay RUN` re-runs an off-policy run's updates"
        )


def _collected_with(rollout_path: AnyPath, k: int) -> AnyPath | None:
    if k == 1:
        return None
    layout = RunLayout.of_rollouts(rollout_path.parent)
    path = layout.checkpoint(k - 1)
    if not path.is_file():
        raise StoreError(
            f"{rollout_path}: no checkpoint of iteration {k - 1} under {layout.checkpoints} to "
            f"start from; {_instead(layout, rollout_path, k)}"
        )
    return path


def _instead(layout: RunLayout, rollout_path: AnyPath, k: int) -> str:
    """What works instead: the replay that rebuilds checkpoint k−1, else an update from other weights."""
    stored, checkpoints = layout.rollout_paths(), layout.checkpoint_paths()
    own = stored.get(k) == rollout_path and layout.params.is_file()
    if own and rebuild_start(checkpoints, stored, k - 1) is not None:
        command = shlex.join(["rlpipe", "replay", str(layout.root), "--iterations", str(k)])
        return f"`{command}` rebuilds it from the stored rollouts and updates this one bit for bit"
    gap = f"the rollouts to rebuild it from are {missing_words(stored)}" if stored else "nothing rebuilds it"
    earlier = [c for c in checkpoints if c < k]
    if not earlier:
        return f"{gap}: pass --checkpoint FILE, the weights to update from"
    command = ["rlpipe", "update", str(layout.root), str(rollout_path), "--checkpoint"]
    return (
        f"{gap}: update from other weights than those that collected it, e.g. "
        f"`{shlex.join([*command, str(checkpoints[earlier[-1]])])}`"
    )


def evaluate_checkpoint(
    cfg: RunConfig, checkpoint: AnyPath | None = None, out: AnyPath | None = None
) -> dict[str, float]:
    """Evaluate a checkpoint's policy with the ``eval`` params; write ``<run_dir>/eval/metrics.json``.

    ``checkpoint=None``: the latest of ``cfg.run_dir``. Builds ``eval.num_envs`` envs and the policy
    from ``cfg``, loads the weights and runs ``eval.num_episodes`` episodes per env (the policy's
    mode unless ``eval.deterministic`` is false). Returns ``eval/…`` metrics plus the checkpoint's
    ``iteration`` and ``env_steps``; also logged as an MLflow run of kind ``eval``. With ``eval.video``
    the first ``eval.video_envs`` envs are filmed to ``<run_dir>/eval/video-iter-NNNNNN.mp4``.
    """
    layout = RunLayout(cfg.run_dir)
    path = as_path(checkpoint) if checkpoint else latest_of(layout)
    state = load_checkpoint(path)
    if "policy" not in state:
        raise StoreError(f"{path}: not an rlpipe checkpoint (no 'policy' entry)")
    device = resolve_device(cfg.trainer.device)
    seed_everything(cfg.trainer.seed)
    env, problem = build_eval_env(
        cfg.env.id, cfg.eval.num_envs, device, cfg.env.cfg, cfg.eval.video, cfg.env.backend
    )
    try:
        policy = build_policy(cfg.policy, env.observation_space, env.action_space, device)
        with checkpoint_fits(path):
            policy.load_state_dict(state["policy"])
        refuse_nonfinite_weights(path, policy)
        seed = cfg.eval.seed if cfg.eval.seed is not None else cfg.trainer.seed + EVAL_SEED_OFFSET
        evaluator = Evaluator(
            env,
            policy,
            cfg.eval.num_episodes,
            seed,
            deterministic=cfg.eval.deterministic,
            video=recorder_for(cfg.eval, problem),
        )
        metrics = evaluator(layout.eval_video(int(state["iteration"])))
    finally:
        env.close()
    env_steps = int(state.get("env_steps", 0))
    metrics |= {"iteration": float(state["iteration"]), "env_steps": float(env_steps)}
    run_id = log_single_run(
        cfg,
        metrics,
        run_dir=layout.root,
        kind="eval",
        step=env_steps,
        parent_run_id=source_run_id(layout.root),
        checkpoint=path,
        artifacts={"eval": evaluator.last_video} if evaluator.last_video else None,
    )
    target = as_path(out) if out else layout.eval_metrics
    with RunLock(target.parent, "rlpipe eval"):
        atomic_write_json(target, {**metrics, "checkpoint": str(path), "mlflow_run_id": run_id})
    return metrics


def refuse_nonfinite_weights(path: AnyPath, policy: torch.nn.Module) -> None:
    """``NonFiniteError`` (exit 3) naming the checkpoint and the weight when a weight is NaN/Inf."""
    if bool(weights_finite(policy)):
        return
    name = first_nonfinite_tensor(named_weights(policy)) or "weights"
    raise NonFiniteError(f"{path}: non-finite weight {name!r}; evaluate an earlier checkpoint", name)


def inspect_rollout(path: AnyPath) -> dict[str, Any]:
    """Schema, attributes, per-key layout and stats, and episode stats of one stored rollout."""
    return describe_rollout(as_path(path))
