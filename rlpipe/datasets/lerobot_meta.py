"""The ``meta/`` folder of a LeRobot v3.0 dataset: info, stats, tasks, episode rows, rlpipe's provenance.

Written after the data and video files (:mod:`rlpipe.datasets.lerobot`), from what they hold:
``info.json`` as given (the episode rows are split into files by its ``chunks_size`` and
``data_files_size_in_mb``), ``stats.json`` from the accumulated stats, ``tasks.parquet`` with the
one task, ``episodes/…parquet`` one row per episode, and ``rlpipe.json`` (:func:`provenance`).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from rlpipe.datasets.lerobot_features import Layout
from rlpipe.datasets.lerobot_stats import Stats
from rlpipe.version import __version__

if TYPE_CHECKING:
    from rlpipe.datasets.episodes import DatasetSource, Selection

__all__ = ["EPISODES_PATH", "provenance", "write_meta"]

EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"


def write_meta(
    root: Path,
    info: dict[str, Any],
    rows: list[dict[str, Any]],
    stats: dict[str, Stats],
    task: str,
    origin: dict[str, Any],
) -> None:
    """Write ``meta/``: tasks, episode ``rows`` (``tasks`` set to ``[task]``), stats, info, rlpipe.json."""
    meta = root / "meta"
    meta.mkdir(parents=True, exist_ok=True)
    pq.write_table(_tasks_table(task), meta / "tasks.parquet")
    for row in rows:
        row["tasks"] = [task]
    _write_episode_rows(root, rows, info["chunks_size"], info["data_files_size_in_mb"])
    _write_json(
        meta / "stats.json",
        {key: {name: value.tolist() for name, value in ft.items()} for key, ft in stats.items()},
    )
    _write_json(meta / "info.json", info)
    _write_json(meta / "rlpipe.json", origin)


def _tasks_table(task: str) -> pa.Table:
    """``meta/tasks.parquet`` as pandas writes a frame indexed by ``task`` (LeRobot reads it so)."""
    pandas_meta = {
        "index_columns": ["task"],
        "column_indexes": [
            {
                "name": None,
                "field_name": None,
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": {"encoding": "UTF-8"},
            }
        ],
        "columns": [
            {
                "name": "task_index",
                "field_name": "task_index",
                "pandas_type": "int64",
                "numpy_type": "int64",
                "metadata": None,
            },
            {
                "name": "task",
                "field_name": "task",
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": None,
            },
        ],
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.3",
    }
    schema = pa.schema(
        [("task_index", pa.int64()), ("task", pa.string())], metadata={"pandas": json.dumps(pandas_meta)}
    )
    return pa.Table.from_arrays([pa.array([0], pa.int64()), pa.array([task])], schema=schema)


def _write_episode_rows(
    root: Path, rows: list[dict[str, Any]], chunks_size: int, file_size_mb: float
) -> None:
    """``meta/episodes/…parquet``: the rows, a new file past ``file_size_mb``; ``chunks_size`` a chunk."""
    per_file = max(1, len(rows))
    table = pa.Table.from_pylist(rows)
    if table.nbytes > file_size_mb * 1024**2:
        per_file = max(1, int(len(rows) * file_size_mb * 1024**2 / table.nbytes))
    for number, start in enumerate(range(0, len(rows), per_file)):
        chunk, file = divmod(number, chunks_size)
        part = rows[start : start + per_file]
        for row in part:
            row["meta/episodes/chunk_index"], row["meta/episodes/file_index"] = chunk, file
        path = root / EPISODES_PATH.format(chunk_index=chunk, file_index=file)
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(part), path, compression="snappy")


def provenance(source: DatasetSource, layout: Layout, selection: Selection | None) -> dict[str, Any]:
    """``meta/rlpipe.json``: the run, its params hash, iterations and checkpoint, and the key mapping."""

    def groups(names):
        return [name if name is not None else "obs" for name in names]

    mapping = {
        "observation.state": groups(layout.state_groups),
        "observation.environment_state": groups(layout.env_state_groups),
        **{cam.key: {"group": cam.group, "frame": _frame_mapping(cam.channels)} for cam in layout.cameras},
    }
    return {
        "rlpipe_version": __version__,
        "run_dir": str(source.run_dir),
        "env_id": source.env_id,
        "gym_id": source.gym_id,
        "params_hash": source.params_hash,
        "iterations": list(source.iterations),
        "checkpoint": source.checkpoint,
        "selection": _selection(selection),
        "mapping": {k: v for k, v in mapping.items() if v},
    }


def _frame_mapping(channels: int) -> str:
    """How a camera's stored frame became the dataset's RGB frame, in words."""
    if channels == 1:
        return "the last channel (gray), CHW → HWC, repeated into 3 identical channels (R = G = B)"
    return f"the last {channels} channels, CHW → HWC"


def _selection(selection: Selection | None) -> dict[str, Any] | None:
    """The selection as JSON: its fields, ``envs`` as ``--envs`` takes them (``0,2,5:7``)."""
    if selection is None:
        return None
    fields = {f.name: getattr(selection, f.name) for f in dataclasses.fields(selection)}
    return {**fields, "envs": None if selection.envs is None else str(selection.envs)}


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=4) + "\n")
