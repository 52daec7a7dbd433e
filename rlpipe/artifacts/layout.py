"""Every name in a run directory, in one place: files, folders, numbered patterns, listing.

A run directory (``<trainer.data_dir>/<trainer.exp_name>``)::

    params.yaml                  the resolved params of the run (offline commands need nothing else)
    rollouts/iter-000001.zarr    one Zarr v3 group per iteration (``…/rank-R`` shards when distributed)
    rollouts/rejected/           rollouts refused by the non-finite guard, kept for post-mortem
    rollouts/superseded-1/       the stores of a run stopped before its first checkpoint, set aside by
                                 the ``--resume`` that started it over (``-2``, … for later ones)
    checkpoints/ckpt-000001.pt   + ``ckpt-000001.pt.sha256`` checksums, ``latest`` and ``best`` pointers
    eval/, reupdate/, updated/, collected/, advantages/   derived outputs (never inside rollouts/)
    eval/video-iter-000012.mp4   the eval video after iteration 12 (``eval.video``)
    export/policy.onnx           ``rlpipe export`` (+ ``policy.onnx.json``; ``policy.pt`` for TorchScript)
    frames/iter-000003-pixels-env-0/t-000000.png   ``rlpipe inspect --frames`` (or ``….mp4``)
    metrics.json, curve.csv      small files for ``dvc metrics`` / ``dvc plots``
    .lock                        held by the one process writing here (pid, host)
    run.json                     a DVC experiment's pointer to the run it read (rlpipe.dvc.runs)
    .<name>.tmp-<pid>-<hex>      a write in progress (``.del-``: a delete); a dead process's goes at start

No other module spells one of these names or patterns: they ask this one.
"""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from rlpipe.artifacts.fs import AnyPath, as_path

__all__ = [
    "BEST",
    "CHECKPOINT_NAME",
    "CHECKSUM_SUFFIX",
    "EXPORT_FILES",
    "LATEST",
    "LOCK",
    "RUN_POINTER",
    "ROLLOUT_NAME",
    "SHARD_NAME",
    "SUPERSEDED_NAME",
    "TEMPORARY_NAME",
    "RunLayout",
    "checkpoint_name",
    "checksum_path",
    "enclosing_run_dir",
    "iteration_from_name",
    "lock_path",
    "numbered",
    "rollout_name",
    "shard_name",
    "temporary_name",
]

ROLLOUT_NAME = re.compile(r"^iter-(\d{6,})\.zarr$")
CHECKPOINT_NAME = re.compile(r"^ckpt-(\d{6,})\.pt$")
SHARD_NAME = re.compile(r"^rank-(\d+)$")
SUPERSEDED_NAME = re.compile(r"^superseded-(\d+)$")
EXPORT_FILES = {"onnx": "policy.onnx", "torchscript": "policy.pt"}
"""File written by ``rlpipe export`` per ``--format``."""
LATEST = "latest"
BEST = "best"
LOCK = ".lock"
CHECKSUM_SUFFIX = ".sha256"
RUN_POINTER = "run.json"
"""Small file beside ``metrics.json`` in the workspace (and in an experiment's own folder) naming the run
dir the results came from (see :mod:`rlpipe.dvc.runs`)."""
TEMPORARY_NAME = re.compile(r"^\.(?P<name>.+)\.(?:tmp|del)-(?P<pid>\d+)-[0-9a-f]+$")
"""A hidden temporary of process ``pid``: a write (``tmp``) or delete (``del``) of ``name`` in progress."""


def temporary_name(name: str, kind: str = "tmp") -> str:
    """``.<name>.<kind>-<pid>-<hex>``: a fresh hidden temporary of ``name`` owned by this process."""
    return f".{name}.{kind}-{os.getpid()}-{secrets.token_hex(4)}"


def rollout_name(iteration: int) -> str:
    """``iter-{iteration:06d}.zarr``."""
    return f"iter-{iteration:06d}.zarr"


def checkpoint_name(iteration: int) -> str:
    """``ckpt-{iteration:06d}.pt``."""
    return f"ckpt-{iteration:06d}.pt"


def lock_path(directory: AnyPath) -> AnyPath:
    """``<directory>/.lock``: the writer lock of a run directory or of a command's output folder."""
    return as_path(directory) / LOCK


def checksum_path(path: AnyPath) -> AnyPath:
    """``<name>.sha256`` beside a checkpoint: its SHA-256, written before the checkpoint is renamed in."""
    path = as_path(path)
    return path.with_name(f"{path.name}{CHECKSUM_SUFFIX}")


def shard_name(rank: int) -> str:
    """``rank-{rank}``: one rank's shard inside an iteration folder."""
    return f"rank-{rank}"


def iteration_from_name(path: AnyPath | str, pattern: re.Pattern[str] = ROLLOUT_NAME) -> int | None:
    """The iteration number in a rollout (or, with ``CHECKPOINT_NAME``, checkpoint) name; ``None`` if none."""
    match = pattern.match(as_path(path).name)
    return int(match[1]) if match else None


def numbered(directory: AnyPath, pattern: re.Pattern[str]) -> dict[int, AnyPath]:
    """``{number: path}`` of the entries of ``directory`` whose names match ``pattern``, ascending."""
    directory = as_path(directory)
    if not directory.is_dir():
        return {}
    found = ((pattern.match(p.name), p) for p in directory.iterdir())
    return dict(sorted((int(m[1]), p) for m, p in found if m))


def enclosing_run_dir(path: Path) -> Path | None:
    """The run directory ``path`` lies in (links resolved), or ``None``.

    A run directory is a folder with ``params.yaml`` beside rollout stores or checkpoints (a project
    folder's own ``params.yaml`` alone does not make one); ``path`` need not exist. What lies inside
    one can go with the run (``--overwrite`` clears what rlpipe wrote there, ``rlpipe gc`` frees
    whole run dirs of removed experiments).
    """
    real = Path(os.path.realpath(path))
    for folder in real.parents:
        layout = RunLayout(folder)
        if layout.params.is_file() and (layout.rollout_paths() or layout.checkpoint_paths()):
            return folder
    return None


@dataclass(frozen=True)
class RunLayout:
    """The paths of one run directory ``root`` (which need not exist yet)."""

    root: AnyPath

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", as_path(self.root))

    @property
    def params(self) -> AnyPath:
        """``params.yaml``: the resolved params, written before the first env step."""
        return self.root / "params.yaml"

    @property
    def rollouts(self) -> AnyPath:
        """Folder of ``iter-NNNNNN.zarr`` rollout stores."""
        return self.root / "rollouts"

    @property
    def checkpoints(self) -> AnyPath:
        """Folder of ``ckpt-NNNNNN.pt`` checkpoints and their pointers."""
        return self.root / "checkpoints"

    @property
    def metrics(self) -> AnyPath:
        """``metrics.json``: the run's final summary."""
        return self.root / "metrics.json"

    @property
    def curve(self) -> AnyPath:
        """``curve.csv``: one row per iteration."""
        return self.root / "curve.csv"

    @property
    def eval_dir(self) -> AnyPath:
        """``eval/``: outputs of ``rlpipe eval``."""
        return self.root / "eval"

    @property
    def eval_metrics(self) -> AnyPath:
        """``eval/metrics.json``."""
        return self.eval_dir / "metrics.json"

    def eval_video(self, iteration: int, policy_file: str | None = None) -> AnyPath:
        """``eval/video-iter-NNNNNN.mp4``; of an exported file: ``eval/video-<stem>-iter-NNNNNN.mp4``."""
        stem = f"-{Path(policy_file).stem}" if policy_file else ""
        return self.eval_dir / f"video{stem}-iter-{iteration:06d}.mp4"

    @property
    def policy_eval_metrics(self) -> AnyPath:
        """``eval/policy-metrics.json``: ``rlpipe eval --policy`` (an exported file)."""
        return self.eval_dir / "policy-metrics.json"

    @property
    def export_dir(self) -> AnyPath:
        """``export/``: the default output of ``rlpipe export``."""
        return self.root / "export"

    def exported(self, fmt: str, directory: AnyPath | None = None) -> AnyPath:
        """The file ``rlpipe export --format fmt`` writes in ``directory`` (default ``export/``)."""
        return as_path(directory or self.export_dir) / EXPORT_FILES[fmt]

    @staticmethod
    def export_metadata(exported: AnyPath) -> AnyPath:
        """The JSON beside an exported file: ``policy.onnx`` → ``policy.onnx.json``."""
        return exported.with_name(f"{exported.name}.json")

    @property
    def frames_dir(self) -> AnyPath:
        """``frames/``: the default output of ``rlpipe inspect --frames``."""
        return self.root / "frames"

    def frames(
        self, iteration: int, group: str, env: int, suffix: str = "", directory: AnyPath | None = None
    ) -> AnyPath:
        """``frames/iter-NNNNNN-<group>-env-E<suffix>`` (in ``directory`` if given): a folder or an MP4."""
        return as_path(directory or self.frames_dir) / f"iter-{iteration:06d}-{group}-env-{env}{suffix}"

    @staticmethod
    def frame_file(folder: AnyPath, step: int) -> AnyPath:
        """``t-NNNNNN.png``: the frame of time step ``step`` in a frames folder."""
        return folder / f"t-{step:06d}.png"

    @property
    def reupdate(self) -> AnyPath:
        """``reupdate/``: the default output of ``rlpipe replay``."""
        return self.root / "reupdate"

    @property
    def updated(self) -> AnyPath:
        """``updated/``: the default output of ``rlpipe update``."""
        return self.root / "updated"

    @property
    def collected(self) -> AnyPath:
        """``collected/``: the default output of ``rlpipe collect``."""
        return self.root / "collected"

    @property
    def advantages(self) -> AnyPath:
        """``advantages/``: the default output of ``rlpipe advantage`` (kept out of ``rollouts/``)."""
        return self.root / "advantages"

    @property
    def rejected(self) -> AnyPath:
        """``rollouts/rejected/``: rollouts the non-finite guard refused (``iter-NNNNNN.zarr``)."""
        return self.rollouts / "rejected"

    @property
    def lock(self) -> AnyPath:
        """``.lock``: created exclusively by the one process writing this run directory."""
        return lock_path(self.root)

    def rejected_rollout(self, iteration: int) -> AnyPath:
        """``rollouts/rejected/iter-NNNNNN.zarr``."""
        return self.rejected / rollout_name(iteration)

    def superseded(self) -> AnyPath:
        """``rollouts/superseded-K/``, K one past the last taken: where a start over sets stores aside."""
        taken = numbered(self.rollouts, SUPERSEDED_NAME)
        return self.rollouts / f"superseded-{max(taken, default=0) + 1}"

    def rollout(self, iteration: int) -> AnyPath:
        """``rollouts/iter-NNNNNN.zarr``."""
        return self.rollouts / rollout_name(iteration)

    def checkpoint(self, iteration: int) -> AnyPath:
        """``checkpoints/ckpt-NNNNNN.pt``."""
        return self.checkpoints / checkpoint_name(iteration)

    def rollout_paths(self) -> dict[int, AnyPath]:
        """``{iteration: path}`` of the stored rollouts, ascending."""
        return numbered(self.rollouts, ROLLOUT_NAME)

    def checkpoint_paths(self) -> dict[int, AnyPath]:
        """``{iteration: path}`` of the checkpoints, ascending."""
        return numbered(self.checkpoints, CHECKPOINT_NAME)

    def holds_run(self) -> bool:
        """True when rollouts or checkpoints of a run are here (a fresh run would destroy them)."""
        return any(d.is_dir() and any(d.iterdir()) for d in (self.rollouts, self.checkpoints))

    def written_entries(self) -> list[AnyPath]:
        """The entries of ``root`` that rlpipe writes (files, folders, temporaries), the lock aside.

        What ``--overwrite`` clears; any other entry there is someone else's and is left alone.
        """
        own = {
            path.name
            for path in (
                self.params,
                self.rollouts,
                self.checkpoints,
                self.metrics,
                self.curve,
                self.eval_dir,
                self.reupdate,
                self.updated,
                self.collected,
                self.advantages,
                self.export_dir,
                self.frames_dir,
                self.root / RUN_POINTER,
            )
        }
        if not self.root.is_dir():
            return []
        return sorted(
            path for path in self.root.iterdir() if path.name in own or TEMPORARY_NAME.match(path.name)
        )

    @classmethod
    def of_rollouts(cls, rollouts: AnyPath) -> RunLayout:
        """The run directory holding the ``rollouts/`` folder ``rollouts`` (or its ``rejected/`` folder)."""
        rollouts = as_path(rollouts)
        if rollouts.name == "rejected" and rollouts.parent.name == "rollouts":
            rollouts = rollouts.parent
        return cls(rollouts.parent)
