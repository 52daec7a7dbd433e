"""``trainer.compile``: whether a run compiles its act step and minibatch loss, and the compiled steps.

Two steps are compiled, both with ``torch.compile(fullgraph=True)`` (inductor), so any graph break
is an error rather than a silent fall back to Python between graph pieces:

* the **act step**: the policy's ``sample(obs, deterministic)`` (a recurrent policy's
  ``sample_step(obs, state, deterministic)``), once per env step in the collector;
* the **minibatch loss**: the algorithm's ``minibatch_loss(prepared minibatch)``, forward and (through
  AOTAutograd) its backward; the optimizer step, gradient clipping and the KL rules stay eager. With
  RND, its networks' losses (``RND.losses``) are compiled too.

A value that changes between calls — the smaller last minibatch of an epoch, GRPO's number of valid
steps, the entropy coefficient under a schedule, the first observations (made outside inference
mode) — costs one more trace of its step, after which Dynamo treats it as dynamic: a run traces each
step at most a few times, never per iteration.

Random draws inside a compiled step are torch's own kernels on the global generator
(inductor's ``fallback_random``), so a compiled run draws the same random numbers as an eager one
and two compiled runs on one machine are bit-identical (resume and replay included); the float
results differ from eager only by the reordering of float operations inductor's fused kernels do.

The decision (:func:`compile_decision`) depends on the setting, the device and the config only —
never on the load — so a resumed or replayed run computes exactly as the original did:

* ``off``: eager;
* ``on``: compiled;
* ``auto``: compiled where ``benchmarks/speed/compile.py`` measured compiled steps faster than eager,
  compile time included (:data:`AUTO_COMPILES`): on the CPU nowhere, so ``auto`` is eager on the CPU;
  CUDA is not measured yet, so ``auto`` is eager there too.

Inductor's cache (``TORCHINDUCTOR_CACHE_DIR``) is the user's ``~/.cache/rlpipe/inductor``
(``$XDG_CACHE_HOME/rlpipe/inductor``) unless that variable is set: a second run of the same networks
reuses the compiled kernels. ``torch._dynamo`` and ``torch._inductor`` are imported only by a run
that compiles.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "AUTO_COMPILES",
    "SETTINGS",
    "CompiledStep",
    "compile_decision",
    "compile_step",
    "compile_words",
    "inductor_cache_dir",
]

SETTINGS = ("auto", "on", "off")

AUTO_COMPILES: frozenset[str] = frozenset()
"""Device types on which ``auto`` compiles: none. On the CPU every measured workload ran slower
compiled than eager once the compile time is counted, or no faster (``benchmarks/results/compile.json``);
CUDA is not measured yet."""

INDUCTOR_OPTIONS: dict[str, str | int | bool | Callable[..., Any]] = {"fallback_random": True}
"""Random ops run torch's own kernels on the global generator: the draws of an eager run."""


def compile_decision(setting: str, device: torch.device) -> bool:
    """Whether ``trainer.compile: setting`` compiles the steps on ``device`` (``ValueError`` if unknown)."""
    if setting not in SETTINGS:
        raise ValueError(f"trainer.compile: got {setting!r}; accepted: {', '.join(SETTINGS)}")
    if setting == "auto":
        return device.type in AUTO_COMPILES
    return setting == "on"


def compile_words(setting: str, device: torch.device) -> str | None:
    """The banner's words for ``trainer.compile`` (``None`` for ``off``: nothing to say).

    ``compile auto → off (eager on cpu: compiling was not measured to pay there)`` or
    ``compile on: act step + minibatch loss (inductor, fullgraph; cache ~/.cache/rlpipe/inductor)``;
    what each compile cost is said when it is done (:class:`CompiledStep`).
    """
    if setting == "off":
        return None
    if not compile_decision(setting, device):
        return f"compile auto → off (eager on {device.type}: compiling was not measured to pay there)"
    return f"compile {setting}: act step + minibatch loss (inductor, fullgraph; cache {inductor_cache_dir()})"


def inductor_cache_dir() -> Path:
    """Where inductor keeps compiled kernels: ``TORCHINDUCTOR_CACHE_DIR``, else the user's rlpipe cache."""
    configured = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rlpipe" / "inductor"


class CompiledStep:
    """A step compiled on first call; says once (rank 0) how long its compile took.

    ``compiled`` is ``torch.compile(fn, fullgraph=True)``; the first call compiles it (or loads it from
    inductor's cache) and :attr:`compile_seconds` records that call's duration.
    """

    def __init__(self, fn: Callable[..., Any], name: str, announce: bool) -> None:
        self.name, self.announce = name, announce
        self.compiled = torch.compile(fn, fullgraph=True, options=INDUCTOR_OPTIONS)
        self.compile_seconds: float | None = None
        """Seconds of the first call (compile or cache load included); ``None`` before it."""

    def __call__(self, *args: object) -> Any:
        """The compiled step's result (the first call compiles it)."""
        if self.compile_seconds is not None:
            return self.compiled(*args)
        start = time.perf_counter()
        result = self.compiled(*args)
        self.compile_seconds = time.perf_counter() - start
        if self.announce:
            print(f"compile: {self.name} ready in {self.compile_seconds:.1f} s", file=sys.stderr, flush=True)
        return result


def compile_step(fn: Callable[..., Any], name: str, announce: bool = True) -> CompiledStep:
    """``fn`` compiled fullgraph by inductor, its kernels cached in :func:`inductor_cache_dir`."""
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(inductor_cache_dir()))
    allow_recurrent_weights()
    return CompiledStep(fn, name, announce)


def allow_recurrent_weights() -> None:
    """Let Dynamo read a torch LSTM/GRU module's weights (it refuses to touch such a module by default).

    A compiled step never runs the module's fused kernel: a recurrent core runs its cell equations
    while compiling (``RecurrentCore.cell_step``); only the weights are read from the module.
    """
    import torch._dynamo

    torch._dynamo.config.allow_rnn = True
