"""``BaseAlgorithm``: the optimizer state every algorithm shares and the one ``update(rollout)``.

An algorithm contributes its config class (an ``UpdateCfg``), ``compute_advantages(rollout)``,
``update_batch(rollout)`` (the rows the update trains on, a TensorDict ``[B]``: transitions, or
sequences for a recurrent policy, :mod:`rlpipe.algorithms.sequences`), and per minibatch
``prepare(mb)`` (what spans all its rows, such as advantage normalization; default: nothing) and
``minibatch_loss(prepared) -> (total, named stats)``. Everything else — optimizer, grad scaler,
schedules, the minibatch shuffle and the epochs × minibatches loop (:meth:`BaseAlgorithm.update`)
— lives here and works the same for every algorithm. The loop also owns: one optimizer step per
minibatch, or per epoch with ``accumulate_grads``; minibatches larger than ``chunk_rows`` run
forward and backward in chunks of the prepared minibatch whose row-weighted gradients add up (one
optimizer step still; only for a ``chunkable`` loss); gradient averaging across ranks, clipping,
the fp16 grad scaler; the KL rules (:mod:`~rlpipe.algorithms.kl_rules`) read from the ``approx_kl``
stat; networks an algorithm trains beside the policy (:meth:`BaseAlgorithm.train_beside`) on the
same minibatches; and ranks with fewer rows join the others' gradient all-reduce with zero gradients.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import torch
from tensordict import TensorDict

from rlpipe import fast
from rlpipe.algorithms import optim, sequences
from rlpipe.algorithms.augmentation import shift_images
from rlpipe.algorithms.finite import GradientCheck
from rlpipe.algorithms.kl_rules import KLRules
from rlpipe.algorithms.minibatches import (
    KL_STAT,
    Minibatch,
    Tally,
    minibatch_indices,
    minibatch_slices,
    take_rows,
)
from rlpipe.algorithms.schedules import Progress, Schedule
from rlpipe.algorithms.update_cfg import UpdateCfg
from rlpipe.config import AlgorithmCfg, ConfigError
from rlpipe.rollout import RECURRENT_KEYS
from rlpipe.runtime.distributed import average_gradients, global_minibatch_count

if TYPE_CHECKING:
    from rlpipe.policies.trainable import ActingPolicy, TrainablePolicy

__all__ = ["BaseAlgorithm", "Minibatch", "minibatch_indices", "update_seed"]


class BaseAlgorithm(ABC):
    """Optimizer, grad scaler, LR/entropy schedules, KL rules and the shared update loop.

    ``update(rollout)`` accepts a raw rollout and computes advantages itself when one of the
    ``advantage_keys`` is missing, so ``build_algo(...).update(rollout)`` works on its own.
    """

    cfg_class: type[UpdateCfg] = UpdateCfg
    cfg: UpdateCfg
    advantage_keys: tuple[str, ...] = ("advantage", "return")
    """Keys ``compute_advantages`` writes (``[N, T+1]``, padding slot zero)."""
    advantage_reads: tuple[str, ...] = ("reward", "done")
    """Rollout keys ``compute_advantages`` reads."""
    update_reads: tuple[str, ...] = ("obs", "action", "sample_log_prob", "advantage")
    """Rollout keys ``update`` reads, advantage keys included (a recurrent policy also reads ``done``
    and its state)."""
    stats_weighted_by_rows: bool = False
    """Average the minibatch stats weighted by minibatch rows (true) or one weight per minibatch."""
    chunkable: bool = False
    """Whether ``minibatch_loss`` is a mean over the rows of a transition minibatch, so chunks of a
    prepared minibatch can run apart (``chunk_rows``); sequence minibatches always run whole."""
    device: torch.device

    AUTO_CHUNK_ROWS = 4096
    """``chunk_rows: auto`` on CPU: 4096 rows of 256 features are 4 MiB per activation (cache-sized)."""

    def __init__(self, cfg: UpdateCfg, policy: TrainablePolicy) -> None:
        self.cfg = cfg
        self.policy = policy
        self.seed = 0
        """The run's seed: with the iteration it seeds each update's shuffle (:func:`update_seed`)."""
        self.device = torch.device(cfg.device)
        self.generator = torch.Generator(device=self.device)
        """Drives the minibatch shuffle only, so collection's sampling never shifts it."""
        self.gradient_check = GradientCheck()
        """Flags a non-finite gradient norm on device; the driver reads it once per update."""
        self.shards = 1
        """Ranks whose rollouts one update's batch concatenates (``rlpipe replay`` of a K-rank run in
        one process): minibatch i is then every rank's own minibatch i, side by side."""
        optim.check_amp_device(cfg.amp, self.device)
        try:
            self.optimizer = optim.build_optimizer(
                cfg.optimizer, policy.parameters(), cfg.learning_rate, cfg.optimizer_kwargs
            )
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"algorithm.cfg.optimizer_kwargs: {exc}") from None
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=cfg.amp == "fp16")
        self.kl_rules = KLRules(cfg, self.optimizer, self.device)
        self.lr_schedule = Schedule.of(cfg.lr_schedule_kind, cfg.learning_rate, cfg.lr_schedule, cfg.lr_final)
        self.ent_coef_schedule = Schedule.of(
            cfg.ent_coef_schedule_kind, cfg.ent_coef, cfg.ent_coef_schedule, cfg.ent_coef_final
        )
        self.ent_coef = cfg.ent_coef
        """The entropy coefficient of the next update (the schedule's value)."""
        self.progress = Progress()
        """Where the run is (the schedules' position): only ``set_progress`` sets it, the update never."""
        self.loss_step: Callable[[Minibatch], tuple[torch.Tensor, dict[str, torch.Tensor]]] = (
            self.minibatch_loss
        )
        """What the update loop calls per (chunk of a) prepared minibatch: :meth:`minibatch_loss`, or
        its compiled form (``trainer.compile``, :func:`rlpipe.build.compile_update`)."""

    # ------------------------------------------------------------------ what an algorithm provides

    @abstractmethod
    def compute_advantages(self, rollout: TensorDict) -> dict[str, float]:
        """Write ``advantage_keys`` into ``rollout``; return cheap diagnostics (no host sync needed)."""

    @abstractmethod
    def update_batch(self, rollout: TensorDict) -> TensorDict:
        """The rows the update trains on, a TensorDict ``[B]`` built from a rollout with advantages."""

    def prepare(self, mb: Minibatch) -> Minibatch:
        """Minibatch ``mb`` as :meth:`minibatch_loss` reads it: what spans all its rows computed once.

        Runs before the minibatch is cut into chunks (default: ``mb`` as it is).
        """
        return mb

    @abstractmethod
    def minibatch_loss(self, mb: Minibatch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``(total loss, detached 0-dim stats by name)`` of a prepared minibatch; ``approx_kl`` is required.

        For a ``chunkable`` algorithm ``mb`` may be some rows of it: weighted by their share of
        the rows, the chunks' losses and stats add up to the whole minibatch's.
        """

    def loss(self, mb: Minibatch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``(total loss, stats)`` of one whole minibatch: :meth:`prepare`, then :meth:`minibatch_loss`."""
        return self.minibatch_loss(self.prepare(mb))

    def train_beside(self, mb: Minibatch) -> dict[str, torch.Tensor]:
        """Step the networks the algorithm trains beside the policy on minibatch ``mb`` (default: none).

        Called once per minibatch with its rows as the update batch holds them; returns their
        detached 0-dim losses, averaged with the minibatch stats.
        """
        return {}

    def diagnostics(self, rollout: TensorDict, batch: TensorDict) -> dict[str, torch.Tensor]:
        """Once-per-update 0-dim tensors reported after the minibatch stats (default: none)."""
        return {}

    @property
    def chunk_rows(self) -> int | None:
        """Rows per forward/backward pass (``cfg.chunk_rows`` resolved; ``None``: whole minibatches)."""
        rows = self.cfg.chunk_rows
        if not self.chunkable or self.policy.is_recurrent or rows is None:
            return None
        if rows == "auto":
            return self.AUTO_CHUNK_ROWS if self.device.type == "cpu" else None
        return rows

    @property
    def batch_shards(self) -> int:
        """Equal parts the update batch is minibatched as, one per rank (``shards``).

        1 for an algorithm whose ranks train on different numbers of rows: a K-rank batch is then
        minibatched as one, close to (not equal to) the distributed update.
        """
        return self.shards

    def minibatch_rows(self, batch: TensorDict) -> int:
        """Rows per minibatch of ``batch`` (one rank's rows): transitions, or whole sequences."""
        return sequences.minibatch_rows(self.cfg, batch)

    @classmethod
    def check_run(
        cls,
        cfg: AlgorithmCfg,
        num_envs: int,
        policy_name: str,
        horizon: int,
        max_episode_steps: int | None = None,
    ) -> None:
        """Reject impossible combinations with the rest of the run before any env step.

        ``max_episode_steps`` is the env's time limit (``None``: none or unknown). Raises
        ``ConfigError`` naming the key path; the default rejects a precision the device cannot run.
        """
        if isinstance(cfg, UpdateCfg) and cfg.device != "auto":
            optim.check_amp_device(cfg.amp, cfg.device)

    def check_spaces(self, obs_space: gym.Space, action_space: gym.Space) -> None:
        """Reject options that do not fit the env's spaces, before any env step or file write.

        Raises ``ConfigError`` naming the key path; the default accepts any spaces.
        """

    # ------------------------------------------------------------------ the update

    def update(self, rollout: TensorDict, iteration: int | None = None) -> dict[str, float]:
        """One rollout's update ``[N, T+1]``: advantages if missing, schedules, epochs × minibatches.

        ``iteration`` (counted from 1) seeds the minibatch shuffle from ``(seed, iteration)`` alone,
        so re-updating a stored rollout from the same state reproduces the online update exactly
        (``None``: the generator goes on as it is). The observation statistics merge this rollout's
        ``obs[:, :T]`` after the update, so the update saw the statistics the rollout was collected
        with. The schedules read :attr:`progress` as the caller set it. Returns averaged diagnostics.
        """
        if iteration is not None:
            self.reseed(update_seed(self.seed, iteration))
        self.policy.train()
        if any(key not in rollout.keys() for key in self.advantage_keys):
            self.compute_advantages(rollout)
        self.apply_schedules()
        batch = self.update_batch(rollout)
        tally = self._epochs(batch)
        metrics = self.report(tally, self.diagnostics(rollout, batch))
        self.policy.update_normalization(rollout["obs"][:, :-1])
        return metrics

    @property
    def acting_policy(self) -> ActingPolicy:
        """The policy the collector acts with (default: the trained one; distillation mixes in a teacher)."""
        return self.policy

    @property
    def update_keys(self) -> tuple[str, ...]:
        """Every rollout key the update reads: ``update_reads``, and the sequences' keys.

        A recurrent policy (its ``is_recurrent`` decides) also reads ``done`` and its state.
        """
        recurrent = RECURRENT_KEYS if self.policy.is_recurrent else ()
        return tuple(dict.fromkeys((*self.update_reads, *recurrent)))

    @property
    def rollout_reads(self) -> tuple[str, ...]:
        """Every collected rollout key the advantage and the update read."""
        return tuple(dict.fromkeys((*self.advantage_reads, *self.update_keys)))

    def _epochs(self, batch: TensorDict) -> Tally:
        """``n_epochs`` passes over ``batch`` (``[B]`` rows, K shards side by side when ``shards``)."""
        cfg, tally = self.cfg, Tally()
        shards = self.batch_shards
        rows = batch.batch_size[0] // shards  # one rank's rows
        size = self.minibatch_rows(batch[:rows])
        per_epoch = global_minibatch_count(rows, size, self.device)  # the most any rank has
        scale = 1.0 / math.ceil(rows / size) if cfg.accumulate_grads else 1.0
        columns, chunk_rows, weighted = dict(batch.items()), self.chunk_rows, self.stats_weighted_by_rows
        params = list(self.policy.parameters())  # once per update, not twice per minibatch step
        self.optimizer.zero_grad(set_to_none=True)
        for epoch in range(1, cfg.n_epochs + 1):
            own = minibatch_slices(rows, size, self.generator, self.device, cfg.shuffle_minibatches, shards)
            slices = itertools.chain(own, itertools.repeat(None))
            for idx in itertools.islice(slices, per_epoch):
                if idx is None:  # this rank ran out of rows: join the others' collectives only
                    if self.kl_rules.stop_after(None):
                        tally.early_stop_epoch = epoch
                        return tally
                    if not cfg.accumulate_grads:
                        self._sync_only_step(params)
                    continue
                rows_taken = take_rows(columns, idx)
                mb = self.prepare(self.augment(rows_taken))
                total: torch.Tensor | None = None  # chunks run their backward as they go
                if chunk_rows is not None and rows_taken.batch_size[0] > chunk_rows:
                    stats = self._chunked_backward(mb, chunk_rows, scale)
                else:
                    total, stats = self.loss_step(mb)
                stats |= self.train_beside(rows_taken)
                tally.add(stats, float(rows_taken.batch_size[0]) if weighted else None)
                if self.kl_rules.stop_after(stats[KL_STAT]):  # an accumulated chunk gradient is never stepped
                    tally.early_stop_epoch = epoch
                    return tally
                if total is not None:
                    self.scaler.scale(total if scale == 1.0 else total * scale).backward()
                tally.minibatch_steps += 1
                if not cfg.accumulate_grads:
                    self._optimizer_step(params)
                    tally.optimizer_steps += 1
            if cfg.accumulate_grads:
                self._optimizer_step(params)
                tally.optimizer_steps += 1
        return tally

    def augment(self, mb: TensorDict) -> TensorDict:
        """Minibatch ``mb`` with its image groups augmented (``cfg.image_augmentation``), else as it is."""
        if self.cfg.image_augmentation == "shift":
            return shift_images(mb, self.generator)
        return mb

    def report(self, tally: Tally, extra: dict[str, torch.Tensor]) -> dict[str, float]:
        """The update's metrics: the stats' means, ``extra``, the schedule values, then the counters."""
        schedules = {"learning_rate": self.learning_rate, "ent_coef": float(self.ent_coef)}
        return tally.means(extra) | schedules | tally.counters(self.cfg.stops_on_kl)

    def _chunked_backward(self, mb: Minibatch, chunk_rows: int, scale: float) -> dict[str, torch.Tensor]:
        """Backward of prepared minibatch ``mb`` ``[B]`` in chunks of ``chunk_rows``; the minibatch's stats.

        Each chunk's loss and stats are weighted by its share of the B rows, so the accumulated
        gradient and the stats are the minibatch's up to float rounding, while each chunk's
        activations (``[chunk_rows, hidden]``) stay in cache instead of streaming ``[B, hidden]``.
        """
        columns = dict(mb.items())
        rows = next(iter(columns.values())).shape[0]
        chunks = Tally()
        for start in range(0, rows, chunk_rows):
            part = take_rows(columns, slice(start, start + chunk_rows))
            share = part.batch_size[0] / rows
            total, stats = self.loss_step(part)
            self.scaler.scale(total * (scale * share)).backward()
            chunks.add(stats, share)
        assert chunks.totals is not None
        return dict(zip(chunks.names, chunks.totals.unbind()))

    def _optimizer_step(self, params: list[torch.nn.Parameter]) -> None:
        """Unscale, average over ranks, clip, step, zero: every rank steps with the same gradient."""
        scaler = self.scaler
        if scaler.is_enabled():
            scaler.unscale_(self.optimizer)
        average_gradients(params)
        self.gradient_check.clip(params, self.cfg.max_grad_norm, scaler.is_enabled())  # NaN flag
        if scaler.is_enabled():
            scaler.step(self.optimizer)
            scaler.update()
        else:  # what a disabled GradScaler's step does, without its wrappers
            fast.optimizer_step(self.optimizer)
        self.optimizer.zero_grad(set_to_none=True)

    def _sync_only_step(self, params: list[torch.nn.Parameter]) -> None:
        """A rank out of minibatches contributes zero gradients to the others' minibatch step."""
        for p in params:
            if p.requires_grad:
                p.grad = torch.zeros_like(p)
        self._optimizer_step(params)

    def reseed(self, seed: int) -> None:
        """Reset the shuffle generator (once per iteration, from ``update_seed(seed, iteration)``)."""
        self.generator.manual_seed(seed)

    def set_progress(self, env_steps: int, total_env_steps: int) -> None:
        """Position the schedules at the caller's counters (the trainer's ``RunState`` owns them).

        ``env_steps``: every rank's env steps before the current rollout; ``total_env_steps``: the run's.
        """
        self.progress = Progress(int(env_steps), int(total_env_steps))

    def apply_schedules(self) -> None:
        """Set the learning rate (unless adaptive) and the entropy coefficient for the next update."""
        at = self.progress
        if not self.cfg.adapts_lr:
            self.set_learning_rate(self.lr_schedule(at.env_steps, at.total_env_steps))
        self.ent_coef = self.ent_coef_schedule(at.env_steps, at.total_env_steps)

    @property
    def learning_rate(self) -> float:
        """The optimizer's current learning rate."""
        return optim.learning_rate(self.optimizer)

    def set_learning_rate(self, lr: float) -> None:
        """Set the learning rate of every parameter group."""
        optim.set_learning_rate(self.optimizer, lr)

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """Autocast of the network forwards under ``amp`` (a null context without it)."""
        if self.cfg.amp == "none":
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=optim.AMP_DTYPES[self.cfg.amp])

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> dict[str, Any]:
        """Optimizer, grad scaler and the schedules' values.

        The schedules' position is not state: the run's counters are the trainer's, handed over
        with ``set_progress`` before every rollout, so a resumed run may also extend ``trainer.iterations``.
        """
        return {
            "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict(),
            "learning_rate": self.learning_rate,
            "ent_coef": float(self.ent_coef),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict``; a state holding only ``optimizer`` loads too (the rest from the config).

        An older state's own ``env_steps`` is ignored: ``set_progress`` positions the schedules.
        """
        self.optimizer.load_state_dict(state["optimizer"])
        if state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        if "learning_rate" in state:
            self.set_learning_rate(float(state["learning_rate"]))
        self.ent_coef = float(state.get("ent_coef", self.cfg.ent_coef))


def update_seed(seed: int, iteration: int) -> int:
    """Seed of iteration ``iteration``'s minibatch shuffle: a function of ``(seed, iteration)`` only."""
    return (seed * 1_000_003 + iteration) % 2**63
