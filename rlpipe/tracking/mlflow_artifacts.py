"""MLflow's local artifact repository without MLflow: a file or folder copied into a run's artifacts.

What ``MlflowClient.log_artifact`` does for a run whose ``artifact_uri`` is a plain local folder
(``LocalArtifactRepository``): a file is copied under a staging name beside its target and renamed,
a folder copied file by file. Used by :class:`rlpipe.tracking.mlflow_sqlite.SqliteRun`, the fast
path of :class:`rlpipe.tracking.mlflow_runs.MlflowRun`, tested equal to it.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import tempfile
from contextlib import suppress
from pathlib import Path

__all__ = ["copy_artifact"]

_TEMP_ARTIFACT_PREFIX = ".artifact.uploading."
"""MLflow's staging prefix for an artifact being copied (reserved: no artifact may start with it)."""


def copy_artifact(root: str, path: Path, artifact_path: str | None = None) -> None:
    """Copy file or folder ``path`` into the artifact folder ``root`` (under ``artifact_path``)."""
    if path.is_dir():
        name = os.path.basename(os.path.normpath(path))
        _copy_folder(root, path, posixpath.join(artifact_path, name) if artifact_path is not None else name)
    else:
        _copy_file(root, path, artifact_path)


def _artifact_dir(root: str, artifact_path: str | None) -> str:
    """MLflow's ``_get_or_create_artifact_dir``: the checked, created folder ``artifact_path``."""
    if artifact_path:
        norm = posixpath.normpath(artifact_path)
        if norm != artifact_path or norm == "." or norm.startswith(("..", "/")):
            raise ValueError(f"Invalid artifact path: {artifact_path!r}")
    folder = os.path.join(root, os.path.normpath(artifact_path)) if artifact_path else root
    os.makedirs(folder, exist_ok=True)
    return folder


def _copy_folder(root: str, source: Path, artifact_path: str) -> None:
    """MLflow's ``log_artifacts``: the tree copied file by file (``shutil.copy2``)."""
    target = _artifact_dir(root, artifact_path)
    for folder, subfolders, files in os.walk(source):
        for sub in subfolders:
            dest = os.path.join(target, os.path.relpath(os.path.join(folder, sub), source))
            if not os.path.exists(dest):
                os.mkdir(dest)
        for name in files:
            file = os.path.join(folder, name)
            shutil.copy2(file, os.path.join(target, os.path.relpath(file, source)))


def _copy_file(root: str, source: Path, artifact_path: str | None) -> None:
    """MLflow's ``log_artifact``: copied to a staging name beside the target, then renamed."""
    folder = _artifact_dir(root, artifact_path)
    if source.name.startswith(_TEMP_ARTIFACT_PREFIX):
        raise ValueError(f"Invalid artifact file name: {source.name!r} (a reserved prefix)")
    dest = os.path.join(folder, source.name)
    if os.path.exists(dest) and os.path.samefile(source, dest):
        return
    fd, temp = tempfile.mkstemp(dir=folder, prefix=_TEMP_ARTIFACT_PREFIX)
    try:
        with os.fdopen(fd, "wb") as out, open(source, "rb") as src:
            shutil.copyfileobj(src, out)
        shutil.copystat(source, temp)
        os.replace(temp, dest)
    except BaseException:
        with suppress(FileNotFoundError):
            os.remove(temp)
        raise
