"""``rlpipe exps``: DVC experiments as one narrow table — the params that differ and a few metrics.

``dvc exp show`` names every column by its full path (``algorithm.cfg.clip_coef``,
``results/<exp>/metrics.json:eval/return_mean``), which makes a table of two experiments wider than
a terminal. This reads ``dvc exp show --json`` and keeps: the experiment's name, each param whose
value differs between the rows (named by the shortest dotted suffix that is still unique), and the
chosen metrics (named by their key, taken from the first metrics file that has them).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

from rlpipe.config import ConfigError

__all__ = ["ExpRow", "changed_params", "experiment_rows", "read_exp_show", "render", "short_names"]


@dataclass
class ExpRow:
    """One row: the workspace, a baseline commit or an experiment on top of it."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    """Flattened ``params.yaml`` values (``algorithm.cfg.clip_coef``: 0.1)."""
    metrics: dict[str, float] = field(default_factory=dict)
    """Metric key → value, the first metrics file that has the key winning."""


def read_exp_show(cwd: str | None = None) -> list[dict[str, Any]]:
    """``dvc exp show --json`` of the DVC project at ``cwd``; a ``ConfigError`` in DVC's words if it fails."""
    command = [sys.executable, "-m", "dvc", "exp", "show", "--json"]  # this environment's DVC
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        detail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise ConfigError(f"rlpipe exps: dvc exp show failed: {detail.removeprefix('ERROR: ')}")
    return json.loads(result.stdout)


def experiment_rows(shown: list[dict[str, Any]]) -> list[ExpRow]:
    """The rows of ``dvc exp show --json``: each commit, then its experiments, in DVC's order."""
    rows = []
    for commit in shown:
        rows.append(_row(commit, _name(commit)))
        for experiment in commit.get("experiments") or []:
            for rev in experiment.get("revs") or []:
                rows.append(_row(rev, f"  {_name(rev)}"))
    return rows


def changed_params(rows: list[ExpRow]) -> list[str]:
    """Param paths whose values are not the same in every row, in ``params.yaml`` order."""
    paths: dict[str, None] = {}
    for row in rows:
        paths.update(dict.fromkeys(row.params))
    return [path for path in paths if len({json.dumps(row.params.get(path)) for row in rows}) > 1]


def short_names(paths: list[str]) -> dict[str, str]:
    """Each dotted path → its shortest suffix (``clip_coef``, ``actor.lr``) unique among ``paths``."""
    names = {}
    for path in paths:
        parts = path.split(".")
        names[path] = path  # a path that ends another one keeps its whole name
        for size in range(1, len(parts)):
            suffix = ".".join(parts[-size:])
            if sum(other == suffix or other.endswith("." + suffix) for other in paths) == 1:
                names[path] = suffix
                break
    return names


def render(rows: list[ExpRow], metrics: tuple[str, ...], width: int | None = 120) -> str:
    """The table as text: experiment, the changed params (short names), then ``metrics``."""
    from rich.console import Console
    from rich.table import Table

    params = changed_params(rows)
    names = short_names(params)
    table = Table(box=None, pad_edge=False)
    table.add_column("Experiment", no_wrap=True)
    for path in params:
        table.add_column(names[path], justify="right")
    for key in metrics:
        table.add_column(key, justify="right")
    for row in rows:
        cells = [
            row.name,
            *(_cell(row.params.get(path)) for path in params),
            *(_cell(row.metrics.get(key)) for key in metrics),
        ]
        table.add_row(*cells)
    out = io.StringIO()
    Console(width=width or 10_000, file=out, color_system=None).print(table)
    return out.getvalue()


def _name(entry: dict[str, Any]) -> str:
    """An entry's name, else its revision: ``workspace`` as is, a commit's hash shortened."""
    rev = str(entry.get("rev", ""))
    return entry.get("name") or (rev if rev == "workspace" else rev[:7])


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _row(entry: dict[str, Any], name: str) -> ExpRow:
    data = entry.get("data") or {}
    params: dict[str, Any] = {}
    for content in (data.get("params") or {}).values():
        params.update(_flatten(content.get("data") or {}))
    metrics: dict[str, float] = {}
    for content in (data.get("metrics") or {}).values():
        for key, value in _flatten(content.get("data") or {}).items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                metrics.setdefault(key, float(value))
    return ExpRow(name, params, metrics)


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, path + "."))
        else:
            flat[path] = value
    return flat
