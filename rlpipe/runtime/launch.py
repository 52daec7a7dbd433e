"""What a launcher (torchrun) told this process, read without importing torch."""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["is_rank_zero"]


def is_rank_zero(environ: Mapping[str, str] | None = None) -> bool:
    """True unless a launcher set ``RANK`` to another rank: the process that prints, logs and tracks."""
    environ = os.environ if environ is None else environ
    return environ.get("RANK", "0") == "0"
