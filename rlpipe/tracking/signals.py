"""SIGTERM → ``SystemExit`` while a tracked run is open, so queued MLflow writes are flushed.

Python turns SIGINT into ``KeyboardInterrupt`` but dies on SIGTERM without running ``finally``
blocks or ``atexit`` handlers. While a tracker is open, :func:`install` makes SIGTERM raise
``SystemExit(143)`` in the main thread (at the next bytecode boundary, like Ctrl-C), so the run's
normal unwinding and the tracking flush at exit happen; the MLflow run ends ``KILLED``. A second
signal of the same kind gets the default behaviour again (kill now). Handlers already installed by
someone else (a launcher, the trainer's :class:`~rlpipe.trainer.signals.GracefulStop`) are left alone.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType

__all__ = ["install", "received"]

_received: int | None = None


def received() -> int | None:
    """The signal (SIGINT/SIGTERM) that interrupted this process, if one did."""
    return _received


def _on_signal(signum: int, frame: FrameType | None) -> None:
    global _received
    _received = signum
    if signum == signal.SIGINT:
        signal.signal(signum, signal.default_int_handler)
        raise KeyboardInterrupt
    signal.signal(signum, signal.SIG_DFL)  # a second SIGTERM kills at once
    raise SystemExit(128 + signum)


def install() -> Callable[[], None]:
    """Route SIGTERM (and SIGINT, to record it) through :func:`_on_signal`; return the undo.

    A no-op outside the main thread or where a handler other than Python's default is installed.
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    defaults = {signal.SIGTERM: signal.SIG_DFL, signal.SIGINT: signal.default_int_handler}
    installed = [sig for sig, default in defaults.items() if signal.getsignal(sig) is default]
    for sig in installed:
        signal.signal(sig, _on_signal)

    def restore() -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in installed:
            if signal.getsignal(sig) is _on_signal:
                signal.signal(sig, defaults[sig])

    return restore
