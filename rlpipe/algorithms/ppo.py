"""PPO over ``[N, T+1]`` rollouts: the seed's ``PPO`` and ``PPOCfg``, plus rl8's and rsl_rl's options.

The loss maths lives in ``ppo_loss`` (one pure function per option), schedules in ``schedules``,
reward scaling in ``normalization`` and the optimizer factory in ``optim``; this module only
configures them and runs the epochs × minibatches loop.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any, Literal

import torch
from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError
from tensordict import TensorDict

from rlpipe.algorithms import optim, sequences
from rlpipe.algorithms.base import BaseAlgorithm, minibatch_indices
from rlpipe.algorithms.gae import generalized_advantage_estimate, truncation_bootstrap
from rlpipe.algorithms.normalization import RewardNormalizer
from rlpipe.algorithms.ppo_loss import (
    adaptive_lr,
    approx_kl,
    clip_fraction,
    clipped_surrogate,
    clipped_value_loss,
    explained_variance,
    kl_exceeds_target,
    normalize,
    value_mse,
)
from rlpipe.algorithms.registry import register_algo
from rlpipe.algorithms.schedules import Schedule, ScheduleKind, points_error
from rlpipe.config import AlgorithmCfg, ConfigError
from rlpipe.distributed import all_reduce_mean, average_gradients, global_normalize, sharded_minibatch_indices

__all__ = ["PPO", "PPOCfg"]

UPDATE_KEYS = ("obs", "action", "sample_log_prob", "advantage", "return", "value")
STAT_NAMES = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")
KL_INDEX = STAT_NAMES.index("approx_kl")
Points = list[tuple[int, float]]


def _fail(loc: tuple[str, ...], message: str) -> None:
    """Raise a validation error located at ``loc`` (so the message names ``algorithm.cfg.<loc>``)."""
    error = PydanticCustomError("value_error", message)
    raise ValidationError.from_exception_data("PPOCfg", [InitErrorDetails(type=error, loc=loc, input={})])


class PPOCfg(sequences.SequenceCfg):
    """Configuration for PPO: the seed's fields and defaults, then rl8's and rsl_rl's options (all off)."""

    n_epochs: int = Field(10, ge=1)
    """Passes over the rollout per update (rl8 ``num_sgd_iters``, rsl_rl ``num_learning_epochs``)."""
    clip_coef: float = Field(0.2, gt=0)
    """Surrogate clip range ε."""
    ent_coef: float = Field(0.01, ge=0)
    """Entropy bonus weight (the start value when ``ent_coef_schedule_kind`` is linear/cosine)."""
    vf_coef: float = Field(0.5, ge=0)
    """Value loss weight."""
    normalize_advantage: Literal["batch", "minibatch", "off"] = "batch"
    """Advantage normalization: over the whole rollout once (``batch``), within every minibatch
    (``minibatch``, rsl_rl's per-minibatch option) or ``off``; ``true``/``false`` mean batch/off."""
    normalize_rewards: bool = False
    """Divide rewards by the running std of the per-env discounted return before GAE
    (arXiv:2005.12729); the stored rollout keeps its raw rewards."""
    clip_value_loss: bool = False
    """PPO2's clipped value loss: the value may move ``vf_clip_coef`` from its collection-time estimate."""
    vf_clip_coef: float = Field(0.2, gt=0)
    """Clip range of the value (in return units) when ``clip_value_loss``."""
    dual_clip_coef: float | None = Field(None, gt=1)
    """Dual clip c > 1 for negative advantages: max(min(surr1, surr2), c·A) (Ye et al. 2020); null: off."""
    target_kl: float | None = Field(None, gt=0)
    """Stop the update before the first minibatch whose approx KL exceeds 1.5 × target_kl; null: never."""
    schedule: Literal["fixed", "adaptive"] = "fixed"
    """``adaptive``: rsl_rl's KL rule sets the learning rate after every minibatch (needs ``desired_kl``)."""
    desired_kl: float | None = Field(None, gt=0)
    """KL the adaptive schedule aims for: lr /1.5 above 2× it, ×1.5 below half of it."""
    min_lr: float = Field(1e-5, gt=0)
    """Floor of the adaptive learning rate."""
    max_lr: float = Field(1e-2, gt=0)
    """Ceiling of the adaptive learning rate."""
    num_mini_batches: int | None = Field(None, ge=1)
    """Minibatches per epoch; when set it wins over ``batch_size`` (= ceil(N·T / num_mini_batches))."""
    shuffle_minibatches: bool = True
    """Draw minibatches from a fresh permutation each epoch; false: contiguous env-major slices."""
    optimizer: Literal["adam", "adamw", "sgd", "rmsprop"] = "adam"
    """torch optimizer class."""
    optimizer_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Extra keyword arguments of the optimizer (e.g. ``{betas: [0.9, 0.999], eps: 1.0e-5}``); not ``lr``."""
    lr_schedule: Points | None = None
    """``[[env_steps, lr], ...]`` with increasing env steps, for kinds step/interp; null: constant."""
    lr_schedule_kind: ScheduleKind = "step"
    """``step`` (jump and hold), ``interp`` (linear between points), or ``linear``/``cosine`` decay
    from ``learning_rate`` to ``lr_final`` over the run."""
    lr_final: float = Field(0.0, ge=0)
    """Learning rate at the end of a linear/cosine decay."""
    ent_coef_schedule: Points | None = None
    """``[[env_steps, ent_coef], ...]`` like ``lr_schedule``; overrides ``ent_coef``."""
    ent_coef_schedule_kind: ScheduleKind = "step"
    """As ``lr_schedule_kind``, for the entropy coefficient (decaying to ``ent_coef_final``)."""
    ent_coef_final: float = Field(0.0, ge=0)
    """Entropy coefficient at the end of a linear/cosine decay."""
    accumulate_grads: bool = False
    """One optimizer step per epoch: backward of each minibatch's loss / num_minibatches."""
    amp: Literal["none", "bf16", "fp16", "auto"] = "none"
    """Mixed precision of the update's network forward: bf16 (CPU, CUDA) or fp16 (CUDA, grad scaler);
    ``auto``: bf16 where the device runs it natively (``optim.native_bf16``), else none."""

    @field_validator("normalize_advantage", mode="before")
    @classmethod
    def _bool_means_batch(cls, value: Any) -> Any:
        return ("batch" if value else "off") if isinstance(value, bool) else value

    @field_validator("lr_schedule", "ent_coef_schedule")
    @classmethod
    def _increasing_points(cls, points: Points | None) -> Points | None:
        error = None if points is None else points_error(points)
        if error:
            raise ValueError(error)
        return points

    @model_validator(mode="after")
    def _coherent(self) -> PPOCfg:
        if self.target_kl is not None and self.accumulate_grads:
            _fail(("target_kl",), "cannot be combined with accumulate_grads (needs a step per minibatch)")
        if self.schedule == "adaptive":
            if self.desired_kl is None:
                _fail(("desired_kl",), "required when schedule is adaptive")
            if self.lr_schedule is not None or self.lr_schedule_kind in ("linear", "cosine"):
                _fail(("schedule",), "adaptive sets the lr from the KL; remove lr_schedule/lr_schedule_kind")
        if self.min_lr > self.max_lr:
            _fail(("min_lr",), f"must be <= max_lr ({self.max_lr})")
        for name in ("lr_schedule", "ent_coef_schedule"):
            if getattr(self, name) is not None and getattr(self, f"{name}_kind") in ("linear", "cosine"):
                _fail((name,), f"points need {name}_kind step or interp (linear/cosine take no points)")
        accepted = optim.optimizer_kwarg_names(self.optimizer)
        for key in self.optimizer_kwargs:
            if key == "lr":
                _fail(("optimizer_kwargs", key), "set learning_rate instead")
            if key not in accepted:
                opt = optim.OPTIMIZERS[self.optimizer].__name__
                _fail(("optimizer_kwargs", key), f"not an argument of {opt}; accepted: {', '.join(accepted)}")
        return self

    def minibatch_size(self, num_samples: int) -> int:
        """Transitions per minibatch: ceil(num_samples / num_mini_batches) when set, else ``batch_size``."""
        if self.num_mini_batches is None:
            return self.batch_size
        return math.ceil(num_samples / self.num_mini_batches)


@register_algo("ppo")
class PPO(BaseAlgorithm):
    """Clipped-surrogate PPO: GAE, then ``n_epochs`` × minibatches, one optimizer step each.

    With ``accumulate_grads`` one step per epoch instead; schedules are applied before every update.
    """

    cfg_class = PPOCfg
    cfg: PPOCfg

    def __init__(self, cfg: PPOCfg, policy: Any) -> None:
        super().__init__(cfg, policy)
        optim.check_amp_device(cfg.amp, self.device)
        try:
            self.optimizer = optim.build_optimizer(cfg.optimizer, policy.parameters(), cfg.learning_rate,
                                             cfg.optimizer_kwargs)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"algorithm.cfg.optimizer_kwargs: {exc}") from None
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=cfg.amp == "fp16")
        self.lr_schedule = Schedule(cfg.lr_schedule_kind, cfg.learning_rate, _points(cfg.lr_schedule),
                                    cfg.lr_final)
        self.ent_coef_schedule = Schedule(cfg.ent_coef_schedule_kind, cfg.ent_coef,
                                          _points(cfg.ent_coef_schedule), cfg.ent_coef_final)
        self.ent_coef = cfg.ent_coef
        self.env_steps = 0
        """Env steps collected before the rollout of the next update (the schedules' position)."""
        self.total_env_steps: int | None = None
        """The run's length in env steps, needed by linear/cosine schedules (see ``set_progress``)."""
        self.reward_normalizer = RewardNormalizer(cfg.gamma, self.device) if cfg.normalize_rewards else None

    @classmethod
    def check_run(cls, cfg: AlgorithmCfg, num_envs: int, policy_name: str, horizon: int,
                  max_episode_steps: int | None = None) -> None:
        """Reject a precision the device cannot run, or a ``seq_len`` not dividing T, before any env step."""
        if isinstance(cfg, PPOCfg):
            cfg.check_sequences(horizon)
            if cfg.device != "auto":
                optim.check_amp_device(cfg.amp, cfg.device)

    @property
    def learning_rate(self) -> float:
        """The optimizer's current learning rate."""
        return float(self.optimizer.param_groups[0]["lr"])

    def set_learning_rate(self, lr: float) -> None:
        """Set the learning rate of every parameter group."""
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def set_progress(self, env_steps: int, total_env_steps: int) -> None:
        """Position the schedules: env steps collected before this update's rollout, and the run's total."""
        self.env_steps, self.total_env_steps = int(env_steps), int(total_env_steps)

    def compute_advantages(self, rollout: TensorDict) -> dict[str, float]:
        """GAE into ``advantage`` and ``return`` (``[N, T+1]``, padding slot zero).

        With ``normalize_rewards`` GAE sees scaled copies of the rewards; ``rollout["reward"]`` is untouched.
        """
        reward, done = rollout["reward"][:, :-1].float(), rollout["done"][:, :-1]
        if self.reward_normalizer is not None:
            reward = self.reward_normalizer(reward, done)
        value = rollout["value"].float()
        advantage, returns = generalized_advantage_estimate(
            reward, value[:, :-1], value[:, 1:], done, truncation_bootstrap(rollout).float(),
            self.cfg.gamma, self.cfg.gae_lambda,
        )
        for key, tensor in (("advantage", advantage), ("return", returns)):
            padded = torch.zeros_like(rollout["value"])
            padded[:, :-1] = tensor
            rollout.set(key, padded)
        return {}

    def update(self, rollout: TensorDict) -> dict[str, float]:
        """Multi-epoch minibatch optimization; returns means over every minibatch forward."""
        if "advantage" not in rollout.keys():
            self.compute_advantages(rollout)
        self._apply_schedules()
        batch = sequences.update_batch(self.policy, rollout, UPDATE_KEYS, self.cfg.seq_len)
        if self.cfg.normalize_advantage == "batch":
            batch["advantage"] = global_normalize(batch["advantage"])  # statistics of every rank
        totals, counts = self._run_epochs(batch)
        self.env_steps += batch["advantage"].numel()
        return self._report(batch, totals, counts)

    def _apply_schedules(self) -> None:
        if self.cfg.schedule == "fixed":
            self.set_learning_rate(self.lr_schedule(self.env_steps, self.total_env_steps))
        self.ent_coef = self.ent_coef_schedule(self.env_steps, self.total_env_steps)

    def _run_epochs(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, int]]:
        """``(summed stats [len(STAT_NAMES)], counters)`` of ``n_epochs`` passes over ``batch``."""
        num_samples = batch["obs"].shape[0]
        shard = {k: v[: num_samples // self.shards] for k, v in batch.items()}  # one rank's rows
        size = sequences.minibatch_rows(self.cfg, shard)
        accumulate = self.cfg.accumulate_grads
        scale = 1.0 / math.ceil(num_samples / size) if accumulate else 1.0
        totals = torch.zeros(len(STAT_NAMES), device=self.device)
        counts = {"forwards": 0, "minibatch_steps": 0, "optimizer_steps": 0, "early_stop_epoch": 0}
        self.optimizer.zero_grad(set_to_none=True)
        for epoch in range(1, self.cfg.n_epochs + 1):
            for idx in self._minibatches(num_samples, size):
                total, stats = self.loss({k: v[idx] for k, v in batch.items()})
                totals += stats
                counts["forwards"] += 1
                if self._kl_control(stats[KL_INDEX]):
                    counts["early_stop_epoch"] = epoch
                    return totals, counts
                self.scaler.scale(total * scale).backward()
                counts["minibatch_steps"] += 1
                if not accumulate:
                    self._optimizer_step()
                    counts["optimizer_steps"] += 1
            if accumulate:
                self._optimizer_step()
                counts["optimizer_steps"] += 1
        return totals, counts

    def _minibatches(self, num_samples: int, size: int) -> Iterator[torch.Tensor | slice]:
        if self.shards > 1:  # one process over K ranks' rollouts: rank r's slice of every minibatch
            yield from sharded_minibatch_indices(num_samples // self.shards, self.shards, size, self.device,
                                                 self.generator, self.cfg.shuffle_minibatches)
        elif self.cfg.shuffle_minibatches:
            yield from minibatch_indices(num_samples, size, self.device, self.generator)
        else:
            yield from (slice(start, start + size) for start in range(0, num_samples, size))

    def _global_mean(self, t: torch.Tensor) -> torch.Tensor:
        """Mean of ``t`` over all ranks; identity in a single process.

        The one place KL decisions read their value: a distributed run all-reduces here so every
        rank stops early and adapts its learning rate identically.
        """
        return all_reduce_mean(t)

    def _kl_control(self, kl: torch.Tensor) -> bool:
        """Adapt the learning rate from this minibatch's KL; true when the update must stop early.

        Reads the KL on the host (one sync per minibatch) only when ``target_kl`` or the adaptive
        schedule is on.
        """
        cfg = self.cfg
        if cfg.target_kl is None and cfg.schedule != "adaptive":
            return False
        kl_value = float(self._global_mean(kl))
        if cfg.schedule == "adaptive":
            assert cfg.desired_kl is not None  # guaranteed by PPOCfg
            self.set_learning_rate(adaptive_lr(self.learning_rate, kl_value, cfg.desired_kl, cfg.min_lr,
                                               cfg.max_lr))
        return cfg.target_kl is not None and kl_exceeds_target(kl_value, cfg.target_kl)

    def _optimizer_step(self) -> None:
        self.scaler.unscale_(self.optimizer)
        average_gradients(self.policy.parameters())  # every rank clips and steps the same gradient
        torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.cfg.max_grad_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.cfg.amp == "none":
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=optim.AMP_DTYPES[self.cfg.amp])

    def evaluate(self, obs: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``policy.evaluate`` (autocast under ``amp``), outputs ``(log_prob, entropy, value)`` in float32."""
        with self._autocast():
            outputs = self.policy.evaluate(obs, action)
        return tuple(t.float() for t in outputs)

    def loss(self, mb: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(total loss, detached stats [len(STAT_NAMES)])`` of one minibatch."""
        cfg = self.cfg
        with self._autocast():  # a sequence minibatch re-runs the recurrent core; ``mb`` comes back flat
            log_prob, entropy, value, mb = sequences.evaluate_minibatch(self.policy, mb)
        advantage = normalize(mb["advantage"]) if cfg.normalize_advantage == "minibatch" else mb["advantage"]
        policy_loss, log_ratio = clipped_surrogate(
            log_prob, mb["sample_log_prob"], advantage, cfg.clip_coef, cfg.dual_clip_coef
        )
        if cfg.clip_value_loss:
            value_loss = clipped_value_loss(value, mb["value"], mb["return"], cfg.vf_clip_coef)
        else:
            value_loss = value_mse(value, mb["return"])
        entropy_mean = entropy.mean()
        total = policy_loss + cfg.vf_coef * value_loss - self.ent_coef * entropy_mean
        with torch.no_grad():
            stats = torch.stack([
                policy_loss, value_loss, entropy_mean,
                approx_kl(log_ratio), clip_fraction(log_ratio, cfg.clip_coef),
            ])
        return total, stats

    def _report(
        self, batch: dict[str, torch.Tensor], totals: torch.Tensor, counts: dict[str, int]
    ) -> dict[str, float]:
        """Means of the stats, explained variance and the schedule values (one host sync)."""
        extra = [explained_variance(batch["value"], batch["return"]).reshape(1)]
        if self.reward_normalizer is not None:
            extra.append(self.reward_normalizer.scale().to(totals).reshape(1))
        values = torch.cat([totals / max(counts["forwards"], 1), *extra]).tolist()
        stats = dict(zip(STAT_NAMES, values))
        stats["explained_variance"] = values[len(STAT_NAMES)]
        if self.reward_normalizer is not None:
            stats["reward_scale"] = values[-1]
        stats |= {"learning_rate": self.learning_rate, "ent_coef": float(self.ent_coef),
                  "minibatch_steps": float(counts["minibatch_steps"]),
                  "optimizer_steps": float(counts["optimizer_steps"])}
        if self.cfg.target_kl is not None:
            stats["early_stop_epoch"] = float(counts["early_stop_epoch"])
        return stats

    def state_dict(self) -> dict[str, Any]:
        """Optimizer, grad scaler, schedule position and values, reward statistics.

        The run length is not state: the pipeline passes it with ``set_progress`` before every
        update, so a resumed run may extend ``trainer.iterations``.
        """
        return {
            "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict(),
            "env_steps": self.env_steps,
            "learning_rate": self.learning_rate,
            "ent_coef": float(self.ent_coef),
            "reward_normalizer": self.reward_normalizer.state_dict() if self.reward_normalizer else None,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict`` (older checkpoints holding only the optimizer load too)."""
        self.optimizer.load_state_dict(state["optimizer"])
        if state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        self.env_steps = int(state.get("env_steps", 0))
        if "learning_rate" in state:
            self.set_learning_rate(float(state["learning_rate"]))
        self.ent_coef = float(state.get("ent_coef", self.cfg.ent_coef))
        if self.reward_normalizer is not None and state.get("reward_normalizer") is not None:
            self.reward_normalizer.load_state_dict(state["reward_normalizer"])


def _points(points: Points | None) -> tuple[tuple[int, float], ...] | None:
    return None if points is None else tuple((int(s), float(v)) for s, v in points)
