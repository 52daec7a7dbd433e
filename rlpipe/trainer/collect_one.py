"""``rlpipe collect``: one more rollout from a checkpoint, exactly as the online run would collect it."""

from __future__ import annotations

from rlpipe.artifacts.checkpoints import checkpoint_fits, latest_checkpoint, load_checkpoint
from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.fs import AnyPath, as_path
from rlpipe.artifacts.layout import rollout_name
from rlpipe.artifacts.lock import RunLock
from rlpipe.artifacts.store import write_rollout
from rlpipe.build import load_learner_state
from rlpipe.config import RunConfig
from rlpipe.trainer.state import rollout_attrs
from rlpipe.trainer.trainer import Trainer

__all__ = ["collect_rollout"]


def collect_rollout(cfg: RunConfig, checkpoint: AnyPath | None, out: AnyPath) -> AnyPath:
    """Collect one rollout with ``checkpoint``; write and return ``out/iter-NNNNNN.zarr``.

    ``checkpoint=None``: the latest of ``cfg.run_dir``. NNNNNN is the checkpoint's iteration + 1.
    An online checkpoint also restores the collector (carried observations, env and RNG state), so
    the store equals the rollout that run collected next, bit for bit on CPU; a checkpoint written
    by ``replay``/``update`` holds weights only, and collection starts from fresh env resets.
    """
    trainer = Trainer(cfg, store=False, evaluate=False)
    parts = trainer.parts
    path = as_path(checkpoint) if checkpoint else latest_checkpoint(parts.layout.checkpoints)
    if path is None:
        raise StoreError(f"{parts.layout.checkpoints}: no checkpoint here")
    state = load_checkpoint(path)
    if "policy" not in state or "algo" not in state:
        raise StoreError(f"{path}: not an rlpipe checkpoint (no 'policy' entry)")
    with checkpoint_fits(path):
        if "collector" in state and "rng" in state:
            trainer.load_state_dict(state)  # an online checkpoint: continue that run's collection exactly
        else:
            load_learner_state(parts.algo, state)
    iteration = int(state["iteration"]) + 1
    rollout, _ = parts.collector()
    target = as_path(out) / rollout_name(iteration)
    attrs = rollout_attrs(cfg, parts, iteration, int(state.get("env_steps", 0)), path.name)
    with RunLock(as_path(out), "rlpipe collect"):
        write_rollout(
            target,
            rollout,
            attrs,
            cfg.store.codec,
            cfg.store.chunk_envs,
            cfg.store.image_codec,
            parts.collector.final_obs,
        )
    return target
