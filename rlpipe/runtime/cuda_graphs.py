"""``trainer.cuda_graphs``: what a run does with the setting, and the one line it prints when it falls back.

CUDA graph capture is not built yet, so every run is eager; the setting decides only what is said:

* ``off``: nothing;
* ``auto`` or ``on`` on a device without CUDA: one line on stderr, once per process
  (``cuda_graphs: on needs a CUDA device; running eager on cpu``), then eager;
* ``auto`` on CUDA: one line that no capture is built, once per process, then eager;
* ``on`` on CUDA: refused (``ConfigError``, exit code 2), so no run believes it replays graphs.
"""

from __future__ import annotations

import sys

import torch

from rlpipe.config import ConfigError

__all__ = ["SETTINGS", "check_cuda_graphs", "cuda_graphs_fallback"]

SETTINGS = ("auto", "on", "off")

_said: set[str] = set()
"""Lines already printed in this process (each is printed at most once)."""


def cuda_graphs_fallback(setting: str, device: torch.device) -> str | None:
    """The line saying why ``setting`` runs eager on ``device`` (``None`` for ``off``).

    Raises ``ConfigError`` for ``on`` on a CUDA device (capture is not built) and for a setting
    outside :data:`SETTINGS`.
    """
    if setting not in SETTINGS:
        raise ConfigError(f"trainer.cuda_graphs: got {setting!r}; accepted: {', '.join(SETTINGS)}")
    if setting == "off":
        return None
    if device.type != "cuda":
        return f"cuda_graphs: {setting} needs a CUDA device; running eager on {device}"
    if setting == "on":
        raise ConfigError(
            f"trainer.cuda_graphs: on is not available: CUDA graph capture is not built yet; "
            f"accepted on {device}: auto (eager), off"
        )
    return f"cuda_graphs: auto: no CUDA graph capture is built yet; running eager on {device}"


def check_cuda_graphs(setting: str, device: torch.device, announce: bool = True) -> None:
    """Refuse a setting this run cannot honour; print its fallback line once per process.

    ``announce`` false (ranks other than 0) stays silent. Raises as :func:`cuda_graphs_fallback`.
    """
    message = cuda_graphs_fallback(setting, device)
    if message is not None and announce and message not in _said:
        _said.add(message)
        print(message, file=sys.stderr, flush=True)
