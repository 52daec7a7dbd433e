"""Generalized Advantage Estimation (Schulman et al. 2015, arXiv:1506.02438) over ``[N, T+1]`` rollouts.

The maths is one pure tensor function; ``compute_gae`` is a thin keyed layer over it.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict

__all__ = ["compute_gae", "generalized_advantage_estimate", "truncation_bootstrap"]


def generalized_advantage_estimate(
    reward: torch.Tensor,
    value: torch.Tensor,
    next_value: torch.Tensor,
    done: torch.Tensor,
    truncation_value: torch.Tensor,
    gamma: float,
    gae_lambda: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and returns, both ``[N, T]``, from ``[N, T]`` inputs.

    δ_t = r_t + γ·(trunc_value_t + (1 − done_t)·V(s_{t+1})) − V(s_t)
    A_t = δ_t + γλ·(1 − done_t)·A_{t+1}

    ``done`` cuts the trace (``next_value`` after a done belongs to the next episode);
    ``truncation_value`` is the value to bootstrap with where a time limit ended the episode
    (zero elsewhere, and zero where it terminated).
    """
    not_done = (~done).to(reward.dtype)
    delta = reward + gamma * (truncation_value + not_done * next_value) - value
    decay = gamma * gae_lambda * not_done
    advantage = torch.empty_like(delta)
    running = torch.zeros_like(delta[:, 0])
    for t in range(delta.shape[1] - 1, -1, -1):
        running = delta[:, t] + decay[:, t] * running
        advantage[:, t] = running
    return advantage, advantage + value


def truncation_bootstrap(rollout: TensorDict) -> torch.Tensor:
    """``[N, T]`` value to bootstrap with at time-limit truncations.

    With ``final_value`` (V of the true final observation, 0 unless truncated): that value, and
    nothing where the step also terminated. Without it, the common approximation
    r_t + γ·V(s_t): the value of the truncated step's own state.
    """
    truncated = rollout["truncated"][:, :-1]
    if "final_value" in rollout.keys():
        keep = truncated & ~rollout["terminated"][:, :-1]
        return rollout["final_value"][:, :-1] * keep
    return rollout["value"][:, :-1] * truncated


def compute_gae(rollout: TensorDict, gamma: float, gae_lambda: float) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE over a rollout stored as ``[num_envs, time + 1]``; returns ``(advantages, returns)`` ``[N, T]``.

    ``value[:, -1]`` is the bootstrap value of the final observation; the padded last slot of
    transition-only fields is ignored.
    """
    value = rollout["value"].float()
    return generalized_advantage_estimate(
        reward=rollout["reward"][:, :-1].float(),
        value=value[:, :-1],
        next_value=value[:, 1:],
        done=rollout["done"][:, :-1],
        truncation_value=truncation_bootstrap(rollout).float(),
        gamma=gamma,
        gae_lambda=gae_lambda,
    )
