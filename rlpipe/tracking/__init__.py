"""Where metrics go: the console table, ``metrics.json``/``curve.csv`` for DVC, and MLflow.

Stages never log: they return metrics and the pipeline hands them to a :class:`Tracker` once per
iteration. ``rlpipe.tracking.mlflow_store`` is the only module of rlpipe that imports mlflow.
"""

from rlpipe.tracking.console import COLUMNS, ConsoleTable, MetricsFiles, flatten_params
from rlpipe.tracking.mlflow_store import (
    MlflowRun,
    RunRecord,
    TrackingError,
    metric_history,
    project_root,
    resolve_uri,
    search_runs,
    source_run_id,
)
from rlpipe.tracking.tracker import Tracker, log_single_run, open_tracker

__all__ = [
    "COLUMNS",
    "ConsoleTable",
    "MetricsFiles",
    "MlflowRun",
    "RunRecord",
    "Tracker",
    "TrackingError",
    "flatten_params",
    "log_single_run",
    "metric_history",
    "open_tracker",
    "project_root",
    "resolve_uri",
    "search_runs",
    "source_run_id",
]
