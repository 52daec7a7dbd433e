"""rlpipe as DVC stages: every experiment keeps its data, and ``rlpipe gc`` frees what DVC forgot.

Inside a DVC experiment (``DVC_EXP_NAME`` set: ``dvc exp run`` in the workspace, ``--temp``,
``--queue``) a stage trains into ``<project>/data/exps/<name>/<exp_name>/`` (:mod:`rlpipe.runs`),
outside DVC's temporary workspace, and then *publishes* the small files DVC tracks —
``metrics.json``, ``curve.csv``, ``eval/metrics.json``, ``reupdate/…`` and ``run.json`` naming the
run dir — into the workspace's ``data/<exp_name>/``, so ``dvc exp show/diff/plots`` and the
experiment's commit carry them. Without ``DVC_EXP_NAME`` (``dvc repro``) the run dir is the
workspace's ``data/<exp_name>`` as before.

The downstream stages (``evaluate``, ``reupdate``) read ``run.json`` to find the run dir, so after
``dvc exp apply <exp>`` they work on that experiment's data. ``gc`` deletes the run dirs no git ref
(branch, tag, DVC experiment) and no workspace ``run.json`` names, except runs still in progress.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rlpipe import config
from rlpipe.artifacts.atomic import atomic_write_json, delete_tree
from rlpipe.artifacts.layout import RunLayout
from rlpipe.config import RunConfig
from rlpipe.runs import (
    RUN_POINTER,
    data_root,
    experiment_data_dir,
    exps_dir,
    project_root,
    read_pointer,
)

__all__ = ["ACTIVE_LOCK", "gc", "kept_run_dirs", "publish", "run_stage", "running", "stage_config"]

ACTIVE_LOCK = ".active.lock"
"""File in ``data/exps/<name>/`` that a running stage holds an ``flock`` on (``gc`` skips it)."""


def published(layout: RunLayout) -> list[Path]:
    """Files of a run dir that DVC tracks (metrics/plots, ``cache: false``), copied to the workspace."""
    reupdate = RunLayout(layout.reupdate)
    return [layout.metrics, layout.curve, layout.eval_metrics, reupdate.metrics, reupdate.curve]


def workspace_dir(cfg: RunConfig) -> Path:
    """``data/<exp_name>`` of the (possibly temporary) DVC workspace, as dvc.yaml names it."""
    return Path(cfg.trainer.data_dir) / cfg.trainer.exp_name


def stage_config(params: str | Path = "params.yaml", stage: str = "train") -> tuple[RunConfig, Path]:
    """``(cfg, workspace results folder)`` for a DVC stage; ``cfg.run_dir`` is where it works.

    ``train`` in an experiment: ``trainer.data_dir`` becomes ``<project>/data/exps/<DVC_EXP_NAME>``.
    ``evaluate``/``reupdate``: the run dir the workspace's ``run.json`` names (the last ``train``
    of this workspace, or the experiment applied with ``dvc exp apply``).
    """
    cfg = config.load(params)
    workspace = workspace_dir(cfg)
    name = os.environ.get("DVC_EXP_NAME")
    if stage == "train":
        if name:
            cfg.trainer.data_dir = str(experiment_data_dir(name, project_root(), cfg.trainer.data_dir))
        return cfg, workspace
    pointer = read_pointer(workspace) or {}
    run_dir = Path(pointer.get("run_dir") or workspace)
    run_dir = run_dir if run_dir.is_absolute() else project_root() / run_dir
    if run_dir.name != cfg.trainer.exp_name:
        raise config.ConfigError(f"{workspace / RUN_POINTER}: names {run_dir}, not a run of "
                                 f"trainer.exp_name={cfg.trainer.exp_name!r}; re-run the train stage")
    cfg.trainer.data_dir = str(run_dir.parent)
    return cfg, workspace


def publish(cfg: RunConfig, workspace: Path) -> None:
    """Copy the run dir's DVC-tracked small files into ``workspace`` and point ``run.json`` at it."""
    workspace.mkdir(parents=True, exist_ok=True)
    if cfg.run_dir.resolve() != workspace.resolve():
        for source in published(RunLayout(cfg.run_dir)):
            if source.is_file():
                target = workspace / source.relative_to(cfg.run_dir)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
    root, run_dir = project_root(), cfg.run_dir.resolve()
    pointer = {"dvc_exp_name": os.environ.get("DVC_EXP_NAME"),
               "run_dir": str(run_dir.relative_to(root) if run_dir.is_relative_to(root) else run_dir)}
    atomic_write_json(workspace / RUN_POINTER, pointer)


@contextlib.contextmanager
def running(cfg: RunConfig) -> Iterator[None]:
    """Hold an ``flock`` on ``data/exps/<name>/.active.lock`` while an experiment's stage runs.

    The kernel drops it when the process ends, however it ends, so ``gc`` can tell a running
    experiment (no git ref yet) from the leftovers of a failed one. Outside experiments: nothing.
    """
    if not os.environ.get("DVC_EXP_NAME"):
        yield
        return
    folder = Path(cfg.trainer.data_dir)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ACTIVE_LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_SH)  # shared: the stages of one experiment run one by one anyway
        yield


def _is_active(folder: Path) -> bool:
    lock = folder / ACTIVE_LOCK
    if not lock.is_file():
        return False
    with open(lock, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


def run_stage(stage: str, work: Callable[[RunConfig], Any], params: str | Path = "params.yaml") -> None:
    """One DVC stage: resolve its run dir, hold the experiment's lock, ``work(cfg)``, publish."""
    cfg, workspace = stage_config(params, stage)
    with running(cfg):
        work(cfg)
        publish(cfg, workspace)


# ----------------------------------------------------------------------------------------------- gc


def _git(root: Path, *args: str) -> str:
    result = subprocess.run(["git", "--no-optional-locks", *args], cwd=root, capture_output=True,
                            text=True, timeout=60)
    return result.stdout if result.returncode == 0 else ""


def _pointers_in_git(root: Path) -> Iterator[dict[str, Any]]:
    """Every ``run.json`` in the tree of every branch, tag and DVC experiment ref."""
    refs = _git(root, "for-each-ref", "--format=%(objectname) %(refname)",
                "refs/heads", "refs/tags", "refs/exps").split("\n")
    commits = {line.split(" ", 1)[0] for line in refs if line and "/stash" not in line}
    for commit in sorted(commits):
        for rel in _git(root, "ls-tree", "-r", "--name-only", commit).splitlines():
            if rel.endswith(f"/{RUN_POINTER}"):
                with contextlib.suppress(ValueError):
                    yield json.loads(_git(root, "show", f"{commit}:{rel}") or "null") or {}


def kept_run_dirs(root: Path) -> set[Path]:
    """Run dirs something still names: a workspace ``run.json`` or one in any git ref."""
    pointers = [p for p in (read_pointer(f.parent) for f in data_root(root).glob(f"*/{RUN_POINTER}")) if p]
    pointers += list(_pointers_in_git(root))
    kept = set()
    for pointer in pointers:
        if isinstance(pointer, dict) and pointer.get("run_dir"):
            path = Path(pointer["run_dir"])
            kept.add((path if path.is_absolute() else root / path).resolve())
    return kept


def gc(root: Path | None = None, dry_run: bool = False) -> list[tuple[Path, int]]:
    """Delete ``data/exps/<name>`` folders no longer named by any experiment, branch or workspace.

    A folder whose experiment is still running (its ``flock`` held) is kept. Returns the deleted
    (or, with ``dry_run``, deletable) folders with their sizes in bytes.
    """
    root = (root or project_root()).resolve()
    folder = exps_dir(root)
    if not folder.is_dir():
        return []
    kept = kept_run_dirs(root)
    freed = []
    for exp in sorted(p for p in folder.iterdir() if p.is_dir()):
        runs = {p.resolve() for p in exp.iterdir() if p.is_dir()}
        if runs & kept or _is_active(exp):
            continue
        freed.append((exp, _size(exp)))
        if not dry_run:
            delete_tree(exp)
    return freed


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
