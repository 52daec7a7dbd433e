"""The one update skeleton: epochs × minibatches over a TensorDict ``[B]`` of update rows.

``BaseAlgorithm.update`` runs :func:`run_epochs` for every algorithm; the algorithm supplies only
``update_batch`` (the rows) and ``loss`` (one minibatch's loss and named stats). The loop owns:

* minibatching: a fresh permutation per epoch from the algorithm's shuffle generator (or
  contiguous slices), ``num_mini_batches`` or ``batch_size`` rows, and — for one process over K
  ranks' rollouts (``algo.shards``) — every rank's own minibatch i side by side;
* one optimizer step per minibatch, or per epoch with ``accumulate_grads``;
* minibatches larger than ``algo.chunk_rows`` run forward and backward in chunks whose
  row-weighted gradients add up (one optimizer step still), so activations stay in cache;
* gradient averaging across ranks, clipping, the fp16 grad scaler;
* the KL rules: adaptive learning rate and target-KL early stop, read from the ``approx_kl`` stat;
* distributed ranks with fewer rows than others (GRPO's valid steps): they join the other ranks'
  gradient all-reduce with zero gradients, so every rank steps the same number of times.

Stats are averaged over every minibatch forward (weighted by rows when the algorithm asks) and
read back to the host once, with the algorithm's ``diagnostics``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from tensordict import TensorDict

from rlpipe.runtime.distributed import average_gradients, global_minibatch_count, sharded_minibatch_indices

if TYPE_CHECKING:
    from rlpipe.algorithms.base import BaseAlgorithm

__all__ = ["Tally", "chunked_backward", "minibatch_indices", "minibatch_slices", "optimizer_step", "report",
           "run_epochs"]

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


def run_epochs(algo: BaseAlgorithm, batch: TensorDict) -> Tally:
    """``n_epochs`` passes over ``batch`` (``[B]`` rows, K shards side by side when ``algo.shards``)."""
    cfg, tally = algo.cfg, Tally()
    shards = algo.batch_shards
    rows = batch.batch_size[0] // shards  # one rank's rows
    size = algo.minibatch_rows(batch[:rows])
    per_epoch = global_minibatch_count(rows, size, algo.device)  # the most any rank has
    scale = 1.0 / math.ceil(rows / size) if cfg.accumulate_grads else 1.0
    weighted = algo.stats_weighted_by_rows
    columns = dict(batch.items())
    params = list(algo.policy.parameters())  # once per update, not twice per minibatch step
    chunk_rows = algo.chunk_rows
    algo.optimizer.zero_grad(set_to_none=True)
    for epoch in range(1, cfg.n_epochs + 1):
        slices = itertools.chain(minibatch_slices(algo, rows, size, shards), itertools.repeat(None))
        for idx in itertools.islice(slices, per_epoch):
            if idx is None:  # this rank ran out of rows: join the others' collectives only
                if algo._kl_control(None):
                    tally.early_stop_epoch = epoch
                    return tally
                if not cfg.accumulate_grads:
                    _sync_only_step(algo, params)
                continue
            mb = _minibatch(columns, idx)
            total: torch.Tensor | None = None  # chunks run their backward as they go
            if chunk_rows is not None and mb.batch_size[0] > chunk_rows:
                stats = chunked_backward(algo, mb, chunk_rows, scale)
            else:
                total, stats = algo.loss(mb)
            tally.add(stats, float(mb.batch_size[0]) if weighted else None)
            if algo._kl_control(stats[KL_STAT]):  # an accumulated chunk gradient is never stepped
                tally.early_stop_epoch = epoch
                return tally
            if total is not None:
                algo.scaler.scale(total if scale == 1.0 else total * scale).backward()  # ×1.0: a graph node
            tally.minibatch_steps += 1
            if not cfg.accumulate_grads:
                optimizer_step(algo, params)
                tally.optimizer_steps += 1
        if cfg.accumulate_grads:
            optimizer_step(algo, params)
            tally.optimizer_steps += 1
    return tally


def chunked_backward(
    algo: BaseAlgorithm, mb: TensorDict, chunk_rows: int, scale: float
) -> dict[str, torch.Tensor]:
    """Backward of minibatch ``mb`` ``[B]`` in chunks of ``chunk_rows``; the minibatch's stats.

    Each chunk's loss and stats are weighted by its share of the B rows, so the accumulated gradient
    and the stats are the minibatch's up to float rounding, while each chunk's activations
    (``[chunk_rows, hidden]``) stay in cache instead of streaming ``[B, hidden]`` through memory.
    """
    rows = mb.batch_size[0]
    columns = dict(algo.chunk_minibatch(mb).items())
    chunks = Tally()
    for start in range(0, rows, chunk_rows):
        part = _minibatch(columns, slice(start, start + chunk_rows))
        share = part.batch_size[0] / rows
        total, stats = algo.chunk_loss(part)
        algo.scaler.scale(total * (scale * share)).backward()
        chunks.add(stats, share)
    assert chunks.totals is not None
    return dict(zip(chunks.names, chunks.totals.unbind()))


def _minibatch(columns: dict[str, torch.Tensor | TensorDict], idx: torch.Tensor | slice) -> TensorDict:
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


def optimizer_step(algo: BaseAlgorithm, params: list[torch.nn.Parameter] | None = None) -> None:
    """Unscale, average over ranks, clip, step, zero: every rank steps with the same gradient.

    ``params``: the policy's parameters (listed once per update by the caller; default: listed here).
    """
    if params is None:
        params = list(algo.policy.parameters())
    scaler = algo.scaler
    if scaler.is_enabled():
        scaler.unscale_(algo.optimizer)
    average_gradients(params)
    algo.gradient_check.clip(params, algo.cfg.max_grad_norm, scaler.is_enabled())  # NaN flag
    if scaler.is_enabled():
        scaler.step(algo.optimizer)
        scaler.update()
    else:  # what a disabled GradScaler's step does, without its wrappers
        algo.optimizer.step()
    algo.optimizer.zero_grad(set_to_none=True)


def _sync_only_step(algo: BaseAlgorithm, params: list[torch.nn.Parameter]) -> None:
    """A rank out of minibatches contributes zero gradients to the others' minibatch step."""
    for p in params:
        if p.requires_grad:
            p.grad = torch.zeros_like(p)
    optimizer_step(algo, params)


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
