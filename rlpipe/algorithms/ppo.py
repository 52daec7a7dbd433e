"""PPO over ``[N, T+1]`` rollouts: ``PPO`` and ``PPOCfg``, with rl8's and rsl_rl's options.

The loss maths lives in ``ppo_loss`` (one pure function per option), reward scaling in
``normalization``; the optimizer, schedules, KL rules and the epochs × minibatches loop are the
shared ``BaseAlgorithm.update``. PPO contributes GAE, its update rows (every transition,
or ``seq_len`` sequences for a recurrent policy) and the clipped-surrogate loss.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict

from rlpipe.algorithms import sequences
from rlpipe.algorithms.base import BaseAlgorithm, Minibatch
from rlpipe.algorithms.gae import generalized_advantage_estimate, truncation_bootstrap
from rlpipe.algorithms.grpo import ACTOR_ONLY_POLICIES
from rlpipe.algorithms.normalization import RewardNormalizer
from rlpipe.algorithms.ppo_loss import (
    approx_kl,
    clip_fraction,
    clipped_surrogate,
    clipped_value_loss,
    explained_variance,
    normalize,
    value_mse,
)
from rlpipe.algorithms.registry import register_algo
from rlpipe.config import AlgorithmCfg, ConfigError
from rlpipe.config.algorithms import PPOCfg
from rlpipe.runtime.distributed import global_normalize

__all__ = ["PPO", "PPOCfg"]

UPDATE_KEYS = ("obs", "action", "sample_log_prob", "advantage", "return", "value")


@register_algo("ppo")
class PPO(BaseAlgorithm):
    """Clipped-surrogate PPO: GAE, then the shared ``n_epochs`` × minibatches loop over every transition."""

    cfg_class = PPOCfg
    cfg: PPOCfg
    advantage_reads = ("reward", "done", "value", "truncated", "terminated", "final_value")
    update_reads = UPDATE_KEYS

    def __init__(self, cfg: PPOCfg, policy: Any) -> None:
        super().__init__(cfg, policy)
        self.reward_normalizer = RewardNormalizer(cfg.gamma, self.device) if cfg.normalize_rewards else None

    @classmethod
    def check_run(cls, cfg: AlgorithmCfg, num_envs: int, policy_name: str, horizon: int,
                  max_episode_steps: int | None = None) -> None:
        """Reject a critic-free policy, a precision the device cannot run, or a ``seq_len`` not dividing T."""
        if policy_name in ACTOR_ONLY_POLICIES:
            raise ConfigError(f"policy.name: {policy_name} has no critic, but PPO's advantages (GAE) need "
                              "value estimates; use policy.name: actor_critic, or algorithm.name: grpo")
        if isinstance(cfg, PPOCfg):
            cfg.check_sequences(horizon)
        super().check_run(cfg, num_envs, policy_name, horizon, max_episode_steps)

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

    def update_batch(self, rollout: TensorDict) -> TensorDict:
        """Every transition ``[N·T]`` (sequences ``[N·T/L]`` for a recurrent policy).

        Under ``normalize_advantage: batch`` the advantages are normalized over every rank's batch.
        """
        batch = sequences.update_batch(self.policy, rollout, UPDATE_KEYS, self.cfg.seq_len)
        if self.cfg.normalize_advantage == "batch":
            batch["advantage"] = global_normalize(batch["advantage"])  # statistics of every rank
        return batch

    def minibatch_rows(self, batch: TensorDict) -> int:
        """Transitions per minibatch, or whole sequences for a recurrent policy's batch."""
        return sequences.minibatch_rows(self.cfg, batch)

    def evaluate(self, obs: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``policy.evaluate`` (autocast under ``amp``), outputs ``(log_prob, entropy, value)`` in float32."""
        with self.autocast():
            outputs = self.policy.evaluate(obs, action)
        return tuple(t.float() for t in outputs)

    def loss(self, mb: Minibatch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``(total loss, detached stats by name)`` of one minibatch."""
        with self.autocast():  # a sequence minibatch re-runs the recurrent core; ``mb`` comes back flat
            log_prob, entropy, value, mb = sequences.evaluate_minibatch(self.policy, mb)
        return self._loss_terms(mb, self._advantage(mb["advantage"]), log_prob, entropy, value)

    @property
    def chunkable(self) -> bool:
        """Feedforward policies: every term is a mean over rows (a recurrent one runs whole sequences)."""
        return not getattr(self.policy, "is_recurrent", False)

    def chunk_minibatch(self, mb: Minibatch) -> Minibatch:
        """``mb`` whose ``advantage`` is already as the loss weighs it (normalized over all of ``mb``)."""
        return {**dict(mb.items()), "advantage": self._advantage(mb["advantage"])}

    def chunk_loss(self, part: Minibatch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``loss`` of rows of :meth:`chunk_minibatch`'s result, their ``advantage`` taken as it is."""
        with self.autocast():
            log_prob, entropy, value, _ = sequences.evaluate_minibatch(self.policy, part)
        return self._loss_terms(part, part["advantage"], log_prob, entropy, value)

    def _advantage(self, advantage: torch.Tensor) -> torch.Tensor:
        """The minibatch's advantages ``[B]`` as the loss weighs them."""
        return normalize(advantage) if self.cfg.normalize_advantage == "minibatch" else advantage

    def _loss_terms(
        self, mb: Minibatch, advantage: torch.Tensor, log_prob: torch.Tensor, entropy: torch.Tensor,
        value: torch.Tensor,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The clipped surrogate, value and entropy terms over the rows of ``mb`` (all ``[B]``)."""
        cfg = self.cfg
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
            stats = {
                "policy_loss": policy_loss.detach(), "value_loss": value_loss.detach(),
                "entropy": entropy_mean.detach(), "approx_kl": approx_kl(log_ratio),
                "clip_fraction": clip_fraction(log_ratio, cfg.clip_coef),
            }
        return total, stats

    def diagnostics(self, rollout: TensorDict, batch: TensorDict) -> dict[str, torch.Tensor]:
        """Explained variance of the collection-time values, and the reward scale when normalizing."""
        extra = {"explained_variance": explained_variance(batch["value"], batch["return"])}
        if self.reward_normalizer is not None:
            extra["reward_scale"] = self.reward_normalizer.scale()
        return extra

    def state_dict(self) -> dict[str, Any]:
        """The shared optimizer/scaler/schedule state, plus the reward statistics."""
        state = super().state_dict()
        state["reward_normalizer"] = self.reward_normalizer.state_dict() if self.reward_normalizer else None
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict``; a state holding only ``optimizer`` loads too (see the base class)."""
        super().load_state_dict(state)
        if self.reward_normalizer is not None and state.get("reward_normalizer") is not None:
            self.reward_normalizer.load_state_dict(state["reward_normalizer"])
