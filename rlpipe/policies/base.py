"""The ``Policy`` interface: TensorDict methods over a tensor-level fast path.

Shapes use B for any batch (``[N]`` while collecting, ``[minibatch]`` while updating).

* ``get_action(td)`` / ``forward(td)``: read ``obs`` ``[B, *obs]``, write ``action``
  ``[B, *act]``, ``sample_log_prob`` ``[B]`` and ``value`` ``[B]``.
* ``get_value(td)``: write ``value`` ``[B]``.
* ``evaluate_actions(td)``: read ``obs`` and ``action``; return a new TensorDict with
  ``sample_log_prob``, ``entropy`` and ``value`` (all ``[B]``).

The collector and the algorithms call the tensor methods (``sample``, ``value``, ``evaluate``)
directly: building a TensorDict per env step costs more than the step of a small MLP.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from tensordict import TensorDict
from torch import nn

from rlpipe.policies.encoders import ObsEncoder
from rlpipe.policies.normalizer import ObsNormalizer
from rlpipe.policies.obs_keys import DictObsNormalizer, select_obs

__all__ = ["Policy"]


class Policy(nn.Module, ABC):
    """Base of every policy: implement the three tensor methods, get the TensorDict API for free."""

    device: torch.device
    has_critic: bool = True
    """False for actor-only policies, whose ``value`` is identically zero."""
    is_recurrent: bool = False
    """True for policies with a hidden state (``RecurrentActorCritic``): the one answer to "recurrent
    or not?", read as it is (every policy has it). Collection and evaluation then step with
    ``sample_step``, the update trains on ``seq_len`` sequences through ``evaluate_sequence``."""
    obs_normalizer: ObsNormalizer | DictObsNormalizer | None
    """Running observation normalization (``policy.obs_normalization``; one per group of a dict
    observation); ``None``: off."""
    actor_obs_keys: tuple[str, ...] | None = None
    """Dict observations: keys the actor reads, concatenated in order (``None``: flat obs)."""
    critic_obs_keys: tuple[str, ...] | None = None
    """Dict observations: keys the critic reads (asymmetric actor-critic)."""

    actor_encoder: ObsEncoder | None
    """Image observations: the actor's :class:`~rlpipe.policies.encoders.ObsEncoder` (CNN features and
    vector groups → ``[B, actor_dim]``); ``None``: the actor reads its keys concatenated."""
    critic_encoder: ObsEncoder | None
    """The critic's encoder (with ``share_encoder``, over the actor's CNN modules)."""

    def __init__(self) -> None:
        super().__init__()
        self.obs_normalizer = None  # a submodule once assigned (nn.Module moves it to _modules)
        self.actor_encoder, self.critic_encoder = None, None

    def normalize_obs(self, obs: torch.Tensor | TensorDict) -> torch.Tensor | TensorDict:
        """``obs`` ``[B, *obs]`` through the frozen normalizer statistics (identity when off)."""
        return obs if self.obs_normalizer is None else self.obs_normalizer(obs)

    def actor_obs(self, obs: torch.Tensor | TensorDict) -> torch.Tensor:
        """Normalized actor input ``[B, actor_dim]`` (dict obs: ``actor_obs_keys``, images encoded)."""
        if self.actor_encoder is not None:
            return self.actor_encoder(self.normalize_obs(obs))
        return select_obs(self.normalize_obs(obs), self.actor_obs_keys)

    def critic_obs(self, obs: torch.Tensor | TensorDict) -> torch.Tensor:
        """Normalized critic input ``[B, critic_dim]`` (dict obs: ``critic_obs_keys``, images encoded)."""
        if self.critic_encoder is not None:
            return self.critic_encoder(self.normalize_obs(obs))
        return select_obs(self.normalize_obs(obs), self.critic_obs_keys)

    def update_normalization(self, obs: torch.Tensor | TensorDict) -> None:
        """Merge ``obs`` ``[..., *obs]`` into the normalizer statistics; a no-op when off."""
        if self.obs_normalizer is not None:
            self.obs_normalizer.update(obs)

    @abstractmethod
    def distribution(self, obs: torch.Tensor) -> torch.distributions.Distribution:
        """Action distribution π(·|obs) for ``obs`` ``[B, *obs]`` (log_prob summed over action dims)."""

    @abstractmethod
    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """State value V(obs): ``[B, *obs]`` → ``[B]``."""

    @abstractmethod
    def deterministic_action(self, dist: torch.distributions.Distribution) -> torch.Tensor:
        """The mode of ``dist`` (argmax / mean) used for evaluation."""

    def sample(self, obs: torch.Tensor, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """``(action [B, *act], log_prob [B])``; the collector's hot path (no value)."""
        dist = self.distribution(obs)
        action = self.deterministic_action(dist) if deterministic else dist.sample()
        return action, dist.log_prob(action)

    def act(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """The action alone ``[B, *act]`` (evaluation, deployment): ``sample`` without the log-probability."""
        return self.sample(obs, deterministic)[0]

    def evaluate(
        self, obs: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(log_prob [B], entropy [B], value [B])`` of given actions; the update's hot path."""
        dist = self.distribution(obs)
        return dist.log_prob(action), dist.entropy(), self.value(obs)

    def get_action(self, tensordict: TensorDict, deterministic: bool = False) -> TensorDict:
        """Sample ``action``, ``sample_log_prob`` and ``value`` into ``tensordict``."""
        return self.forward(tensordict, deterministic)

    def forward(self, tensordict: TensorDict, deterministic: bool = False) -> TensorDict:
        """Write ``action``, ``sample_log_prob`` and ``value`` into ``tensordict``."""
        obs = tensordict["obs"]
        action, log_prob = self.sample(obs, deterministic)
        tensordict.update({"action": action, "sample_log_prob": log_prob, "value": self.value(obs)})
        return tensordict

    def get_value(self, tensordict: TensorDict) -> TensorDict:
        """Write the value estimate ``value`` ``[B]`` into ``tensordict``."""
        tensordict.set("value", self.value(tensordict["obs"]))
        return tensordict

    def evaluate_actions(self, tensordict: TensorDict) -> TensorDict:
        """New TensorDict with ``sample_log_prob``, ``entropy`` and ``value`` of the stored actions."""
        log_prob, entropy, value = self.evaluate(tensordict["obs"], tensordict["action"])
        return TensorDict(
            {"sample_log_prob": log_prob, "entropy": entropy, "value": value},
            batch_size=tensordict.batch_size,
            device=tensordict.device,
        )
