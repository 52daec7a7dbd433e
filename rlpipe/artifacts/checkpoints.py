"""Checkpoint files: atomic ``ckpt-NNNNNN.pt`` writes, ``latest``/``best`` pointers, RNG states.

Layout of a checkpoint directory::

    ckpt-000010.pt   torch.save of a state dict, written to a temporary, fsynced, then renamed
    ckpt-000010.pt.sha256   its SHA-256 (``sha256sum`` format), written before it; checked on load
    ckpt-000020.pt
    latest           text: the file name of the newest checkpoint written ("ckpt-000020.pt")
    best             JSON: {"file": "ckpt-000010.pt", "metric": 487.5}; higher metric is better

A checkpoint's ``state`` may hold only what ``torch.load(weights_only=True)`` accepts: tensors,
numbers, strings, bools, ``None`` and lists/tuples/dicts of those (see :mod:`rlpipe.runtime.seeding`).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from rlpipe.artifacts.atomic import atomic_write, atomic_write_text
from rlpipe.artifacts.errors import LockedError, StoreError
from rlpipe.artifacts.fs import AnyPath, PreconditionFailed, as_path, is_object, read_versioned, replace_if
from rlpipe.artifacts.layout import (
    BEST,
    CHECKPOINT_NAME,
    CHECKSUM_SUFFIX,
    LATEST,
    checkpoint_name,
    checksum_path,
    iteration_from_name,
    numbered,
)
from rlpipe.artifacts.removal import check_confined, delete
from rlpipe.artifacts.removal import clean_temporaries as _clean
from rlpipe.refused import RefusedDataError
from rlpipe.testing import faults

__all__ = [
    "Checkpointer",
    "ChecksumError",
    "checkpoint_fits",
    "best_checkpoint",
    "checkpoint_path",
    "clean_temporaries",
    "latest_checkpoint",
    "load_checkpoint",
    "save_checkpoint",
    "verify_checkpoint",
    "write_pointer",
]


def checkpoint_path(directory: AnyPath, iteration: int) -> AnyPath:
    """``directory/ckpt-{iteration:06d}.pt``."""
    return as_path(directory) / checkpoint_name(iteration)


def save_checkpoint(
    directory: AnyPath,
    iteration: int,
    state: dict[str, Any],
    keep_last: int | None,
    best_metric: float | None = None,
) -> AnyPath:
    """Write ``state`` as ``ckpt-{iteration:06d}.pt`` atomically; update pointers; apply retention.

    The file is fsynced before it is renamed into place, then ``latest`` is pointed at it. With
    ``best_metric`` (higher is better) the ``best`` pointer moves here when the metric beats it.
    ``keep_last`` keeps the newest K checkpoints plus the best one (``None``: keep all).
    Returns the checkpoint's path.
    """
    directory = as_path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = checkpoint_path(directory, iteration)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    data = buffer.getbuffer()
    # The checksum goes first: a checkpoint under its final name always has its sidecar.
    atomic_write_text(checksum_path(path), f"{hashlib.sha256(data).hexdigest()}  {path.name}\n")
    atomic_write(path, lambda f: f.write(data))
    write_pointer(directory / LATEST, f"{path.name}\n")
    if best_metric is not None and _beats_best(directory, best_metric):
        record = json.dumps({"file": path.name, "metric": float(best_metric)})
        write_pointer(directory / BEST, f"{record}\n")
    if keep_last is not None:
        faults.point("checkpoint.retention")
        _apply_retention(directory, keep_last, protect=path)
    return path


_POINTER_ETAGS: dict[AnyPath, str] = {}
"""The ETag of each pointer this process last wrote on an object store."""


def write_pointer(path: AnyPath, text: str) -> None:
    """Point ``latest``/``best``: atomically; on an object store by a conditional overwrite.

    The overwrite holds only while the pointer is still the one this process last wrote (or read,
    on its first write): a writer that lost the run lock to another cannot move it back.
    """
    if not is_object(path):
        atomic_write_text(path, text)
        return
    etag = _POINTER_ETAGS.get(path)
    if etag is None:
        current = read_versioned(path)
        etag = current[1] if current else None
    faults.point(f"write.{path.name}")
    try:
        _POINTER_ETAGS[path] = replace_if(path, text.encode(), etag)
    except PreconditionFailed:
        raise LockedError(
            f"{path}: moved by another writer since this process wrote it (its run lock "
            "was taken over); stopping so that two writers never interleave"
        ) from None


class ChecksumError(StoreError, RefusedDataError):
    """A checkpoint whose bytes do not match its ``.sha256`` sidecar (exit code 3)."""


def verify_checkpoint(path: AnyPath, data: bytes | memoryview | None = None) -> None:
    """Raise :class:`ChecksumError` when ``path`` (or its bytes ``data``) does not match its sidecar.

    A checkpoint without a sidecar passes (there is nothing to check it against).
    """
    path = as_path(path)
    try:
        recorded = checksum_path(path).read_text(errors="replace").split()
    except FileNotFoundError:
        return
    data = path.read_bytes() if data is None else data
    actual = hashlib.sha256(data).hexdigest()
    if not recorded or recorded[0] != actual:
        raise ChecksumError(
            f"{path}: checksum mismatch (sha256 {actual[:12]}…, recorded "
            f"{(recorded or ['nothing'])[0][:12]}…): the file is damaged; "
            f"{_damaged_advice(path)}"
        )


def _damaged_advice(path: AnyPath) -> str:
    """What to do about the damaged checkpoint ``path``: fall back to an earlier one only if there is one."""
    iteration = iteration_from_name(path, CHECKPOINT_NAME)
    earlier = [p for k, p in _checkpoints(path.parent).items() if iteration is not None and k < iteration]
    if earlier:
        return (
            f"delete it (and its {CHECKSUM_SUFFIX}) to fall back to the previous checkpoint, "
            f"{earlier[-1].name}"
        )
    return (
        "no earlier checkpoint is here to fall back to: restore it from a copy, or delete it (and its "
        f"{CHECKSUM_SUFFIX}) and --resume, which starts the run over with its rollout stores set aside, "
        "kept (--overwrite deletes them)"
    )


def _checkpoints(directory: AnyPath) -> dict[int, AnyPath]:
    return numbered(directory, CHECKPOINT_NAME)


def _read_best(directory: AnyPath) -> dict[str, Any] | None:
    """Return the ``best`` record if it names an existing checkpoint, else ``None``."""
    try:
        record = json.loads((directory / BEST).read_text())
        return record if (directory / record["file"]).is_file() else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _beats_best(directory: AnyPath, metric: float) -> bool:
    best = _read_best(directory)
    return best is None or float(metric) > float(best["metric"])


def _apply_retention(directory: AnyPath, keep_last: int, protect: AnyPath) -> None:
    best = _read_best(directory)
    keep = {protect.name, *(p.name for p in list(_checkpoints(directory).values())[-keep_last:])}
    if best is not None:
        keep.add(best["file"])
    for path in _checkpoints(directory).values():
        if path.name not in keep:
            delete(path, within=directory.parent, missing_ok=True)
            delete(checksum_path(path), within=directory.parent, missing_ok=True)


def clean_temporaries(directory: AnyPath) -> list[Path]:
    """Remove temporaries of checkpoint and pointer writes left by dead processes; return them."""
    return _clean(as_path(directory))


def latest_checkpoint(directory: AnyPath) -> AnyPath | None:
    """Return the checkpoint ``latest`` points at, else the newest valid one, else ``None``.

    The fallback covers a crash between writing a checkpoint and moving the pointer (silently), and
    a damaged pointer (with a warning naming it). On the fallback, checkpoints failing their checksum
    are passed over with a warning.
    """
    directory = as_path(directory)
    pointer = directory / LATEST
    try:
        raw = pointer.read_bytes()
    except OSError:
        raw = None
    name = raw.decode("utf-8", errors="replace").strip() if raw is not None else ""
    if CHECKPOINT_NAME.fullmatch(name) and (directory / name).is_file():
        return directory / name
    found = _checkpoints(directory)
    newest = _newest_valid(found)
    if raw is not None and found and not _names_a_newer_checkpoint(name, found):
        shown = repr(name[:40]) if name.isprintable() else f"{len(raw)} unreadable bytes"
        print(
            f"Warning: {pointer}: holds {shown}, not a checkpoint of this folder; using the newest "
            f"valid checkpoint, {newest.name if newest else 'none'}",
            file=sys.stderr,
        )
    return newest


def _names_a_newer_checkpoint(name: str, found: dict[int, AnyPath]) -> bool:
    """True when ``name`` is a checkpoint name newer than every checkpoint in ``found``."""
    iteration = iteration_from_name(name, CHECKPOINT_NAME) if CHECKPOINT_NAME.fullmatch(name) else None
    return iteration is not None and iteration > max(found)


def _newest_valid(found: dict[int, AnyPath]) -> AnyPath | None:
    for path in reversed(found.values()):
        try:
            verify_checkpoint(path)
        except ChecksumError as exc:
            print(f"Warning: {exc}".split(": the file")[0] + "; passed over", file=sys.stderr)
            continue
        return path
    return None


def best_checkpoint(directory: AnyPath) -> AnyPath | None:
    """Return the checkpoint the ``best`` pointer names, or ``None``."""
    best = _read_best(as_path(directory))
    return as_path(directory) / best["file"] if best else None


def load_checkpoint(path: AnyPath, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint with ``torch.load(weights_only=True)``.

    Raises :class:`StoreError` naming the file when it is missing, truncated or not a checkpoint,
    and :class:`ChecksumError` when its bytes do not match its ``.sha256`` sidecar.
    """
    path = as_path(path)
    if not path.is_file():
        raise StoreError(f"{path}: no checkpoint here")
    data = path.read_bytes()
    verify_checkpoint(path, data)
    try:
        state = torch.load(io.BytesIO(data), map_location=map_location, weights_only=True)
    except Exception as exc:
        line = (str(exc).strip().splitlines() or [""])[0]
        raise StoreError(f"{path}: truncated or not a checkpoint ({type(exc).__name__}: {line})") from None
    if not isinstance(state, dict):
        raise StoreError(f"{path}: not a checkpoint (holds a {type(state).__name__}, not a dict)")
    return state


@contextlib.contextmanager
def checkpoint_fits(path: AnyPath) -> Iterator[None]:
    """Turn a state that does not fit the built policy/algorithm into one ``StoreError`` naming ``path``."""
    try:
        yield
    except (RuntimeError, KeyError, ValueError, TypeError) as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()] or [repr(exc)]
        detail = lines[1] if len(lines) > 1 and lines[0].startswith("Error(s)") else lines[0]
        raise StoreError(
            f"{path}: checkpoint does not match the policy/algorithm built from the params ({detail})"
        ) from None


class Checkpointer:
    """Writes ``ckpt-NNNNNN.pt`` + ``latest`` under ``directory``; the caller assembles the state.

    Retention (``keep_last``) deletes inside ``directory``'s parent (the run directory) and never
    through a link: a ``directory`` that is a symbolic link is refused here, before any write.
    """

    def __init__(self, directory: AnyPath, keep_last: int | None = None) -> None:
        self.directory = as_path(directory)
        self.keep_last = keep_last
        if keep_last is not None:
            check_confined(checkpoint_path(self.directory, 0), self.directory.parent)
        self.last_saved: AnyPath | None = None

    def save(self, iteration: int, state: dict[str, Any], best_metric: float | None = None) -> AnyPath:
        """Write the checkpoint of ``iteration``; return its path."""
        self.directory.mkdir(parents=True, exist_ok=True)
        saved = save_checkpoint(self.directory, iteration, state, self.keep_last, best_metric)
        self.last_saved = saved
        return saved

    def latest(self) -> AnyPath | None:
        """The newest complete checkpoint, or ``None``."""
        return latest_checkpoint(self.directory) if self.directory.exists() else None

    @staticmethod
    def load(path: AnyPath) -> dict[str, Any]:
        """Load with ``weights_only=True``."""
        return load_checkpoint(path)
