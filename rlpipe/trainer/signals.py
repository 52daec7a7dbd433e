"""SIGINT/SIGTERM during a run: stop at the next iteration boundary; a second signal stops at once.

While :class:`GracefulStop` is entered (main thread only), the first SIGINT or SIGTERM is only
recorded (``signum``) and announced on stderr; the loop checks it between iterations, writes a
checkpoint of the last complete iteration and ends the run. A second signal raises
:class:`Interrupted` right where the process is (no further checkpoint: the previous one stays).
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType, TracebackType
from typing import Any

__all__ = ["GracefulStop", "Interrupted", "exit_code", "signal_name"]

_HANDLED = (signal.SIGINT, signal.SIGTERM)


def signal_name(signum: int) -> str:
    """``SIGINT``, ``SIGTERM``."""
    return signal.Signals(signum).name


def exit_code(signum: int) -> int:
    """The shell's code for a process ended by ``signum``: 130 for SIGINT, 143 for SIGTERM."""
    return 128 + int(signum)


class Interrupted(BaseException):  # noqa: N818  # like KeyboardInterrupt: not an ``Exception``
    """The run was stopped by a signal; ``signum``, the last ``iteration`` on disk and its ``checkpoint``.

    A ``BaseException``, so no ``except Exception`` on the way swallows it.
    """

    def __init__(
        self, signum: int, iteration: int | None = None, checkpoint: str | None = None, at_once: bool = False
    ) -> None:
        name = signal.Signals(signum).name
        where = f"checkpoint {checkpoint} (iteration {iteration})" if checkpoint else "no checkpoint yet"
        how = "at once (second signal)" if at_once else "at the iteration boundary"
        super().__init__(f"stopped by {name} {how}; {where}")
        self.signum, self.iteration, self.checkpoint, self.at_once = signum, iteration, checkpoint, at_once


class GracefulStop:
    """``with GracefulStop() as stop:`` … ``stop.signum`` is set once SIGINT/SIGTERM arrived."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        """True once a first signal arrived."""
        return self.signum is not None

    def __enter__(self) -> GracefulStop:
        if threading.current_thread() is threading.main_thread():
            for sig in _HANDLED:
                self._previous[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            self.__exit__(None, None, None)  # a third signal gets the default behaviour
            raise Interrupted(signum, at_once=True)
        self.signum = signum
        print(
            f"rlpipe: {signal.Signals(signum).name} received; stopping after this iteration "
            "(send it again to stop at once)",
            file=sys.stderr,
            flush=True,
        )
