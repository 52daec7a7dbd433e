"""The off-policy critics: K Q networks over ``[observation, action]``, scalar or categorical (C51).

``QCritics(obs_dim, action_dim, K, mlp, distributional)`` maps ``[B, obs_dim]`` and ``[B, A]`` to
``[K, B]`` values (:meth:`QCritics.values`) and, for a categorical critic, ``[K, B, atoms]`` logits
(:meth:`QCritics.logits`). :func:`project_returns` is the categorical Bellman projection of
Bellemare et al. 2017 (arXiv:1707.06887), as FastTD3 applies it to n-step targets.
"""

from __future__ import annotations

import torch
from torch import nn

from rlpipe.config.offpolicy import DistributionalCfg
from rlpipe.config.policy import MLPCfg
from rlpipe.policies.mlp import build_mlp

__all__ = ["QCritics", "bootstrap_target", "project_returns", "reduce_critics"]


class QCritics(nn.Module):
    """K independent MLPs ``[B, obs_dim + A]`` → ``[B, 1]`` (scalar) or ``[B, atoms]`` (categorical)."""

    atoms: torch.Tensor
    """The categorical critic's support ``[atoms]`` (only with ``distributional``)."""

    def __init__(
        self, obs_dim: int, action_dim: int, count: int, mlp: MLPCfg, distributional: DistributionalCfg | None
    ) -> None:
        super().__init__()
        out = 1 if distributional is None else distributional.num_atoms
        self.nets = nn.ModuleList(
            build_mlp(obs_dim + action_dim, out, list(mlp.hidden_sizes), mlp.activation) for _ in range(count)
        )
        self.distributional = distributional
        if distributional is not None:
            atoms = torch.linspace(distributional.v_min, distributional.v_max, distributional.num_atoms)
            self.register_buffer("atoms", atoms, persistent=False)

    def outputs(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Every network's raw output ``[K, B, 1 or atoms]``."""
        x = torch.cat([obs, action.to(obs.dtype)], dim=-1)
        return torch.stack([net(x) for net in self.nets])

    def values(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Q ``[K, B]``: the scalar output, or the categorical distribution's expected return."""
        return self.expected(self.outputs(obs, action))

    def expected(self, outputs: torch.Tensor) -> torch.Tensor:
        """Q ``[K, B]`` of :meth:`outputs`."""
        if self.distributional is None:
            return outputs.squeeze(-1)
        return (torch.softmax(outputs.float(), dim=-1) * self.atoms).sum(-1)


def reduce_critics(values: torch.Tensor, how: str) -> torch.Tensor:
    """``[K, B]`` → ``[B]``: the minimum over the critics (clipped double Q) or their mean."""
    return values.min(dim=0).values if how == "min" else values.mean(dim=0)


def bootstrap_target(
    targets: QCritics,
    outputs: torch.Tensor,
    ret: torch.Tensor,
    discount: torch.Tensor,
    shift: torch.Tensor,
    how: str,
) -> torch.Tensor:
    """The critics' regression target from the target critics' ``outputs`` at the bootstrap observations.

    Scalar critics: ``ret + discount · (reduce_k Q'_k + shift)`` ``[B]``; categorical: the projected
    distribution ``[B, atoms]`` of ``ret + discount · shift + discount · Z'`` of the critic the
    reduction ``how`` picks (``min``: the lowest expected value per row; ``mean``: the mixture).
    ``ret``, ``discount``, ``shift`` are ``[B]``; ``outputs`` ``[K, B, 1 or atoms]``.
    """
    if targets.distributional is None:
        return ret + discount * (reduce_critics(outputs.squeeze(-1).float(), how) + shift)
    probs = torch.softmax(outputs.float(), dim=-1)  # [K, B, atoms]
    if how == "min":
        pick = targets.expected(outputs).argmin(dim=0)  # [B]
        chosen = probs.gather(0, pick.view(1, -1, 1).expand(1, *probs.shape[1:])).squeeze(0)
    else:
        chosen = probs.mean(dim=0)
    return project_returns(chosen, ret + discount * shift, discount, targets.atoms)


def project_returns(
    target_probs: torch.Tensor, shift: torch.Tensor, discount: torch.Tensor, atoms: torch.Tensor
) -> torch.Tensor:
    """The distribution of ``shift + discount · Z`` projected onto ``atoms``: ``[B, atoms]``.

    ``target_probs`` ``[B, atoms]``: the target critic's distribution of Z at the bootstrap
    observation; ``shift`` ``[B]`` (the n-step reward sum) and ``discount`` ``[B]`` (0 after a
    termination: all mass on ``shift``). Each shifted atom's mass is split between its two
    neighbours on the support, clamped to ``[v_min, v_max]``.
    """
    v_min, v_max, count = atoms[0], atoms[-1], atoms.numel()
    delta = (v_max - v_min) / (count - 1)
    moved = (shift.unsqueeze(-1) + discount.unsqueeze(-1) * atoms).clamp(v_min, v_max)
    where = ((moved - v_min) / delta).clamp(0, count - 1)  # v_max can round past the last atom
    lower, upper = where.floor().long(), where.ceil().long()
    same = lower == upper  # a moved atom exactly on the support keeps its whole mass there
    lower_mass = target_probs * (upper.to(where.dtype) - where + same.to(where.dtype))
    upper_mass = target_probs * (where - lower.to(where.dtype))
    projected = torch.zeros_like(target_probs)
    projected.scatter_add_(-1, lower, lower_mass)
    projected.scatter_add_(-1, upper, upper_mass)
    return projected
