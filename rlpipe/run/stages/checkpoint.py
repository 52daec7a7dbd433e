"""The checkpoint stage: every ``save_freq`` env steps and at the end, atomically, with retention."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlpipe.artifacts.checkpoints import latest_checkpoint, load_checkpoint, save_checkpoint
from rlpipe.artifacts.fs import as_path
from rlpipe.run.stages.base import Stage

__all__ = ["Checkpointer"]


class Checkpointer(Stage):
    """Writes ``ckpt-NNNNNN.pt`` + ``latest`` under ``directory``; the caller assembles the state."""

    def __init__(self, directory: Path, keep_last: int | None = None) -> None:
        self.directory = as_path(directory)
        self.keep_last = keep_last
        self.last_saved: Path | None = None

    def save(self, iteration: int, state: dict[str, Any], best_metric: float | None = None) -> Path:
        """Write the checkpoint of ``iteration``; return its path."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.last_saved = save_checkpoint(self.directory, iteration, state, self.keep_last, best_metric)
        return self.last_saved

    def latest(self) -> Path | None:
        """The newest complete checkpoint, or ``None``."""
        return latest_checkpoint(self.directory) if self.directory.exists() else None

    @staticmethod
    def load(path: Path) -> dict[str, Any]:
        """Load with ``weights_only=True``."""
        return load_checkpoint(path)
