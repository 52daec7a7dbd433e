"""``curve.csv`` surgery for resume: keep the rows a checkpoint covers."""

from __future__ import annotations

import csv
import io

from rlpipe.artifacts.atomic import atomic_write_text
from rlpipe.artifacts.fs import AnyPath, as_path

__all__ = ["truncate_curve"]


def truncate_curve(path: AnyPath, iteration: int) -> list[str] | None:
    """Keep the header and the rows of iterations ≤ ``iteration`` of ``curve.csv``; return the header.

    ``None`` when there is no curve to continue. Rewritten atomically, and only when rows go.
    """
    try:
        with as_path(path).open(newline="") as fh:
            header, *rows = list(csv.reader(fh))
    except (OSError, ValueError):
        return None
    if "iteration" not in header:
        return None
    col = header.index("iteration")
    kept = [row for row in rows if len(row) > col and row[col] and float(row[col]) <= iteration]
    if len(kept) == len(rows):
        return header  # nothing to cut: leave the file alone
    text = io.StringIO()
    csv.writer(text).writerows([header, *kept])
    atomic_write_text(as_path(path), text.getvalue())
    return header
