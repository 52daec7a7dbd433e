"""Event functions named by ``module:function`` in the events tests (``_event_fns:record``)."""

from __future__ import annotations

import json
from pathlib import Path


def record(ctx, path: str, tag: str = "call") -> None:
    """Append ``{tag, event, iteration}`` to the JSON-lines file ``path``."""
    with Path(path).open("a") as fh:
        fh.write(json.dumps({"tag": tag, "event": ctx.event, "iteration": ctx.iteration}) + "\n")


def explode(ctx) -> None:
    raise ZeroDivisionError("handler went wrong")
