"""``--resume`` of an off-policy run: its replay ring refilled from the run's own rollout stores.

The checkpoint holds no replay buffer, only how many rollouts the ring had taken
(``ring_newest``). Every rollout a run adds to its ring is stored (the store settings an off-policy
run accepts: :meth:`rlpipe.config.RunConfig._replay_memory_rebuildable`), so the newest
``min(capacity, ring_newest)`` stores up to the checkpoint's iteration are the ring's rollouts, read
back exact with their true final observations and added in order to the slots they held. The
continued run then samples what the uninterrupted one sampled.
"""

from __future__ import annotations

import time

from rlpipe.algorithms.offpolicy import OffPolicyAlgorithm
from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.fs import AnyPath
from rlpipe.artifacts.layout import ROLLOUT_NAME, numbered
from rlpipe.artifacts.shards import is_sharded, shard_paths
from rlpipe.config import ConfigError
from rlpipe.trainer.parts import Parts

__all__ = ["refill_ring"]


def refill_ring(parts: Parts, iteration: int) -> float:
    """Refill an off-policy algorithm's ring from the stores up to ``iteration``; the seconds it took.

    A no-op for an on-policy algorithm. A ring to refill without a store, or with one of its stores
    missing, is refused in one line naming what is missing.
    """
    algo = parts.algo
    if not isinstance(algo, OffPolicyAlgorithm):
        return 0.0
    start = time.perf_counter()
    count = algo.held_rollouts(parts.env.num_envs, parts.collector.horizon)
    if count == 0:
        return 0.0
    if parts.store is None or not parts.store.cfg.enabled:
        raise ConfigError(
            f"store.enabled: --resume of a {type(algo).__name__} run refills its replay ring from the "
            "run's rollout stores, and this run stores none; start it over (without --resume)"
        )
    wanted = ring_iterations(parts, iteration, count)
    stored = set(parts.store.iterations())
    missing = [k for k in wanted if k not in stored]
    if missing:
        raise StoreError(
            f"{parts.store.path_for(missing[0])}: missing; --resume refills the replay ring from the "
            f"newest {count} stores up to iteration {iteration} ({wanted[0]}..{wanted[-1]}), so the ring "
            "cannot be rebuilt"
        )
    from rlpipe.artifacts.zarr_read import read_rollout_final_obs  # zarr on first use, never at start-up

    rank = parts.dist.rank
    rollouts = []
    for k in wanted:
        rollout, _, final_obs = read_rollout_final_obs(_own_shard(parts.store.path_for(k), rank), algo.device)
        rollouts.append((rollout, final_obs))
    algo.refill(rollouts)
    return time.perf_counter() - start


def ring_iterations(parts: Parts, iteration: int, count: int) -> list[int]:
    """The iterations whose rollouts the ring held after ``iteration``: the newest ``count`` not refused.

    A rollout the non-finite guard refused (``rollouts/rejected/``) never joined the ring.
    """
    refused = set(numbered(parts.layout.rejected, ROLLOUT_NAME))
    return [k for k in range(1, iteration + 1) if k not in refused][-count:]


def _own_shard(path: AnyPath, rank: int) -> AnyPath:
    """The store of ``rank`` in an iteration folder (the folder itself in a one-process run)."""
    return shard_paths(path)[rank] if is_sharded(path) else path
