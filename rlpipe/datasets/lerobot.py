"""Episodes → a LeRobot v3.0 dataset, written by rlpipe with pyarrow and ffmpeg (no lerobot needed).

The folder follows LeRobot's v3.0 layout (``CODEBASE_VERSION = "v3.0"``)::

    meta/info.json                          schema: fps, features, counts, paths (meta/: lerobot_meta);
                                            rlpipe_store: what the stores kept (store.envs, precision)
    meta/stats.json                         per-feature normalization stats (lerobot_stats)
    meta/tasks.parquet                      the one task: column task_index, the task string as index
    meta/episodes/chunk-000/file-000.parquet one row per episode: its frame range, files, stats
    meta/rlpipe.json                        provenance: run, params hash, iterations, checkpoint, mapping
    data/chunk-000/file-000.parquet         one row per frame (lerobot_features), many episodes a file
    videos/observation.images.<g>/chunk-000/file-000.mp4   one folder per camera (lerobot_video)

Files hold many episodes; a new data file starts when the next episode would take the current
one past 100 MB, a new video file past 200 MB, and ``chunk-CCC`` holds 1000 files (LeRobot's
defaults, recorded in ``info.json``). Frames are written in row groups of several episodes (an
RL episode can be ten frames long; a row group per episode would bloat the parquet footer).
Every frame's ``timestamp`` is ``frame_index / fps`` in float32, the camera frame of that step
sits at ``from_timestamp + timestamp`` of its episode's video, so LeRobot's decode check holds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rlpipe.datasets.episodes import FIDELITY_KEY
from rlpipe.datasets.lerobot_features import Layout, layout_of
from rlpipe.datasets.lerobot_meta import provenance, write_meta
from rlpipe.datasets.lerobot_stats import StatsAccumulator, image_stats, vector_stats
from rlpipe.datasets.lerobot_video import CameraVideos

if TYPE_CHECKING:
    from rlpipe.datasets.episodes import DatasetSource, Episode, Selection

__all__ = ["CODEBASE_VERSION", "IMAGE_MODES", "LeRobotWritten", "check_lerobot_source", "write_lerobot"]

CODEBASE_VERSION = "v3.0"
IMAGE_MODES = ("video", "png")
"""``images=``: AV1 video per camera (LeRobot's default), or lossless PNG inside the data parquet."""
CHUNKS_SIZE = 1000
DATA_FILE_SIZE_MB = 100
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
_ROW_GROUP_FRAMES = 16_384


@dataclass
class LeRobotWritten:
    """What :func:`write_lerobot` wrote: episodes, frames, bytes of all files, wall seconds."""

    episodes: int = 0
    frames: int = 0
    bytes: int = 0
    seconds: float = 0.0

    def per_million(self) -> tuple[float, float]:
        """``(MB, seconds)`` per one million frames (transitions)."""
        scale = 1e6 / max(self.frames, 1)
        return self.bytes / 1e6 * scale, self.seconds * scale


def check_lerobot_source(source: DatasetSource, *, images: str = "video") -> None:
    """Refuse, in one line, a source LeRobot cannot hold (before anything is written).

    LeRobot needs an integer control rate; a camera frame of 1 or 3 channels; AV1 video in
    ``yuv420p`` needs even frame sides (``images="png"`` keeps any size).
    """
    if images not in IMAGE_MODES:
        raise ValueError(f"--images: {images!r}; accepted: {', '.join(IMAGE_MODES)}")
    if source.fps is None:
        raise ValueError(
            f"--format lerobot: env {source.env_id} has no control rate (fps); "
            "LeRobot datasets need an integer fps"
        )
    for group in source.image_groups:
        channels = source.frame_channels[group]
        _, height, width = source.image_shape(group)
        if channels not in (1, 3):
            raise ValueError(
                f"--format lerobot: camera group {group!r} has {channels}-channel frames; "
                "accepted: 1 (gray) or 3 (RGB)"
            )
        if images == "video" and (height % 2 or width % 2):
            raise ValueError(
                f"--format lerobot: camera group {group!r} is {height}x{width}; AV1 video "
                "needs even sides (use --images png)"
            )


def write_lerobot(
    source: DatasetSource,
    episodes: Iterable[Episode],
    out_dir: str | Path,
    *,
    images: str = "video",
    task: str | None = None,
    progress: Callable[[Episode], None] | None = None,
    selection: Selection | None = None,
) -> LeRobotWritten:
    """Write ``episodes`` of ``source`` as a LeRobot v3.0 dataset in ``out_dir`` (absent or empty).

    ``task`` is the one task string of every episode (default: the env id). ``progress`` is called
    after each episode is written. ``selection`` is recorded in ``meta/rlpipe.json``.
    ValueError (one line) for a source LeRobot cannot hold or no episodes at all.
    """
    check_lerobot_source(source, images=images)
    fps = source.fps
    assert fps is not None  # check_lerobot_source refuses a run without one
    root = Path(out_dir)
    if root.exists() and any(root.iterdir()):
        raise ValueError(f"--out: {root} is not empty")
    started = time.perf_counter()
    writer: _Writer | None = None
    try:
        for episode in episodes:
            if writer is None:
                root.mkdir(parents=True, exist_ok=True)
                layout = layout_of(source, video=images == "video", success=episode.success is not None)
                writer = _Writer(root, layout, int(fps))
            writer.add(episode)
            if progress is not None:
                progress(episode)
        if writer is None:
            raise ValueError("--format lerobot: no episodes to export")
        writer.close()
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    write_meta(
        root,
        _info(writer, images, source.fidelity()),
        writer.rows,
        writer.stats.result(),
        task or source.env_id,
        provenance(source, writer.layout, selection),
    )
    written = LeRobotWritten(episodes=writer.episodes, frames=writer.frames)
    written.bytes = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    written.seconds = time.perf_counter() - started
    return written


class _DataFiles:
    """The data parquet files: row groups of several episodes, a new file past the size limit."""

    def __init__(self, root: Path, schema: pa.Schema) -> None:
        self.root, self.schema = root, schema
        self.chunk, self.file = 0, 0
        self._writer: pq.ParquetWriter | None = None
        self._pending: list[pa.Table] = []
        self._file_frames = 0  # frames written to the open file (flushed or pending)
        self._pending_bytes = 0

    def add(self, table: pa.Table) -> tuple[int, int]:
        """Append one episode's rows; return its ``(chunk_index, file_index)``."""
        if self._file_frames and self._estimated_size(table.num_rows) >= DATA_FILE_SIZE_MB * 1024**2:
            self._close_file()
            self.file += 1
            if self.file == CHUNKS_SIZE:
                self.chunk, self.file = self.chunk + 1, 0
        self._pending.append(table)
        self._pending_bytes += table.nbytes
        self._file_frames += table.num_rows
        if sum(t.num_rows for t in self._pending) >= _ROW_GROUP_FRAMES:
            self._flush()
        return self.chunk, self.file

    def _path(self) -> Path:
        return self.root / DATA_PATH.format(chunk_index=self.chunk, file_index=self.file)

    def _estimated_size(self, rows: int) -> float:
        on_disk = self._path().stat().st_size if self._writer is not None else 0
        size = on_disk + self._pending_bytes
        return size * (1 + rows / self._file_frames)

    def _flush(self) -> None:
        if not self._pending:
            return
        if self._writer is None:
            self._path().parent.mkdir(parents=True, exist_ok=True)
            self._writer = pq.ParquetWriter(self._path(), self.schema, compression="snappy")
        self._writer.write_table(pa.concat_tables(self._pending), row_group_size=1 << 30)
        self._pending, self._pending_bytes = [], 0

    def _close_file(self) -> None:
        self._flush()
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self._file_frames = 0

    def close(self) -> None:
        self._close_file()

    def abort(self) -> None:
        self._pending = []
        if self._writer is not None:
            self._writer.close()
            self._writer = None


class _Writer:
    """Appends episodes to the data and video files, keeping their episode rows and stats."""

    def __init__(self, root: Path, layout: Layout, fps: int) -> None:
        self.root, self.layout, self.fps = root, layout, fps
        self.data = _DataFiles(root, layout.schema())
        self.videos = (
            {
                cam.key: CameraVideos(root / "videos" / cam.key, fps, cam.height, cam.width, CHUNKS_SIZE)
                for cam in layout.cameras
            }
            if layout.video
            else {}
        )
        self.rows: list[dict[str, Any]] = []
        self.stats = StatsAccumulator()
        self.episodes = self.frames = 0

    def add(self, episode: Episode) -> None:
        index = self.episodes
        frames = {cam.key: cam.frames(episode.observations[cam.group]) for cam in self.layout.cameras}
        cols = self.layout.columns(
            episode, episode_index=index, first_index=self.frames, fps=self.fps, frames=frames
        )
        chunk, file = self.data.add(self.layout.table(cols))
        row: dict[str, Any] = {
            "episode_index": index,
            "tasks": None,
            "length": episode.length,
            "data/chunk_index": chunk,
            "data/file_index": file,
            "dataset_from_index": self.frames,
            "dataset_to_index": self.frames + episode.length,
        }
        for key, videos in self.videos.items():
            for name, value in videos.add_episode(frames[key]).items():
                row[f"videos/{key}/{name}"] = value
        stats = _episode_stats(self.layout, cols, frames)
        self.stats.add(stats)
        row.update(
            {f"stats/{key}/{name}": value.tolist() for key, ft in stats.items() for name, value in ft.items()}
        )
        row.update(_episode_extras(episode))
        self.rows.append(row)
        self.episodes += 1
        self.frames += episode.length

    def close(self) -> None:
        self.data.close()
        for videos in self.videos.values():
            videos.close()

    def abort(self) -> None:
        self.data.abort()
        for videos in self.videos.values():
            videos.abort()


def _episode_stats(layout: Layout, cols: dict, frames: dict[str, np.ndarray]) -> dict[str, dict]:
    """Stats of each feature of one episode, in ``info.json``'s order.

    The scalar features are one ``[L, F]`` matrix for :func:`vector_stats` (one pass instead of F).
    """
    scalars = [key for key, ft in layout.features.items() if ft["shape"] == [1] and key not in frames]
    matrix = vector_stats(np.stack([np.asarray(cols[key], dtype=np.float64) for key in scalars], axis=1))
    stats = {
        key: {name: value if name == "count" else value[i : i + 1] for name, value in matrix.items()}
        for i, key in enumerate(scalars)
    }
    for key in layout.features:
        if key in frames:
            stats[key] = image_stats(frames[key])
        elif key not in stats:
            stats[key] = vector_stats(cols[key])
    return {key: stats[key] for key in layout.features}


def _episode_extras(episode: Episode) -> dict[str, Any]:
    """Episode columns under ``rl/``: filter mixed-quality data (return, success) without the frames."""
    return {
        "rl/rank": episode.rank,
        "rl/env": episode.env,
        "rl/iteration": episode.iteration,
        "rl/return": float(episode.episode_return),
        "rl/success": episode.succeeded,
        "rl/cut": bool(episode.cut),
    }


def _info(writer: _Writer, images: str, fidelity: dict[str, Any]) -> dict[str, Any]:
    """``meta/info.json``: the schema, the counts and the file layout LeRobot reads the dataset with.

    ``fidelity`` (what the stores kept: :meth:`~rlpipe.datasets.episodes.DatasetSource.fidelity`)
    goes under its own key, beside LeRobot's.
    """
    return {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": None,
        "total_episodes": writer.episodes,
        "total_frames": writer.frames,
        "total_tasks": 1,
        "chunks_size": CHUNKS_SIZE,
        "data_files_size_in_mb": DATA_FILE_SIZE_MB,
        "video_files_size_in_mb": 200,
        "fps": writer.fps,
        "splits": {"train": f"0:{writer.episodes}"},
        "data_path": DATA_PATH,
        "video_path": VIDEO_PATH if images == "video" else None,
        "features": writer.layout.features,
        FIDELITY_KEY: fidelity,
    }
