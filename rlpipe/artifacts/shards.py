"""Sharded rollout stores of a distributed run: ``iter-NNNNNN.zarr/rank-R``, one Zarr group per rank.

Each rank writes its own shard atomically (``rank`` and ``world_size`` in its attributes); a reader
concatenates the shards of an iteration along the env dim in rank order, so a K-rank iteration
reads back as one ``[K·N, T+1]`` rollout (rank r's envs at rows ``r·N … (r+1)·N − 1``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict

from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.fs import AnyPath, as_path, is_object
from rlpipe.artifacts.layout import ROLLOUT_NAME, SHARD_NAME, numbered, rollout_name, shard_name
from rlpipe.artifacts.removal import clean_temporaries
from rlpipe.artifacts.store import RolloutStore
from rlpipe.artifacts.store_policy import StorePolicy
from rlpipe.config import StoreCfg
from rlpipe.rollout import DIM_NAMES

__all__ = ["ShardedStore", "is_sharded", "read_any", "read_any_attrs", "read_any_final_obs", "shard_paths"]


def is_sharded(path: AnyPath) -> bool:
    """True for an iteration folder holding ``rank-R`` shards instead of being a store itself."""
    path = as_path(path)
    return (
        path.is_dir()
        and not (path / "zarr.json").is_file()
        and any(SHARD_NAME.match(p.name) for p in path.iterdir())
    )


def shard_paths(path: AnyPath) -> list[AnyPath]:
    """The ``rank-R`` shards of an iteration folder, in rank order."""
    return list(numbered(as_path(path), SHARD_NAME).values())


def read_any(path: AnyPath, device: torch.device | str = "cpu") -> tuple[TensorDict, dict[str, Any]]:
    """Read a store or a sharded iteration (shards concatenated along ``env``) and its attributes.

    A sharded iteration's attributes are rank 0's, without ``rank``; ``world_size`` says how many
    shards were joined. Raises ``StoreError`` when a shard is missing or disagrees on the world size.
    """
    from rlpipe.artifacts.zarr_read import read_rollout  # zarr on first use (see rlpipe.artifacts.store)

    path = as_path(path)
    if not is_sharded(path):
        return read_rollout(path, device)
    parts = [read_rollout(p, device) for p in shard_paths(path)]
    return _joined(path, [r for r, _ in parts], [a for _, a in parts])


def read_any_final_obs(
    path: AnyPath, device: torch.device | str = "cpu"
) -> tuple[TensorDict, dict[str, Any], TensorDict | None]:
    """:func:`read_any` plus the iteration's sparse final observations ``[K]`` (``None``: it has none).

    ``index`` ``[K, 2]`` is ``(env, t)`` of the joined rollout: a shard's env rows are offset by
    the envs of the ranks before it, as its rollout rows are.
    """
    from rlpipe.artifacts.zarr_read import read_rollout_final_obs

    path = as_path(path)
    if not is_sharded(path):
        return read_rollout_final_obs(path, device)
    parts = [read_rollout_final_obs(p, device) for p in shard_paths(path)]
    rollout, attrs = _joined(path, [r for r, _, _ in parts], [a for _, a, _ in parts])
    finals, offset = [], 0
    for shard, _, final in parts:
        if final is not None:
            final = final.clone()
            final["index"][:, 0] += offset
            finals.append(final)
        offset += shard.batch_size[0]
    return rollout, attrs, TensorDict.cat(finals, dim=0) if finals else None


def _joined(
    path: AnyPath, rollouts: list[TensorDict], shard_attrs: list[dict[str, Any]]
) -> tuple[TensorDict, dict[str, Any]]:
    """The shards' rollouts side by side along ``env`` and rank 0's attributes (``rank`` dropped)."""
    world = shard_attrs[0].get("world_size")
    ranks = [attrs.get("rank") for attrs in shard_attrs]
    if ranks != list(range(len(rollouts))) or world != len(rollouts):
        raise StoreError(
            f"{path}: incomplete sharded iteration (shards of ranks {ranks}, world_size {world})"
        )
    rollout = TensorDict.cat(rollouts, dim=0)
    rollout.refine_names(*DIM_NAMES)
    return rollout, {k: v for k, v in shard_attrs[0].items() if k != "rank"}


def read_any_attrs(path: AnyPath) -> dict[str, Any]:
    """The attributes of a store, or of rank 0's shard of a sharded iteration (no array is read)."""
    from rlpipe.artifacts.zarr_read import read_attrs

    path = as_path(path)
    return read_attrs(shard_paths(path)[0] if is_sharded(path) else path)


class ShardedStore(RolloutStore):
    """Rank ``rank``'s view of a run's rollouts: it writes, lists and retires only its own shards."""

    def __init__(
        self, root: AnyPath, cfg: StoreCfg, rank: int, world_size: int, policy: StorePolicy | None = None
    ) -> None:
        self.rank, self.world_size = rank, world_size
        super().__init__(root, cfg, policy)

    def path_for(self, iteration: int) -> AnyPath:
        """``root/iter-{iteration:06d}.zarr/rank-{rank}``."""
        return self.root / rollout_name(iteration) / shard_name(self.rank)

    def iterations(self) -> list[int]:
        """The iterations with a complete shard of this rank, ascending."""
        found = numbered(self.root, ROLLOUT_NAME)
        return [k for k in found if (self.path_for(k) / "zarr.json").is_file()]

    def submit(
        self, rollout: TensorDict, attrs: dict[str, Any], final_obs: TensorDict | None = None
    ) -> float:
        """Queue this rank's shard, its attributes extended with ``rank`` and ``world_size``; the wait (s)."""
        return super().submit(rollout, {**attrs, "rank": self.rank, "world_size": self.world_size}, final_obs)

    def clean_temporaries(self) -> list[Path]:
        """Also remove shard temporaries (inside iteration folders) of dead processes."""
        removed = super().clean_temporaries()
        if not self.root.is_dir():
            return removed
        if is_object(self.root):  # only this rank's own shards: other nodes may be writing theirs
            with self._io_lock:
                folders = numbered(self.root, ROLLOUT_NAME)
                return removed + self._clean_uncommitted(
                    self.path_for(k) for k in folders if self.path_for(k).exists()
                )
        for folder in numbered(self.root, ROLLOUT_NAME).values():
            removed += clean_temporaries(folder, SHARD_NAME)
        return removed

    def _delete(self, iterations: list[int]) -> list[int]:
        super()._delete(iterations)
        for iteration in iterations:
            try:
                self.path_for(iteration).parent.rmdir()  # the last rank out removes the iteration folder
            except OSError:
                pass
        return iterations
