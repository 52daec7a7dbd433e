"""Action heads: turn actor outputs into torch distributions for Discrete and Box spaces.

``policy.distribution`` picks the head (:func:`build_action_head`): categorical logits for Discrete;
for a 1-D Box a Gaussian with a learned state-independent log-std (``gaussian``, the ``auto``
choice), a Gaussian whose log-std the actor outputs beside the mean (``gaussian_state_std``), or a
Beta mapped onto the Box's finite bounds (``beta``, :mod:`rlpipe.policies.distributions`), or a
tanh-squashed head of the off-policy algorithms (``tanh_gaussian``, ``tanh_deterministic``:
:mod:`rlpipe.policies.squashed`). The
actor's output layer has ``head.out_dim`` units: twice the action dims for the last two.

Besides ``distribution``, every head computes what the torch distribution computes, op for op (same
values, same bits, same random draws), without building a ``Distribution`` object:
:meth:`ActionHead.sample` (collection, once per env step) and :meth:`ActionHead.evaluate` (the
update). On a small network that object's construction and argument handling cost more than the
network itself. The categorical draw is :func:`rlpipe.fast.categorical_draw` (behind the
``RLPIPE_FAST`` switch). ``tests/policies/test_heads.py`` checks these methods bit for bit against
the distributions.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical, Distribution, Independent, Normal

from rlpipe import fast
from rlpipe.config import ConfigError
from rlpipe.policies.action_head import ActionHead
from rlpipe.policies.distributions import (
    ScaledBeta,
    beta_concentrations,
    beta_entropy,
    beta_log_prob,
    beta_mode,
    draw_beta,
)
from rlpipe.policies.squashed import TanhDeterministicHead, TanhGaussianHead

__all__ = [
    "DISTRIBUTIONS",
    "LOG_STD_RANGE",
    "ActionHead",
    "BetaHead",
    "CategoricalHead",
    "GaussianHead",
    "StateStdGaussianHead",
    "build_action_head",
]

DISTRIBUTIONS = ("auto", "gaussian", "gaussian_state_std", "beta", "tanh_gaussian", "tanh_deterministic")
"""Values of ``policy.distribution``; ``auto`` is categorical for Discrete and ``gaussian`` for Box."""
BOUNDED = ("beta", "tanh_gaussian", "tanh_deterministic")
"""Distributions that map onto the Box's bounds, so need them finite (:mod:`rlpipe.policies.squashed`)."""
LOG_STD_RANGE = (-20.0, 2.0)
"""Clamp of the state-dependent log-std: std in ``[2e-9, 7.4]``, so an outlying actor output can
neither collapse the Gaussian (log-prob → +inf) nor make it flat enough to drown the mean."""


class CategoricalHead(ActionHead):
    """Discrete(n): the actor outputs logits ``[B, n]``; actions are int64 ``[B]``."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.out_dim = self.action_dim = n

    def distribution(self, out: torch.Tensor) -> Distribution:
        """Categorical over the logits."""
        return Categorical(logits=out, validate_args=False)

    def mode(self, dist: Distribution) -> torch.Tensor:
        """Argmax action."""
        assert isinstance(dist, Categorical), dist  # this head's distribution
        return dist.logits.argmax(-1)

    def sample(self, out: torch.Tensor, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """``Categorical(logits=out)``'s sample (or argmax) and its log-probability, without the object."""
        logits = _normalized(out)
        if deterministic:
            action = logits.argmax(-1)
        else:
            action = fast.categorical_draw(torch.softmax(logits, -1))
        return action, _gather(logits, action)

    def act(self, out: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """The argmax of the raw logits (as the exported policy acts), or a sample."""
        return out.argmax(-1) if deterministic else self.sample(out)[0]

    def evaluate(self, out: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``Categorical(logits=out)``'s ``log_prob(action)`` and ``entropy()``, without the object."""
        logits = _normalized(out)
        log_prob = _gather(logits, action)  # before the entropy, as PPO calls the distribution: the
        probs = torch.softmax(logits, -1)  # gradients then accumulate in the same order
        return log_prob, -(logits.clamp(min=torch.finfo(logits.dtype).min) * probs).sum(-1)


class GaussianHead(ActionHead):
    """Box(shape=(A,)): the actor outputs the mean ``[B, A]``; log-std is a learned ``[A]`` parameter.

    The log-std is state-independent (one learnable vector); log_prob and entropy are
    summed over action dims (``Independent``).
    """

    def __init__(self, action_dim: int, log_std_init: float = 0.0) -> None:
        super().__init__()
        self.out_dim = self.action_dim = action_dim
        self.log_std = nn.Parameter(torch.full((action_dim,), float(log_std_init)))

    def distribution(self, out: torch.Tensor) -> Distribution:
        """Diagonal Gaussian with the learned std."""
        std = self.log_std.exp().expand_as(out)
        return Independent(Normal(out, std, validate_args=False), 1, validate_args=False)

    def mode(self, dist: Distribution) -> torch.Tensor:
        """The mean action."""
        return dist.mean

    def sample(self, out: torch.Tensor, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """The Gaussian's sample (or mean) and its log-probability summed over action dims, no object."""
        std = self.log_std.exp().expand_as(out)
        if deterministic:
            action = out
        else:
            with torch.no_grad():  # Normal.sample draws without a graph
                action = torch.normal(out, std)
        return action, _normal_log_prob(action, out, std)

    def act(self, out: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """The mean, or a sample."""
        return out if deterministic else self.sample(out)[0]

    def evaluate(self, out: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The Gaussian's ``log_prob(action)`` and ``entropy()`` summed over action dims."""
        std = self.log_std.exp().expand_as(out)
        log_prob = _normal_log_prob(action, out, std)  # first, as with the distribution (see above)
        return log_prob, (0.5 + 0.5 * math.log(2 * math.pi) + torch.log(std)).sum(-1)


class StateStdGaussianHead(ActionHead):
    """Box(shape=(A,)): the actor outputs ``[B, 2A]``, the mean then the log-std of each dim.

    log-std = ``clamp(out[:, A:] + log_std_init, *LOG_STD_RANGE)``: the offset starts the std where
    ``log_std_init`` starts the state-independent head's. log_prob and entropy are summed over
    action dims, as :class:`GaussianHead`'s; the deterministic action is the mean.
    """

    def __init__(self, action_dim: int, log_std_init: float = 0.0) -> None:
        super().__init__()
        self.action_dim, self.out_dim = action_dim, 2 * action_dim
        self.log_std_init = float(log_std_init)

    def _mean_std(self, out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = out.chunk(2, dim=-1)
        return mean, (log_std + self.log_std_init).clamp(*LOG_STD_RANGE).exp()

    def distribution(self, out: torch.Tensor) -> Distribution:
        """Diagonal Gaussian with the actor's mean and std."""
        mean, std = self._mean_std(out)
        return Independent(Normal(mean, std, validate_args=False), 1, validate_args=False)

    def mode(self, dist: Distribution) -> torch.Tensor:
        """The mean action."""
        return dist.mean

    def sample(self, out: torch.Tensor, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """The Gaussian's sample (or mean) and its log-probability summed over action dims, no object."""
        mean, std = self._mean_std(out)
        if deterministic:
            action = mean
        else:
            with torch.no_grad():
                action = torch.normal(mean, std)
        return action, _normal_log_prob(action, mean, std)

    def act(self, out: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """The mean ``out[:, :A]``, or a sample."""
        return out.chunk(2, dim=-1)[0] if deterministic else self.sample(out)[0]

    def evaluate(self, out: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The Gaussian's ``log_prob(action)`` and ``entropy()`` summed over action dims."""
        mean, std = self._mean_std(out)
        log_prob = _normal_log_prob(action, mean, std)
        return log_prob, (0.5 + 0.5 * math.log(2 * math.pi) + torch.log(std)).sum(-1)


class BetaHead(ActionHead):
    """Box(shape=(A,)) with finite bounds: the actor outputs ``[B, 2A]``, α's then β's pre-activations.

    ``α, β = softplus(·) + 1 > 1`` per dim; actions are ``low + (high − low) · Beta(α, β)`` (see
    :mod:`rlpipe.policies.distributions` for the Jacobian and the clamp before ``log_prob``); the
    deterministic action is the mapped mode ``low + (high − low) · (α − 1) / (α + β − 2)``.
    ``low``/``high`` are buffers outside the state dict: they come from the env's action space.
    """

    low: torch.Tensor
    scale: torch.Tensor
    log_scale: torch.Tensor

    def __init__(self, low: np.ndarray | torch.Tensor, high: np.ndarray | torch.Tensor) -> None:
        super().__init__()
        low = torch.as_tensor(low, dtype=torch.float32).reshape(-1)
        high = torch.as_tensor(high, dtype=torch.float32).reshape(-1)
        self.action_dim, self.out_dim = low.numel(), 2 * low.numel()
        self.register_buffer("low", low.clone(), persistent=False)
        self.register_buffer("scale", high - low, persistent=False)
        self.register_buffer("log_scale", torch.log(high - low).sum(), persistent=False)

    def distribution(self, out: torch.Tensor) -> Distribution:
        """The mapped Beta (:class:`~rlpipe.policies.distributions.ScaledBeta`)."""
        alpha, beta = beta_concentrations(out)
        return ScaledBeta(alpha, beta, self.low, self.scale, self.log_scale)

    def mode(self, dist: Distribution) -> torch.Tensor:
        """The mapped mode."""
        return dist.mode

    def sample(self, out: torch.Tensor, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """The mapped Beta's sample (or mode) and its log-probability, without the object."""
        alpha, beta = beta_concentrations(out)
        if deterministic:
            action = beta_mode(alpha, beta, self.low, self.scale)
        else:
            action = self.low + self.scale * draw_beta(alpha, beta)
        return action, beta_log_prob(action, alpha, beta, self.low, self.scale, self.log_scale)

    def act(self, out: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """The mapped mode, or a sample."""
        if deterministic:
            return beta_mode(*beta_concentrations(out), self.low, self.scale)
        return self.sample(out)[0]

    def evaluate(self, out: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(log_prob [B], entropy [B])`` of ``action`` ``[B, A]``, Jacobian included in both."""
        alpha, beta = beta_concentrations(out)
        log_prob = beta_log_prob(action, alpha, beta, self.low, self.scale, self.log_scale)
        return log_prob, beta_entropy(alpha, beta, self.log_scale)


def _normalized(out: torch.Tensor) -> torch.Tensor:
    """Log-probabilities ``[..., n]`` of logits ``out`` as ``Categorical`` normalizes them."""
    return out - out.logsumexp(dim=-1, keepdim=True)


def _gather(logits: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """``logits[..., action]``: the log-probability ``[...]`` of integer actions ``[...]``."""
    return logits.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)


def _normal_log_prob(value: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """``Independent(Normal(mean, std), 1).log_prob(value)``: ``[B, A]`` → ``[B]``, the same ops."""
    var = std**2
    log_prob = -((value - mean) ** 2) / (2 * var) - std.log() - math.log(math.sqrt(2 * math.pi))
    return log_prob.sum(-1)


def build_action_head(
    action_space: gym.Space, log_std_init: float = 0.0, distribution: str = "auto"
) -> ActionHead:
    """The head ``policy.distribution`` names for ``action_space``; a bad combination is a ``ConfigError``.

    Discrete → categorical (``auto`` only); 1-D Box → ``gaussian`` (``auto``), ``gaussian_state_std``
    or ``beta`` (finite bounds, ``low < high``). Other spaces are a ``ValueError``.
    """
    if distribution not in DISTRIBUTIONS:
        accepted = ", ".join(DISTRIBUTIONS)
        raise ConfigError(f"policy.distribution: unknown {distribution!r}; accepted: {accepted}")
    if isinstance(action_space, gym.spaces.Discrete):
        if distribution != "auto":
            raise ConfigError(
                f"policy.distribution: {distribution!r} needs a Box action space, the env's is "
                f"{action_space}; accepted for Discrete actions: auto (categorical)"
            )
        return CategoricalHead(int(action_space.n))
    if not (isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1):
        raise ValueError(f"unsupported action space {action_space}; accepted: Discrete, 1-D Box")
    dim = int(action_space.shape[0])
    if distribution == "gaussian_state_std":
        return StateStdGaussianHead(dim, log_std_init)
    if distribution in BOUNDED:
        low, high = np.asarray(action_space.low, np.float64), np.asarray(action_space.high, np.float64)
        if not (np.isfinite(low).all() and np.isfinite(high).all() and (high > low).all()):
            raise ConfigError(
                f"policy.distribution: {distribution!r} needs finite action bounds with low < high, "
                f"the env's are {action_space}; accepted for it: auto, gaussian, "
                "gaussian_state_std"
            )
        if distribution == "beta":
            return BetaHead(low, high)
        squashed = TanhGaussianHead if distribution == "tanh_gaussian" else TanhDeterministicHead
        return squashed(low, high)
    return GaussianHead(dim, log_std_init)
