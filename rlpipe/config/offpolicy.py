"""The off-policy algorithms' config classes (``SACCfg``, ``TD3Cfg``), without torch.

SAC and TD3 learn from a replay memory: the ring of the newest rollouts on the device, rebuilt from
the run's rollout stores on ``--resume`` (:mod:`rlpipe.algorithms.replay_ring`). Their options follow
FastSAC / FastTD3 (Seo et al. 2025, arXiv:2505.22642): many envs, large batches, several gradient
steps per env step, clipped double Q, n-step returns, an optional distributional critic, mixed
precision. The names of SB3 and CleanRL are kept where they exist (``tau``, ``learning_starts``,
``policy_frequency``, ``ent_coef``, ``target_policy_noise``).
"""

from __future__ import annotations

import math
from typing import Literal, Self

from pydantic import Field, model_validator

from rlpipe.config.algorithms import AlgorithmCfg, check_optimizer_kwargs
from rlpipe.config.errors import fail
from rlpipe.config.policy import MLPCfg
from rlpipe.config.schedules import Points, ScheduleKind
from rlpipe.config.strict import StrictModel

__all__ = ["DistributionalCfg", "OffPolicyCfg", "SACCfg", "TD3Cfg", "replay_rollouts"]


def _critic_default() -> MLPCfg:
    return MLPCfg(hidden_sizes=[256, 256], activation="relu")


class DistributionalCfg(StrictModel):
    """A categorical (C51) critic: each Q is a distribution over ``num_atoms`` returns in [v_min, v_max].

    The target distribution is projected onto the atoms (Bellemare et al. 2017, arXiv:1707.06887), as
    FastTD3 does; the loss is the cross-entropy; the actor maximizes the expected value.
    """

    v_min: float = -250.0
    """Smallest return an atom stands for (returns below it count as it)."""
    v_max: float = 250.0
    """Largest return an atom stands for."""
    num_atoms: int = Field(default=101, ge=2)
    """Atoms of each critic's distribution."""

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if not self.v_min < self.v_max:
            fail("DistributionalCfg", ("v_min",), f"must be < v_max ({self.v_max})")
        return self


class OffPolicyCfg(AlgorithmCfg):
    """What SAC and TD3 share: the replay memory, the critics, the gradient steps, precision.

    ``gae_lambda`` and ``n_epochs`` (of every algorithm's block) are unused: an off-policy update
    takes ``updates_per_step`` gradient steps per env step, each on a batch sampled from the ring.
    """

    learning_rate: float = Field(default=3.0e-4, gt=0)
    """The actor's learning rate (and the critics' unless ``critic_learning_rate`` is set)."""
    critic_learning_rate: float | None = Field(default=None, gt=0)
    """The critics' learning rate; null: ``learning_rate``."""
    batch_size: int = Field(default=256, ge=1)
    """Transitions per gradient step, sampled uniformly from the ring."""
    gamma: float = Field(default=0.99, ge=0, le=1)
    """Discount factor."""
    tau: float = Field(default=0.005, gt=0, le=1)
    """Polyak step of the target networks: ``target ← (1 − tau)·target + tau·online``."""
    n_step: int = Field(default=1, ge=1)
    """Rewards summed before bootstrapping (n-step returns); a return stops at an episode's end and at
    the end of its rollout, bootstrapping there (exactly, from the stored final observation)."""
    updates_per_step: float = Field(default=1.0, gt=0)
    """Gradient steps per env step of the N envs (FastTD3's ``num_updates``): an iteration of
    ``trainer.buffer_size`` steps takes ``buffer_size × updates_per_step`` of them (a whole number)."""
    replay_size: int = Field(default=1_000_000, ge=1)
    """Transitions the ring holds: the newest ⌈replay_size / (num_envs × buffer_size)⌉ rollouts."""
    learning_starts: int = Field(default=10_000, ge=0)
    """Env steps (all envs) collected before the first gradient step."""
    random_steps: int = Field(default=10_000, ge=0)
    """Env steps (all envs) acted with uniformly random actions before the policy acts."""
    policy_frequency: int = Field(default=1, ge=1)
    """The actor (and the target networks) step once every ``policy_frequency`` critic steps."""
    num_critics: int = Field(default=2, ge=1)
    """Q networks trained side by side (2: clipped double Q)."""
    critic_reduce: Literal["min", "mean"] = "min"
    """How the critics' target estimates combine: ``min`` (clipped double Q) or ``mean``."""
    critic: MLPCfg = Field(default_factory=_critic_default)
    """Each Q network: an MLP over ``[critic observation, action]``."""
    distributional: DistributionalCfg | None = None
    """A categorical critic (FastTD3's); null: scalar Q values."""
    optimizer: Literal["adam", "adamw"] = "adam"
    """torch optimizer class of the actor, the critics and the entropy coefficient."""
    optimizer_kwargs: dict[str, object] = Field(default_factory=dict)
    """Extra keyword arguments of the optimizers (e.g. ``{weight_decay: 0.1}``); not ``lr``."""
    lr_schedule: Points | None = None
    """``[[env_steps, lr], ...]`` for kinds step/interp (the actor's; the critics' scale alike)."""
    lr_schedule_kind: ScheduleKind = "step"
    """``step``/``interp`` through the points, or ``linear``/``cosine`` decay to ``lr_final``."""
    lr_final: float = Field(default=0.0, ge=0)
    """The actor's learning rate at the end of a linear/cosine decay."""
    max_grad_norm: float | None = Field(default=None, gt=0)
    """Global gradient-norm clip of each network's step; null: no clipping."""
    amp: Literal["none", "bf16", "fp16", "auto"] = "none"
    """Mixed precision of the networks' forwards: bf16 (CPU, CUDA), fp16 (CUDA, grad scaler), ``auto``."""

    @model_validator(mode="after")
    def _coherent(self) -> Self:
        name = type(self).__name__
        if self.lr_schedule is not None and self.lr_schedule_kind in ("linear", "cosine"):
            fail(name, ("lr_schedule",), "points need lr_schedule_kind step or interp")
        check_optimizer_kwargs(name, self.optimizer, dict(self.optimizer_kwargs))
        return self

    def gradient_steps(self, horizon: int) -> int:
        """Gradient steps per iteration of ``horizon`` env steps (:meth:`steps_problem` checks them)."""
        return round(horizon * self.updates_per_step)

    def steps_problem(self, horizon: int) -> str | None:
        """Why ``updates_per_step`` does not fit ``trainer.buffer_size`` = ``horizon`` (``None``: it does)."""
        steps = horizon * self.updates_per_step
        if steps < 1 or not math.isclose(steps, round(steps), abs_tol=1e-9):
            return (
                f"algorithm.cfg.updates_per_step: {self.updates_per_step:g} × trainer.buffer_size "
                f"({horizon}) = {steps:g} gradient steps per iteration; accepted: a whole number >= 1"
            )
        return None

    def minibatch_size(self, num_samples: int) -> int:
        """Rows the networks see at once in an update: ``batch_size``."""
        return self.batch_size

    @property
    def reads_kl(self) -> bool:
        """No KL rule reads an off-policy update."""
        return False


class SACCfg(OffPolicyCfg):
    """Soft actor-critic (Haarnoja et al. 2018, arXiv:1812.05905): a tanh-squashed Gaussian actor.

    The policy acts through ``policy.distribution: tanh_gaussian`` (``actor_only``: the critics are
    the algorithm's). ``ent_coef: auto`` tunes the entropy coefficient α so the policy's entropy
    stays near ``target_entropy``.
    """

    ent_coef: float | Literal["auto"] = "auto"
    """The entropy coefficient α: a fixed value, or ``auto`` (learned, starting at ``ent_coef_init``)."""
    ent_coef_init: float = Field(default=1.0, gt=0)
    """α's start value under ``ent_coef: auto``."""
    target_entropy: float | Literal["auto"] = "auto"
    """The entropy ``auto`` α aims for; ``auto``: −(action dims)."""
    ent_coef_learning_rate: float | None = Field(default=None, gt=0)
    """Learning rate of log α; null: ``learning_rate``."""

    @model_validator(mode="after")
    def _alpha(self) -> Self:
        if isinstance(self.ent_coef, float) and self.ent_coef < 0:
            fail("SACCfg", ("ent_coef",), f"got {self.ent_coef}; accepted: a float >= 0 or auto")
        return self


class TD3Cfg(OffPolicyCfg):
    """Twin delayed DDPG (Fujimoto et al. 2018, arXiv:1802.09477): a deterministic tanh actor.

    The policy acts through ``policy.distribution: tanh_deterministic``, adding Gaussian exploration
    noise of ``exploration_noise`` (a fraction of the action range's half-width) while collecting.
    """

    policy_frequency: int = Field(default=2, ge=1)
    """The actor and the targets step once every ``policy_frequency`` critic steps (TD3's delay)."""
    exploration_noise: float = Field(default=0.1, ge=0)
    """Std of the Gaussian noise added to the squashed action while collecting (in [-1, 1] units)."""
    target_policy_noise: float = Field(default=0.2, ge=0)
    """Std of the noise added to the target actor's action (target policy smoothing)."""
    target_noise_clip: float = Field(default=0.5, ge=0)
    """Clip of that noise, in [-1, 1] units."""


def replay_rollouts(replay_size: int, num_envs: int, horizon: int) -> int:
    """Rollouts the ring holds: ⌈replay_size / (num_envs × horizon)⌉, at least 1."""
    return max(1, math.ceil(replay_size / (num_envs * horizon)))
