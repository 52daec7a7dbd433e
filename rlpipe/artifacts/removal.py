"""Every delete of a run file goes through here: inside its folder, never through a symbolic link.

rlpipe deletes only what it wrote (stores past a checkpoint, retention, ``--overwrite``, its own
temporaries, ``rlpipe gc``'s experiment folders), and only where it wrote it:

* the path must lie below the folder the caller names (``within``, e.g. the run directory),
  reached from it without a symbolic link; otherwise :class:`UnsafeRemoval` (nothing is deleted);
* a link is unlinked, never followed: the file or folder it points at is left alone;
* a folder is renamed to a hidden ``.<name>.del-…`` sibling first and then deleted (links inside it
  are unlinked, not followed), so a reader sees it whole or not at all, and a delete cut short
  leaves a temporary that :func:`clean_temporaries` removes at the next start.

On an object store (an :class:`~rlpipe.artifacts.fs.ObjectPath`) there are no links: every key
under the prefix is deleted.

What rlpipe must clear out of the way but may not delete (the stores of a run stopped before its
first checkpoint) is set aside instead (:func:`set_aside`): moved, under the same confinement.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

from rlpipe.artifacts.errors import StoreError
from rlpipe.artifacts.fs import AnyPath, is_object, move_tree, remove_tree
from rlpipe.artifacts.layout import TEMPORARY_NAME, temporary_name

__all__ = [
    "UnsafeRemoval",
    "check_confined",
    "clean_temporaries",
    "delete",
    "output_folder",
    "pid_alive",
    "set_aside",
]


class UnsafeRemoval(StoreError):
    """A delete refused: the path is outside the folder it belongs to, or reached through a link (exit 2)."""


def check_confined(path: AnyPath, within: AnyPath) -> Path | None:
    """``path`` made absolute (lexically) when it lies strictly below ``within``, reached without a link.

    Raises :class:`UnsafeRemoval` naming the path and the link (or the folder it escapes). Only the
    folders between ``within`` and ``path`` are checked: ``path`` itself may be a link (it is then
    unlinked), and ``within`` is the folder the user chose. ``None`` on an object store (no links).
    """
    if is_object(path):
        return None
    base = Path(os.path.abspath(str(within)))
    target = Path(os.path.abspath(path))
    if target == base or not target.is_relative_to(base):
        raise UnsafeRemoval(f"{path}: not inside {within}; rlpipe deletes only inside the folder it wrote")
    folder = base
    for part in target.relative_to(base).parts[:-1]:
        folder = folder / part
        if folder.is_symlink():
            raise UnsafeRemoval(
                f"{path}: reached through the symbolic link {folder} "
                f"(→ {os.readlink(folder)}); rlpipe never deletes through a link: replace "
                "the link by a folder, or "
                "delete what it points at yourself"
            )
    return target


def delete(path: AnyPath, within: AnyPath | None = None, missing_ok: bool = False) -> None:
    """Remove the file, folder or link ``path`` (a link itself, never what it points at).

    ``within``: the folder ``path`` must lie below, reached without a link (default: its parent,
    which checks nothing but that a link is not followed). Raises :class:`UnsafeRemoval` before
    deleting anything when ``path`` escapes ``within``; ``FileNotFoundError`` when ``path`` is
    missing, unless ``missing_ok``.
    """
    if is_object(path):
        remove_tree(path)
        return
    target = check_confined(path, Path(path).parent if within is None else within)
    assert target is not None
    if not target.is_symlink() and not target.exists():
        if missing_ok:
            return
        raise FileNotFoundError(2, "No such file or directory", str(path))
    if target.is_symlink() or not target.is_dir():
        target.unlink()
        return
    trash = target.with_name(temporary_name(target.name, "del"))
    os.rename(target, trash)
    shutil.rmtree(trash)  # unlinks links inside the tree, never follows them


def set_aside(paths: Iterable[AnyPath], folder: AnyPath, within: AnyPath) -> None:
    """Move each of ``paths`` into ``folder`` (created), keeping its name: kept, out of the way.

    Every path and ``folder`` must lie below ``within``, reached without a symbolic link (as for
    :func:`delete`; nothing moves otherwise). Locally each is one rename (a link moves as a link);
    on an object store its keys are copied, then deleted (:func:`~rlpipe.artifacts.fs.move_tree`).
    """
    paths = list(paths)
    for path in (*paths, folder / "x"):
        check_confined(path, within)
    if not is_object(folder):
        Path(folder).mkdir(parents=True, exist_ok=True)
    for path in paths:
        target = folder / path.name
        if is_object(path) or is_object(target):
            assert is_object(path) and is_object(target), "a move between a folder and an object store"
            move_tree(path, target)
        else:
            os.rename(path, target)


@contextlib.contextmanager
def output_folder(folder: AnyPath) -> Iterator[None]:
    """Create ``folder`` (and its missing parents) for a command's output, and take back an unused one.

    When the body raises, the folders this call created and the command left empty are removed: a
    command refused part-way leaves no trace, and one that wrote some output keeps it. Nothing
    to create on an object store (a prefix exists by its keys).
    """
    if is_object(folder):
        yield
        return
    folder = Path(folder)
    created = [p for p in (folder, *folder.parents) if not p.exists()]  # deepest first
    folder.mkdir(parents=True, exist_ok=True)
    try:
        yield
    except BaseException:
        for path in created:
            with contextlib.suppress(OSError):  # not empty (output kept) or gone: leave it
                path.rmdir()
        raise


def clean_temporaries(directory: AnyPath, names: re.Pattern[str] | None = None) -> list[Path]:
    """Remove temporaries of dead processes (and of this one) in ``directory``; return them.

    ``names`` restricts the clean-up to temporaries whose final name matches it. A temporary of this
    process counts as dead: call this before the process writes anything there. A temporary that
    is a link is unlinked. An object store has no temporaries (its writes are single PUTs;
    uncommitted groups are the store's to clean).
    """
    if is_object(directory):
        return []
    directory = Path(directory)
    removed: list[Path] = []
    for path in directory.iterdir() if directory.is_dir() else ():
        match = TEMPORARY_NAME.match(path.name)
        if not match or (names is not None and not names.match(match["name"])):
            continue
        pid = int(match["pid"])
        if pid == os.getpid() or not pid_alive(pid):
            try:
                delete(path, within=directory, missing_ok=True)
            except OSError:
                continue  # not ours to remove (permissions): left for its owner, not reported as removed
            removed.append(path)
    return removed


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (a temporary it owns may still be being written)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:  # exists, owned by another user
        pass
    return True
