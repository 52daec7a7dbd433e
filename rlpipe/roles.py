"""What each rank of a distributed run does: rank 0 logs, checkpoints and evaluates.

Every rank collects into its own rollout shard. A single process is rank 0 of a world of one.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from rlpipe.checkpoints import clean_temporaries, rng_state
from rlpipe.config import ConfigError, RunConfig
from rlpipe.distributed import DistContext, barrier, gather_objects, rank_zero_decides
from rlpipe.shards import ShardedStore
from rlpipe.stages.checkpoint import Checkpointer
from rlpipe.stages.collect import Collector
from rlpipe.stages.stopping import Stopper
from rlpipe.store import RolloutStore
from rlpipe.tracking import Tracker, open_tracker
from rlpipe.tracking.console import MetricsFiles

__all__ = [
    "QuietTracker", "agree_stop", "claim_run_dir", "open_run_store", "open_run_tracker", "rank_states",
    "save_on_rank_zero", "select_rank_state",
]

RANK_STOPPED = "rank 0 stopped the run"
"""``stopped_by`` of the other ranks when rank 0's ``trainer.stop_when`` fired."""


class QuietTracker(Tracker):
    """The tracker of ranks other than 0: no console rows, no files, no MLflow run."""

    def __init__(self, cfg: RunConfig, run_dir: Path) -> None:
        self.cfg, self.table, self.mlflow = cfg, None, None
        self.files = MetricsFiles(run_dir)

    def log(self, metrics: dict[str, float], step: int) -> None:
        """Nothing: rank 0 logs for the run."""

    def finish(self, summary: dict[str, Any]) -> None:
        """Nothing: rank 0 writes ``metrics.json``."""


def open_run_tracker(cfg: RunConfig, ctx: DistContext) -> Tracker:
    """Rank 0: the tracker ``cfg.tracking`` asks for (its MLflow run tagged with the world size)."""
    return open_tracker(cfg, cfg.run_dir) if ctx.is_main else QuietTracker(cfg, cfg.run_dir)


def open_run_store(cfg: RunConfig, ctx: DistContext) -> RolloutStore | None:
    """The run's rollout store: whole iterations in one process, ``iter-N.zarr/rank-R`` shards in K."""
    if not cfg.store.enabled:
        return None
    root = cfg.run_dir / "rollouts"
    if ctx.active:
        return ShardedStore(root, cfg.store, ctx.rank, ctx.world_size)
    return RolloutStore(root, cfg.store)


def rank_states(collect: Collector) -> dict[str, Any]:
    """``{"ranks": [...]}``: every rank's collector and RNG state (a collective: all ranks call it)."""
    return {"ranks": gather_objects({"collector": collect.state_dict(), "rng": rng_state()})}


def select_rank_state(state: dict[str, Any], ctx: DistContext) -> dict[str, Any]:
    """``state`` with this rank's own collector and RNG state in place of rank 0's."""
    ranks = state.get("ranks")
    if not ctx.active or not ranks:
        return state
    if len(ranks) != ctx.world_size:
        raise ConfigError(f"trainer.distributed: checkpoint of {len(ranks)} ranks cannot resume "
                          f"{ctx.world_size} ranks")
    return {**state, **ranks[ctx.rank]}


def save_on_rank_zero(checkpoint: Checkpointer, iteration: int, state: dict[str, Any],
                      store: RolloutStore | None, ctx: DistContext) -> None:
    """Every rank's shard on disk, then rank 0 writes the checkpoint; every rank learns its path."""
    if store is not None:
        store.flush()  # never checkpoint past a rollout that is not on disk yet
    barrier()
    if ctx.is_main:
        checkpoint.save(iteration, state)
    barrier()
    if not ctx.is_main:
        checkpoint.last_saved = checkpoint.latest()


def agree_stop(stopper: Stopper, ctx: DistContext) -> None:
    """Rank 0's ``trainer.stop_when`` decides for every rank (only its metrics include evaluation)."""
    if not ctx.active:
        return
    stop = rank_zero_decides(stopper.stopped_by is not None)
    if not ctx.is_main:
        stopper.stopped_by = RANK_STOPPED if stop else None


def claim_run_dir(cfg: RunConfig, ctx: DistContext, checkpoints: Path, resume: bool, overwrite: bool) -> None:
    """Refuse (or, with ``overwrite``, clear) a run dir holding an earlier run; then create it.

    Rank 0 alone checks and deletes (and removes dead checkpoint temporaries); the others wait for it.
    """
    if ctx.is_main:
        earlier = [d for d in (checkpoints, cfg.run_dir / "rollouts") if d.is_dir() and any(d.iterdir())]
        if earlier and not resume:
            if not overwrite:
                raise ConfigError(f"{cfg.run_dir}: holds an earlier run; use --resume to continue it, "
                                  "--overwrite to replace it, or another trainer.exp_name")
            for directory in earlier:
                shutil.rmtree(directory)
            for name in ("metrics.json", "curve.csv"):
                (cfg.run_dir / name).unlink(missing_ok=True)
        cfg.run_dir.mkdir(parents=True, exist_ok=True)
        clean_temporaries(checkpoints)
    barrier()
