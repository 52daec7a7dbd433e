"""GRPO over ``[N, T+1]`` rollouts: ``GRPO`` and ``GRPOCfg`` (no critic).

Group Relative Policy Optimization (Shao et al. 2024, arXiv:2402.03300), in a step-wise
form for dense-reward control: per-step discounted returns, normalized at every time step within
a group of ``group_size`` consecutive envs over the members still alive at that step, then a
clipped surrogate with optional k3 KL to a frozen reference policy.

The maths is pure tensor functions (``grpo_loss``); ``GRPO`` contributes its advantages, its
update rows (the valid steps only) and its masked loss to the shared update loop, so it has the
same optimizer, schedule, KL-rule and mixed-precision options as PPO.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, cast

import torch
from tensordict import TensorDict

from rlpipe.algorithms.base import BaseAlgorithm, Minibatch
from rlpipe.algorithms.grpo_loss import (
    group_advantages,
    k3_kl,
    masked_clipped_surrogate,
    masked_mean,
    step_returns_and_mask,
)
from rlpipe.algorithms.sequences import flatten_transitions
from rlpipe.algorithms.target_networks import frozen_copy
from rlpipe.config import AlgorithmCfg, ConfigError
from rlpipe.config.algorithms import GRPOCfg, group_size_error
from rlpipe.config.registry import BUILTIN_POLICIES

if TYPE_CHECKING:
    from rlpipe.policies.trainable import TrainablePolicy

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


class GRPO(BaseAlgorithm):
    """GRPO: step-wise group-relative advantages, then the shared loop over the valid steps.

    With ``kl_coef > 0`` a frozen copy of the policy at construction is the reference of the KL
    penalty; it travels in ``state_dict`` so a resumed run keeps the original reference. Stats are
    averaged weighted by valid steps.
    """

    cfg_class = GRPOCfg
    cfg: GRPOCfg
    advantage_keys = ("advantage", "seq_mask", "seq_return")
    advantage_reads = ("reward", "done")
    update_reads = UPDATE_KEYS
    stats_weighted_by_rows = True

    def __init__(self, cfg: GRPOCfg, policy: TrainablePolicy) -> None:
        if getattr(policy, "has_critic", False):
            raise ConfigError(
                f"policy.name: GRPO needs an actor-only policy (got {type(policy).__name__}, "
                f"which has a critic); accepted: {', '.join(ACTOR_ONLY_POLICIES)}"
            )
        super().__init__(cfg, policy)
        self.ref_policy = frozen_copy(policy) if cfg.kl_coef > 0 else None

    @classmethod
    def check_run(
        cls,
        cfg: AlgorithmCfg,
        num_envs: int,
        policy_name: str,
        horizon: int,
        max_episode_steps: int | None = None,
    ) -> None:
        """One-line ``ConfigError`` for impossible runs; warn when the horizon misses episode ends."""
        cfg = cast(GRPOCfg, cfg)  # resolve_algo_cfg validated it against cfg_class
        error = group_size_error(cfg.group_size)
        if error:
            raise ConfigError(f"algorithm.cfg.group_size: {error}")
        if num_envs % cfg.group_size:
            raise ConfigError(
                f"trainer.num_envs: {num_envs} is not divisible by algorithm.cfg.group_size={cfg.group_size}"
            )
        if policy_name in BUILTIN_POLICIES and policy_name not in ACTOR_ONLY_POLICIES:
            # a plug-in policy says itself whether it has a critic (checked when GRPO is built)
            raise ConfigError(
                f"policy.name: GRPO needs an actor-only policy (got {policy_name!r}); "
                f"accepted: {', '.join(ACTOR_ONLY_POLICIES)}"
            )
        super().check_run(cfg, num_envs, policy_name, horizon, max_episode_steps)
        if cfg.truncate_at_first_done and max_episode_steps and horizon < max_episode_steps:
            warnings.warn(
                f"trainer.buffer_size: {horizon} is shorter than the env's time limit "
                f"({max_episode_steps} steps); with truncate_at_first_done, episodes that outlive "
                "the horizon never reach their end and their returns are cut at the horizon",
                stacklevel=2,
            )

    # ------------------------------------------------------------------ keyed wrappers of the maths

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

    # ------------------------------------------------------------------ advantage, rows, loss

    def compute_advantages(self, rollout: TensorDict) -> dict[str, float]:
        """Write ``advantage``, ``seq_mask`` and ``seq_return`` (``[N, T+1]``, padding slot zero)."""
        n = rollout.batch_size[0]
        if n % self.cfg.group_size:
            raise ValueError(
                f"rollout has {n} envs, not divisible by algorithm.cfg.group_size={self.cfg.group_size}"
            )
        returns, mask = self._compute_step_returns_and_mask(
            rollout["reward"][:, :-1], rollout["done"][:, :-1]
        )
        advantage = self._compute_step_group_advantages(returns, mask)
        for key, value in (("advantage", advantage), ("seq_mask", mask), ("seq_return", returns)):
            padded = torch.zeros_like(rollout["reward"], dtype=torch.float32)
            padded[:, :-1] = value
            rollout.set(key, padded)
        return {}

    def update_batch(self, rollout: TensorDict) -> TensorDict:
        """The valid transitions only (``seq_mask > 0``), env-major.

        Masked steps carry no gradient, so dropping them first saves their forward/backward passes
        and keeps every minibatch ``batch_size`` valid steps.
        """
        flat = flatten_transitions(rollout, UPDATE_KEYS)
        valid = flat["seq_mask"] > 0
        rows = {key: value[valid] for key, value in flat.items()}
        return TensorDict(rows, batch_size=[rows["obs"].shape[0]])

    def minibatch_loss(self, mb: Minibatch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``(total loss, detached stats by name)`` of one minibatch of ``[B]`` tensors.

        Every term is a mean over the steps with ``seq_mask`` set:
        loss = surrogate − ent_coef·entropy + kl_coef·KL_k3(π‖π_ref). Under ``amp`` the network
        forwards run autocast and their outputs are read in float32.
        """
        mask = mb["seq_mask"].float()
        with self.autocast():
            dist = self.policy.distribution(mb["obs"])
            log_prob, entropy = dist.log_prob(mb["action"]).float(), dist.entropy().float()
        policy_loss, log_ratio = masked_clipped_surrogate(
            log_prob, mb["sample_log_prob"], mb["advantage"].detach(), mask, self.cfg.clip_coef
        )
        entropy = masked_mean(entropy, mask)
        ref_kl = self.reference_kl(mb["obs"], mb["action"], mask, log_prob)
        total = policy_loss - self.ent_coef * entropy + self.cfg.kl_coef * ref_kl
        with torch.no_grad():
            stats = {
                "policy_loss": policy_loss.detach(),
                "entropy": entropy.detach(),
                "approx_ref_kl": ref_kl.detach(),
                "approx_kl": masked_mean(k3_kl(log_ratio), mask),
                "clip_fraction": masked_mean(
                    ((log_ratio.exp() - 1.0).abs() > self.cfg.clip_coef).float(), mask
                ),
            }
        return total, stats

    def reference_kl(
        self,
        obs: torch.Tensor,
        action: torch.Tensor,
        mask: torch.Tensor,
        log_prob: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """KL(π‖π_ref) as the masked mean of exp(Δ) − Δ − 1, Δ = log π_ref − log π, over ``[B]`` steps.

        Zero when there is no reference policy (``kl_coef == 0``).
        """
        if self.ref_policy is None:
            return torch.zeros((), device=obs.device)
        if log_prob is None:
            with self.autocast():
                log_prob = self.policy.distribution(obs).log_prob(action).float()
        with torch.no_grad(), self.autocast():
            ref_log_prob = self.ref_policy.distribution(obs).log_prob(action).float()
        return masked_mean(k3_kl(ref_log_prob - log_prob), mask)

    @property
    def batch_shards(self) -> int:
        """1: ranks keep different numbers of valid steps, so a K-rank batch is minibatched as one."""
        return 1

    def diagnostics(self, rollout: TensorDict, batch: TensorDict) -> dict[str, torch.Tensor]:
        """``valid_fraction``: the share of the rollout's ``N·T`` steps the update trained on."""
        n, t1 = rollout.batch_size
        fraction = batch.batch_size[0] / max(n * (t1 - 1), 1)
        return {"valid_fraction": torch.tensor(fraction, dtype=torch.float64)}

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> dict[str, Any]:
        """The shared optimizer/scaler/schedule state and, with ``kl_coef > 0``, the reference weights."""
        state = super().state_dict()
        if self.ref_policy is not None:
            state["ref_policy"] = self.ref_policy.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the shared state and the reference policy (a checkpoint without one cannot feed a KL)."""
        super().load_state_dict(state)
        if self.ref_policy is None:
            return
        if "ref_policy" not in state:
            raise ValueError(
                "algorithm.cfg.kl_coef: > 0 but the checkpoint holds no reference "
                "policy (it was written with kl_coef: 0)"
            )
        self.ref_policy.load_state_dict(state["ref_policy"])
