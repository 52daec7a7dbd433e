"""What is in a stored rollout: schema, layout, per-key statistics and episode statistics.

``describe_rollout(path)`` reads one ``iter-NNNNNN.zarr`` store through
:func:`rlpipe.artifacts.zarr_read.read_arrays` (so a damaged store fails with the same one-line
``StoreError``) and returns a JSON-serializable summary; ``rlpipe inspect`` prints it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from rlpipe.artifacts.fs import AnyPath, as_path, tree_bytes
from rlpipe.artifacts.zarr_read import read_arrays

if TYPE_CHECKING:
    from zarr import AsyncArray
from rlpipe.rollout import TRANSITION_KEYS

__all__ = ["describe_rollout", "episode_stats"]


def describe_rollout(path: AnyPath) -> dict[str, Any]:
    """Summarize one store for ``rlpipe inspect``: schema, attributes, per-key layout and stats.

    Keys whose slot T is padding (``TRANSITION_KEYS``) are summarized over the ``[N, T]`` valid
    transitions only. Float keys: min/max/mean/std of the finite values and a non-finite count;
    bool keys: true/false counts; integer keys: min/max and value counts when there are ≤ 16.
    ``episodes`` is :func:`episode_stats` of the valid transitions.
    """
    path = as_path(path)
    attrs, arrays = read_arrays(path)
    n, t1 = arrays["value"][1].shape[:2]
    keys = {name: _describe_array(path, name, arr, data) for name, (arr, data) in arrays.items()}
    valid = {key: arrays[key][1][:, :-1] for key in ("done", "terminated", "truncated", "reward")}
    return {
        "path": str(path),
        "schema_version": attrs["schema_version"],
        "attrs": attrs,
        "num_envs": int(n),
        "horizon": int(t1 - 1),
        "transitions": int(n * (t1 - 1)),
        "bytes_on_disk": _disk_bytes(path),
        "keys": keys,
        "episodes": episode_stats(valid["done"], valid["terminated"], valid["truncated"], valid["reward"]),
    }


def episode_stats(
    done: np.ndarray, terminated: np.ndarray, truncated: np.ndarray, reward: np.ndarray
) -> dict[str, Any]:
    """Episode counts and the returns/lengths of the episodes wholly inside the rollout.

    All inputs are the valid ``[N, T]`` transitions. An episode is *complete* when it both starts
    and ends inside the window (it follows an earlier done of its env); the others finished here
    but began in an earlier rollout, so their return is unknown. ``return_*``/``length_*`` are
    over complete episodes (absent when there is none).
    """
    reward = reward.astype(np.float64)
    returns, lengths = [], []
    for env in np.flatnonzero(done.any(axis=1)):
        ends = np.flatnonzero(done[env])
        cumulative = np.concatenate(([0.0], np.cumsum(reward[env])))
        returns += (cumulative[ends[1:] + 1] - cumulative[ends[:-1] + 1]).tolist()
        lengths += np.diff(ends).tolist()
    stats: dict[str, Any] = {
        "finished": int(done.sum()),
        "terminated": int(terminated.sum()),
        "truncated": int(truncated.sum()),
        "complete": len(returns),
        "mean_reward_per_step": float(reward.mean()) if reward.size else 0.0,
    }
    if returns:
        ret, length = np.asarray(returns), np.asarray(lengths)
        stats |= {
            "return_mean": float(ret.mean()),
            "return_std": float(ret.std()),
            "return_min": float(ret.min()),
            "return_max": float(ret.max()),
            "length_mean": float(length.mean()),
            "length_min": int(length.min()),
            "length_max": int(length.max()),
        }
    return stats


def _describe_array(path: AnyPath, name: str, arr: AsyncArray, data: np.ndarray) -> dict[str, Any]:
    values = data[:, :-1] if name in TRANSITION_KEYS else data
    codecs = [_codec_name(c.to_dict()) for c in arr.compressors]  # pyright: ignore[reportAttributeAccessIssue]  # a Zarr v3 array's compressors are codecs
    return {
        "shape": list(data.shape),
        "dtype": str(data.dtype),
        "chunks": list(arr.chunks),
        "codec": "+".join(c for c in codecs if c != "crc32c") or "none",
        "checksum": "crc32c" if "crc32c" in codecs else None,
        "bytes_on_disk": _disk_bytes(path / name),
        "stats": _stats(values),
    }


def _codec_name(spec: dict[str, Any]) -> str:
    cname = spec.get("configuration", {}).get("cname")
    return f"{spec['name']}-{cname}" if cname else spec["name"]


def _stats(values: np.ndarray) -> dict[str, Any]:
    if values.dtype == np.bool_:
        true = int(values.sum())
        return {"true": true, "false": int(values.size) - true}
    if np.issubdtype(values.dtype, np.floating):
        finite = values[np.isfinite(values)].astype(np.float64)
        summary = {"nonfinite": int(values.size - finite.size)}
        if finite.size:
            summary |= {
                "min": float(finite.min()),
                "max": float(finite.max()),
                "mean": float(finite.mean()),
                "std": float(finite.std()),
            }
        return summary
    if not values.size:
        return {}
    summary: dict[str, Any] = {"min": int(values.min()), "max": int(values.max())}
    unique, counts = np.unique(values, return_counts=True)
    if unique.size <= 16:
        summary["counts"] = {int(u): int(c) for u, c in zip(unique, counts)}
    return summary


def _disk_bytes(path: AnyPath) -> int:
    return tree_bytes(path)
