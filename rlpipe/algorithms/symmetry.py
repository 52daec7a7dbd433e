"""Symmetry: mirrored minibatches and a mirror loss (rsl_rl's extension).

Mittal et al. 2024, arXiv:2403.04359.

A task symmetric under a mirror M (left ↔ right) has an optimal policy with π(M a | M s) = π(a | s).
The user's mirror function ``function(obs=..., actions=..., env=None)`` returns ``(obs, actions)``
with the originals first and their K−1 mirrored copies after them (``[K·B, ...]``); either input
may be ``None``, and then so is its output (rsl_rl's contract). Two uses, either or both:

* data augmentation: the minibatch ``[B]`` becomes ``[K·B]``, old log-probs, advantages, returns
  and values repeated for the copies (rsl_rl repeats them: for a symmetric behaviour policy the
  mirrored pair has the same log-probability);
* mirror loss: MSE between the policy's mean on the mirrored observations and the mirrored mean on
  the observations (the target detached), ``update/symmetry_loss``. For a categorical policy the
  mean is the probability vector, mirrored by the permutation the function applies to the indices.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import torch
from tensordict import TensorDict
from torch.distributions import Categorical, Distribution

from rlpipe.algorithms.base import Minibatch
from rlpipe.algorithms.mirror_contract import ACCEPTED, KEY, Batch, call_mirror, check_mirror, check_signature
from rlpipe.config import ConfigError
from rlpipe.config.references import import_reference
from rlpipe.config.symmetry import SymmetryCfg

if TYPE_CHECKING:
    from rlpipe.policies.trainable import TrainablePolicy

__all__ = ["MirrorFn", "Symmetry", "action_mean", "resolve_mirror"]

MirrorFn = Callable[..., object]
"""``function(obs=None, actions=None, env=None) -> (obs [K·B, ...] | None, actions [K·B, ...] | None)``,
checked where it is called."""
REPEATED = ("sample_log_prob", "advantage", "return", "value")
"""Minibatch columns the mirrored copies share with their originals."""


def resolve_mirror(spec: str) -> MirrorFn:
    """``package.module:function`` → the function; a ``ConfigError`` naming the key otherwise.

    Imported from the installed packages and ``PYTHONPATH`` (never the working directory), only by
    the commands that build the algorithm.
    """
    func = import_reference(spec, KEY)
    if not callable(func):
        raise ConfigError(f"{KEY}: {spec!r} is not a function; {ACCEPTED}")
    check_signature(func, spec)
    return func


def action_mean(dist: Distribution) -> torch.Tensor:
    """The mean the mirror loss compares ``[B, A]``: a Gaussian's/Beta's mean, categorical probabilities."""
    return dist.probs if isinstance(dist, Categorical) else dist.mean


class Symmetry:
    """``algorithm.cfg.symmetry`` at work: :meth:`augment` a minibatch, :meth:`mirror_loss` of a policy."""

    def __init__(self, cfg: SymmetryCfg) -> None:
        self.cfg = cfg
        self.function = resolve_mirror(cfg.function)

    def check(self, obs_space: gym.Space, action_space: gym.Space, device: torch.device | str) -> None:
        """Call the function on a sample batch of the env's spaces: a broken one fails before training."""
        check_mirror(self.function, self.cfg.function, obs_space, action_space, device)

    def mirror(self, obs: Batch | None, actions: torch.Tensor | None) -> tuple[Any, Any]:
        """The function on ``obs``/``actions`` (either ``None``); raising or no pair is a ``ConfigError``."""
        return call_mirror(self.function, self.cfg.function, obs, actions)

    def augment(self, mb: Minibatch) -> Minibatch:
        """``mb`` ``[B]`` with its mirrored copies appended: ``[K·B]`` (``mb`` itself without augmentation).

        ``obs`` and ``action`` go through the mirror function; ``REPEATED`` columns are tiled K times.
        """
        if not self.cfg.data_augmentation:
            return mb
        rows = mb["action"].shape[0]
        obs, action = self.mirror(mb["obs"], mb["action"])
        copies = action.shape[0] // rows
        if copies * rows != action.shape[0] or obs.shape[0] != action.shape[0]:
            raise ConfigError(
                f"{KEY}: returned {obs.shape[0]} observations and "
                f"{action.shape[0]} actions for {rows} rows; expected K·{rows} of both"
            )
        columns: dict[str, Any] = {"obs": obs, "action": action}
        columns |= {
            key: mb[key].repeat(copies, *([1] * (mb[key].dim() - 1))) for key in REPEATED if key in mb.keys()
        }
        return TensorDict(columns, batch_size=[action.shape[0]])

    def mirror_loss(self, policy: TrainablePolicy, obs: torch.Tensor | TensorDict) -> torch.Tensor:
        """MSE between π's mean on the mirrored ``obs`` ``[B, ...]`` and the mirrored mean on ``obs`` (0-dim).

        The target (the mirrored mean of the originals) is detached, as in rsl_rl; the loss is
        detached entirely unless ``mirror_loss`` is on, so it is only logged.
        """
        rows = obs.shape[0]
        all_obs, _ = self.mirror(obs, None)
        dist = policy.distribution(all_obs)
        mean = action_mean(dist)
        mirror = self.mirror_probs if isinstance(dist, Categorical) else self.mirror_actions
        target = mirror(mean[:rows].detach())
        loss = torch.nn.functional.mse_loss(mean[rows:], target[rows:])
        return loss if self.cfg.mirror_loss else loss.detach()

    def mirror_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """Continuous ``actions`` ``[B, A]`` (or means) with their mirrored copies appended ``[K·B, A]``."""
        return self.mirror(None, actions)[1]

    def mirror_probs(self, probs: torch.Tensor) -> torch.Tensor:
        """Categorical ``probs`` ``[B, n]`` with their mirrored copies appended ``[K·B, n]``.

        The function's image of each action index says where that index's probability goes.
        """
        n = probs.shape[-1]
        _, images = self.mirror(None, torch.arange(n, device=probs.device))
        # copy k sends index a to image[a]: q[:, image[a]] = p[:, a], i.e. q = p[:, argsort(image)]
        copies = images.reshape(-1, n)
        return torch.cat([probs[:, torch.argsort(image)] for image in copies])
