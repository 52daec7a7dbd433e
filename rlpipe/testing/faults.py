"""Fault injection for ``tests/faults``: kill, signal or hang the process, or poison a tensor, at a point.

Read once from the environment at import; with no variable set every hook is one global
lookup and a ``None`` check (no cost worth measuring).

``RLPIPE_FAULT_KILL_AT=<point>:<n>``
    SIGKILL this process the n-th time (1-based) it reaches ``<point>`` (see :data:`KILL_POINTS`).
``RLPIPE_FAULT_SIGNAL_AT=<point>:<n>:<SIGNAL>[:<count>]``
    Send ``SIGNAL`` (``SIGTERM``, ``SIGINT``) to this process ``count`` times (default once) the
    n-th time it reaches ``<point>``: a signal at a known place, without timing races.
``RLPIPE_FAULT_HANG_AT=<point>:<n>:<seconds>``
    Sleep ``seconds`` the n-th time this process reaches ``<point>``: a disk or an object store
    that stops answering in the middle of a write.
``RLPIPE_FAULT_NAN_AT=<target>:<n>[+][:<value>]``
    Write ``value`` (``nan`` default, or ``inf``) into ``<target>`` (``obs``, ``reward``, ``grad``)
    the n-th time (``n+``: and every later time) it passes :func:`poison` (collect: once per
    iteration; grad: once per optimizer step). Rollout targets are hit at env 1 (env 0 if there
    is one env), step 2.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

__all__ = ["KILL_POINTS", "POISON_TARGETS", "point", "poison"]

KILL_POINTS = (
    "collect.start",
    "collect.end",
    "advantage.end",
    "store.write",
    "store.arrays_written",
    "store.published",
    "store.retention",
    "update.start",
    "update.step",
    "update.end",
    "eval.start",
    "checkpoint.start",
    "write.checkpoint",
    "renamed.checkpoint",
    "write.checksum",
    "write.latest",
    "renamed.latest",
    "checkpoint.retention",
    "checkpoint.end",
    "curve.append",
    "iteration.end",
    "resume.discard",
    "write.params",
    "write.metrics",
)
"""Every point a kill can be injected at (collect, store write, update, checkpoint, pointers)."""
POISON_TARGETS = ("obs", "reward", "grad")


def _parse(name: str) -> tuple[str, int, str] | None:
    raw = os.environ.get(name)
    if not raw:
        return None
    where, _, rest = raw.partition(":")
    count, _, value = rest.partition(":")
    if count.endswith("+"):  # "<n>+": the n-th visit and every later one
        _FROM_ON.add(name)
    return where, int(count.rstrip("+") or 1), value or "nan"


_FROM_ON: set[str] = set()


_KILL = _parse("RLPIPE_FAULT_KILL_AT")
_NAN = _parse("RLPIPE_FAULT_NAN_AT")
_SIGNAL = _parse("RLPIPE_FAULT_SIGNAL_AT")
_HANG = _parse("RLPIPE_FAULT_HANG_AT")
_seen: dict[str, int] = {}


def point(name: str) -> None:
    """Kill, signal or sleep here when ``RLPIPE_FAULT_KILL_AT`` (``…_SIGNAL_AT``, ``…_HANG_AT``) says so."""
    if _KILL is not None and _KILL[0] == name and _visit(f"kill:{name}") == _KILL[1]:
        os.kill(os.getpid(), signal.SIGKILL)
    if _SIGNAL is not None and _SIGNAL[0] == name and _visit(f"signal:{name}") == _SIGNAL[1]:
        sig, _, count = _SIGNAL[2].partition(":")
        for _ in range(int(count or 1)):
            os.kill(os.getpid(), signal.Signals[sig])
    if _HANG is not None and _HANG[0] == name and _visit(f"hang:{name}") == _HANG[1]:
        time.sleep(float(_HANG[2]))


def _visit(key: str) -> int:
    _seen[key] = _seen.get(key, 0) + 1
    return _seen[key]


def poison(target: str, tensor: Any) -> None:
    """Overwrite one element of ``tensor`` in place when ``RLPIPE_FAULT_NAN_AT`` asks for ``target`` now.

    ``tensor``: a ``[N, T+1, ...]`` rollout entry (obs/reward) or a gradient (any shape).
    """
    if _NAN is None or _NAN[0] != target:
        return
    visit = _visit(f"nan:{target}")
    hit = visit == _NAN[1] or ("RLPIPE_FAULT_NAN_AT" in _FROM_ON and visit > _NAN[1])
    if not hit or tensor is None:
        return
    value = float(_NAN[2])
    if target == "grad":
        tensor.view(-1)[0] = value
    else:
        tensor[min(1, tensor.shape[0] - 1), min(2, tensor.shape[1] - 2)] = value
