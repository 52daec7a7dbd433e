"""Checkpoint files: atomic ``ckpt-NNNNNN.pt`` writes, ``latest``/``best`` pointers, RNG states.

Layout of a checkpoint directory::

    ckpt-000010.pt   torch.save of a state dict, written to a temporary, fsynced, then renamed
    ckpt-000020.pt
    latest           text: the file name of the newest checkpoint written ("ckpt-000020.pt")
    best             JSON: {"file": "ckpt-000010.pt", "metric": 487.5}; higher metric is better

A checkpoint's ``state`` may hold only what ``torch.load(weights_only=True)`` accepts: tensors,
numbers, strings, bools, ``None`` and lists/tuples/dicts of those. :func:`rng_state` turns the
python, numpy, torch and CUDA RNG states into that form.
"""

from __future__ import annotations

import json
import os
import random
import re
import secrets
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlpipe.store import StoreError, pid_alive

__all__ = [
    "best_checkpoint",
    "checkpoint_path",
    "clean_temporaries",
    "latest_checkpoint",
    "load_checkpoint",
    "restore_rng_state",
    "rng_state",
    "save_checkpoint",
]

LATEST = "latest"
BEST = "best"
_CKPT_NAME = re.compile(r"^ckpt-(\d{6,})\.pt$")


def checkpoint_path(directory: Path, iteration: int) -> Path:
    """``directory/ckpt-{iteration:06d}.pt``."""
    return Path(directory) / f"ckpt-{iteration:06d}.pt"


def save_checkpoint(
    directory: Path, iteration: int, state: dict[str, Any], keep_last: int | None,
    best_metric: float | None = None,
) -> Path:
    """Write ``state`` as ``ckpt-{iteration:06d}.pt`` atomically; update pointers; apply retention.

    The file is fsynced before it is renamed into place, then ``latest`` is pointed at it. With
    ``best_metric`` (higher is better) the ``best`` pointer moves here when the metric beats it.
    ``keep_last`` keeps the newest K checkpoints plus the best one (``None``: keep all).
    Returns the checkpoint's path.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = checkpoint_path(directory, iteration)
    _atomic_write(path, lambda f: torch.save(state, f))
    _atomic_write(directory / LATEST, lambda f: f.write(f"{path.name}\n".encode()))
    if best_metric is not None and _beats_best(directory, best_metric):
        record = json.dumps({"file": path.name, "metric": float(best_metric)})
        _atomic_write(directory / BEST, lambda f: f.write(f"{record}\n".encode()))
    if keep_last is not None:
        _apply_retention(directory, keep_last, protect=path)
    return path


def _atomic_write(path: Path, write: Any) -> None:
    """Run ``write(file)`` on a temporary sibling, fsync, rename it to ``path``, fsync the dir."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    finally:
        os.close(dir_fd)


def _checkpoints(directory: Path) -> dict[int, Path]:
    if not directory.is_dir():
        return {}
    found = ((_CKPT_NAME.match(p.name), p) for p in directory.iterdir())
    return dict(sorted((int(m[1]), p) for m, p in found if m))


def _read_best(directory: Path) -> dict[str, Any] | None:
    """Return the ``best`` record if it names an existing checkpoint, else ``None``."""
    try:
        record = json.loads((directory / BEST).read_text())
        return record if (directory / record["file"]).is_file() else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _beats_best(directory: Path, metric: float) -> bool:
    best = _read_best(directory)
    return best is None or float(metric) > float(best["metric"])


def _apply_retention(directory: Path, keep_last: int, protect: Path) -> None:
    best = _read_best(directory)
    keep = {protect.name, *(p.name for p in list(_checkpoints(directory).values())[-keep_last:])}
    if best is not None:
        keep.add(best["file"])
    for path in _checkpoints(directory).values():
        if path.name not in keep:
            path.unlink(missing_ok=True)


_CHECKPOINT_TEMP = re.compile(r"^\.(?:ckpt-\d{6,}\.pt|latest|best)\.tmp-(\d+)-[0-9a-f]+$")


def clean_temporaries(directory: Path) -> list[Path]:
    """Remove temporaries of ``_atomic_write`` left by dead processes (killed mid-save); return them.

    A temporary of this process counts as dead: call it before this process saves anything.
    """
    removed = []
    for path in directory.glob(".*.tmp-*") if directory.is_dir() else ():
        match = _CHECKPOINT_TEMP.match(path.name)
        if match and (int(match[1]) == os.getpid() or not pid_alive(int(match[1]))):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed
    return True


def latest_checkpoint(directory: Path) -> Path | None:
    """Return the checkpoint ``latest`` points at, else the highest-numbered one, else ``None``.

    The fallback covers a crash between writing a checkpoint and moving the pointer.
    """
    directory = Path(directory)
    try:
        name = (directory / LATEST).read_text().strip()
    except OSError:
        name = ""
    if _CKPT_NAME.match(name) and (directory / name).is_file():
        return directory / name
    found = _checkpoints(directory)
    return found[max(found)] if found else None


def best_checkpoint(directory: Path) -> Path | None:
    """Return the checkpoint the ``best`` pointer names, or ``None``."""
    best = _read_best(Path(directory))
    return Path(directory) / best["file"] if best else None


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint with ``torch.load(weights_only=True)``.

    Raises :class:`StoreError` naming the file when it is missing, truncated or not a checkpoint.
    """
    path = Path(path)
    if not path.is_file():
        raise StoreError(f"{path}: no checkpoint here")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:
        line = (str(exc).strip().splitlines() or [""])[0]
        raise StoreError(f"{path}: truncated or not a checkpoint ({type(exc).__name__}: "
                         f"{line})") from None
    if not isinstance(state, dict):
        raise StoreError(f"{path}: not a checkpoint (holds a {type(state).__name__}, not a dict)")
    return state


# ---------------------------------------------------------------------------------------- RNGs


def rng_state() -> dict[str, Any]:
    """Return python, numpy, torch (and CUDA) RNG states in a ``weights_only``-safe form.

    ``python``: ``{"version", "state": int64 [625], "gauss_next"}``; ``numpy``: the legacy global
    ``RandomState`` as ``{"name", "key": int64 [624], "pos", "has_gauss", "cached_gaussian"}``;
    ``torch``: uint8 CPU state; ``cuda``: one uint8 state per device (when CUDA is available).
    """
    version, internal, gauss_next = random.getstate()
    name, key, pos, has_gauss, cached = np.random.get_state(legacy=True)
    state: dict[str, Any] = {
        "python": {"version": version, "state": torch.tensor(internal, dtype=torch.int64),
                   "gauss_next": gauss_next},
        "numpy": {"name": name, "key": torch.from_numpy(key.astype(np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Restore the states :func:`rng_state` returned (CUDA ones only where CUDA is available)."""
    py = state["python"]
    random.setstate((py["version"], tuple(int(x) for x in py["state"].tolist()), py["gauss_next"]))
    npy = state["numpy"]
    key = np.asarray(npy["key"].tolist(), dtype=np.uint32)
    np.random.set_state((npy["name"], key, npy["pos"], npy["has_gauss"], npy["cached_gaussian"]))
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])
