"""GRPO over ``[N, T+1]`` rollouts: the seed's ``GRPO`` and ``GRPOCfg`` (no critic).

Group Relative Policy Optimization (Shao et al. 2024, arXiv:2402.03300), in the seed's step-wise
form for dense-reward control: per-step discounted returns, normalized at every time step within
a group of ``group_size`` consecutive envs over the members still alive at that step, then a
clipped surrogate with optional k3 KL to a frozen reference policy.

The maths is pure tensor functions (``step_returns_and_mask``, ``group_advantages``, the masked
losses); ``GRPO`` is the keyed shell that reads and writes rollout keys around them.
"""

from __future__ import annotations

import copy
import itertools
import warnings
from typing import Any, Literal, cast

import torch
from pydantic import Field, field_validator
from tensordict import TensorDict

from rlpipe.algorithms.base import BaseAlgorithm, flatten_transitions, minibatch_indices
from rlpipe.algorithms.registry import register_algo
from rlpipe.config import AlgorithmCfg, ConfigError
from rlpipe.distributed import average_gradients, global_minibatch_count

__all__ = [
    "GRPO",
    "GRPOCfg",
    "group_advantages",
    "k3_kl",
    "masked_clipped_surrogate",
    "masked_mean",
    "step_returns_and_mask",
]

ACTOR_ONLY_POLICIES = ("actor_only",)
"""``policy.name`` values GRPO accepts (it has no critic to train)."""
UPDATE_KEYS = ("obs", "action", "sample_log_prob", "advantage", "seq_mask")
STAT_NAMES = ("policy_loss", "entropy", "approx_ref_kl", "approx_kl", "clip_fraction")


def _group_size_error(value: int) -> str | None:
    return None if value >= 2 else f"must be >= 2 for within-group normalization (got {value})"


class GRPOCfg(AlgorithmCfg):
    """Configuration for GRPO (the seed's fields and defaults, plus ``group_reset``).

    ``gae_lambda`` is inherited for config compatibility and unused: GRPO has no critic.
    """

    n_epochs: int = Field(10, ge=1)
    """Passes over the rollout per update."""
    clip_coef: float = Field(0.2, gt=0)
    """Surrogate clip range ε."""
    ent_coef: float = Field(0.0, ge=0)
    """Entropy bonus weight."""
    kl_coef: float = Field(0.02, ge=0)
    """Weight of the k3 KL to a frozen copy of the initial policy; 0 builds no reference policy
    (from-scratch training), 0.02 suits fine-tuning."""
    group_size: int = 4
    """Consecutive envs ``[g*k, (g+1)*k)`` that form one group; must be >= 2 and divide ``num_envs``."""
    eps: float = Field(1e-8, gt=0)
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
        error = _group_size_error(value)
        if error:
            raise ValueError(error)
        return value

    @property
    def reset_group_size(self) -> int:
        """Envs that share one initial state at each reset: ``group_size`` when shared, else 1."""
        return self.group_size if self.group_reset == "shared" else 1


def step_returns_and_mask(
    rewards: torch.Tensor, dones: torch.Tensor, gamma: float, truncate_at_first_done: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-step discounted returns and the valid-step mask, both ``[N, T]`` float32.

    R_t = r_t + γ·R_{t+1}·(1 − done_t), accumulated backwards from R_T = 0 (no bootstrap past the
    horizon). With ``truncate_at_first_done`` the mask keeps each env's steps up to and including
    its first done and zeroes everything after; otherwise it is all ones.
    """
    rewards = rewards.float()
    not_done = (~dones.bool()).float()
    returns = torch.empty_like(rewards)
    running = torch.zeros_like(rewards[:, 0])
    for t in range(rewards.shape[1] - 1, -1, -1):
        running = rewards[:, t] + gamma * running * not_done[:, t]
        returns[:, t] = running
    if not truncate_at_first_done:
        return returns, torch.ones_like(rewards)
    dones_before = dones.long().cumsum(dim=1) - dones.long()
    return returns, (dones_before == 0).float()


def group_advantages(
    step_returns: torch.Tensor, seq_mask: torch.Tensor, group_size: int, eps: float
) -> torch.Tensor:
    """Advantages ``[N, T]``: returns normalized per time step within each group's valid members.

    Groups are consecutive blocks of ``group_size`` envs. At each step t, mean and population std
    are taken over the members with ``seq_mask = 1`` only; A = (R − mean) / (std + eps) · mask.
    A member alone in its group at a step, or a group of equal returns, gets 0.
    """
    n, t = step_returns.shape
    returns = step_returns.view(n // group_size, group_size, t)
    mask = seq_mask.view(n // group_size, group_size, t)
    count = mask.sum(dim=1, keepdim=True).clamp_min(1.0)
    mean = (returns * mask).sum(dim=1, keepdim=True) / count
    std = (((returns - mean) ** 2 * mask).sum(dim=1, keepdim=True) / count).sqrt()
    return ((returns - mean) / (std + eps)).view(n, t) * seq_mask


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Σ(x·mask) / max(Σ mask, 1) over ``[B]`` tensors."""
    return (x * mask).sum() / mask.sum().clamp_min(1.0)


def masked_clipped_surrogate(
    log_prob: torch.Tensor, old_log_prob: torch.Tensor, advantage: torch.Tensor,
    mask: torch.Tensor, clip_coef: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss, log_ratio)``: −masked mean of min(ρA, clip(ρ, 1±ε)A), ρ = π/π_old; ``[B]`` inputs."""
    log_ratio = log_prob - old_log_prob
    ratio = log_ratio.exp()
    surrogate = torch.min(ratio * advantage, ratio.clamp(1.0 - clip_coef, 1.0 + clip_coef) * advantage)
    return -masked_mean(surrogate, mask), log_ratio


def k3_kl(log_ratio: torch.Tensor) -> torch.Tensor:
    """Per-sample k3 estimator exp(Δ) − Δ − 1 ≥ 0 of KL(q‖p), Δ = log p(x) − log q(x), x ~ q.

    Schulman 2020, "Approximating KL divergence" (joschu.net/blog/kl-approx.html).
    """
    return log_ratio.exp() - log_ratio - 1.0


@register_algo("grpo")
class GRPO(BaseAlgorithm):
    """GRPO: step-wise group-relative advantages, then ``n_epochs`` × minibatches of the masked loss.

    With ``kl_coef > 0`` a frozen copy of the policy at construction is the reference of the KL
    penalty; it travels in ``state_dict`` so a resumed run keeps the original reference.
    """

    cfg_class = GRPOCfg
    cfg: GRPOCfg
    advantage_keys = ("advantage", "seq_mask", "seq_return")
    advantage_reads = ("reward", "done")
    update_reads = UPDATE_KEYS

    def __init__(self, cfg: GRPOCfg, policy: Any) -> None:
        if getattr(policy, "has_critic", False):
            raise ConfigError(
                f"policy.name: GRPO needs an actor-only policy (got {type(policy).__name__}, "
                f"which has a critic); accepted: {', '.join(ACTOR_ONLY_POLICIES)}"
            )
        super().__init__(cfg, policy)
        self.optimizer = torch.optim.Adam(policy.parameters(), lr=cfg.learning_rate)
        self.ref_policy = self._frozen_copy(policy) if cfg.kl_coef > 0 else None

    @staticmethod
    def _frozen_copy(policy: Any) -> Any:
        ref = copy.deepcopy(policy).eval()
        for param in ref.parameters():
            param.requires_grad_(False)
        return ref

    @classmethod
    def check_run(
        cls, cfg: AlgorithmCfg, num_envs: int, policy_name: str, horizon: int,
        max_episode_steps: int | None = None,
    ) -> None:
        """One-line ``ConfigError`` for impossible runs; warn when the horizon misses episode ends."""
        cfg = cast(GRPOCfg, cfg)  # resolve_algo_cfg validated it against cfg_class
        error = _group_size_error(cfg.group_size)
        if error:
            raise ConfigError(f"algorithm.cfg.group_size: {error}")
        if num_envs % cfg.group_size:
            raise ConfigError(f"trainer.num_envs: {num_envs} is not divisible by "
                              f"algorithm.cfg.group_size={cfg.group_size}")
        if policy_name not in ACTOR_ONLY_POLICIES:
            raise ConfigError(f"policy.name: GRPO needs an actor-only policy (got {policy_name!r}); "
                              f"accepted: {', '.join(ACTOR_ONLY_POLICIES)}")
        if cfg.truncate_at_first_done and max_episode_steps and horizon < max_episode_steps:
            warnings.warn(
                f"trainer.buffer_size: {horizon} is shorter than the env's time limit "
                f"({max_episode_steps} steps); with truncate_at_first_done, episodes that outlive "
                "the horizon never reach their end and their returns are cut at the horizon",
                stacklevel=2,
            )

    # ------------------------------------------------------------------ the seed's methods

    def _compute_step_returns_and_mask(
        self, rewards: torch.Tensor, dones: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Discounted per-step returns and valid-step mask over ``[N, T]`` (see ``step_returns_and_mask``)."""
        return step_returns_and_mask(rewards, dones, self.cfg.gamma, self.cfg.truncate_at_first_done)

    def _compute_step_group_advantages(
        self, step_returns: torch.Tensor, seq_mask: torch.Tensor
    ) -> torch.Tensor:
        """Normalize ``[N, T]`` per-step returns within each env group (see ``group_advantages``)."""
        return group_advantages(step_returns, seq_mask, self.cfg.group_size, self.cfg.eps)

    # ------------------------------------------------------------------ stages

    def compute_advantages(self, rollout: TensorDict) -> dict[str, float]:
        """Write ``advantage``, ``seq_mask`` and ``seq_return`` (``[N, T+1]``, padding slot zero)."""
        n = rollout.batch_size[0]
        if n % self.cfg.group_size:
            raise ValueError(f"rollout has {n} envs, not divisible by "
                             f"algorithm.cfg.group_size={self.cfg.group_size}")
        returns, mask = self._compute_step_returns_and_mask(
            rollout["reward"][:, :-1], rollout["done"][:, :-1]
        )
        advantage = self._compute_step_group_advantages(returns, mask)
        for key, value in (("advantage", advantage), ("seq_mask", mask), ("seq_return", returns)):
            padded = torch.zeros_like(rollout["reward"], dtype=torch.float32)
            padded[:, :-1] = value
            rollout.set(key, padded)
        return {}

    def update(self, rollout: TensorDict) -> dict[str, float]:
        """Multi-epoch minibatch optimization over the valid steps; returns valid-step-weighted means.

        Only transitions with ``seq_mask > 0`` are flattened into the batch: masked steps carry no
        gradient, so dropping them first saves their forward/backward passes and keeps every
        minibatch ``batch_size`` valid steps.
        """
        if "advantage" not in rollout.keys():
            self.compute_advantages(rollout)
        flat = flatten_transitions(rollout, UPDATE_KEYS)
        valid = flat["seq_mask"] > 0
        batch = {key: value[valid] for key, value in flat.items()}
        totals = torch.zeros(len(STAT_NAMES), device=self.device)
        weight = torch.zeros((), device=self.device)
        steps = global_minibatch_count(len(batch["obs"]), self.cfg.batch_size, self.device)
        for _ in range(self.cfg.n_epochs):
            indices = minibatch_indices(len(batch["obs"]), self.cfg.batch_size, self.device, self.generator)
            for idx in itertools.islice(itertools.chain(indices, itertools.repeat(None)), steps):
                if idx is None:  # this rank has fewer valid steps: join the others' all-reduce only
                    self._sync_only_step()
                    continue
                mb = {key: value[idx] for key, value in batch.items()}
                stats = self._minibatch_step(mb)
                mb_weight = mb["seq_mask"].sum()
                totals += stats * mb_weight
                weight += mb_weight
        result = dict(zip(STAT_NAMES, (totals / weight.clamp_min(1.0)).tolist()))
        result["valid_fraction"] = len(batch["obs"]) / max(len(flat["obs"]), 1)
        result["learning_rate"] = self.optimizer.param_groups[0]["lr"]
        return result

    def loss(self, mb: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(total loss, detached stats [len(STAT_NAMES)])`` of one minibatch of ``[B]`` tensors.

        Every term is a mean over the steps with ``seq_mask`` set:
        loss = surrogate − ent_coef·entropy + kl_coef·KL_k3(π‖π_ref).
        """
        mask = mb["seq_mask"].float()
        dist = self.policy.distribution(mb["obs"])
        log_prob = dist.log_prob(mb["action"])
        policy_loss, log_ratio = masked_clipped_surrogate(
            log_prob, mb["sample_log_prob"], mb["advantage"].detach(), mask, self.cfg.clip_coef
        )
        entropy = masked_mean(dist.entropy(), mask)
        ref_kl = self.reference_kl(mb["obs"], mb["action"], mask, log_prob)
        total = policy_loss - self.cfg.ent_coef * entropy + self.cfg.kl_coef * ref_kl
        with torch.no_grad():
            stats = torch.stack([
                policy_loss, entropy, ref_kl, masked_mean(k3_kl(log_ratio), mask),
                masked_mean(((log_ratio.exp() - 1.0).abs() > self.cfg.clip_coef).float(), mask),
            ])
        return total, stats

    def reference_kl(
        self, obs: torch.Tensor, action: torch.Tensor, mask: torch.Tensor,
        log_prob: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """KL(π‖π_ref) as the masked mean of exp(Δ) − Δ − 1, Δ = log π_ref − log π, over ``[B]`` steps.

        Zero when there is no reference policy (``kl_coef == 0``).
        """
        if self.ref_policy is None:
            return torch.zeros((), device=obs.device)
        if log_prob is None:
            log_prob = self.policy.distribution(obs).log_prob(action)
        with torch.no_grad():
            ref_log_prob = self.ref_policy.distribution(obs).log_prob(action)
        return masked_mean(k3_kl(ref_log_prob - log_prob), mask)

    def _minibatch_step(self, mb: dict[str, torch.Tensor]) -> torch.Tensor:
        total, stats = self.loss(mb)
        self.optimizer.zero_grad(set_to_none=True)
        total.backward()
        self._clip_and_step()
        return stats

    def _sync_only_step(self) -> None:
        """A rank out of minibatches contributes zero gradients to the others' minibatch step."""
        self.optimizer.zero_grad(set_to_none=True)
        self._clip_and_step()

    def _clip_and_step(self) -> None:
        average_gradients(self.policy.parameters())  # every rank clips and steps the same gradient
        torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.cfg.max_grad_norm)
        self.optimizer.step()

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> dict[str, Any]:
        """Optimizer state and, with ``kl_coef > 0``, the reference policy's weights."""
        state: dict[str, Any] = {"optimizer": self.optimizer.state_dict()}
        if self.ref_policy is not None:
            state["ref_policy"] = self.ref_policy.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the optimizer and the reference policy (a checkpoint without one cannot feed a KL)."""
        self.optimizer.load_state_dict(state["optimizer"])
        if self.ref_policy is None:
            return
        if "ref_policy" not in state:
            raise ValueError("algorithm.cfg.kl_coef: > 0 but the checkpoint holds no reference "
                             "policy (it was written with kl_coef: 0)")
        self.ref_policy.load_state_dict(state["ref_policy"])
