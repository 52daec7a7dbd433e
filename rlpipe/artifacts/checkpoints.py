"""Checkpoint files: atomic ``ckpt-NNNNNN.pt`` writes, ``latest``/``best`` pointers, RNG states.

Layout of a checkpoint directory::

    ckpt-000010.pt   torch.save of a state dict, written to a temporary, fsynced, then renamed
    ckpt-000020.pt
    latest           text: the file name of the newest checkpoint written ("ckpt-000020.pt")
    best             JSON: {"file": "ckpt-000010.pt", "metric": 487.5}; higher metric is better

A checkpoint's ``state`` may hold only what ``torch.load(weights_only=True)`` accepts: tensors,
numbers, strings, bools, ``None`` and lists/tuples/dicts of those (see :mod:`rlpipe.seeding`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from rlpipe.artifacts.atomic import atomic_write, atomic_write_text
from rlpipe.artifacts.atomic import clean_temporaries as _clean
from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.layout import BEST, CHECKPOINT_NAME, LATEST, checkpoint_name, numbered

__all__ = [
    "checkpoint_fits",
    "best_checkpoint",
    "checkpoint_path",
    "clean_temporaries",
    "latest_checkpoint",
    "load_checkpoint",
    "save_checkpoint",
]



def checkpoint_path(directory: Path, iteration: int) -> Path:
    """``directory/ckpt-{iteration:06d}.pt``."""
    return Path(directory) / checkpoint_name(iteration)


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
    atomic_write(path, lambda f: torch.save(state, f))
    atomic_write_text(directory / LATEST, f"{path.name}\n")
    if best_metric is not None and _beats_best(directory, best_metric):
        record = json.dumps({"file": path.name, "metric": float(best_metric)})
        atomic_write_text(directory / BEST, f"{record}\n")
    if keep_last is not None:
        _apply_retention(directory, keep_last, protect=path)
    return path


def _checkpoints(directory: Path) -> dict[int, Path]:
    return numbered(directory, CHECKPOINT_NAME)


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


def clean_temporaries(directory: Path) -> list[Path]:
    """Remove temporaries of checkpoint and pointer writes left by dead processes; return them."""
    return _clean(Path(directory))


def latest_checkpoint(directory: Path) -> Path | None:
    """Return the checkpoint ``latest`` points at, else the highest-numbered one, else ``None``.

    The fallback covers a crash between writing a checkpoint and moving the pointer.
    """
    directory = Path(directory)
    try:
        name = (directory / LATEST).read_text().strip()
    except OSError:
        name = ""
    if CHECKPOINT_NAME.match(name) and (directory / name).is_file():
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


@contextlib.contextmanager
def checkpoint_fits(path: Path) -> Iterator[None]:
    """Turn a state that does not fit the built policy/algorithm into one ``StoreError`` naming ``path``."""
    try:
        yield
    except (RuntimeError, KeyError, ValueError, TypeError) as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()] or [repr(exc)]
        detail = lines[1] if len(lines) > 1 and lines[0].startswith("Error(s)") else lines[0]
        raise StoreError(f"{path}: checkpoint does not match the policy/algorithm built from the "
                         f"params ({detail})") from None
