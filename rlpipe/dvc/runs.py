"""Find a run's data after the fact: by path, or by the name of the DVC experiment that made it.

Every DVC experiment (workspace, ``--temp``, ``--queue``) trains into its own run directory under
the project, keyed by the experiment's name, so no experiment overwrites another and none is
deleted with DVC's temporary workspace::

    <project>/data/exps/<dvc-exp-name>/<trainer.exp_name>/   rollouts/, checkpoints/, params.yaml,
                                                             metrics.json, curve.csv, eval/, reupdate/
    <workspace>/results/<trainer.exp_name>/run.json          which run dir the workspace's results
                                                             (metrics.json, curve.csv) came from

``data/`` is ignored by git as a whole and ``results/`` holds only the small files DVC commits.
They must not share a folder: ``dvc exp apply`` stashes the workspace's untracked files with
libgit2, which deletes an untracked folder whole, ignored files included — every rollout and
checkpoint of a run dir holding an uncommitted ``metrics.json`` (tests/dvc/test_experiments.py).

``resolve_run_dir("clip01")`` → ``data/exps/clip01/cartpole_ppo``; ``resolve_path`` also maps
``clip01/rollouts/iter-000002.zarr`` below it. Existing paths are taken as they are.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml

from rlpipe.artifacts.layout import RUN_POINTER, RunLayout
from rlpipe.location import AnyPath, is_url, location

__all__ = [
    "EXPS_DIR",
    "RESULTS_DIR",
    "RUN_POINTER",
    "RunDirError",
    "data_root",
    "experiment_data_dir",
    "exps_dir",
    "known_experiments",
    "project_root",
    "read_pointer",
    "resolve_path",
    "resolve_run_dir",
    "resolve_target",
]

EXPS_DIR = "exps"
"""Folder below ``trainer.data_dir`` holding one folder per DVC experiment."""
RESULTS_DIR = "results"
"""Project folder of the DVC stages' small, git-tracked files: ``results/<trainer.exp_name>/``."""


class RunDirError(ValueError):
    """No run directory or DVC experiment matches what the user named (one line)."""


def project_root(start: Path | None = None) -> Path:
    """The absolute project folder (``data/`` and the default ``data/mlflow.db`` live below it).

    ``$DVC_ROOT`` when DVC runs us (inside a queued experiment's temporary copy DVC sets it to the
    main repo), else the nearest folder up from ``start`` (cwd) holding ``dvc.yaml`` or
    ``pyproject.toml``, else ``start`` itself.
    """
    if os.environ.get("DVC_ROOT"):
        return Path(os.environ["DVC_ROOT"]).resolve()
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "dvc.yaml").is_file() or (folder / "pyproject.toml").is_file():
            return folder
    return here


def data_root(root: Path) -> Path:
    """``trainer.data_dir`` of the project's ``params.yaml`` (default ``data``), made absolute."""
    try:
        params = yaml.safe_load((root / "params.yaml").read_text()) or {}
        data_dir = str((params.get("trainer") or {}).get("data_dir") or "data")
    except (OSError, yaml.YAMLError, AttributeError):
        data_dir = "data"
    return Path(data_dir) if Path(data_dir).is_absolute() else root / data_dir


def exps_dir(root: Path | None = None, data_dir: str | Path | None = None) -> Path:
    """``<data_dir>/exps`` of the project: where DVC experiments keep their run dirs."""
    root = root or project_root()
    if data_dir is None:
        return data_root(root) / EXPS_DIR
    base = Path(data_dir)
    return (base if base.is_absolute() else root / base) / EXPS_DIR


def experiment_data_dir(name: str, root: Path | None = None, data_dir: str | Path | None = None) -> Path:
    """The ``trainer.data_dir`` an experiment trains with: ``<project>/<data_dir>/exps/<name>``."""
    if not name or name in (".", "..") or "/" in name or "\\" in name:
        raise RunDirError(f"DVC_EXP_NAME: {name!r} is not usable as a folder name")
    return exps_dir(root, data_dir) / name


def read_pointer(folder: Path) -> dict[str, Any] | None:
    """``<folder>/run.json`` as a dict, or ``None`` when it is missing or unreadable."""
    try:
        data = json.loads((Path(folder) / RUN_POINTER).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _is_run_dir(path: Path) -> bool:
    layout = RunLayout(path)
    return path.is_dir() and any(
        p.exists()
        for p in (layout.params, layout.rollouts, layout.checkpoints, layout.metrics, path / RUN_POINTER)
    )


def _follow_pointer(path: Path, root: Path) -> Path:
    """A workspace results folder without data of its own → the run dir its ``run.json`` names."""
    pointer = read_pointer(path)
    if pointer is None or RunLayout(path).holds_run() or not pointer.get("run_dir"):
        return path
    target = Path(pointer["run_dir"])
    target = target if target.is_absolute() else root / target
    if not target.is_dir():
        name = pointer.get("dvc_exp_name") or target
        raise RunDirError(
            f"{path / RUN_POINTER}: the run dir of experiment {name} ({target}) no longer "
            "exists (removed by `rlpipe gc`?)"
        )
    return target


def _single_run(folder: Path, name: str) -> Path:
    runs = sorted(child for child in folder.iterdir() if _is_run_dir(child))
    if len(runs) == 1:
        return runs[0]
    if not runs:
        raise RunDirError(f"{name}: {folder} holds no run (no params.yaml, rollouts or checkpoints)")
    choices = ", ".join(f"{name}/{run.name}" for run in runs)
    raise RunDirError(f"{name}: experiment holds several runs; name one of: {choices}")


def _url_run_dir(path: AnyPath) -> AnyPath:
    """A run directory on an object store: itself, once it is checked to be one (one line if not)."""
    from rlpipe.artifacts.fs import probe

    probe(path)
    layout = RunLayout(path)
    if layout.params.is_file() or layout.holds_run():
        return path
    raise RunDirError(f"{path}: not a run directory (no params.yaml, rollouts or checkpoints there)")


def known_experiments(root: Path | None = None) -> list[str]:
    """Names of the experiments that have a run dir in this project, sorted."""
    folder = exps_dir(root)
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def resolve_run_dir(name_or_path: str | Path, root: Path | None = None) -> AnyPath:
    """The run dir meant by ``name_or_path``.

    * an existing run dir → itself; a folder holding a ``run.json`` but no data (the workspace's
      ``results/<exp>``, or an experiment that only re-ran ``evaluate``/``reupdate``) → the run dir
      its ``run.json`` names;
    * ``data/exps/<name>`` → its single run;
    * a DVC experiment name (``clip01``) or ``name/<exp_name>`` → ``<data_dir>/exps/<name>/<exp_name>``.

    Raises :class:`RunDirError` naming what was asked and the experiments that do exist.
    """
    if is_url(name_or_path):
        return _url_run_dir(location(name_or_path))
    root = root or project_root()
    path = Path(name_or_path)
    if path.is_dir():
        if _is_run_dir(path):
            return _follow_pointer(path, root)
        if path.resolve().parent == exps_dir(root).resolve():
            return _follow_pointer(_single_run(path, path.name), root)
    name = str(name_or_path)
    head, _, rest = name.partition("/")
    folder = exps_dir(root) / head
    if head and folder.is_dir() and not path.is_absolute():
        if rest and _is_run_dir(folder / rest):
            return _follow_pointer(folder / rest, root)
        if not rest:
            return _follow_pointer(_single_run(folder, head), root)
    known = known_experiments(root)
    listed = ", ".join(known[:20]) + (" …" if len(known) > 20 else "") if known else "none yet"
    if path.is_dir():
        raise RunDirError(
            f"{path}: not a run directory (no params.yaml); pass a params file, the folder "
            "of a run made by `rlpipe run`, or a DVC experiment name "
            f"(experiments with data: {listed})"
        )
    raise RunDirError(
        f"{name}: no run directory and no DVC experiment of that name under "
        f"{exps_dir(root)} (experiments with data: {listed})"
    )


def resolve_target(target: str | Path, root: Path | None = None) -> AnyPath:
    """What an offline command's ``RUN_DIR|EXP|PARAMS`` argument names.

    A params file as it is (a missing one is reported by the loader), else the run dir of
    :func:`resolve_run_dir` (a path, a workspace results folder, an experiment name).
    """
    if is_url(target):
        url = location(target)
        return url if url.suffix in (".yaml", ".yml", ".json") else _url_run_dir(url)
    path = Path(target)
    if path.is_file() or path.suffix in (".yaml", ".yml", ".json"):
        return path  # a missing params file is reported as such by the loader
    return resolve_run_dir(path, root)


def resolve_path(path: str | Path, root: Path | None = None) -> AnyPath:
    """A run, or a file or folder of one, by path or below a DVC experiment's run dir.

    A workspace results folder (``run.json``, no data) is the run dir it names; another existing
    path is taken as is; else ``<exp-name>[/<exp_name>][/<rest>]`` is ``<rest>`` below that
    experiment's run dir (``clip01``, ``clip01/rollouts/iter-000002.zarr``), as is ``<rest>``
    below a workspace results folder; else the path unchanged (the command then reports it missing).
    """
    if is_url(path):
        return location(path)
    candidate = Path(path)
    if candidate.is_dir() and read_pointer(candidate) is not None:
        return resolve_run_dir(candidate, root)
    if candidate.exists() or candidate.is_absolute():
        return candidate
    parts = candidate.parts
    for cut in sorted({len(parts), 2, 1}, reverse=True):  # the longest prefix that names a run
        if cut <= len(parts):
            try:
                return resolve_run_dir("/".join(parts[:cut]), root).joinpath(*parts[cut:])
            except RunDirError:
                continue
    return candidate
