"""The params snapshot of a run: ``<run_dir>/params.yaml``, so a run directory describes itself."""

from __future__ import annotations

from typing import Any

import yaml

from rlpipe.artifacts.atomic import atomic_write_text
from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.fs import AnyPath, as_path, probe
from rlpipe.artifacts.layout import RunLayout

__all__ = ["params_file", "write_params"]


def write_params(layout: RunLayout, params: dict[str, Any]) -> AnyPath:
    """Write the resolved ``params`` to ``params.yaml`` atomically (before the run's first env step)."""
    atomic_write_text(layout.params, yaml.safe_dump(params, sort_keys=False))
    return layout.params


def params_file(target: AnyPath) -> tuple[AnyPath, RunLayout | None]:
    """``(params file, run layout)`` for a params file or a run directory given on the command line.

    A run directory yields its ``params.yaml`` and itself (the run may have moved since it was
    written: its location wins over the snapshot's ``data_dir``/``exp_name``); a file yields itself
    and ``None``. A directory without ``params.yaml`` is a ``StoreError`` naming it.
    """
    target = as_path(target)
    probe(target)  # an object store: reachable, bucket there, credentials accepted (else one line)
    if target.is_dir():
        layout = RunLayout(target)
        if not layout.params.is_file():
            raise StoreError(
                f"{target}: not a run directory (no params.yaml); pass a params file or "
                "the folder of a run made by `rlpipe run`"
            )
        return layout.params, layout
    return target, None
