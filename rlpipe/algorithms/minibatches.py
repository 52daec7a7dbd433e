"""Minibatches of the update: row selections per epoch, rows taken as a TensorDict, and the stats tally.

``BaseAlgorithm.update`` runs the epochs × minibatches loop with these: a fresh permutation per
epoch from the algorithm's shuffle generator (or contiguous slices), ``num_mini_batches`` or
``batch_size`` rows, and — for one process over K ranks' rollouts (``algo.shards``) — every rank's
own minibatch i side by side. Stats are summed over every minibatch forward (weighted by rows when
the algorithm asks) and read back to the host once (:func:`report`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from tensordict import TensorDict

from rlpipe.runtime.distributed import sharded_minibatch_indices

if TYPE_CHECKING:
    from rlpipe.algorithms.base import BaseAlgorithm

__all__ = ["KL_STAT", "Tally", "minibatch_indices", "minibatch_slices", "report", "take_rows"]

KL_STAT = "approx_kl"
"""The stat the KL rules read (every loss reports it)."""


@dataclass
class Tally:
    """Running sums of the minibatch stats and the loop's counters."""

    names: tuple[str, ...] = ()
    totals: torch.Tensor | None = None
    weight: float = 0.0
    forwards: int = 0
    minibatch_steps: int = 0
    optimizer_steps: int = 0
    early_stop_epoch: int = 0

    def add(self, stats: dict[str, torch.Tensor], weight: float | None) -> None:
        """Add one minibatch's stats (``weight`` rows, or one plain count when ``None``)."""
        values = torch.stack(list(stats.values()))
        if weight is not None:
            values = values * weight
        if self.totals is None:
            self.names, self.totals = tuple(stats), values
        else:
            self.totals += values
        self.weight += 1.0 if weight is None else weight
        self.forwards += 1


def take_rows(columns: dict[str, torch.Tensor | TensorDict], idx: torch.Tensor | slice) -> TensorDict:
    """Rows ``idx`` of every column, as a TensorDict ``[B]``.

    Indexing the columns one by one and wrapping them is cheaper than indexing the batch
    TensorDict itself (its generic ``__getitem__``), once per minibatch.
    """
    rows = {key: value[idx] for key, value in columns.items()}
    return TensorDict(rows, batch_size=[next(iter(rows.values())).shape[0]])


def minibatch_slices(
    algo: BaseAlgorithm, rows: int, size: int, shards: int = 1
) -> Iterator[torch.Tensor | slice]:
    """Row selections of one epoch: shuffled index tensors, contiguous slices, or K shards side by side.

    ``rows`` is one shard's row count; with ``shards`` K > 1 the batch holds K such shards.
    """
    if shards > 1:  # one process over K ranks' rollouts: rank r's slice of every minibatch
        yield from sharded_minibatch_indices(rows, shards, size, algo.device, algo.generator,
                                             algo.cfg.shuffle_minibatches)
    elif algo.cfg.shuffle_minibatches:
        yield from minibatch_indices(rows, size, algo.device, algo.generator)
    else:
        yield from (slice(start, start + size) for start in range(0, rows, size))


def minibatch_indices(
    num_samples: int, batch_size: int, device: torch.device, generator: torch.Generator | None = None
) -> Iterator[torch.Tensor]:
    """Shuffled index tensors of ``batch_size`` (the last one may be smaller) covering every sample once."""
    perm = torch.randperm(num_samples, device=device, generator=generator)
    for start in range(0, num_samples, batch_size):
        yield perm[start : start + batch_size]


def report(algo: BaseAlgorithm, tally: Tally, extra: dict[str, torch.Tensor]) -> dict[str, float]:
    """Means of the stats, then ``extra`` (0-dim diagnostics), the schedule values and the counters.

    One host sync for all tensors.
    """
    if tally.totals is None:  # no forward ran on this rank: report the diagnostics only
        means: list[float] = []
        values = torch.stack(list(extra.values())).tolist() if extra else []
    else:
        tail = [t.to(tally.totals).reshape(1) for t in extra.values()]
        values = torch.cat([tally.totals / max(tally.weight, 1.0), *tail]).tolist()
        means, values = values[:len(tally.names)], values[len(tally.names):]
    stats = dict(zip(tally.names, means)) | dict(zip(extra, values))
    stats |= {"learning_rate": algo.learning_rate, "ent_coef": float(algo.ent_coef),
              "minibatch_steps": float(tally.minibatch_steps),
              "optimizer_steps": float(tally.optimizer_steps)}
    if algo.cfg.target_kl is not None:
        stats["early_stop_epoch"] = float(tally.early_stop_epoch)
    return stats
