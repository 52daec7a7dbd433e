"""Where metrics go: the console table, ``metrics.json``/``curve.csv`` for DVC, and MLflow.

The steps of an iteration never log: they return metrics, and :class:`rlpipe.trainer.Trainer` hands
them to a :class:`Tracker` once per iteration. ``rlpipe.tracking.mlflow_store`` (the connection),
``mlflow_runs`` (writing) and ``mlflow_query`` (reading, ``rlpipe compare``) are the only modules of
rlpipe that import mlflow, and only inside the tracking process (:mod:`rlpipe.tracking.sink`) or
``rlpipe compare``: the training process never loads it (:mod:`rlpipe.tracking.background`).

Names are resolved on first use (PEP 562), so ``import rlpipe.tracking`` costs nothing until one
is needed, and the tracking process imports only what it writes with.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "COLUMNS": "console",
    "ConsoleTable": "console",
    "MetricsFiles": "console",
    "flatten_params": "console",
    "MlflowRun": "mlflow_runs",
    "RunRecord": "mlflow_query",
    "TrackingError": "mlflow_store",
    "metric_history": "mlflow_query",
    "project_root": "mlflow_store",
    "resolve_uri": "mlflow_store",
    "search_runs": "mlflow_query",
    "source_run_id": "mlflow_runs",
    "BackgroundRun": "background",
    "Tracker": "tracker",
    "log_single_run": "tracker",
    "open_tracker": "tracker",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rlpipe.tracking' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"rlpipe.tracking.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
