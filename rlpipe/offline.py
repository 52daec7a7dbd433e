"""One stage against stored data, and offline replay: what the offline ``rlpipe`` commands run.

Each function builds the run's parts with :func:`rlpipe.pipeline.build` from the params (rollout
store and evaluation off: offline work writes only its own outputs), loads what it needs from disk
and writes its result; every problem with a file is a one-line ``StoreError`` naming it.

=======================  ==========================================================================
``collect_rollout``      checkpoint → ``out/iter-NNNNNN.zarr``, the rollout that run collected next
``compute_advantages``   rollout → ``iter-NNNNNN.advantage.zarr`` beside it (the rollout is untouched)
``update_from_rollout``  rollout + the checkpoint it was collected with → ``out/ckpt-NNNNNN.pt``
``evaluate_checkpoint``  checkpoint → ``<run_dir>/eval/metrics.json``
``inspect_rollout``      rollout → schema, layout, per-key and episode statistics
``replay``               stored rollouts → re-updated checkpoints, ``metrics.json``, ``curve.csv``
                         (:mod:`rlpipe.replay`)
=======================  ==========================================================================
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from pathlib import Path
from typing import Any

import torch
import zarr

from rlpipe.checkpoints import latest_checkpoint, load_checkpoint
from rlpipe.config import RunConfig, params_hash
from rlpipe.distributed import resolve_device
from rlpipe.inspect import describe_rollout
from rlpipe.pipeline import (
    EVAL_SEED_OFFSET,
    build,
    checkpoint_matches,
    restore,
    seed_everything,
    training_hash,
)
from rlpipe.policies import build_policy
from rlpipe.replay import (
    iteration_of,
    load_rollout,
    offline_config,
    replay,
    save_learner,
    update_once,
)
from rlpipe.rollout import DIM_NAMES
from rlpipe.stages import Evaluator
from rlpipe.stages.video import build_eval_env, video_path
from rlpipe.store import StoreError, write_rollout
from rlpipe.tracking import log_single_run, source_run_id

__all__ = [
    "advantage_path",
    "collect_rollout",
    "compute_advantages",
    "evaluate_checkpoint",
    "inspect_rollout",
    "replay",
    "update_from_rollout",
]


def _latest(directory: Path) -> Path:
    found = latest_checkpoint(directory) if directory.is_dir() else None
    if found is None:
        raise StoreError(f"{directory}: no checkpoint here")
    return found


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


# ------------------------------------------------------------------------------ one stage at a time


def collect_rollout(cfg: RunConfig, checkpoint: Path | None, out: Path) -> Path:
    """Collect one rollout with ``checkpoint``; write and return ``out/iter-NNNNNN.zarr``.

    ``checkpoint=None``: the latest of ``cfg.run_dir``. NNNNNN is the checkpoint's iteration + 1.
    An online checkpoint also restores the collector (carried observations, env and RNG state), so
    the store equals the rollout that run collected next, bit for bit on CPU; a checkpoint written
    by ``replay``/``update`` holds weights only, and collection starts from fresh env resets.
    """
    path = Path(checkpoint) if checkpoint else _latest(cfg.run_dir / "checkpoints")
    exp = build(offline_config(cfg))
    state = restore(exp, path, full=None)
    iteration = int(state["iteration"]) + 1
    rollout, _ = exp.collect()
    target = Path(out) / f"iter-{iteration:06d}.zarr"
    attrs = {
        "iteration": iteration, "env_steps": int(state.get("env_steps", 0)) + exp.steps_per_iteration,
        "env_id": cfg.env.id, "seed": cfg.trainer.seed, "params_hash": params_hash(cfg),
        "training_hash": training_hash(cfg), "checkpoint": path.name,
    }
    write_rollout(target, rollout, attrs, cfg.store.codec, cfg.store.chunk_envs)
    return target


def advantage_path(rollout_path: Path) -> Path:
    """Where ``compute_advantages`` writes by default: ``iter-NNNNNN.advantage.zarr`` beside the rollout."""
    path = Path(rollout_path)
    return path.with_name(f"{path.name.removesuffix('.zarr')}.advantage.zarr")


def compute_advantages(cfg: RunConfig, rollout_path: Path, out: Path | None = None) -> Path:
    """Run the advantage stage on a stored rollout; write its keys as a separate Zarr group.

    The group (default :func:`advantage_path`) holds one ``[N, T+1]`` float32 array per key the
    algorithm writes (PPO: ``advantage``, ``return``; padding slot T zero), chunked like the
    rollout, with attributes naming the rollout, its iteration and the algorithm block. An existing
    group is replaced atomically; the rollout itself is only read. Returns the group's path.
    """
    rollout_path = Path(rollout_path)
    target = Path(out) if out else advantage_path(rollout_path)
    if target.resolve() == rollout_path.resolve():
        raise StoreError(f"{target}: would overwrite the rollout; advantages go beside it")
    exp = build(offline_config(cfg))
    rollout, attrs = load_rollout(rollout_path, exp.device)
    exp.advantage(rollout)
    arrays = {key: rollout.get(key) for key in exp.algo.advantage_keys}
    meta = {"kind": "advantage", "rollout": rollout_path.name,
            "iteration": iteration_of(attrs, rollout_path), "algorithm": cfg.algorithm.to_dict(),
            "params_hash": params_hash(cfg)}
    _write_group(target, arrays, meta, cfg.store.chunk_envs)
    return target


def _write_group(path: Path, arrays: dict[str, torch.Tensor], attrs: dict[str, Any],
                 chunk_envs: int) -> None:
    """Write ``arrays`` (``[N, T+1, ...]``) as a Zarr v3 group at ``path``: temporary, then rename."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        group = zarr.open_group(tmp, mode="w-", zarr_format=3, attributes=attrs)
        for name, tensor in arrays.items():
            data = tensor.detach().cpu().numpy()
            n, *rest = data.shape
            group.create_array(name, data=data, chunks=(min(chunk_envs, n), *rest), compressors=(),
                               dimension_names=(*DIM_NAMES, *(f"feat{i}" for i in range(len(rest) - 1))))
        if path.exists():  # rename the old group away first: readers see one whole group or the other
            trash = path.with_name(f".{path.name}.del-{os.getpid()}-{secrets.token_hex(4)}")
            os.rename(path, trash)
            os.rename(tmp, path)
            shutil.rmtree(trash)
        else:
            os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def update_from_rollout(cfg: RunConfig, rollout_path: Path, checkpoint: Path | None,
                        out: Path) -> tuple[Path, dict[str, float]]:
    """Advantage + update of one stored rollout; write ``out/ckpt-NNNNNN.pt``; return it and the losses.

    NNNNNN is the rollout's iteration k, and the minibatch shuffle is that of online update k.
    ``checkpoint=None``: the weights the rollout was collected with — checkpoint k−1 in the run's
    ``checkpoints/`` beside the rollouts' folder, or the initial weights for k = 1 (otherwise use
    ``replay``, which rebuilds missing checkpoints). Advantages are recomputed from the rollout.
    """
    rollout_path = Path(rollout_path)
    exp = build(offline_config(cfg))
    rollout, attrs = load_rollout(rollout_path, exp.device)
    k = iteration_of(attrs, rollout_path)
    start = Path(checkpoint) if checkpoint else _collected_with(rollout_path, k)
    if start is not None:
        restore(exp, start, full=False)
    metrics = update_once(exp, rollout, attrs, k)
    origin = {"rollout": str(rollout_path), "start": str(start) if start else None}
    path = save_learner(exp, cfg, Path(out), k, int(attrs.get("env_steps", 0)), origin)
    return path, metrics


def _collected_with(rollout_path: Path, k: int) -> Path | None:
    if k == 1:
        return None
    directory = rollout_path.parent.parent / "checkpoints"
    path = directory / f"ckpt-{k - 1:06d}.pt"
    if not path.is_file():
        raise StoreError(f"{rollout_path}: no checkpoint of iteration {k - 1} under {directory} to "
                         "start from; pass --checkpoint, or use `rlpipe replay`, which rebuilds it")
    return path


def evaluate_checkpoint(cfg: RunConfig, checkpoint: Path | None = None,
                        out: Path | None = None) -> dict[str, float]:
    """Evaluate a checkpoint's policy with the ``eval`` params; write ``<run_dir>/eval/metrics.json``.

    ``checkpoint=None``: the latest of ``cfg.run_dir``. Builds ``eval.num_envs`` envs and the policy
    from ``cfg``, loads the weights and runs ``eval.num_episodes`` episodes per env (the policy's
    mode unless ``eval.deterministic`` is false). Returns ``eval/…`` metrics plus the checkpoint's
    ``iteration`` and ``env_steps``; also logged as an MLflow run of kind ``eval``. With ``eval.video``
    the first ``eval.video_envs`` envs are filmed to ``<run_dir>/eval/video-iter-NNNNNN.mp4``.
    """
    path = Path(checkpoint) if checkpoint else _latest(cfg.run_dir / "checkpoints")
    state = load_checkpoint(path)
    if "policy" not in state:
        raise StoreError(f"{path}: not an rlpipe checkpoint (no 'policy' entry)")
    device = resolve_device(cfg.trainer.device)
    seed_everything(cfg.trainer.seed)
    env, video = build_eval_env(cfg.env.id, cfg.eval.num_envs, device, cfg.env.cfg, cfg.eval)
    try:
        policy = build_policy(cfg.policy, env.observation_space, env.action_space, device)
        with checkpoint_matches(path):
            policy.load_state_dict(state["policy"])
        seed = cfg.eval.seed if cfg.eval.seed is not None else cfg.trainer.seed + EVAL_SEED_OFFSET
        evaluator = Evaluator(env, policy, cfg.eval.num_episodes, seed,
                              deterministic=cfg.eval.deterministic, video=video)
        metrics = evaluator(video_path(cfg.run_dir, int(state["iteration"])) if video else None)
    finally:
        env.close()
    env_steps = int(state.get("env_steps", 0))
    metrics |= {"iteration": float(state["iteration"]), "env_steps": float(env_steps)}
    run_id = log_single_run(cfg, metrics, run_dir=cfg.run_dir, kind="eval", step=env_steps,
                            parent_run_id=source_run_id(cfg.run_dir), checkpoint=path,
                            artifacts={"eval": evaluator.last_video} if evaluator.last_video else None)
    target = Path(out) if out else cfg.run_dir / "eval" / "metrics.json"
    _write_json(target, {**metrics, "checkpoint": str(path), "mlflow_run_id": run_id})
    return metrics


def inspect_rollout(path: Path) -> dict[str, Any]:
    """Schema, attributes, per-key layout and stats, and episode stats of one stored rollout.

    See :func:`rlpipe.inspect.describe_rollout`; ``advantage_store`` names the group
    ``compute_advantages`` wrote beside it, if any.
    """
    info = describe_rollout(Path(path))
    beside = advantage_path(Path(path))
    return info | {"advantage_store": str(beside) if beside.is_dir() else None}
