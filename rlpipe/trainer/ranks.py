"""What each rank of a run does: every rank collects into its own shard; rank 0 logs, checkpoints, evaluates.

A single process is rank 0 of a world of one.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from tensordict import TensorDict

from rlpipe.artifacts.checkpoints import Checkpointer, clean_temporaries
from rlpipe.artifacts.layout import RunLayout
from rlpipe.artifacts.lock import RunLock
from rlpipe.artifacts.removal import delete
from rlpipe.artifacts.shards import ShardedStore
from rlpipe.artifacts.store import RolloutStore
from rlpipe.artifacts.store_policy import derive_policy, layout_of
from rlpipe.collector import Collector
from rlpipe.config import ConfigError, RunConfig
from rlpipe.runtime.distributed import DistContext, barrier, gather_objects, rank_zero_decides
from rlpipe.runtime.seeding import rng_state
from rlpipe.tracking import Tracker, open_tracker
from rlpipe.trainer.stopping import Stopper

__all__ = [
    "agree_flag",
    "agree_stop",
    "claim_run_dir",
    "hold_run_dir",
    "open_run_store",
    "open_run_tracker",
    "rank_states",
    "save_on_rank_zero",
    "select_rank_state",
]

RANK_STOPPED = "rank 0 stopped the run"
"""``stopped_by`` of the other ranks when rank 0's ``trainer.stop_when`` fired."""


def open_run_tracker(
    cfg: RunConfig,
    layout: RunLayout,
    ctx: DistContext,
    resume_curve: list[str] | None = None,
    run_id: str | None = None,
) -> Tracker:
    """Rank 0: the tracker ``cfg.tracking`` asks for; the other ranks: a silent one (no rows, files or run).

    ``resume_curve``: the header of the kept ``curve.csv`` a resumed run appends to; ``run_id``: the
    MLflow run a resumed run reopens.
    """
    if not ctx.is_main:
        return Tracker.silent_tracker(cfg, layout.root)
    return open_tracker(cfg, layout.root, curve_fields=resume_curve, run_id=run_id)


@contextlib.contextmanager
def hold_run_dir(layout: RunLayout, ctx: DistContext) -> Iterator[None]:
    """Rank 0 holds the run dir's writer lock for the body (the other ranks write under its lock)."""
    if not ctx.is_main:
        yield
        return
    with RunLock(layout.root, "rlpipe run"):
        yield


def agree_flag(flag: bool, ctx: DistContext) -> bool:
    """Rank 0's ``flag`` on every rank (a signal may reach the ranks at different iterations)."""
    return rank_zero_decides(flag) if ctx.active else flag


def open_run_store(
    cfg: RunConfig, layout: RunLayout, ctx: DistContext, rollout: TensorDict
) -> RolloutStore | None:
    """The run's rollout store: whole iterations in one process, ``iter-N.zarr/rank-R`` shards in K.

    ``rollout``: one rank's rollout as stored (the advantage keys left out), from which the store
    policy (``store.every``/``envs``/``precision``, or a ``store.budget``) is derived.
    """
    if not cfg.store.enabled:
        return None
    policy = derive_policy(cfg.store, layout_of(rollout), cfg.trainer.iterations, ctx.world_size)
    if ctx.active:
        return ShardedStore(layout.rollouts, cfg.store, ctx.rank, ctx.world_size, policy)
    return RolloutStore(layout.rollouts, cfg.store, policy)


def rank_states(collect: Collector) -> dict[str, Any]:
    """``{"ranks": [...]}``: every rank's collector and RNG state (a collective: all ranks call it)."""
    return {"ranks": gather_objects({"collector": collect.state_dict(), "rng": rng_state()})}


def select_rank_state(state: dict[str, Any], ctx: DistContext) -> dict[str, Any]:
    """``state`` with this rank's own collector and RNG state in place of rank 0's."""
    ranks = state.get("ranks")
    if not ctx.active or not ranks:
        return state
    if len(ranks) != ctx.world_size:
        raise ConfigError(
            f"trainer.distributed: checkpoint of {len(ranks)} ranks cannot resume {ctx.world_size} ranks"
        )
    return {**state, **ranks[ctx.rank]}


def save_on_rank_zero(
    checkpoint: Checkpointer,
    iteration: int,
    state: dict[str, Any],
    store: RolloutStore | None,
    ctx: DistContext,
) -> None:
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


def claim_run_dir(layout: RunLayout, ctx: DistContext, resume: bool, overwrite: bool) -> None:
    """Refuse (or, with ``overwrite``, clear) a run dir holding an earlier run; then create it.

    ``overwrite`` removes everything the earlier run wrote, derived outputs (``eval/``, ``reupdate/``…)
    included, so no file of it survives into the new run; entries rlpipe does not write are kept
    (and named), links inside the run dir are unlinked, never followed. A run dir that is itself a
    symbolic link is refused: clearing it would empty a folder rlpipe did not create. Rank 0 alone
    checks and deletes (and removes dead checkpoint temporaries); the others wait for it.
    """
    if ctx.is_main:
        if layout.holds_run() and not resume:
            if not overwrite:
                raise ConfigError(
                    f"{layout.root}: holds an earlier run; use --resume to continue it, "
                    "--overwrite to replace it (from Python: Trainer(..., resume=True) or "
                    "overwrite=True), or another trainer.exp_name"
                )
            _clear_earlier_run(layout)
        layout.root.mkdir(parents=True, exist_ok=True)
        clean_temporaries(layout.checkpoints)
        clean_temporaries(layout.root)  # params.yaml / metrics.json writes a killed run left behind
    barrier()


def _clear_earlier_run(layout: RunLayout) -> None:
    """``--overwrite``: delete what rlpipe wrote in the run dir (not the lock this process holds)."""
    if layout.root.is_symlink():
        raise ConfigError(
            f"{layout.root}: is a symbolic link (to {layout.root.resolve()}); --overwrite "
            "never deletes through a link: remove the link to start afresh here, or clear the "
            "earlier run where it points yourself"
        )
    for entry in layout.written_entries():
        delete(entry, within=layout.root)
    foreign = sorted(p.name for p in layout.root.iterdir() if p != layout.lock)
    if foreign:
        print(
            f"Warning: --overwrite kept {len(foreign)} entries of {layout.root} that rlpipe did not write: "
            f"{', '.join(foreign[:5])}{' …' if len(foreign) > 5 else ''}",
            file=sys.stderr,
        )
