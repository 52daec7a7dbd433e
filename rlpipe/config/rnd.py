"""``algorithm.cfg.rnd``'s config class (``RNDCfg``), without torch; :mod:`rlpipe.algorithms.rnd` uses it."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, field_validator, model_validator

from rlpipe.config.errors import fail
from rlpipe.config.schedules import Points, ScheduleKind
from rlpipe.config.strict import StrictModel

__all__ = ["RNDCfg"]


class RNDCfg(StrictModel):
    """``algorithm.cfg.rnd``: random network distillation curiosity (Burda et al. 2018, arXiv:1810.12894).

    The predictor's squared error against a frozen random target on each next observation is the
    intrinsic reward; by default weighted and added to the extrinsic reward before GAE (one value head,
    as rsl_rl), with ``intrinsic_critic`` given its own value network and GAE (the paper).
    """

    obs_keys: list[str] | None = None
    """Dict observations: the keys the networks read, concatenated; ``null``: every key (flat obs as is)."""
    hidden_sizes: list[int] = Field(default_factory=lambda: [256, 256])
    """Hidden layers of the predictor and the target (ELU)."""
    embedding_dim: int = Field(default=16, ge=1)
    """Output size of both networks."""
    learning_rate: float = Field(default=1.0e-3, gt=0)
    """Adam learning rate of the predictor."""
    weight: float = Field(default=1.0, ge=0)
    """Intrinsic reward weight, or A_int's coefficient with ``intrinsic_critic`` (the start value when
    ``weight_schedule_kind`` is linear/cosine)."""
    weight_schedule: Points | None = None
    """``[[env_steps, weight], ...]`` for kinds step/interp; null: constant ``weight``."""
    weight_schedule_kind: ScheduleKind = "step"
    """As ``lr_schedule_kind``, for the weight (decaying to ``weight_final``)."""
    weight_final: float = Field(default=0.0, ge=0)
    """Weight at the end of a linear/cosine decay."""
    reward_normalization: Literal["running", "rollout", "off"] = "running"
    """Divide the intrinsic reward by the std of its discounted return over every rollout so far
    (``running``, the paper's), over this rollout's alone (``rollout``: a novelty that collapses within
    a few updates keeps no trace of the first rollouts' scale), or ``off``; true/false: running/off."""
    state_normalization: bool = True
    """Whiten the networks' input with running mean/std clipped to ±5 (the RND paper's choice)."""
    gamma: float = Field(default=0.99, ge=0, le=1)
    """Discount of the intrinsic return (its normalization, and V_int's GAE)."""
    intrinsic_critic: bool = False
    """A separate value network V_int learns the intrinsic return (own GAE, ``gae_lambda``); advantages
    are ``extrinsic_coef·A_ext + weight·A_int`` (the RND paper); false: one value head (rsl_rl)."""
    critic_hidden_sizes: list[int] = Field(default_factory=lambda: [64, 64])
    """Hidden layers of V_int (ELU), on the whitened network input."""
    critic_learning_rate: float = Field(default=1.0e-3, gt=0)
    """Adam learning rate of V_int (trained on the update's minibatches, beside the predictor)."""
    extrinsic_coef: float = Field(default=2.0, ge=0)
    """Coefficient of the extrinsic advantage with ``intrinsic_critic`` (the paper's 2)."""
    episodic: bool | None = None
    """Whether ``done`` cuts the intrinsic return; null: false with ``intrinsic_critic`` (the paper's
    non-episodic novelty), true without (one value head sums it into the episodic return)."""

    @field_validator("reward_normalization", mode="before")
    @classmethod
    def _bool_means_running(cls, value: object) -> object:
        return ("running" if value else "off") if isinstance(value, bool) else value

    @model_validator(mode="after")
    def _points_need_kind(self) -> Self:
        name = type(self).__name__
        if self.weight_schedule is not None and self.weight_schedule_kind in ("linear", "cosine"):
            fail(
                name,
                ("weight_schedule",),
                "points need weight_schedule_kind step or interp (linear/cosine take no points)",
            )
        for key in ("hidden_sizes", "critic_hidden_sizes"):
            if any(size < 1 for size in getattr(self, key)):
                fail(name, (key,), "every size must be >= 1")
        if not self.intrinsic_critic:
            if self.episodic is False:
                fail(
                    name,
                    ("episodic",),
                    "false needs intrinsic_critic: true (with one value head the "
                    "intrinsic reward joins the episodic extrinsic return); accepted: true or null",
                )
            for key in ("extrinsic_coef", "critic_hidden_sizes", "critic_learning_rate"):
                if key in self.model_fields_set:
                    fail(name, (key,), "is read only with intrinsic_critic: true")
        return self
