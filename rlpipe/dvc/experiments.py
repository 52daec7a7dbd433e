"""rlpipe as DVC stages: every experiment keeps its data, and ``rlpipe gc`` frees what DVC forgot.

Inside a DVC experiment (``DVC_EXP_NAME`` set: ``dvc exp run`` in the workspace, ``--temp``,
``--queue``) a stage trains into ``<project>/data/exps/<name>/<exp_name>/`` (:mod:`rlpipe.dvc.runs`),
outside DVC's temporary workspace, and then *publishes* the small files DVC tracks —
``metrics.json``, ``curve.csv``, ``eval/metrics.json``, ``reupdate/…`` and ``run.json`` naming the
run dir — into the workspace's ``results/<exp_name>/``, so ``dvc exp show/diff/plots`` and the
experiment's commit carry them. Without ``DVC_EXP_NAME`` (``dvc repro``) the run dir is
``data/<exp_name>``, and its small files are published to ``results/<exp_name>/`` the same way.
``data/`` is ignored by git as a whole: no git operation of DVC's touches a rollout (see
:mod:`rlpipe.dvc.runs` for the ``dvc exp apply`` hazard this layout avoids).

The downstream stages (``evaluate``, ``reupdate``) read ``run.json`` to find the run dir, so after
``dvc exp apply <exp>`` they work on that experiment's data. ``gc`` deletes the folders of
experiments that no longer exist, unless a git ref (branch, tag) or the workspace's ``run.json``
still names their run dir or their stage is still running.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from rlpipe import config
from rlpipe.artifacts.atomic import atomic_write_json
from rlpipe.artifacts.layout import RunLayout
from rlpipe.artifacts.removal import delete
from rlpipe.config import RunConfig
from rlpipe.dvc.runs import (
    RESULTS_DIR,
    RUN_POINTER,
    experiment_data_dir,
    exps_dir,
    project_root,
    read_pointer,
)

__all__ = [
    "ACTIVE_LOCK",
    "ExperimentsUnreadable",
    "StageDirs",
    "gc",
    "kept_run_dirs",
    "publish",
    "run_stage",
    "running",
    "stage_config",
]

ACTIVE_LOCK = ".active.lock"
"""File in ``data/exps/<name>/`` that a running stage holds an ``flock`` on (``gc`` skips it)."""


def published(layout: RunLayout) -> list[Path]:
    """Files of a run dir that DVC tracks (metrics/plots, ``cache: false``), copied to the workspace."""
    reupdate = RunLayout(layout.reupdate)
    files = [layout.metrics, layout.curve, layout.eval_metrics, reupdate.metrics, reupdate.curve]
    return cast(list[Path], files)  # a DVC stage's run dir is a local folder


@dataclass(frozen=True)
class StageDirs:
    """Where one DVC stage reads and writes."""

    cfg: RunConfig
    """The params; ``cfg.run_dir`` is the run whose rollouts and checkpoints the stage uses."""
    out: Path
    """Where the stage writes (``eval/``, ``reupdate/`` …): ``cfg.run_dir``, except in an
    experiment that re-runs only downstream stages on an earlier run's data: then its own folder."""
    workspace: Path
    """``results/<exp_name>`` of the (possibly temporary) DVC workspace, as dvc.yaml names it."""


def stage_config(params: str | Path = "params.yaml", stage: str = "train") -> StageDirs:
    """Resolve the folders of a DVC stage.

    ``train`` in an experiment: ``trainer.data_dir`` becomes ``<project>/data/exps/<DVC_EXP_NAME>``.
    ``evaluate``/``reupdate``: the run dir the workspace's ``run.json`` names (the last ``train``
    of this workspace, or the experiment applied with ``dvc exp apply``). An experiment whose
    ``train`` was skipped (only ``replay``/``eval`` params changed) writes to its own folder, which
    gets a ``run.json`` naming the run it read, so no experiment overwrites another's outputs.
    """
    cfg = config.load(params)
    workspace = Path(RESULTS_DIR) / cfg.trainer.exp_name
    name, root = os.environ.get("DVC_EXP_NAME"), project_root()
    own = experiment_data_dir(name, root, cfg.trainer.data_dir) / cfg.trainer.exp_name if name else None
    if stage == "train":
        if own is not None:
            cfg.trainer.data_dir = str(own.parent)
        return StageDirs(cfg, _local_run_dir(cfg), workspace)
    pointer = read_pointer(workspace) or {}
    run_dir = Path(pointer.get("run_dir") or Path(cfg.trainer.data_dir) / cfg.trainer.exp_name)
    run_dir = run_dir if run_dir.is_absolute() else root / run_dir
    if run_dir.name != cfg.trainer.exp_name:
        raise config.ConfigError(
            f"{workspace / RUN_POINTER}: names {run_dir}, not a run of "
            f"trainer.exp_name={cfg.trainer.exp_name!r}; re-run the train stage"
        )
    cfg.trainer.data_dir = str(run_dir.parent)
    if own is None or own.resolve() == run_dir.resolve():
        return StageDirs(cfg, _local_run_dir(cfg), workspace)
    own.mkdir(parents=True, exist_ok=True)
    atomic_write_json(own / RUN_POINTER, _pointer(run_dir, root, pointer.get("dvc_exp_name")))
    return StageDirs(cfg, own, workspace)


def _local_run_dir(cfg: RunConfig) -> Path:
    return cast(Path, cfg.run_dir)  # a DVC stage's run dir is a local folder


def _pointer(run_dir: Path, root: Path, name: str | None) -> dict[str, Any]:
    run_dir = run_dir.resolve()
    return {
        "dvc_exp_name": name,
        "run_dir": str(run_dir.relative_to(root) if run_dir.is_relative_to(root) else run_dir),
    }


def publish(dirs: StageDirs, pointer: bool = False) -> None:
    """Copy the DVC-tracked small files of ``dirs.out`` into the workspace.

    ``pointer`` (the ``train`` stage): also write the workspace's ``run.json`` naming the run dir.
    """
    workspace = dirs.workspace
    workspace.mkdir(parents=True, exist_ok=True)
    if dirs.out.resolve() != workspace.resolve():
        for source in published(RunLayout(dirs.out)):
            if source.is_file():
                target = workspace / source.relative_to(dirs.out)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
    if pointer:
        name = os.environ.get("DVC_EXP_NAME")
        atomic_write_json(workspace / RUN_POINTER, _pointer(_local_run_dir(dirs.cfg), project_root(), name))


@contextlib.contextmanager
def running(dirs: StageDirs) -> Iterator[None]:
    """Hold an ``flock`` on ``data/exps/<name>/.active.lock`` while an experiment's stage runs.

    The kernel drops it when the process ends, however it ends, so ``gc`` can tell a running
    experiment (no git ref yet) from the leftovers of a failed one. Outside experiments: nothing.
    """
    if not os.environ.get("DVC_EXP_NAME"):
        yield
        return
    folder = dirs.out.parent
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ACTIVE_LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_SH)  # shared: the stages of one experiment run one by one anyway
        yield


def run_stage(
    stage: str, work: Callable[[RunConfig, RunLayout], Any], params: str | Path = "params.yaml"
) -> None:
    """One DVC stage: resolve its folders, hold the experiment's lock, ``work(cfg, out)``, publish.

    ``out`` is the layout of :attr:`StageDirs.out`, where the stage writes its outputs.
    """
    dirs = stage_config(params, stage)
    with running(dirs):
        work(dirs.cfg, RunLayout(dirs.out))
        publish(dirs, pointer=stage == "train")


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


# ----------------------------------------------------------------------------------------------- gc


class ExperimentsUnreadable(ValueError):
    """``rlpipe gc`` cannot tell which experiments exist (no git/DVC project, git failing): nothing goes."""


def _git(root: Path, *args: str) -> str:
    """``git ARGS`` in ``root``; its output, or :class:`ExperimentsUnreadable` when git fails in any way."""
    try:
        result = subprocess.run(
            ["git", "--no-optional-locks", *args], cwd=root, capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise _unreadable(root, f"git {args[0]} could not run ({exc})") from None
    if result.returncode != 0:
        said = (result.stderr.strip().splitlines() or [""])[0].strip()[:200]  # git's "fatal: …" line
        raise _unreadable(root, f"git {args[0]} failed (exit {result.returncode}: {said})")
    return result.stdout


def _unreadable(root: Path, why: str) -> ExperimentsUnreadable:
    return ExperimentsUnreadable(
        f"{root}: cannot tell which DVC experiments exist: {why}; rlpipe gc deletes "
        "nothing it cannot prove unused"
    )


def _check_project(root: Path) -> None:
    """:class:`ExperimentsUnreadable` unless ``root`` is inside a git repository and a DVC project."""
    toplevel = Path(_git(root, "rev-parse", "--show-toplevel").strip()).resolve()
    folders = [root, *(p for p in root.parents if p.is_relative_to(toplevel))]
    if not any((folder / ".dvc").is_dir() for folder in folders):
        raise _unreadable(
            root,
            f"not a DVC project (no .dvc/ folder in {root} or above it up to {toplevel}; "
            "run `dvc init` first)",
        )


def _workspace_pointers(root: Path) -> list[dict[str, Any]]:
    """Every ``results/*/run.json`` of the workspace; one it cannot read is :class:`ExperimentsUnreadable`."""
    pointers = []
    for path in sorted((root / RESULTS_DIR).glob(f"*/{RUN_POINTER}")):
        try:
            pointers.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            where = path.relative_to(root)
            raise _unreadable(root, f"{where}: unreadable ({exc}); fix or remove it") from None
    return pointers


def _pointers_in_git(root: Path) -> Iterator[dict[str, Any]]:
    """Every ``run.json`` in the tree of every branch, tag and DVC experiment ref."""
    refs = _git(
        root, "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads", "refs/tags", "refs/exps"
    ).split("\n")
    commits = {line.split(" ", 1)[0] for line in refs if line and "/stash" not in line}
    for commit in sorted(commits):
        for rel in _git(root, "ls-tree", "-r", "--name-only", commit).splitlines():
            if rel.endswith(f"/{RUN_POINTER}"):
                with contextlib.suppress(ValueError):
                    yield json.loads(_git(root, "show", f"{commit}:{rel}") or "null") or {}


def experiment_names(root: Path) -> set[str]:
    """Names of the DVC experiments that exist (``refs/exps/<baseline>/<name>`` git refs)."""
    refs = _git(root, "for-each-ref", "--format=%(refname)", "refs/exps").split()
    return {ref.split("/")[-1] for ref in refs if len(ref.split("/")) == 5}


def kept_run_dirs(root: Path) -> set[Path]:
    """Run dirs something still names: a workspace ``run.json`` or one in any git ref."""
    pointers = _workspace_pointers(root) + list(_pointers_in_git(root))
    kept = set()
    for pointer in pointers:
        if isinstance(pointer, dict) and pointer.get("run_dir"):
            path = Path(pointer["run_dir"])
            kept.add((path if path.is_absolute() else root / path).resolve())
    return kept


def gc(root: Path | None = None, dry_run: bool = False) -> list[tuple[Path, int]]:
    """Delete ``data/exps/<name>`` folders no longer named by any experiment, branch or workspace.

    A folder whose experiment is still running (its ``flock`` held) is kept. A symbolic link there
    is unlinked, never followed (size 0). When the experiments cannot be read (not a git repository
    or DVC project, git failing, an unreadable workspace ``run.json``) nothing is deleted:
    :class:`ExperimentsUnreadable`. Returns the deleted (or, with ``dry_run``, deletable) entries
    with their sizes in bytes.
    """
    root = (root or project_root()).resolve()
    folder = exps_dir(root)
    if not folder.is_dir():
        return []
    _check_project(root)
    kept, names = kept_run_dirs(root), experiment_names(root)
    freed = []
    for exp in sorted(p for p in folder.iterdir() if p.is_dir() or p.is_symlink()):
        if exp.name in names or _runs(exp) & kept or _is_active(exp):
            continue
        freed.append((exp, 0 if exp.is_symlink() else _size(exp)))
        if not dry_run:
            delete(exp, within=folder)
    return freed


def _runs(exp: Path) -> set[Path]:
    """The run dirs in experiment folder ``exp``, resolved (none for a dangling link)."""
    return {p.resolve() for p in exp.iterdir() if p.is_dir()} if exp.is_dir() else set()


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
