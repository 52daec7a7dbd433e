"""Camera frames as LeRobot v3.0 keeps them: AV1 MP4 files of many episodes each, or PNG bytes.

Video: one folder per camera, ``videos/<key>/chunk-CCC/file-FFF.mp4``; the episodes follow each
other in a file, so an episode is the time span ``[from_timestamp, to_timestamp)`` of its file,
and frame ``i`` of an episode shows at ``from_timestamp + i / fps`` (LeRobot's reader asks for
exactly that time, within 1e-4 s). Frames are streamed into imageio-ffmpeg's bundled ffmpeg as raw
RGB with LeRobot's encoder settings: SVT-AV1 (``libsvtav1``; ``libaom-av1`` where the binary has
no SVT), ``yuv420p``, a keyframe every 2 frames (``g=2``), ``crf=30``, preset 12, and
``+faststart`` so the index sits at the front. A new file starts when the next episode would take
the current one past :data:`VIDEO_FILE_SIZE_MB` (an episode never spans two files).

PNG: each frame as a PNG (zlib level 1, as LeRobot's image writer) inside the data parquet, in the
``{bytes, path}`` struct of a ``datasets.Image`` column — v3.0 keeps no separate image files.
"""

from __future__ import annotations

import io
import subprocess
import tempfile
from functools import cache
from pathlib import Path

import numpy as np

from rlpipe.extras import require

__all__ = ["ENCODER", "VIDEO_FILE_SIZE_MB", "CameraVideos", "encoder_info", "png_bytes"]

VIDEO_FILE_SIZE_MB = 200
"""LeRobot's default limit per video file (``video_files_size_in_mb``)."""
ENCODER = {"g": 2, "crf": 30, "preset": 12, "fast_decode": 0, "pix_fmt": "yuv420p"}
"""LeRobot's default RGB encoder settings (recorded per camera in ``info.json``)."""
_FILE = "chunk-{chunk:03d}/file-{file:03d}.mp4"


@cache
def _ffmpeg() -> tuple[str, str]:
    """``(ffmpeg executable, AV1 encoder)`` of the ``video`` extra's bundled ffmpeg."""
    exe = require("imageio_ffmpeg", "dataset --format lerobot (camera video)").get_ffmpeg_exe()
    listing = subprocess.run([exe, "-hide_banner", "-encoders"], capture_output=True, text=True).stdout
    for codec in ("libsvtav1", "libaom-av1"):
        if f" {codec} " in listing:
            return exe, codec
    raise RuntimeError(f"{exe} has no AV1 encoder (libsvtav1 or libaom-av1); use --images png")


def encoder_info(height: int, width: int, fps: int) -> dict:
    """The ``info`` block of a video feature in ``info.json`` (LeRobot's ``video.*`` keys)."""
    return {
        "video.height": height,
        "video.width": width,
        "video.codec": "av1",
        "video.pix_fmt": ENCODER["pix_fmt"],
        "video.is_depth_map": False,
        "video.fps": fps,
        "video.channels": 3,
        "video.g": ENCODER["g"],
        "video.crf": ENCODER["crf"],
        "video.preset": ENCODER["preset"],
        "video.fast_decode": ENCODER["fast_decode"],
        "has_audio": False,
        "is_depth_map": False,
    }


class _Encoder:
    """One ffmpeg process writing one MP4 from ``[n, H, W, 3]`` uint8 frames fed to its stdin."""

    def __init__(self, path: Path, fps: int, height: int, width: int) -> None:
        exe, codec = _ffmpeg()
        options = ["-g", str(ENCODER["g"]), "-crf", str(ENCODER["crf"])]
        if codec == "libsvtav1":
            options += [
                "-preset",
                str(ENCODER["preset"]),
                "-svtav1-params",
                f"fast-decode={ENCODER['fast_decode']}",
            ]
        else:
            options += ["-cpu-used", "8", "-row-mt", "1"]
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._log = tempfile.TemporaryFile()  # SVT-AV1 logs to stderr whatever the log level
        self._proc = subprocess.Popen(
            [
                exe,
                "-hide_banner",
                "-loglevel",
                "error",
                "-nostdin",
                "-y",
                "-f",
                "rawvideo",
                "-pix_fmt",
                "rgb24",
                "-s",
                f"{width}x{height}",
                "-r",
                str(fps),
                "-i",
                "-",
                "-c:v",
                codec,
                *options,
                "-pix_fmt",
                ENCODER["pix_fmt"],
                "-movflags",
                "+faststart",
                "-f",
                "mp4",
                str(path),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )

    def write(self, frames: np.ndarray) -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(np.ascontiguousarray(frames).data)
        except BrokenPipeError:
            self.close()  # raises with ffmpeg's own message

    def close(self) -> None:
        """Finish the file; RuntimeError with ffmpeg's last line when it failed."""
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            try:
                self._proc.stdin.close()
            except BrokenPipeError:
                pass
        if self._proc.wait() != 0:
            self._log.seek(0)
            lines = [line for line in self._log.read().decode(errors="replace").splitlines() if line.strip()]
            last = lines[-1] if lines else f"exit status {self._proc.returncode}"
            raise RuntimeError(f"ffmpeg failed writing {self.path}: {last}")
        self._log.close()

    def kill(self) -> None:
        self._proc.kill()
        self._proc.wait()
        self._log.close()


class CameraVideos:
    """The video files of one camera key: episodes appended in order, a new file past the size limit."""

    def __init__(self, folder: Path, fps: int, height: int, width: int, chunks_size: int) -> None:
        self.folder, self.fps, self.height, self.width = folder, fps, height, width
        self.chunks_size = chunks_size
        self.chunk, self.file = 0, 0
        self._frames = 0  # frames in the open file
        self._encoder: _Encoder | None = None

    def add_episode(self, frames: np.ndarray) -> dict[str, float | int]:
        """Append ``[L, H, W, 3]`` uint8 frames; return the episode's place in the files.

        ``chunk_index, file_index``, and ``from_timestamp, to_timestamp``: seconds within its file.
        """
        if self._encoder is not None and self._would_overflow(len(frames)):
            self._encoder.close()
            self._encoder, self._frames = None, 0
            self.file += 1
            if self.file == self.chunks_size:
                self.chunk, self.file = self.chunk + 1, 0
        if self._encoder is None:
            path = self.folder / _FILE.format(chunk=self.chunk, file=self.file)
            self._encoder = _Encoder(path, self.fps, self.height, self.width)
        start = self._frames
        self._encoder.write(frames)
        self._frames += len(frames)
        return {
            "chunk_index": self.chunk,
            "file_index": self.file,
            "from_timestamp": start / self.fps,
            "to_timestamp": self._frames / self.fps,
        }

    def _would_overflow(self, length: int) -> bool:
        """Whether the open file plus ``length`` more frames (at its average size) reaches the limit."""
        assert self._encoder is not None
        size = self._encoder.path.stat().st_size if self._encoder.path.exists() else 0
        return size * (1 + length / max(self._frames, 1)) >= VIDEO_FILE_SIZE_MB * 1024**2

    def close(self) -> None:
        """Finish the open file."""
        if self._encoder is not None:
            self._encoder.close()
            self._encoder = None

    def abort(self) -> None:
        """Stop the encoder (after an error; the caller drops the folder)."""
        if self._encoder is not None:
            self._encoder.kill()
            self._encoder = None


def png_bytes(frame: np.ndarray) -> bytes:
    """One ``[H, W, 3]`` uint8 frame as RGB PNG bytes (lossless)."""
    from PIL import Image

    image = Image.fromarray(frame)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()
