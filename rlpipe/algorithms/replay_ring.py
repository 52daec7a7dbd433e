"""The replay memory of the off-policy algorithms: a ring of the newest rollouts, on the device.

The ring holds R rollouts of N envs × T steps as they were collected (``obs`` ``[R, N, T+1, *obs]``,
``action`` ``[R, N, T, *act]``) with, per transition, its n-step target precomputed when the
rollout is added (a pure function of the rollout, γ and n):

* ``ret`` ``[R, N, T]``: Σ_k γ^k r_{t+k} over the return's m ≤ n steps. A return stops at its
  episode's end (``done``) and at the end of its rollout (no transition of another rollout is read);
* ``discount`` ``[R, N, T]``: γ^m, or 0 where the return ends in a termination;
* ``boot_t`` and ``boot_final``: where the bootstrap observation is, ``obs[t_end + 1]``, or the
  stored true final observation at ``t_end`` where the return ends in a truncation (a time limit
  bootstraps exactly, from the observation the episode really ended in, never from the next
  episode's first one).

Rollout p (counted from 1) goes to slot ``(p − 1) mod R``, so the slots are a function of the
rollout's position alone: ``--resume`` rebuilds the ring by adding the stored rollouts p−R+1 … p
again, and a sample drawn from the same generator state then picks the same transitions as the
uninterrupted run (:meth:`ReplayRing.add`, :meth:`ReplayRing.sample`). Sampling is uniform over
the filled slots' transitions.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict

__all__ = ["NStepTargets", "ReplayRing", "n_step_targets"]

Obs = torch.Tensor | TensorDict


class NStepTargets:
    """The n-step targets of one rollout's ``[N, T]`` transitions (see the module docstring)."""

    def __init__(
        self, ret: torch.Tensor, discount: torch.Tensor, boot_t: torch.Tensor, boot_final: torch.Tensor
    ) -> None:
        self.ret, self.discount, self.boot_t, self.boot_final = ret, discount, boot_t, boot_final


def n_step_targets(
    reward: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor, gamma: float, n_step: int
) -> NStepTargets:
    """n-step returns of one rollout's transitions; each argument ``[N, T]`` (padding slot dropped).

    The k-th reward counts while the return is alive (no done at steps t … t+k−1) and t+k < T.
    """
    n, horizon = reward.shape
    device = reward.device
    done = terminated | truncated
    t = torch.arange(horizon, device=device).expand(n, horizon)
    ret = torch.zeros(n, horizon, dtype=reward.dtype, device=device)
    alive = torch.ones(n, horizon, dtype=torch.bool, device=device)
    t_end = t.clone()
    for k in range(n_step):
        at = t + k
        valid = alive & (at < horizon)
        at = at.clamp(max=horizon - 1)
        ret = torch.where(valid, ret + (gamma**k) * reward.gather(1, at), ret)
        t_end = torch.where(valid, at, t_end)
        alive = valid & ~done.gather(1, at)
    steps = (t_end - t + 1).to(reward.dtype)
    ends_terminated = terminated.gather(1, t_end)
    discount = torch.where(ends_terminated, torch.zeros_like(ret), torch.full_like(ret, gamma) ** steps)
    boot_final = truncated.gather(1, t_end) & ~ends_terminated
    return NStepTargets(ret, discount, t_end, boot_final)


class ReplayRing:
    """The newest ``capacity`` rollouts' transitions ``[N, T]`` on ``device``; allocated at the first add."""

    def __init__(self, capacity: int, gamma: float, n_step: int, device: torch.device) -> None:
        self.capacity, self.gamma, self.n_step, self.device = capacity, gamma, n_step, device
        self.data: TensorDict | None = None
        """``final_obs``, ``action``, ``ret``, ``discount``, ``boot_t``, ``boot_final`` ``[R, N, T]``
        (``final_obs`` a TensorDict for dict observations)."""
        self.obs: Obs = torch.zeros(0)
        """The rollouts' observations ``[R, N, T+1, *obs]`` (a TensorDict for dict observations)."""
        self.filled = 0
        """Slots holding a rollout (they fill from slot 0 up)."""
        self.newest = 0
        """The position (counted from 1) of the newest rollout added; 0: none yet."""
        self.held = 0
        """Slots this ring has written (a rebuild must write all :attr:`filled` ones before sampling)."""

    @property
    def transitions(self) -> int:
        """Transitions the ring holds now."""
        if self.data is None:
            return 0
        _, n, horizon = self.data.batch_size
        return self.filled * n * horizon

    def slot_of(self, position: int) -> int:
        """The slot of the rollout at ``position`` (counted from 1)."""
        return (position - 1) % self.capacity

    def add(self, rollout: TensorDict, final_obs: TensorDict | None, position: int) -> None:
        """Add rollout ``[N, T+1]`` as the rollout at ``position`` (from 1), its n-step targets computed.

        ``final_obs``: the rollout's sparse true final observations ``[K]`` (``index`` ``[K, 2]``,
        ``obs``), as the collector and the store give them; ``None`` only for a rollout without a
        done. Positions must follow each other from where the ring stands (a rebuild starts anywhere).
        """
        if self.newest and position != self.newest + 1:
            raise ValueError(f"replay ring: rollout {position} added after rollout {self.newest}")
        n, horizon = rollout.batch_size[0], rollout.batch_size[1] - 1
        if self.data is None:
            self.data = self._allocate(rollout, n, horizon)
        elif tuple(self.data.batch_size[1:]) != (n, horizon):
            raise ValueError(
                f"replay ring: a rollout of {n} envs × {horizon} steps does not fit the ring's "
                f"{self.data.batch_size[1]} × {self.data.batch_size[2]}"
            )
        if not self.newest:
            self.filled = min(position - 1, self.capacity)  # a rebuild: earlier slots are not held
        slot = self.slot_of(position)
        flags = {key: rollout[key][:, :horizon] for key in ("reward", "terminated", "truncated")}
        targets = n_step_targets(
            flags["reward"], flags["terminated"], flags["truncated"], self.gamma, self.n_step
        )
        row = self.data[slot]
        self.obs[slot].copy_(rollout["obs"])
        row["action"].copy_(rollout["action"][:, :horizon])
        row["final_obs"].zero_()
        if final_obs is not None and final_obs.batch_size[0]:
            env, t = final_obs["index"].unbind(-1)
            row["final_obs"][env, t] = final_obs["obs"].to(self.device)
        row["ret"].copy_(targets.ret)
        row["discount"].copy_(targets.discount)
        row["boot_t"].copy_(targets.boot_t)
        row["boot_final"].copy_(targets.boot_final)
        self.filled = min(max(self.filled, slot + 1), self.capacity)
        self.held = min(self.held + 1, self.capacity)
        self.newest = position

    def _allocate(self, rollout: TensorDict, n: int, horizon: int) -> TensorDict:
        """The ``[R, N, T]`` buffers, and :attr:`obs` ``[R, N, T+1, *obs]`` beside them."""
        r, device = self.capacity, self.device
        transition = (r, n, horizon)

        def zeros_like_rows(x: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
            return torch.zeros((*shape, *x.shape[2:]), dtype=x.dtype, device=device)

        def obs_buffer(obs: Obs, shape: tuple[int, ...]) -> Obs:
            if isinstance(obs, TensorDict):
                groups: dict[str, torch.Tensor] = {}
                for key, value in obs.items(True, True):
                    assert isinstance(value, torch.Tensor) and isinstance(key, str)
                    groups[key] = zeros_like_rows(value, shape)
                return TensorDict(groups, batch_size=list(shape), device=device)
            return zeros_like_rows(obs, shape)

        self.obs = obs_buffer(rollout["obs"], (r, n, horizon + 1))
        reward = rollout["reward"]
        return TensorDict(
            {
                "action": zeros_like_rows(rollout["action"], transition),
                "final_obs": obs_buffer(rollout["obs"], transition),
                "ret": torch.zeros(transition, dtype=reward.dtype, device=device),
                "discount": torch.zeros(transition, dtype=reward.dtype, device=device),
                "boot_t": torch.zeros(transition, dtype=torch.int64, device=device),
                "boot_final": torch.zeros(transition, dtype=torch.bool, device=device),
            },
            batch_size=list(transition),
            device=device,
        )

    def sample(self, batch_size: int, generator: torch.Generator) -> dict[str, Obs]:
        """``batch_size`` transitions drawn uniformly (with replacement) with ``generator``.

        Returns ``obs`` ``[B, *obs]``, ``action`` ``[B, *act]``, ``ret`` ``[B]``, ``discount`` ``[B]``
        and ``next_obs`` ``[B, *obs]``, the bootstrap observation of each n-step return.
        """
        if self.data is None or not self.filled:
            raise RuntimeError("replay ring: sample() before any rollout was added")
        if self.held < self.filled:  # unwritten slots would be sampled as zeros
            raise RuntimeError(
                f"replay ring: holds {self.held} of the {self.filled} rollouts up to rollout "
                f"{self.newest}; add rollouts {self.newest - self.filled + 1}…{self.newest} first"
            )
        _, n, horizon = self.data.batch_size
        index = torch.randint(
            self.filled * n * horizon, (batch_size,), generator=generator, device=self.device
        )
        slot, rest = index // (n * horizon), index % (n * horizon)
        env, t = rest // horizon, rest % horizon
        data = self.data
        boot_t = data["boot_t"][slot, env, t]
        boot_final = data["boot_final"][slot, env, t]
        obs, final_obs = self.obs, data["final_obs"]
        return {
            "obs": obs[slot, env, t],
            "action": data["action"][slot, env, t],
            "ret": data["ret"][slot, env, t],
            "discount": data["discount"][slot, env, t],
            "next_obs": _where(boot_final, final_obs[slot, env, boot_t], obs[slot, env, boot_t + 1]),
        }


def _where(mask: torch.Tensor, a: Obs, b: Obs) -> Obs:
    """``a`` where ``mask`` ``[B]`` is set, else ``b`` (tensors or TensorDicts of ``[B, ...]``)."""
    if isinstance(a, TensorDict):
        assert isinstance(b, TensorDict)
        return TensorDict(
            {k: _where(mask, a[k], b[k]) for k in a.keys(True, True)},
            batch_size=a.batch_size,
            device=a.device,
        )
    return torch.where(mask.view(-1, *([1] * (a.dim() - 1))), a, b)
