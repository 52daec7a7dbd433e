"""What a user sees in the MLflow UI: the classic runs view of an experiment with its key columns.

MLflow 3 opens an experiment on its GenAI pages unless the experiment says it holds model training
(tag ``mlflow.experimentKind``), and its runs table shows no param or metric column until the user
picks them. rlpipe therefore tags every experiment it writes to with:

* ``mlflow.experimentKind: custom_model_development`` — the experiment page opens on *Runs*;
* ``mlflow.note.content`` — the experiment's description (what the runs are, how to compare them);
* ``mlflow.sharedViewState.rlpipe`` — a saved view (MLflow's "share view" format) whose table shows
  the key params and final metrics (:data:`KEY_PARAMS`, :data:`KEY_METRICS`), newest run first.

MLflow 3's UI starts in its GenAI mode whatever the experiment says (a per-browser setting), so
:func:`ui_url` asks for the "Model training" mode in the link it builds:
``#/experiments/<id>/runs?workflowType=machine_learning&viewStateShareKey=rlpipe`` (the URL
parameters of MLflow 3.17's UI).

Only the standard library is imported here: the trainer prints :func:`ui_command` in its banner.
"""

from __future__ import annotations

import json

__all__ = ["KEY_METRICS", "KEY_PARAMS", "VIEW_KEY", "experiment_tags", "run_line", "ui_command", "ui_url"]

KEY_PARAMS = (
    "env.id",
    "algorithm.name",
    "trainer.num_envs",
    "trainer.buffer_size",
    "trainer.seed",
    "algorithm.cfg.learning_rate",
    "algorithm.cfg.clip_coef",
    "rlpipe.params_hash",
)
"""Param columns of the saved runs view (``rlpipe.params_hash`` is a tag)."""
KEY_METRICS = ("eval/return_mean", "train/episode_return_mean", "env_steps", "time/sps")
"""Metric columns of the saved runs view (their latest values: the final ones of a finished run)."""
VIEW_KEY = "rlpipe"
"""``viewStateShareKey`` of the saved view."""
DEFAULT_PORT = 5000
"""``mlflow ui``'s default port."""


def _column(kind: str, key: str) -> str:
    """MLflow's canonical column id: ``params.`env.id```."""
    return f"{kind}.`{key}`"


def view_state() -> dict[str, object]:
    """The saved runs view: key columns, newest run first, the table (not the charts) shown."""
    columns = [
        *(_column("params", k) for k in KEY_PARAMS[:-1]),
        _column("tags", KEY_PARAMS[-1]),
        *(_column("metrics", k) for k in KEY_METRICS),
    ]
    return {
        "orderByKey": "attributes.start_time",
        "orderByAsc": False,
        "selectedColumns": columns,
        "runListHidden": False,
        "viewMaximized": False,
    }


def experiment_tags(name: str) -> dict[str, str]:
    """Tags set on experiment ``name`` so the UI opens on its runs with the key columns."""
    note = (
        f"rlpipe runs of `trainer.exp_name: {name}` (one MLflow run per `rlpipe run`, `replay` "
        "and `eval`; step = env steps). Params are the resolved params.yaml, flattened; the "
        "run's `rlpipe.run_dir` tag names its run directory. Compare runs in a terminal with "
        f"`rlpipe compare --experiment {name} --plot curves.png`."
    )
    return {
        "mlflow.experimentKind": "custom_model_development",
        "mlflow.note.content": note,
        f"mlflow.sharedViewState.{VIEW_KEY}": json.dumps(view_state()),
    }


def ui_command(uri: str) -> str:
    """The command that serves ``uri`` in the MLflow UI (an http(s) server already does)."""
    if uri.startswith(("http://", "https://")):
        return f"open {uri}"
    return f"mlflow ui --backend-store-uri {uri}"


def ui_url(uri: str, experiment_id: str | None) -> str:
    """The runs view of ``experiment_id`` with rlpipe's saved columns, on ``uri``'s UI."""
    base = uri.rstrip("/") if uri.startswith(("http://", "https://")) else f"http://127.0.0.1:{DEFAULT_PORT}"
    if experiment_id is None:
        return base
    query = f"workflowType=machine_learning&viewStateShareKey={VIEW_KEY}"
    return f"{base}/#/experiments/{experiment_id}/runs?{query}"


def run_line(experiment: str, run_id: str, uri: str, experiment_id: str | None) -> str:
    """The console line that says where an MLflow run is and how to open it, e.g.

    ``  MLflow  run 5e1d0c2a… (experiment cartpole_ppo): mlflow ui --backend-store-uri sqlite:///…
    → http://127.0.0.1:5000/#/experiments/1/runs?…&viewStateShareKey=rlpipe``
    """
    return (
        f"  MLflow  run {run_id} (experiment {experiment}): {ui_command(uri)} → {ui_url(uri, experiment_id)}"
    )
