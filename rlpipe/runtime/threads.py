"""Torch's CPU thread count: the ``trainer.num_threads: auto`` rule and the oversubscription warning.

Torch's own default, one intra-op thread per core, buys a small network little (its ops are too
short to split well) and collapses on a busy machine: every op splits over the threads and waits
for the slowest, so one descheduled thread stalls the whole step. ``auto`` therefore runs one thread
unless the run's largest forward is big enough for threads to pay clearly on a quiet machine (the
common case):

    forward MACs = rows × Σ over the policy's Linear layers (in_features × out_features)

with ``rows`` the larger of the update's minibatch and the collector's batch (N envs). At or above
:data:`PARALLEL_MACS` ``auto`` takes every core this process may run on.
The threshold comes from ``benchmarks/profile/threads.py`` (update steps at 1 vs 2 threads,
interleaved, on a quiet machine; ``benchmarks/results/threads.json``).

Independently of the choice, :func:`configure_threads` warns once per process, in one line, when the
machine is oversubscribed: the 1-minute load average already reaches the core count before the run
starts, or torch threads × processes of this run exceed the cores.

The count depends on the config only (never on the load), so a resumed or replayed run computes
with the same thread count as the original.

rlpipe's helper processes (the store's writer, the MLflow process) call :func:`yield_to_training`
first: they run at a lower scheduling priority, on the cycles training leaves, so on a machine with
fewer free cores than busy processes the training loop is the one that keeps its core.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import nn

__all__ = [
    "AUTO",
    "HELPER_NICENESS",
    "LOAD_WARNING_ENV",
    "PARALLEL_MACS",
    "auto_threads",
    "available_cores",
    "configure_threads",
    "forward_macs",
    "linear_shapes",
    "oversubscription",
    "resolve_threads",
    "thread_reason",
    "yield_to_training",
]

AUTO = "auto"
PARALLEL_MACS = 2**25
"""Forward multiply-accumulates (rows × Σ in×out) from which ``auto`` uses more than one thread
(about 34 M): above it a second thread pays on a quiet machine; below it the gain is small and a
busy machine (a test suite, several runs) loses much more, so smaller forwards stay on one thread.
``benchmarks/profile/threads.py`` measures both sides (``benchmarks/results/threads.json``)."""

_warned = False
"""The oversubscription warning was printed in this process (it is printed at most once)."""


def linear_shapes(*modules: nn.Module) -> list[tuple[int, int]]:
    """``(in_features, out_features)`` of every ``nn.Linear`` inside ``modules``."""
    from torch import nn

    return [
        (m.in_features, m.out_features)
        for module in modules
        for m in module.modules()
        if isinstance(m, nn.Linear)
    ]


def forward_macs(rows: int, shapes: Iterable[tuple[int, int]]) -> int:
    """Multiply-accumulates of one forward of ``rows`` rows through layers of ``shapes``."""
    return rows * sum(a * b for a, b in shapes)


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity API (macOS, Windows)
        return max(1, os.cpu_count() or 1)


def auto_threads(rows: int, shapes: Iterable[tuple[int, int]], cores: int) -> int:
    """The ``auto`` rule: 1 thread below :data:`PARALLEL_MACS` forward MACs, else ``cores``."""
    return 1 if forward_macs(rows, shapes) < PARALLEL_MACS else max(1, cores)


def thread_reason(setting: int | str | None, rows: int, shapes: Iterable[tuple[int, int]]) -> str:
    """Why the run has its thread count, for the banner: the setting, and for ``auto`` the rule's input."""
    if setting is None:
        return "torch's default"
    if setting != AUTO:
        return "trainer.num_threads"
    macs = forward_macs(rows, list(shapes))
    side = "<" if macs < PARALLEL_MACS else "≥"
    return f"auto: {_si(macs)} forward MACs {side} {_si(PARALLEL_MACS)}"


def _si(value: float) -> str:
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.3g}"


def resolve_threads(
    setting: int | str | None, rows: int, shapes: Iterable[tuple[int, int]], cores: int, current: int
) -> int:
    """The thread count ``trainer.num_threads`` asks for: an int as is, ``auto`` the rule.

    ``None`` keeps ``current`` (torch's count as it stands: its default unless the caller changed it).
    """
    if setting is None:
        return current
    if setting == AUTO:
        return auto_threads(rows, shapes, cores)
    return int(setting)


def oversubscription(threads: int, processes: int, cores: int, load: float | None) -> str | None:
    """The one-line warning for an oversubscribed CPU, or ``None`` when the run fits.

    Oversubscribed: ``threads × processes > cores``, or the 1-minute ``load`` average (``None``:
    unknown) already reaches ``cores`` as the run starts.
    """
    wanted = threads * processes
    busy = load is not None and load >= cores
    if wanted <= cores and not busy:
        return None
    why = []
    if busy:
        why.append(f"load average {load:.1f} on {cores} core{'s' * (cores != 1)} before this run")
    if wanted > cores:
        why.append(
            f"{threads} torch threads × {processes} process{'es' * (processes != 1)} > "
            f"{cores} core{'s' * (cores != 1)}"
        )
    advice = (
        "set trainer.num_threads: 1"
        if threads > 1
        else "timings will be slow and vary; fewer processes or a quieter machine help"
    )
    return f"Warning: the CPU is oversubscribed ({'; '.join(why)}): {advice}"


LOAD_WARNING_ENV = "RLPIPE_LOAD_WARNING"
"""Set to ``0`` to leave the load average out of the warning (shared CI machines, test suites: the
load there is the caller's own doing); the threads × processes check stays."""


def load_average() -> float | None:
    """1-minute load average; ``None`` where the OS has none or :data:`LOAD_WARNING_ENV` is ``0``."""
    if os.environ.get(LOAD_WARNING_ENV, "1").strip() == "0":
        return None
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def configure_threads(
    setting: int | str | None,
    rows: int,
    shapes: Iterable[tuple[int, int]],
    processes: int = 1,
    announce: bool = True,
) -> int:
    """Set torch's intra-op threads as ``trainer.num_threads`` asks; warn once if oversubscribed.

    ``rows``: the largest batch through the networks (minibatch rows or N envs); ``shapes``: their
    Linear layers (:func:`linear_shapes`); ``processes``: this run's processes on this machine
    (ranks per node). ``announce`` false (ranks other than 0) sets the count silently. Returns it.
    """
    import torch

    global _warned
    cores = available_cores()
    threads = resolve_threads(setting, rows, list(shapes), cores, torch.get_num_threads())
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    message = oversubscription(threads, processes, cores, load_average())
    if message and announce and not _warned:
        _warned = True
        print(message, file=sys.stderr, flush=True)
    return threads


HELPER_NICENESS = 10
"""How much lower than the training process a helper process is scheduled (``nice`` increment)."""


def yield_to_training() -> None:
    """Lower this (helper) process's scheduling priority by :data:`HELPER_NICENESS`, where the OS allows.

    Priority, not a limit: an idle core still runs the helper at full speed, and a training loop
    waiting on the helper (a full store queue) leaves it the core.
    """
    try:
        os.nice(HELPER_NICENESS)
    except (OSError, AttributeError):  # no os.nice (Windows), or not permitted
        pass
