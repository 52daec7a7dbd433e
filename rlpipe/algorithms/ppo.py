"""PPO over ``[N, T+1]`` rollouts: ``PPO`` and ``PPOCfg``, with rl8's and rsl_rl's options.

One minibatch reads in three files: the shared loop (``BaseAlgorithm.update`` in ``base``:
optimizer, schedules, KL rules, epochs × minibatches), this module (:meth:`PPO.prepare`,
:meth:`PPO.minibatch_loss` and, at the bottom, the loss maths: one pure function of ``[B]`` tensors
per option, Schulman et al. 2017, arXiv:1707.06347) and the policy's ``evaluate``. Reward scaling
is in ``normalization``. PPO contributes GAE, its update rows (every transition, or ``seq_len``
sequences for a recurrent policy), the minibatch preparation (advantage normalization) and the
clipped-surrogate loss. Two optional parts plug in where they act: RND curiosity (``rnd``) adds
its intrinsic reward (or, with its own value network, its intrinsic advantage) in the advantage
stage and trains its networks on each of the update's minibatches (``train_beside``); symmetry
(``symmetry``) mirrors the rows of the loss and/or adds the mirror loss.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym
import torch
from tensordict import TensorDict

from rlpipe.algorithms import sequences
from rlpipe.algorithms.base import BaseAlgorithm, Minibatch
from rlpipe.algorithms.gae import generalized_advantage_estimate, truncation_bootstrap
from rlpipe.algorithms.grpo import ACTOR_ONLY_POLICIES
from rlpipe.algorithms.normalization import RewardNormalizer
from rlpipe.algorithms.rnd import INTRINSIC_RETURN, RND
from rlpipe.algorithms.symmetry import Symmetry
from rlpipe.config import AlgorithmCfg, ConfigError
from rlpipe.config.algorithms import PPOCfg
from rlpipe.runtime.distributed import global_normalize

if TYPE_CHECKING:
    from rlpipe.policies.trainable import TrainablePolicy

__all__ = [
    "PPO",
    "PPOCfg",
    "approx_kl",
    "clip_fraction",
    "clipped_surrogate",
    "clipped_value_loss",
    "dual_clip",
    "explained_variance",
    "normalize",
    "surrogate",
    "value_mse",
]

UPDATE_KEYS = ("obs", "action", "sample_log_prob", "advantage", "return", "value")


class PPO(BaseAlgorithm):
    """Clipped-surrogate PPO: GAE, then the shared ``n_epochs`` × minibatches loop over every transition."""

    cfg_class = PPOCfg
    cfg: PPOCfg
    advantage_reads = ("reward", "done", "value", "truncated", "terminated", "final_value")
    update_reads = UPDATE_KEYS
    chunkable = True
    """Every term is a mean over the rows of a transition minibatch."""

    def __init__(self, cfg: PPOCfg, policy: TrainablePolicy) -> None:
        if not getattr(policy, "has_critic", True):
            raise ConfigError(
                f"policy.name: {type(policy).__name__} has no critic, but PPO's advantages (GAE) "
                "need value estimates; use a policy with a critic (policy.name: actor_critic), "
                "or algorithm.name: grpo"
            )
        super().__init__(cfg, policy)
        self.reward_normalizer = RewardNormalizer(cfg.gamma, self.device) if cfg.normalize_rewards else None
        self.rnd = RND(cfg.rnd, self.device) if cfg.rnd is not None else None
        """Curiosity: intrinsic rewards in ``compute_advantages``, its networks' steps in ``train_beside``."""
        if self.rnd is not None:
            self.advantage_reads = (*type(self).advantage_reads, "obs")
        if cfg.rnd is not None and cfg.rnd.intrinsic_critic:
            self.advantage_keys = (*type(self).advantage_keys, INTRINSIC_RETURN)
            self.update_reads = (*type(self).update_reads, INTRINSIC_RETURN)
        self.symmetry = Symmetry(cfg.symmetry) if cfg.symmetry is not None else None
        """Mirrored rows and/or the mirror loss, in ``minibatch_loss``."""
        if self.symmetry is not None and policy.is_recurrent:
            raise ConfigError(
                "algorithm.cfg.symmetry: mirrors transitions of feedforward policies; "
                "a recurrent policy is not supported (remove symmetry or use policy.name: "
                "actor_critic)"
            )

    @classmethod
    def check_run(
        cls,
        cfg: AlgorithmCfg,
        num_envs: int,
        policy_name: str,
        horizon: int,
        max_episode_steps: int | None = None,
    ) -> None:
        """Reject a critic-free policy, a precision the device cannot run, or a ``seq_len`` not dividing T."""
        if policy_name in ACTOR_ONLY_POLICIES:
            raise ConfigError(
                f"policy.name: {policy_name} has no critic, but PPO's advantages (GAE) need "
                "value estimates; use policy.name: actor_critic, or algorithm.name: grpo"
            )
        if isinstance(cfg, PPOCfg):
            cfg.check_sequences(horizon)
        super().check_run(cfg, num_envs, policy_name, horizon, max_episode_steps)

    def check_spaces(self, obs_space: gym.Space, action_space: gym.Space) -> None:
        """``rnd.obs_keys`` against the observation groups; the mirror function on a sample batch."""
        if self.rnd is not None:
            self.rnd.check_observations(obs_space)
        if self.symmetry is not None:
            self.symmetry.check(obs_space, action_space, self.device)

    def compute_advantages(self, rollout: TensorDict) -> dict[str, float]:
        """GAE into ``advantage`` and ``return`` (``[N, T+1]``, padding slot zero).

        With ``normalize_rewards`` GAE sees scaled copies of the rewards, and with ``rnd`` the
        intrinsic rewards added to them; ``rollout["reward"]`` is untouched. With the RND's
        ``intrinsic_critic`` the advantage is ``extrinsic_coef·A_ext + weight·A_int`` instead,
        ``return`` stays extrinsic and ``intrinsic_return`` (V_int's targets) is written too.
        """
        reward, done = rollout["reward"][:, :-1].float(), rollout["done"][:, :-1]
        if self.reward_normalizer is not None:
            reward = self.reward_normalizer(reward, done)
        diagnostics: dict[str, float] = {}
        rnd, at = self.rnd, self.progress
        two_values = rnd is not None and rnd.cfg.intrinsic_critic
        if rnd is not None and not two_values:
            intrinsic, diagnostics = rnd.intrinsic_reward(
                rollout, self.seed, at.env_steps, at.total_env_steps
            )
            reward = reward + intrinsic
        value = rollout["value"].float()
        advantage, returns = generalized_advantage_estimate(
            reward,
            value[:, :-1],
            value[:, 1:],
            done,
            truncation_bootstrap(rollout).float(),
            self.cfg.gamma,
            self.cfg.gae_lambda,
        )
        outputs = {"advantage": advantage, "return": returns}
        if rnd is not None and two_values:
            intrinsic, outputs[INTRINSIC_RETURN], diagnostics = rnd.intrinsic_advantage(
                rollout, self.seed, at.env_steps, at.total_env_steps, self.cfg.gae_lambda
            )
            outputs["advantage"] = rnd.cfg.extrinsic_coef * advantage + intrinsic
        for key, tensor in outputs.items():
            padded = torch.zeros_like(rollout["value"])
            padded[:, :-1] = tensor
            rollout.set(key, padded)
        return diagnostics

    def update_batch(self, rollout: TensorDict) -> TensorDict:
        """Every transition ``[N·T]`` (sequences ``[N·T/L]`` for a recurrent policy).

        Under ``normalize_advantage: batch`` the advantages are normalized over every rank's batch.
        """
        batch = sequences.update_batch(self.policy, rollout, self.update_reads, self.cfg.seq_len)
        if self.cfg.normalize_advantage == "batch":
            batch["advantage"] = global_normalize(batch["advantage"])  # statistics of every rank
        return batch

    def evaluate(self, obs: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``policy.evaluate`` (autocast under ``amp``), outputs ``(log_prob, entropy, value)`` in float32."""
        with self.autocast():
            outputs = self.policy.evaluate(obs, action)
        return tuple(t.float() for t in outputs)

    def prepare(self, mb: Minibatch) -> Minibatch:
        """``mb`` with its advantages normalized over all its rows (``normalize_advantage: minibatch``).

        Before any chunk or mirrored copy (rsl_rl); ``advantage`` is then flat, ``[B·L]`` for sequences.
        """
        if self.cfg.normalize_advantage != "minibatch":
            return mb
        columns = cast("dict[str, torch.Tensor]", dict(mb.items()))  # a minibatch's columns are tensors
        return {**columns, "advantage": normalize(mb["advantage"].flatten())}

    def minibatch_loss(self, mb: Minibatch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``(total loss, detached stats by name)`` of a prepared minibatch, or of some of its rows.

        With ``symmetry`` the PPO terms run over ``mb`` ``[B]`` and its mirrored copies ``[K·B]``
        (as rsl_rl: surrogate and value losses over every row; entropy, KL and clip fraction over
        the B original rows), and ``symmetry_loss`` is reported, added × ``mirror_loss_coef`` when on.
        """
        symmetry = self.symmetry
        rows = mb if symmetry is None else symmetry.augment(mb)
        with self.autocast():
            log_prob, entropy, value = self._evaluate(rows)
            mirror_loss = None if symmetry is None else symmetry.mirror_loss(self.policy, mb["obs"]).float()
        originals = entropy.shape[0] if symmetry is None else mb["advantage"].shape[0]
        total, stats = self._loss_terms(rows, log_prob, entropy[:originals], value, originals)
        if mirror_loss is not None:
            if symmetry is not None and symmetry.cfg.mirror_loss:
                total = total + symmetry.cfg.mirror_loss_coef * mirror_loss
            stats["symmetry_loss"] = mirror_loss.detach()
        return total, stats

    def _evaluate(self, mb: Minibatch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(log_prob, entropy, value)`` of the minibatch's actions, flat ``[B]`` (``[B·L]``), float32.

        A recurrent policy re-runs its core over each ``[L]`` sequence from its ``start_state``.
        """
        if self.policy.is_recurrent:
            outputs = self.policy.evaluate_sequence(
                mb["obs"], mb["action"], mb[sequences.START_STATE], mb[sequences.DONE]
            )
        else:
            outputs = self.policy.evaluate(mb["obs"], mb["action"])
        log_prob, entropy, value = outputs
        return log_prob.flatten().float(), entropy.flatten().float(), value.flatten().float()

    def train_beside(self, mb: Minibatch) -> dict[str, torch.Tensor]:
        """With ``rnd``: one step of its predictor (and V_int) on the minibatch's observations."""
        if self.rnd is None:
            return {}
        obs, returns = mb["obs"], mb[INTRINSIC_RETURN] if self.rnd.cfg.intrinsic_critic else None
        if self.policy.is_recurrent:  # [B, L] sequences: their transitions
            obs, returns = obs.flatten(0, 1), None if returns is None else returns.flatten(0, 1)
        return self.rnd.step(obs, returns)

    def _loss_terms(
        self,
        mb: Minibatch,
        log_prob: torch.Tensor,
        entropy: torch.Tensor,
        value: torch.Tensor,
        stat_rows: int,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The clipped surrogate, value and entropy terms over the rows of ``mb`` (all flat ``[B]``).

        The KL and clip fraction read the first ``stat_rows`` rows only (the originals of a mirrored
        minibatch).
        """
        cfg = self.cfg
        old_log_prob, returns = mb["sample_log_prob"].flatten(), mb["return"].flatten()
        policy_loss, log_ratio = clipped_surrogate(
            log_prob, old_log_prob, mb["advantage"].flatten(), cfg.clip_coef, cfg.dual_clip_coef
        )
        if cfg.clip_value_loss:
            value_loss = clipped_value_loss(value, mb["value"].flatten(), returns, cfg.vf_clip_coef)
        else:
            value_loss = value_mse(value, returns)
        entropy_mean = entropy.mean()
        total = policy_loss + cfg.vf_coef * value_loss - self.ent_coef * entropy_mean
        with torch.no_grad():
            stats = {
                "policy_loss": policy_loss.detach(),
                "value_loss": value_loss.detach(),
                "entropy": entropy_mean.detach(),
                "approx_kl": approx_kl(log_ratio[:stat_rows]),
                "clip_fraction": clip_fraction(log_ratio[:stat_rows], cfg.clip_coef),
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
        if self.rnd is not None:
            state["rnd"] = self.rnd.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict``; a state holding only ``optimizer`` loads too (see the base class)."""
        super().load_state_dict(state)
        if self.reward_normalizer is not None and state.get("reward_normalizer") is not None:
            self.reward_normalizer.load_state_dict(state["reward_normalizer"])
        if self.rnd is not None and state.get("rnd") is not None:
            self.rnd.load_state_dict(state["rnd"])


# ---------------------------------------------------------------------- the loss maths
# One pure function of flat ``[B]`` tensors per option of ``PPOCfg`` that changes the maths.


def surrogate(ratio: torch.Tensor, advantage: torch.Tensor, clip_coef: float) -> torch.Tensor:
    """Per-sample clipped objective ``[B]``: min(ρA, clip(ρ, 1−ε, 1+ε)A) (to be maximized)."""
    return torch.min(ratio * advantage, ratio.clamp(1.0 - clip_coef, 1.0 + clip_coef) * advantage)


def dual_clip(objective: torch.Tensor, advantage: torch.Tensor, dual_clip_coef: float) -> torch.Tensor:
    """Bound the objective ``[B]`` below by c·A where A < 0 (Ye et al. 2020, arXiv:1912.09729).

    For a negative advantage the plain clip leaves −ρA unbounded as ρ grows; the dual clip caps
    that loss at −c·A (c > 1): max(objective, c·A). Samples with A ≥ 0 are unchanged.
    """
    return torch.where(advantage < 0, torch.max(objective, dual_clip_coef * advantage), objective)


def clipped_surrogate(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantage: torch.Tensor,
    clip_coef: float,
    dual_clip_coef: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss, log_ratio)``: −mean of the clipped (optionally dual-clipped) objective, ρ = π/π_old."""
    log_ratio = log_prob - old_log_prob
    objective = surrogate(log_ratio.exp(), advantage, clip_coef)
    if dual_clip_coef is not None:
        objective = dual_clip(objective, advantage, dual_clip_coef)
    return -objective.mean(), log_ratio


def value_mse(value: torch.Tensor, returns: torch.Tensor) -> torch.Tensor:
    """Mean squared error of the critic against the GAE returns."""
    return (value - returns).pow(2).mean()


def clipped_value_loss(
    value: torch.Tensor, old_value: torch.Tensor, returns: torch.Tensor, clip_coef: float
) -> torch.Tensor:
    """PPO2's clipped value loss: mean(max((V − R)², (V_old + clip(V − V_old, ±c) − R)²)).

    ``old_value`` ``[B]`` is the critic's estimate at collection time; the value may move at most
    ``clip_coef`` from it before the clipped branch stops the gradient (OpenAI baselines, rsl_rl).
    """
    clipped = old_value + (value - old_value).clamp(-clip_coef, clip_coef)
    return torch.max((value - returns).pow(2), (clipped - returns).pow(2)).mean()


def approx_kl(log_ratio: torch.Tensor) -> torch.Tensor:
    """KL(π_old‖π) estimate E[(ρ − 1) − log ρ] (Schulman's k3: unbiased, non-negative)."""
    return (log_ratio.exp() - 1.0 - log_ratio).mean()


def clip_fraction(log_ratio: torch.Tensor, clip_coef: float) -> torch.Tensor:
    """Share of samples whose ratio left the clip range."""
    return ((log_ratio.exp() - 1.0).abs() > clip_coef).float().mean()


def explained_variance(value: torch.Tensor, returns: torch.Tensor) -> torch.Tensor:
    """1 − Var[returns − value] / Var[returns]: 1 is a perfect critic, ≤ 0 no better than a constant."""
    var = returns.var()
    return 1.0 - (returns - value).var() / var.clamp_min(1e-8)


def normalize(x: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Zero mean, unit std (advantage normalization, over a batch or a minibatch).

    A single sample has no spread: it is only centered (to 0), never divided by a NaN std.
    """
    if x.numel() < 2:
        return x - x.mean()
    return (x - x.mean()) / (x.std() + eps)
