"""``UpdateCfg``: the fields of the shared update loop, accepted by every algorithm built on it.

Optimizer, minibatching, gradient accumulation, mixed precision, learning-rate and entropy
schedules, the adaptive learning rate and target-KL early stopping work the same for PPO and
GRPO; an algorithm's config class adds only its loss and advantage options.
"""

from __future__ import annotations

import math
from typing import Any, Literal, Self

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from rlpipe.algorithms import optim
from rlpipe.algorithms.schedules import ScheduleKind, points_error
from rlpipe.config import AlgorithmCfg

__all__ = ["Points", "UpdateCfg", "fail"]

Points = list[tuple[int, float]]


def fail(model: str, loc: tuple[str, ...], message: str) -> None:
    """Raise a validation error located at ``loc`` (so the message names ``algorithm.cfg.<loc>``)."""
    error = PydanticCustomError("value_error", message)
    raise ValidationError.from_exception_data(model, [InitErrorDetails(type=error, loc=loc, input={})])


class UpdateCfg(AlgorithmCfg):
    """Fields of the epochs × minibatches loop every algorithm shares (all options off by default)."""

    clip_coef: float = Field(0.2, gt=0)
    """Surrogate clip range ε (also the threshold of the ``clip_fraction`` diagnostic)."""
    ent_coef: float = Field(0.01, ge=0)
    """Entropy bonus weight (the start value when ``ent_coef_schedule_kind`` is linear/cosine)."""
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
    """Minibatches per epoch; when set it wins over ``batch_size`` (= ceil(rows / num_mini_batches))."""
    shuffle_minibatches: bool = True
    """Draw minibatches from a fresh permutation each epoch; false: contiguous slices in batch order."""
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
    amp: Literal["none", "bf16", "fp16"] = "none"
    """Mixed precision of the update's network forward: bf16 (CPU, CUDA) or fp16 (CUDA, grad scaler)."""

    @field_validator("lr_schedule", "ent_coef_schedule")
    @classmethod
    def _increasing_points(cls, points: Points | None) -> Points | None:
        error = None if points is None else points_error(points)
        if error:
            raise ValueError(error)
        return points

    @model_validator(mode="after")
    def _coherent(self) -> Self:
        name = type(self).__name__
        if self.target_kl is not None and self.accumulate_grads:
            fail(name, ("target_kl",),
                 "cannot be combined with accumulate_grads (needs a step per minibatch)")
        if self.schedule == "adaptive":
            if self.desired_kl is None:
                fail(name, ("desired_kl",), "required when schedule is adaptive")
            if self.lr_schedule is not None or self.lr_schedule_kind in ("linear", "cosine"):
                fail(name, ("schedule",),
                     "adaptive sets the lr from the KL; remove lr_schedule/lr_schedule_kind")
        if self.min_lr > self.max_lr:
            fail(name, ("min_lr",), f"must be <= max_lr ({self.max_lr})")
        for key in ("lr_schedule", "ent_coef_schedule"):
            if getattr(self, key) is not None and getattr(self, f"{key}_kind") in ("linear", "cosine"):
                fail(name, (key,), f"points need {key}_kind step or interp (linear/cosine take no points)")
        accepted = optim.optimizer_kwarg_names(self.optimizer)
        for key in self.optimizer_kwargs:
            if key == "lr":
                fail(name, ("optimizer_kwargs", key), "set learning_rate instead")
            if key not in accepted:
                opt = optim.OPTIMIZERS[self.optimizer].__name__
                fail(name, ("optimizer_kwargs", key),
                     f"not an argument of {opt}; accepted: {', '.join(accepted)}")
        return self

    @property
    def reads_kl(self) -> bool:
        """True when a KL rule (target-KL stop or adaptive lr) reads each minibatch's KL on the host."""
        return self.target_kl is not None or self.schedule == "adaptive"

    def minibatch_size(self, num_samples: int) -> int:
        """Rows per minibatch: ceil(num_samples / num_mini_batches) when set, else ``batch_size``."""
        if self.num_mini_batches is None:
            return self.batch_size
        return math.ceil(num_samples / self.num_mini_batches)
