"""Minibatches of the update: row selections per epoch, rows taken as a TensorDict, and the stats tally.

``BaseAlgorithm.update`` runs the epochs × minibatches loop with these: a fresh permutation per
epoch from the algorithm's shuffle generator (or contiguous slices), ``num_mini_batches`` or
``batch_size`` rows, and — for one process over K ranks' rollouts (``algo.shards``) — every rank's
own minibatch i side by side. Stats are summed over every minibatch forward (weighted by rows when
the algorithm asks) and read back to the host once (:meth:`Tally.means`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from tensordict import TensorDict

from rlpipe.runtime.distributed import sharded_minibatch_indices

if TYPE_CHECKING:
    from tensordict.base import CompatibleType

__all__ = ["KL_STAT", "Minibatch", "Tally", "minibatch_indices", "minibatch_slices", "take_rows"]

KL_STAT = "approx_kl"
"""The stat the KL rules read (every loss reports it)."""

Minibatch = TensorDict | Mapping[str, torch.Tensor]
"""What a loss reads: a TensorDict ``[B]`` (plain mappings of ``[B, ...]`` tensors work too)."""


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

    def means(self, extra: dict[str, torch.Tensor]) -> dict[str, float]:
        """Means of the stats, then ``extra`` (0-dim diagnostics), with one host sync for all tensors."""
        if self.totals is None:  # no forward ran on this rank: the diagnostics only
            means: list[float] = []
            values = torch.stack(list(extra.values())).tolist() if extra else []
        else:
            tail = [t.to(self.totals).reshape(1) for t in extra.values()]
            values = torch.cat([self.totals / max(self.weight, 1.0), *tail]).tolist()
            means, values = values[: len(self.names)], values[len(self.names) :]
        return dict(zip(self.names, means)) | dict(zip(extra, values))

    def counters(self, early_stop: bool) -> dict[str, float]:
        """The loop's step counters, and ``early_stop_epoch`` when the KL rule could stop it."""
        counts = {"minibatch_steps": self.minibatch_steps, "optimizer_steps": self.optimizer_steps}
        if early_stop:
            counts["early_stop_epoch"] = self.early_stop_epoch
        return {name: float(count) for name, count in counts.items()}


def take_rows(columns: Mapping[str, CompatibleType], idx: torch.Tensor | slice) -> TensorDict:
    """Rows ``idx`` of every column, as a TensorDict ``[B]``.

    Indexing the columns one by one and wrapping them is cheaper than indexing the batch
    TensorDict itself (its generic ``__getitem__``), once per minibatch.
    """
    rows = {key: value[idx] for key, value in columns.items()}
    return TensorDict(rows, batch_size=[next(iter(rows.values())).shape[0]])


def minibatch_slices(
    rows: int,
    size: int,
    generator: torch.Generator,
    device: torch.device,
    shuffle: bool = True,
    shards: int = 1,
) -> Iterator[torch.Tensor | slice]:
    """Row selections of one epoch: shuffled index tensors, contiguous slices, or K shards side by side.

    ``rows`` is one shard's row count; with ``shards`` K > 1 the batch holds K such shards.
    Shuffles draw from ``generator`` only (the update's own).
    """
    if shards > 1:  # one process over K ranks' rollouts: rank r's slice of every minibatch
        yield from sharded_minibatch_indices(rows, shards, size, device, generator, shuffle)
    elif shuffle:
        yield from minibatch_indices(rows, size, device, generator)
    else:
        yield from (slice(start, start + size) for start in range(0, rows, size))


def minibatch_indices(
    num_samples: int, batch_size: int, device: torch.device, generator: torch.Generator | None = None
) -> Iterator[torch.Tensor]:
    """Shuffled index tensors of ``batch_size`` (the last one may be smaller) covering every sample once."""
    perm = torch.randperm(num_samples, device=device, generator=generator)
    for start in range(0, num_samples, batch_size):
        yield perm[start : start + batch_size]
