"""What a run stores of its rollouts: which iterations, which envs, which precision; and the bytes.

A :class:`StorePolicy` is fixed before the first iteration (from ``store.every``, ``store.envs``,
``store.precision``, or derived from ``store.budget`` by :func:`derive_policy`), so the same params
store the same iterations, envs and dtypes, and a resumed run stores exactly what an uninterrupted
one does. :meth:`StorePolicy.shape` cuts a rollout to what is stored on its own device (before
the device → host copy, so fewer bytes cross to the host and the writer) and returns the
attributes every store records: ``complete`` (all envs of the iteration), ``exact`` (no group in a
lower precision) and what was left out. :func:`fidelity_refusal` says, in one line naming the
store, why a store cannot be used where the online data must be reproduced bit for bit; a store
without these attributes (written before them) is complete and exact.

The byte arithmetic (:func:`layout_of`, :func:`stored_bytes`, :func:`bytes_per_env_step`) works on
``(name, shape, dtype)`` layouts, so it needs no tensor and serves planning as well as the banner.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Context, Decimal
from typing import Any

import torch
from tensordict import TensorDict

from rlpipe.artifacts.fs import AnyPath
from rlpipe.config import ConfigError, StoreCfg
from rlpipe.config.storage import StoreBudgetCfg

__all__ = [
    "FIDELITY_KEYS",
    "Layout",
    "StorePolicy",
    "bytes_per_env_step",
    "derive_policy",
    "fidelity_refusal",
    "layout_of",
    "stored_bytes",
]

Layout = tuple[tuple[str, tuple[int, ...], torch.dtype], ...]
"""``("/"-joined key, shape [N, T+1, ...], dtype)`` of every leaf of a rollout."""

FIDELITY_KEYS = ("complete", "exact", "stored_envs", "num_envs", "every", "precision")
"""The attributes :meth:`StorePolicy.shape` adds to every store."""

_DTYPES = {"float16": torch.float16}


def layout_of(rollout: TensorDict) -> Layout:
    """The rollout's leaves as ``("/"-joined key, shape, dtype)``, in its key order."""
    return tuple(
        (key if isinstance(key, str) else "/".join(key), tuple(t.shape), t.dtype)
        for key, t in rollout.items(include_nested=True, leaves_only=True)
    )


def stored_bytes(layout: Layout) -> int:
    """Bytes of the arrays of ``layout``, uncompressed: what one iteration writes."""
    return sum(math.prod(shape) * torch.empty(0, dtype=dtype).element_size() for _, shape, dtype in layout)


def bytes_per_env_step(layout: Layout) -> float:
    """Stored bytes per env step of ``layout`` (``[N, T+1]``: N·T env steps; slot T is the bootstrap)."""
    n, t1 = layout[0][1][:2]
    return stored_bytes(layout) / (n * (t1 - 1))


def _in_group(name: str, group: str) -> bool:
    return name == group or name.startswith(f"{group}/")


@dataclass(frozen=True)
class StorePolicy:
    """Which iterations, envs and dtypes a run stores (the default keeps everything, exactly)."""

    every: int = 1
    """Iteration k is stored when ``k % every == 0``."""
    envs: int | None = None
    """The first M envs of each rank are stored (``None``: all)."""
    precision: Mapping[str, str] = field(default_factory=dict)
    """Observation group (``obs``, ``obs/<key>``) → dtype name it is stored in."""
    budget: str | None = None
    """The budget ``every`` was derived from, in words (``None``: set directly)."""

    @classmethod
    def of(cls, cfg: StoreCfg) -> StorePolicy:
        """The policy ``cfg`` sets directly (a budget is applied by :func:`derive_policy`)."""
        return cls(cfg.every, cfg.envs, dict(cfg.precision))

    def stores(self, iteration: int) -> bool:
        """Whether iteration ``iteration`` is stored."""
        return iteration % self.every == 0

    def narrowed(self, layout: Layout) -> dict[str, str]:
        """``{array name: dtype name}`` of the float arrays this policy stores in a narrower dtype."""
        out = {}
        for name, _, dtype in layout:
            for group, target in self.precision.items():
                wanted = _DTYPES[target]
                if (
                    _in_group(name, group)
                    and dtype.is_floating_point
                    and torch.finfo(dtype).bits > torch.finfo(wanted).bits
                ):
                    out[name] = target
        return out

    def stored_layout(self, layout: Layout) -> Layout:
        """``layout`` as stored: the first M envs, the narrowed groups in their dtype."""
        narrowed = self.narrowed(layout)
        return tuple(
            (
                name,
                (min(shape[0], self.envs or shape[0]), *shape[1:]),
                _DTYPES[narrowed[name]] if name in narrowed else dtype,
            )
            for name, shape, dtype in layout
        )

    def check_groups(self, layout: Layout) -> None:
        """``ConfigError`` naming ``store.precision.<group>`` when no array of the rollout is in it."""
        names = [name for name, _, _ in layout]
        for group in self.precision:
            if not any(_in_group(name, group) for name in names):
                have = ", ".join(n for n in names if _in_group(n, "obs"))
                raise ConfigError(
                    f"store.precision.{group}: the rollout has no such observation "
                    f"group (its observation arrays: {have})"
                )

    def shape(self, rollout: TensorDict) -> tuple[TensorDict, dict[str, Any]]:
        """``(what is stored of rollout, the fidelity attributes)``, on the rollout's device.

        The subset is a view of the first M envs; a narrowed group is converted where it is.
        """
        layout = layout_of(rollout)
        n, t1 = rollout.batch_size
        m = min(n, self.envs or n)
        narrowed = self.narrowed(layout)
        kept = TensorDict({}, batch_size=[m, t1], device=rollout.device)
        for key, tensor in rollout.items(include_nested=True, leaves_only=True):
            name = key if isinstance(key, str) else "/".join(key)
            part = tensor[:m] if m < n else tensor
            kept.set(key, part.to(_DTYPES[narrowed[name]]) if name in narrowed else part)
        attrs = {
            "complete": m == n,
            "exact": not narrowed,
            "stored_envs": m,
            "num_envs": n,
            "every": self.every,
            "precision": narrowed,
        }
        return kept, attrs

    def shape_final_obs(self, final_obs: TensorDict, num_envs: int) -> TensorDict:
        """What is stored of the sparse final observations, on their device.

        ``final_obs``: :func:`~rlpipe.rollout.gather_final_obs`'s ``[K]`` of a rollout of
        ``num_envs`` envs; the rows of the stored envs are kept, and each observation group in the
        precision of its group in the rollout (``final_obs/obs/<key>`` follows ``obs/<key>``, and
        the ``precision`` attribute, which names the rollout's groups, covers both).
        """
        m = min(num_envs, self.envs or num_envs)
        if m < num_envs:
            final_obs = final_obs[final_obs["index"][:, 0] < m]
        layout = layout_of(final_obs.select("obs"))
        narrowed = self.narrowed(layout)
        for name, target in narrowed.items():
            key = tuple(name.split("/"))
            final_obs.set(key, final_obs.get(key).to(_DTYPES[target]))
        return final_obs

    def words(self, layout: Layout) -> str:
        """What is kept, for the banner: ``every 4th iteration (store.budget …), envs 0–255 of 4096``.

        ``layout``: one rank's rollout as collected.
        """
        n = layout[0][1][0]
        parts = ["every iteration" if self.every == 1 else f"every {_ordinal(self.every)} iteration"]
        if self.budget:
            parts[0] += f" (store.budget {self.budget})"
        parts.append(f"envs 0–{self.envs - 1} of {n}" if self.envs and self.envs < n else f"all {n} envs")
        narrowed = self.narrowed(layout)
        if narrowed:
            parts.append(", ".join(f"{k} {v}" for k, v in narrowed.items()))
        return ", ".join(parts)


def _ordinal(k: int) -> str:
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


def derive_policy(cfg: StoreCfg, layout: Layout, iterations: int, world_size: int = 1) -> StorePolicy:
    """The policy of ``cfg``, its ``every`` derived from ``store.budget`` when there is one.

    ``layout``: one rank's rollout (``[N, T+1]``, the advantage keys left out); ``iterations``: the
    run's ``trainer.iterations``. A total keeps the most iterations whose bytes (all ranks) fit in
    it; a rate keeps every k-th iteration with the stored bytes per env step over k within the rate
    at the stated speed. Pure arithmetic: the same params give the same policy. A policy that
    would store none of the run's iterations (``store.every`` past ``trainer.iterations``, a
    budget below one stored iteration) is a :class:`ConfigError` naming the key.
    """
    policy = StorePolicy.of(cfg)
    policy.check_groups(layout)
    budget = cfg.budget
    if budget is None:
        if policy.every > iterations:
            raise ConfigError(
                f"store.every: {policy.every} is more than trainer.iterations ({iterations}), so no "
                f"iteration would be stored; accepted: 1 to {iterations} (store.enabled: false "
                "stores none)"
            )
        return policy
    stored = policy.stored_layout(layout)
    if budget.total_tb is not None:
        every = _every_within_total(budget.total_tb, stored_bytes(stored) * world_size, iterations)
    else:
        every = _every_within_rate(budget, bytes_per_env_step(stored), iterations)
    return StorePolicy(every, policy.envs, policy.precision, budget.words())


def _every_within_total(total_tb: float, per_iteration: int, iterations: int) -> int:
    """The smallest k whose ``iterations // k`` stored iterations of ``per_iteration`` bytes fit."""
    allowed = int(total_tb * 1e12 // per_iteration)  # finite: StoreBudgetCfg bounds total_tb
    if allowed == 0:
        raise ConfigError(
            f"store.budget.total_tb: {total_tb:g} TB is less than one stored "
            f"iteration ({per_iteration / 1e9:.3g} GB); raise it, or lower store.envs "
            "or set store.precision"
        )
    return 1 if allowed >= iterations else iterations // (allowed + 1) + 1


def _every_within_rate(budget: StoreBudgetCfg, needed: float, iterations: int) -> int:
    """The smallest k with ``needed / k`` bytes per env step within the rate; at most ``iterations``.

    ``needed``: the stored bytes per env step. StoreBudgetCfg bounds the allowed bytes per env step
    (:data:`~rlpipe.config.storage.BUDGET_BYTES_PER_ENV_STEP`), so the quotient is finite.
    """
    allowed = budget.bytes_per_env_step()
    assert allowed is not None and budget.env_steps_per_s is not None  # a rate (BudgetCfg's check)
    every = max(1, math.ceil(needed / allowed))
    if every > iterations:
        least = needed / iterations * budget.env_steps_per_s / 1e9
        raise ConfigError(
            f"store.budget.rate_gb_s: {budget.words()} allows {allowed:.3g} B per env step, the "
            f"store writes {needed:.3g} B per stored env step: every {_ordinal(every)} iteration, "
            f"so none of the run's {iterations} would be stored; raise it to at least "
            f"{_rounded_up(least)}, or lower store.envs or set store.precision"
        )
    return every


def _rounded_up(x: float) -> str:
    """``x`` to 3 significant digits, rounded up (a bound the user can type and that holds)."""
    return format(Context(prec=3, rounding=ROUND_CEILING).plus(Decimal(x)), "g")


def fidelity_refusal(path: AnyPath, attrs: Mapping[str, Any], purpose: str) -> str | None:
    """One line naming ``path`` when its store cannot serve ``purpose`` bit for bit, else ``None``.

    A store without the fidelity attributes (written before them) is complete and exact.
    """
    if attrs.get("complete", True) is False:
        return (
            f"{path}: holds the first {attrs.get('stored_envs')} of {attrs.get('num_envs')} envs "
            f"(store.envs), not the whole iteration; {purpose} needs every env, so it is refused"
        )
    if attrs.get("exact", True) is False:
        groups = ", ".join(f"{k} as {v}" for k, v in dict(attrs.get("precision") or {}).items())
        return (
            f"{path}: stores {groups or 'observation groups'} (store.precision), not the values "
            f"the run saw; {purpose} needs them exact, so it is refused"
        )
    return None


def every_of(stores: Iterable[Mapping[str, Any]]) -> int:
    """The largest ``every`` recorded by ``stores`` (1 when none records one)."""
    return max((int(a.get("every", 1)) for a in stores), default=1)
