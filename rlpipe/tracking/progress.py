"""A live count of a long offline job (episodes and frames written), drawn only on a terminal."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

__all__ = ["CountProgress"]


class CountProgress:
    """``<what>  ⠋ 12 episodes · 3,456 frames · 0:00:07``: a spinner and counts (rich), transient.

    Nothing is drawn when the console is not a terminal, so logs, pipes and CI output stay the plain
    summary line the command prints at the end. Use as a context manager; :meth:`add` per item.
    """

    def __init__(self, what: str, console: Console | None = None) -> None:
        if console is None:
            from rich.console import Console

            console = Console(stderr=True, highlight=False)
        self.console = console
        self.what = what
        self.items = 0
        self.frames = 0
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> CountProgress:
        if self.console.is_terminal:
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn(self.what),
                SpinnerColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task(self._text(), total=None)
        return self

    def add(self, frames: int) -> None:
        """Count one more item (an episode) of ``frames`` frames."""
        self.items += 1
        self.frames += frames
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, description=self._text())

    def _text(self) -> str:
        return f"{self.items:,} episodes · {self.frames:,} frames"

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
