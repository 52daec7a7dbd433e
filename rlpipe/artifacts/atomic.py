"""Atomic writes: a file or folder appears under its final name whole, or not at all.

Every writer of a run directory goes through here. A file is written to a hidden temporary
sibling (``.<name>.tmp-<pid>-<token>``), fsynced and renamed into place; a folder (a Zarr group) is
built under such a temporary and renamed when complete. Deletions rename to ``.<name>.del-…``
first, so a reader sees a whole entry or none (:mod:`rlpipe.artifacts.removal`, where every delete
goes). Temporaries of dead processes are cleaned at start.

On an object store (an :class:`~rlpipe.artifacts.fs.ObjectPath`) a file is one PUT, which is
atomic by itself, and a folder is deleted key by key (see :mod:`rlpipe.artifacts.fs`).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from rlpipe.artifacts.fs import AnyPath, ObjectPath, as_path
from rlpipe.artifacts.layout import temporary_name
from rlpipe.artifacts.removal import delete
from rlpipe.testing import faults

__all__ = [
    "atomic_write",
    "atomic_write_json",
    "atomic_write_text",
    "naming_the_file",
    "publish_file",
    "publish_dir",
    "staged_files",
    "temporary_sibling",
    "unpublishable",
]


def temporary_sibling(path: AnyPath, kind: str = "tmp") -> Path:
    """A fresh hidden sibling of ``path`` owned by this process (``kind``: ``tmp`` or ``del``).

    For a file on an object store: a fresh local file of the same name, to be put by :func:`publish_file`.
    """
    if isinstance(path, ObjectPath):
        return Path(tempfile.mkdtemp(prefix="rlpipe-upload-")) / path.name
    path = Path(path)
    return path.with_name(temporary_name(path.name, kind))


def publish_file(tmp: Path, path: AnyPath) -> None:
    """Move the finished local ``tmp`` (from :func:`temporary_sibling`) to ``path``: a rename, or one PUT."""
    if isinstance(path, ObjectPath):
        try:
            path.write_bytes(tmp.read_bytes())
        finally:
            shutil.rmtree(tmp.parent, ignore_errors=True)
        return
    tmp.replace(path)


def atomic_write(path: AnyPath, write: Callable[[IO[bytes]], Any], fsync: bool = True) -> None:
    """Run ``write(file)`` on a temporary sibling, fsync it, rename it to ``path``, fsync the folder.

    On an object store: ``write`` fills a buffer that is put as the whole object in one request.
    """
    path = as_path(path)
    if isinstance(path, ObjectPath):
        _put_whole(path, write)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_sibling(path)
    kind = fault_kind(path)
    try:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        faults.point(f"write.{kind}")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.filename is None:  # a failed write(2) names no file: name the one being written
            raise type(exc)(exc.errno, exc.strerror, str(path)) from exc
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    faults.point(f"renamed.{kind}")
    if fsync:
        _fsync_dir(path.parent)


def _put_whole(path: ObjectPath, write: Callable[[IO[bytes]], Any]) -> None:
    buffer = io.BytesIO()
    write(buffer)
    kind = fault_kind(path)
    faults.point(f"write.{kind}")
    path.write_bytes(buffer.getbuffer())
    faults.point(f"renamed.{kind}")


def fault_kind(path: AnyPath) -> str:
    """The fault-injection name of a file: ``checkpoint``, ``checksum``, or its stem (``latest``, …)."""
    name = as_path(path).name
    if name.endswith(".sha256"):
        return "checksum"
    return "checkpoint" if name.startswith("ckpt-") else name.split(".")[0]


def atomic_write_text(path: AnyPath, text: str, fsync: bool = True) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    atomic_write(path, lambda fh: fh.write(text.encode()), fsync)


def atomic_write_json(path: AnyPath, data: Any, fsync: bool = True) -> None:
    """Write ``data`` as indented, key-sorted JSON to ``path`` atomically."""
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n", fsync)


def publish_dir(tmp: Path, path: Path, replace: bool = False) -> None:
    """Rename the finished folder ``tmp`` to ``path``; an existing ``path`` is an error unless ``replace``.

    With ``replace`` the old folder is renamed away first, so readers see one whole folder or the other.
    """
    if path.exists():
        if not replace:
            raise FileExistsError(f"{path}: already exists (entries are written once)")
        trash = temporary_sibling(path, "del")
        os.rename(path, trash)  # a link is moved as a link, and then unlinked: never followed
        os.rename(tmp, path)
        delete(trash)
        return
    os.rename(tmp, path)


def unpublishable(path: Path) -> str | None:
    """Why :func:`publish_dir` could not put a new folder at ``path``, in words; ``None`` when it can.

    Checked before the folder is built: an existing entry is not replaced (a link neither, dangling
    or not: the rename fails on it), and no folder can be made under a file or a dangling link.
    """
    if path.is_symlink() and not path.exists():
        return f"{path} is a symbolic link to {os.readlink(path)}, which does not exist"
    if os.path.lexists(path):
        return f"{path} already exists"
    above = next(folder for folder in Path(os.path.abspath(path)).parents if os.path.lexists(folder))
    if not above.is_dir():
        return f"{above} is not a folder (a file, or a link to none)"
    return None


@contextlib.contextmanager
def naming_the_file(path: AnyPath) -> Iterator[None]:
    """Give an ``OSError`` that names no file (a failed ``write(2)``: disk full, ``ulimit -f``) ``path``.

    Libraries that write through their own file objects (PIL, ffmpeg) raise such errors; the one-line
    message then names the file being written instead of "a file".
    """
    try:
        yield
    except OSError as exc:
        if exc.filename is None and exc.errno is not None:
            raise type(exc)(exc.errno, exc.strerror, str(path)) from exc
        raise


@contextlib.contextmanager
def staged_files(directory: AnyPath, name: str) -> Iterator[Path]:
    """A hidden temporary folder beside ``directory/name`` to write files in; all appear, or none.

    On a clean exit every file in it is renamed into ``directory`` (in name order), replacing older
    ones; on an exception the folder is deleted and nothing appears. The folder is removed either way.
    On an object store the folder is local and each file is put whole, in name order, on a clean exit.
    """
    if isinstance(directory, ObjectPath):
        with tempfile.TemporaryDirectory(prefix="rlpipe-stage-") as local:
            yield Path(local)
            for path in sorted(Path(local).iterdir()):
                (directory / path.name).write_bytes(path.read_bytes())
        return
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tmp = temporary_sibling(directory / name)
    tmp.mkdir()
    try:
        yield tmp
        for path in sorted(tmp.iterdir()):
            os.replace(path, directory / path.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)  # make the rename itself durable
    finally:
        os.close(fd)
