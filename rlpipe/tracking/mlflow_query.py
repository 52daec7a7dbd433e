"""Reading MLflow runs back for ``rlpipe compare``: :func:`search_runs` and :func:`metric_history`."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rlpipe.tracking.mlflow_store import TrackingError, check_server, open_client, resolve_uri, sqlite_path

if TYPE_CHECKING:
    from mlflow.entities import Run
    from mlflow.tracking import MlflowClient

__all__ = ["RunRecord", "metric_history", "search_runs"]


@dataclass(frozen=True)
class RunRecord:
    """One MLflow run as ``rlpipe compare`` sees it (latest metric values, params, tags)."""

    run_id: str
    name: str
    experiment: str
    status: str
    start_ms: int
    end_ms: int | None
    params: dict[str, str]
    metrics: dict[str, float]
    tags: dict[str, str]

    @property
    def wall_s(self) -> float:
        """Seconds from start to end (to now while the run is still running)."""
        end = self.end_ms if self.end_ms else int(time.time() * 1000)
        return max(end - self.start_ms, 0) / 1000


def _open_store(uri: str | None) -> tuple[MlflowClient, str]:
    uri = uri or resolve_uri()
    db = sqlite_path(uri)
    if db is not None and not db.is_file():
        raise TrackingError(f"no MLflow store at {db}; train first (rlpipe run) or set MLFLOW_TRACKING_URI")
    check_server(uri)
    return open_client(uri), uri


def search_runs(
    uri: str | None = None, experiments: tuple[str, ...] = (), run_ids: tuple[str, ...] = ()
) -> list[RunRecord]:
    """Runs of ``experiments`` (default: all) or exactly ``run_ids``, oldest first."""
    from mlflow.exceptions import MlflowException

    client, uri = _open_store(uri)
    names = {e.experiment_id: e.name for e in client.search_experiments()}
    if run_ids:
        try:
            runs = [client.get_run(run_id) for run_id in run_ids]
        except MlflowException as exc:
            raise TrackingError(f"--runs: {str(exc).splitlines()[0]}") from None
    else:
        runs = _all_runs(client, _experiment_ids(names, experiments))
    records = [_record(run, names) for run in runs]
    return sorted(records, key=lambda r: r.start_ms)


def _experiment_ids(names: dict[str, str], wanted: tuple[str, ...]) -> list[str]:
    if not wanted:
        return list(names)
    ids = {name: exp_id for exp_id, name in names.items()}
    for name in wanted:
        if name not in ids:
            raise TrackingError(f"--experiment: no experiment {name!r}; accepted: {', '.join(sorted(ids))}")
    return [ids[name] for name in wanted]


def _all_runs(client: MlflowClient, experiment_ids: list[str]) -> list[Any]:
    runs: list[Any] = []
    token: str | None = None
    while True:
        page = client.search_runs(experiment_ids, max_results=1000, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def _record(run: Run, names: dict[str, str]) -> RunRecord:
    info, data = run.info, run.data
    return RunRecord(
        info.run_id,
        info.run_name or info.run_id[:8],
        names.get(info.experiment_id, "?"),
        info.status,
        int(info.start_time or 0),
        info.end_time,
        dict(data.params),
        dict(data.metrics),
        dict(data.tags),
    )


def metric_history(uri: str | None, run_ids: list[str], key: str) -> dict[str, list[tuple[int, float]]]:
    """``{run_id: [(step, value), ...]}`` of one metric, by step (step = env steps for training runs)."""
    client, _ = _open_store(uri)
    return {
        run_id: sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))
        for run_id in run_ids
    }
