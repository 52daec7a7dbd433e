"""The algorithms' config classes (``AlgorithmCfg``, ``UpdateCfg``, ``PPOCfg``, ``GRPOCfg``…), without torch.

``rlpipe.config.load`` validates ``algorithm.cfg`` against the config class ``algorithm.name``
resolves to (:mod:`rlpipe.config.registry`), so a bad hyperparameter of a built-in is a one-line
error before torch is imported; ``rlpipe.algorithms`` re-exports them next to the algorithms that use
them. Only ``optimizer_kwargs`` needs torch (the optimizers' signatures), and only when it is set.
"""

from __future__ import annotations

import inspect
import math
from typing import Any, Literal, Self

from pydantic import Field, field_validator, model_validator

from rlpipe.config.errors import ConfigError, fail
from rlpipe.config.rnd import RNDCfg
from rlpipe.config.schedules import Points, ScheduleKind, points_error
from rlpipe.config.strict import StrictModel
from rlpipe.config.symmetry import SymmetryCfg

__all__ = [
    "OPTIMIZER_CLASSES",
    "AlgorithmCfg",
    "GRPOCfg",
    "PPOCfg",
    "Points",
    "RNDCfg",
    "ScheduleKind",
    "SequenceCfg",
    "SymmetryCfg",
    "TrustRegionCfg",
    "UpdateCfg",
    "check_optimizer_kwargs",
    "fail",
    "group_size_error",
    "optimizer_kwarg_names",
    "points_error",
]

OPTIMIZER_CLASSES = {"adam": "Adam", "adamw": "AdamW", "sgd": "SGD", "rmsprop": "RMSprop"}
"""``algorithm.cfg.optimizer`` → the ``torch.optim`` class name."""
RESERVED_OPTIMIZER_KWARGS = ("params", "lr")
"""Set by the algorithm (``lr`` is ``learning_rate``), never through ``optimizer_kwargs``."""


def optimizer_kwarg_names(name: str) -> tuple[str, ...]:
    """Keyword arguments optimizer ``name`` accepts besides ``params`` and ``lr`` (imports torch)."""
    import torch

    signature = inspect.signature(getattr(torch.optim, OPTIMIZER_CLASSES[name]).__init__)
    return tuple(p for p in signature.parameters if p not in ("self", *RESERVED_OPTIMIZER_KWARGS))


def check_optimizer_kwargs(name: str, optimizer: str, kwargs: dict[str, Any]) -> None:
    """Fail (naming ``optimizer_kwargs.<key>``) for ``lr`` or a key optimizer ``optimizer`` does not take.

    ``name`` is the config class's; torch is imported only when ``kwargs`` is not empty.
    """
    if "lr" in kwargs:
        fail(name, ("optimizer_kwargs", "lr"), "set learning_rate instead")
    if kwargs:  # only then is torch needed (its optimizers' signatures)
        accepted = optimizer_kwarg_names(optimizer)
        for key in kwargs:
            if key not in accepted:
                fail(
                    name,
                    ("optimizer_kwargs", key),
                    f"not an argument of {OPTIMIZER_CLASSES[optimizer]}; accepted: {', '.join(accepted)}",
                )


class AlgorithmCfg(StrictModel):
    """Fields every algorithm shares."""

    device: str = "auto"
    """Device for the update; ``auto`` follows ``trainer.device``."""
    learning_rate: float = Field(default=3.0e-4, gt=0)
    """Optimizer learning rate."""
    batch_size: int = Field(default=64, ge=1)
    """Minibatch size in transitions."""
    gamma: float = Field(default=0.99, ge=0, le=1)
    """Discount factor."""
    gae_lambda: float = Field(default=0.95, ge=0, le=1)
    """GAE lambda (bias/variance trade-off of the advantage)."""
    max_grad_norm: float = Field(default=0.5, gt=0)
    """Global gradient-norm clip."""
    n_epochs: int = Field(default=10, ge=1)
    """Passes over the rollout per update."""

    def lineage(self) -> dict[str, str]:
        """Runs and files this algorithm's run learns from, by name (MLflow tags ``rlpipe.<name>``)."""
        return {}


class UpdateCfg(AlgorithmCfg):
    """Fields of the epochs × minibatches loop every algorithm shares (all options off by default).

    Optimizer, schedules, epochs, minibatches, gradient accumulation and chunks, precision and
    gradient clipping: what :class:`~rlpipe.algorithms.base.BaseAlgorithm`'s loop reads. An
    algorithm's own options (a clip range, the KL rules: :class:`TrustRegionCfg`) live in its
    config class, so an algorithm inherits no option it ignores.
    """

    ent_coef: float = Field(default=0.01, ge=0)
    """Entropy bonus weight (the start value when ``ent_coef_schedule_kind`` is linear/cosine)."""
    num_mini_batches: int | None = Field(default=None, ge=1)
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
    lr_final: float = Field(default=0.0, ge=0)
    """Learning rate at the end of a linear/cosine decay."""
    ent_coef_schedule: Points | None = None
    """``[[env_steps, ent_coef], ...]`` like ``lr_schedule``; overrides ``ent_coef``."""
    ent_coef_schedule_kind: ScheduleKind = "step"
    """As ``lr_schedule_kind``, for the entropy coefficient (decaying to ``ent_coef_final``)."""
    ent_coef_final: float = Field(default=0.0, ge=0)
    """Entropy coefficient at the end of a linear/cosine decay."""
    accumulate_grads: bool = False
    """One optimizer step per epoch: backward of each minibatch's loss / num_minibatches."""
    chunk_rows: int | Literal["auto"] | None = "auto"
    """Rows per forward/backward pass: a larger minibatch runs in chunks whose gradients add up to the
    minibatch's (the same optimizer steps; the gradient equal up to float rounding), so a chunk's
    activations stay in the CPU's cache. ``auto``: 4096 on CPU (where chunks pay: measured by
    ``benchmarks/peers/scaling.py``), none on CUDA; ``null``: whole minibatches.
    Applies to losses that are means over rows (feedforward PPO); others always run whole."""
    amp: Literal["none", "bf16", "fp16", "auto"] = "none"
    """Mixed precision of the update's network forward: bf16 (CPU, CUDA) or fp16 (CUDA, grad scaler);
    ``auto``: bf16 where the device runs it natively (``algorithms.optim.native_bf16``), else none."""
    image_augmentation: Literal["none", "shift"] = "none"
    """Augment the image groups of every minibatch: ``shift`` pads each image by 4 pixels (edge
    copies) and crops it back at a random offset per sample (DrQ, Kostrikov et al. 2020,
    arXiv:2004.13649), drawn from the update's seeded generator so a replay is bit-exact."""

    @field_validator("chunk_rows", mode="before")
    @classmethod
    def _chunk_rows(cls, rows: object) -> object:
        positive_int = isinstance(rows, int) and not isinstance(rows, bool) and rows >= 1
        if not (positive_int or rows is None or rows == "auto"):
            raise ValueError("accepted: an int >= 1, auto or null")
        return rows

    @model_validator(mode="after")
    def _coherent(self) -> Self:
        name = type(self).__name__
        for key in ("lr_schedule", "ent_coef_schedule"):
            if getattr(self, key) is not None and getattr(self, f"{key}_kind") in ("linear", "cosine"):
                fail(name, (key,), f"points need {key}_kind step or interp (linear/cosine take no points)")
        check_optimizer_kwargs(name, self.optimizer, self.optimizer_kwargs)
        return self

    @property
    def reads_kl(self) -> bool:
        """True when a KL rule (target-KL stop or adaptive lr) reads each minibatch's KL on the host."""
        return False

    @property
    def stops_on_kl(self) -> bool:
        """True when the update may stop early on the KL (``target_kl``)."""
        return False

    @property
    def adapts_lr(self) -> bool:
        """True when a KL rule sets the learning rate (``schedule: adaptive``), not the lr schedule."""
        return False

    def minibatch_size(self, num_samples: int) -> int:
        """Rows per minibatch: ceil(num_samples / num_mini_batches) when set, else ``batch_size``."""
        if self.num_mini_batches is None:
            return self.batch_size
        return math.ceil(num_samples / self.num_mini_batches)


class TrustRegionCfg(UpdateCfg):
    """A clip range and the KL rules: options of algorithms that keep each update near its rollout's policy.

    PPO and GRPO build on it; the shared loop applies the KL rules to each minibatch's ``approx_kl``.
    """

    clip_coef: float = Field(default=0.2, gt=0)
    """Surrogate clip range ε (also the threshold of the ``clip_fraction`` diagnostic)."""
    target_kl: float | None = Field(default=None, gt=0)
    """Stop the update before the first minibatch whose approx KL exceeds 1.5 × target_kl; null: never."""
    schedule: Literal["fixed", "adaptive"] = "fixed"
    """``adaptive``: rsl_rl's KL rule sets the learning rate after every minibatch (needs ``desired_kl``)."""
    desired_kl: float | None = Field(default=None, gt=0)
    """KL the adaptive schedule aims for: lr /1.5 above 2× it, ×1.5 below half of it."""
    min_lr: float = Field(default=1e-5, gt=0)
    """Floor of the adaptive learning rate."""
    max_lr: float = Field(default=1e-2, gt=0)
    """Ceiling of the adaptive learning rate."""

    @model_validator(mode="after")
    def _kl_rules(self) -> Self:
        name = type(self).__name__
        if self.target_kl is not None and self.accumulate_grads:
            fail(
                name, ("target_kl",), "cannot be combined with accumulate_grads (needs a step per minibatch)"
            )
        if self.schedule == "adaptive":
            if self.desired_kl is None:
                fail(name, ("desired_kl",), "required when schedule is adaptive")
            if self.lr_schedule is not None or self.lr_schedule_kind in ("linear", "cosine"):
                fail(
                    name,
                    ("schedule",),
                    "adaptive sets the lr from the KL; remove lr_schedule/lr_schedule_kind",
                )
        if self.min_lr > self.max_lr:
            fail(name, ("min_lr",), f"must be <= max_lr ({self.max_lr})")
        return self

    @property
    def reads_kl(self) -> bool:
        """True when a KL rule (target-KL stop or adaptive lr) reads each minibatch's KL on the host."""
        return self.target_kl is not None or self.schedule == "adaptive"

    @property
    def stops_on_kl(self) -> bool:
        """True when the update may stop early on the KL (``target_kl``)."""
        return self.target_kl is not None

    @property
    def adapts_lr(self) -> bool:
        """True when a KL rule sets the learning rate (``schedule: adaptive``), not the lr schedule."""
        return self.schedule == "adaptive"


class SequenceCfg(UpdateCfg):
    """Fields of algorithms that train recurrent policies; feedforward policies ignore them."""

    seq_len: int | None = Field(default=None, ge=1)
    """Truncated-BPTT length L; must divide ``trainer.buffer_size``. null: the whole rollout."""
    seqs_per_state_reset: int = 8
    """Collection zeroes the recurrent state every ``seq_len × seqs_per_state_reset`` steps of a
    rollout (starting with step 0); negative or 0: only after a done (the state then carries over)."""

    def check_sequences(self, horizon: int) -> None:
        """``ConfigError`` unless ``seq_len`` divides the rollout length ``horizon``."""
        if self.seq_len is not None and horizon % self.seq_len:
            raise ConfigError(
                f"trainer.buffer_size ({horizon}) must be a multiple of "
                f"algorithm.cfg.seq_len ({self.seq_len})"
            )


class PPOCfg(TrustRegionCfg, SequenceCfg):
    """Configuration for PPO: the classic defaults, then rl8's and rsl_rl's options (all off).

    The optimizer, minibatch, schedule and precision fields come from ``UpdateCfg``, the clip range
    and KL rules from ``TrustRegionCfg``, the recurrent sequences from ``SequenceCfg``.
    """

    n_epochs: int = Field(default=10, ge=1)
    """Passes over the rollout per update (rl8 ``num_sgd_iters``, rsl_rl ``num_learning_epochs``)."""
    vf_coef: float = Field(default=0.5, ge=0)
    """Value loss weight."""
    normalize_advantage: Literal["batch", "minibatch", "off"] = "batch"
    """Advantage normalization: over the whole rollout once (``batch``), within every minibatch
    (``minibatch``, rsl_rl's per-minibatch option) or ``off``; ``true``/``false`` mean batch/off."""
    normalize_rewards: bool = False
    """Divide rewards by the running std of the per-env discounted return before GAE
    (arXiv:2005.12729); the stored rollout keeps its raw rewards."""
    clip_value_loss: bool = False
    """PPO2's clipped value loss: the value may move ``vf_clip_coef`` from its collection-time estimate."""
    vf_clip_coef: float = Field(default=0.2, gt=0)
    """Clip range of the value (in return units) when ``clip_value_loss``."""
    dual_clip_coef: float | None = Field(default=None, gt=1)
    """Dual clip c > 1 for negative advantages: max(min(surr1, surr2), c·A) (Ye et al. 2020); null: off."""
    symmetry: SymmetryCfg | None = None
    """Mirror augmentation and/or mirror loss (``SymmetryCfg``); null: off."""
    rnd: RNDCfg | None = None
    """Random network distillation curiosity (``RNDCfg``); null: off."""

    @field_validator("normalize_advantage", mode="before")
    @classmethod
    def _bool_means_batch(cls, value: object) -> object:
        return ("batch" if value else "off") if isinstance(value, bool) else value


def group_size_error(value: int) -> str | None:
    """Why ``group_size`` is invalid (``None`` when it is not): a group needs two members."""
    return None if value >= 2 else f"must be >= 2 for within-group normalization (got {value})"


class GRPOCfg(TrustRegionCfg):
    """Configuration for GRPO: group size, reference KL, episode masking and group resets.

    The optimizer, minibatch, schedule and precision fields come from ``UpdateCfg``, the clip range
    and KL rules from ``TrustRegionCfg``; ``gae_lambda`` is inherited for config compatibility and
    unused: GRPO has no critic.
    """

    n_epochs: int = Field(default=10, ge=1)
    """Passes over the rollout per update."""
    ent_coef: float = Field(default=0.0, ge=0)
    """Entropy bonus weight (the start value when ``ent_coef_schedule_kind`` is linear/cosine)."""
    kl_coef: float = Field(default=0.02, ge=0)
    """Weight of the k3 KL to a frozen copy of the initial policy; 0 builds no reference policy
    (from-scratch training), 0.02 suits fine-tuning."""
    group_size: int = 4
    """Consecutive envs ``[g*k, (g+1)*k)`` that form one group; must be >= 2 and divide ``num_envs``."""
    eps: float = Field(default=1e-8, gt=0)
    """Added to the group std: a constant-return group gets advantage 0, not NaN."""
    reset_every_rollout: bool = True
    """Reset every env at the start of each collect, so each rollout starts fresh episodes."""
    truncate_at_first_done: bool = True
    """Train only on each env's first episode of the rollout (steps up to and including its first
    done); otherwise on every step."""
    group_reset: Literal["shared", "independent"] = "shared"
    """``shared``: the envs of a group are reset with one seed and start from the same state, so
    group-relative advantages compare like with like; ``independent``: every env starts on its own."""

    @field_validator("group_size")
    @classmethod
    def _group_size_at_least_two(cls, value: int) -> int:
        error = group_size_error(value)
        if error:
            raise ValueError(error)
        return value

    @property
    def reset_group_size(self) -> int:
        """Envs that share one initial state at each reset: ``group_size`` when shared, else 1."""
        return self.group_size if self.group_reset == "shared" else 1
