"""One env stream of stored rollouts cut into episodes: the store reader and the cutter.

:func:`read_store` reads one store (one rank's shard) into host arrays; :class:`StreamCutter` walks
one env's rows through a rank's stores in iteration order and cuts them after each done, following
the rules of :mod:`rlpipe.datasets.episodes`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from tensordict import TensorDict

from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.fs import AnyPath
from rlpipe.artifacts.staging import LeafKey, tensor_leaves
from rlpipe.artifacts.zarr_read import read_rollout_final_obs
from rlpipe.config import ConfigError
from rlpipe.datasets.episode import Episode, Obs
from rlpipe.rollout import FINAL_OBS, RESET_AT_START, SUCCESS

__all__ = ["StoreData", "StreamCutter", "read_store"]

MEAN_KEYS = ("action_mean", "extras/action_mean")
"""Where a store keeps the policy mean (``--action mean``)."""


@dataclass
class StoreData:
    """One store's arrays on the host: ``[N, T+1, ...]`` per key, and its sparse final observations."""

    path: AnyPath
    iteration: int
    reset_at_start: bool
    obs: np.ndarray | dict[str, np.ndarray]
    actions: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    success: np.ndarray | None
    log_probs: np.ndarray
    values: np.ndarray
    final_index: np.ndarray | None
    """``[K, 2]`` ``(env, t)`` of the done slots (``None``: a store written before they were stored)."""
    final_obs: np.ndarray | dict[str, np.ndarray] | None

    def __post_init__(self) -> None:
        index = self.final_index
        self._final_keys = None if index is None else index[:, 0] * self.horizon + index[:, 1]

    @property
    def num_envs(self) -> int:
        """Envs stored (per rank)."""
        return self.rewards.shape[0]

    @property
    def horizon(self) -> int:
        """T: transitions per env."""
        return self.rewards.shape[1] - 1

    def final_of(self, env: int, t: int) -> np.ndarray | dict[str, np.ndarray]:
        """The true final observation of the episode that ended at ``(env, t)``."""
        keys, finals = self._final_keys, self.final_obs
        if keys is None or finals is None:
            raise StoreError(
                f"{self.path}: written before rlpipe stored final observations ({FINAL_OBS}); "
                "the episodes ending in it have no true final observation"
            )
        row = int(np.searchsorted(keys, env * self.horizon + t))  # rows in (env, t) order
        return _pick(finals, row)


def read_store(path: AnyPath, iteration: int, attrs: dict[str, Any], action: str) -> StoreData:
    """Read one store (a rank's shard) for episode cutting; ``action``: ``executed`` or ``mean``."""
    rollout, _, finals = read_rollout_final_obs(path)
    arrays = {_name(k): v.numpy() for k, v in tensor_leaves(rollout)}
    if action == "mean":
        key = next((k for k in MEAN_KEYS if k in arrays), None)
        if key is None:
            raise ConfigError(
                f"--action mean: {path} stores no action_mean (the policy's deterministic "
                "action is recorded only with store.action_mean: true); accepted here: "
                "--action executed"
            )
        actions = arrays[key]
    else:
        actions = arrays["action"]
    obs = (
        arrays["obs"]
        if "obs" in arrays
        else {k.removeprefix("obs/"): v for k, v in arrays.items() if k.startswith("obs/")}
    )
    final_obs: np.ndarray | dict[str, np.ndarray] | None = None
    if finals is not None:
        stored = finals["obs"]
        final_obs = (
            {_name(k): v.numpy() for k, v in tensor_leaves(stored)}
            if isinstance(stored, TensorDict)
            else stored.numpy()
        )
    return StoreData(
        path=path,
        iteration=iteration,
        reset_at_start=bool(attrs.get(RESET_AT_START, iteration == 1)),
        obs=obs,
        actions=actions,
        rewards=arrays["reward"],
        terminated=arrays["terminated"],
        truncated=arrays["truncated"],
        success=arrays.get(SUCCESS),
        log_probs=arrays["sample_log_prob"],
        values=arrays["value"],
        final_index=None if finals is None else finals["index"].numpy(),
        final_obs=final_obs,
    )


def _name(key: LeafKey) -> str:
    """A leaf's key as its array name: a nested key's parts joined by ``/``."""
    return key if isinstance(key, str) else "/".join(key)


def _pick(obs: np.ndarray | dict[str, np.ndarray], *index: Any) -> np.ndarray | dict[str, np.ndarray]:
    if isinstance(obs, dict):
        return {k: v[index] for k, v in obs.items()}
    return obs[index]


def _cat(parts: list[np.ndarray | dict[str, np.ndarray]]) -> np.ndarray | dict[str, np.ndarray]:
    arrays = [p for p in parts if not isinstance(p, dict)]
    groups = [p for p in parts if isinstance(p, dict)]
    assert not (arrays and groups)  # the stores of one run hold one kind of observation
    if groups:
        return {k: np.concatenate([p[k] for p in groups]) for k in groups[0]}
    return np.concatenate(arrays)


Piece = tuple[StoreData, int, int]
"""Steps ``a..b-1`` of one store, of the stream's env."""


class StreamCutter:
    """Cuts env ``env`` of one rank's stores (iteration order) into episodes; counts dropped fragments."""

    def __init__(self, stores: list[StoreData], env: int, rank: int, keep_last_fragment: bool) -> None:
        self.stores, self.env, self.rank, self.keep_last = stores, env, rank, keep_last_fragment
        self.dropped = 0

    def episodes(self) -> Iterator[Episode]:
        """The stream's episodes in time order (``Episode`` with ``index`` 0: the caller numbers them)."""
        pieces: list[Piece] = []
        known = False  # the current fragment's first step is in the selection
        for s, store in enumerate(self.stores):
            if store.reset_at_start:
                self._drop(pieces)
                pieces, known = [], True
            elif s == 0:
                known = False
            done = store.terminated[self.env, :-1] | store.truncated[self.env, :-1]
            start = 0
            for d in np.flatnonzero(done):
                pieces.append((store, start, int(d) + 1))
                if known:
                    yield self._episode(pieces, store.final_of(self.env, int(d)), cut=False)
                else:
                    self.dropped += 1
                pieces, known, start = [], True, int(d) + 1
            if start < store.horizon:
                pieces.append((store, start, store.horizon))
        if pieces and known and self.keep_last:
            last = self.stores[-1]
            yield self._episode(pieces, _pick(last.obs, self.env, last.horizon), cut=True)
        else:
            self._drop(pieces)

    def _drop(self, pieces: list[Piece]) -> None:
        if pieces:
            self.dropped += 1

    def _episode(self, pieces: list[Piece], next_obs: Obs, cut: bool) -> Episode:
        e = self.env

        def cat(field: str) -> np.ndarray:
            return np.concatenate([getattr(s, field)[e, a:b] for s, a, b in pieces])

        truncated = cat("truncated")
        if cut:
            truncated[-1] = True
        stored = [(s.success, a, b) for s, a, b in pieces]
        success = (
            np.concatenate([x[e, a:b] for x, a, b in stored if x is not None])
            if all(x is not None for x, _, _ in stored)
            else None
        )
        return Episode(
            rank=self.rank,
            env=e,
            index=0,
            observations=_cat([_pick(s.obs, e, slice(a, b)) for s, a, b in pieces]),
            next_observation=next_obs,
            actions=cat("actions"),
            rewards=cat("rewards"),
            terminated=cat("terminated"),
            truncated=truncated,
            success=success,
            iterations=np.concatenate([np.full(b - a, s.iteration, np.int64) for s, a, b in pieces]),
            log_probs=cat("log_probs"),
            values=cat("values"),
            cut=cut,
        )
