"""The one filesystem abstraction of a run directory: a local folder, or an object store (fsspec URL).

Every writer of a run directory asks this module for the few operations whose guarantees differ:

=====================  =================================  ==========================================
operation              local folder                       object store (``s3://…``)
=====================  =================================  ==========================================
whole-file write       temporary, fsync, rename           one PUT (an object appears whole or not)
Zarr group publish     build under a temporary, rename    write the arrays, then the root
                                                          ``zarr.json`` last: it is the commit marker
exclusive create       ``O_CREAT | O_EXCL``               PUT with ``If-None-Match: *``
conditional overwrite  (single writer: plain replace)     PUT with ``If-Match: <ETag>``
delete a folder        rename away, then delete           delete every key under the prefix
move a folder aside    one rename                         copy every key (the root ``zarr.json``
                                                          last), then delete the old prefix
=====================  =================================  ==========================================

A rollout group on an object store without its root ``zarr.json`` is uncommitted: listings skip it,
readers refuse it, and the writer that holds the run lock removes it (a killed writer's leftovers).
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
from collections.abc import Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast, runtime_checkable

from typing_extensions import TypeIs

from rlpipe.location import AnyPath, ObjectPath, url_problem
from rlpipe.object_store import StorageUnavailable, filesystem, with_retries

if TYPE_CHECKING:
    from asyncio import AbstractEventLoop

    from fsspec.asyn import AsyncFileSystem
    from zarr.storage import FsspecStore, LocalStore

__all__ = [
    "AnyPath",
    "ObjectPath",
    "PreconditionFailed",
    "StorageUnavailable",
    "UnusableLocation",
    "as_path",
    "chunk_sizes",
    "create_exclusive",
    "disk_free",
    "folder_problem",
    "is_object",
    "move_tree",
    "probe",
    "read_versioned",
    "remove_tree",
    "replace_if",
    "run_coroutine",
    "tree_bytes",
    "zarr_store",
]

T = TypeVar("T")


class _Stream(Protocol):
    """An object store's response body, read whole."""

    async def read(self) -> bytes: ...


@runtime_checkable
class _S3Calls(Protocol):
    """An s3fs filesystem: raw S3 requests (conditional PUTs, ETags)."""

    def call_s3(self, method: str, *args: object, **kwargs: object) -> dict[str, Any]: ...


def _sync(loop: AbstractEventLoop | None, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """``make()`` run to its end on ``loop`` (fsspec's I/O loop; ``None`` fails there), from this thread."""
    from fsspec.asyn import sync

    return cast(T, sync(loop, make))  # fsspec's ``sync`` is unannotated: its inferred return is None


def _listing(path: ObjectPath) -> dict[str, dict[str, Any]]:
    """``{key: info}`` of every object under ``path`` (one listing)."""
    # fsspec's ``find`` is unannotated: its return is inferred as dict | list; ``detail=True`` gives the dict
    return cast("dict[str, dict[str, Any]]", with_retries(path, lambda: path.fs.find(path.key, detail=True)))


class PreconditionFailed(RuntimeError):
    """A conditional write lost: the object changed (or appeared) since it was read."""


def is_object(path: object) -> TypeIs[ObjectPath]:
    """True for a path on an object store."""
    return isinstance(path, ObjectPath)


def as_path(path: str | AnyPath) -> AnyPath:
    """``path`` as a ``Path`` or, for a URL, an :class:`ObjectPath` (never a mangled ``s3:/…`` Path)."""
    if isinstance(path, ObjectPath):
        return path
    if isinstance(path, str) and "://" in path:
        return ObjectPath(path)
    return Path(path)


def remove_tree(path: ObjectPath) -> None:
    """Delete every key under the prefix ``path`` (and the object ``path`` itself).

    Call it through :func:`rlpipe.artifacts.removal.delete`, the one door of every delete.
    """
    fs = path.fs
    # fsspec's ``find`` is unannotated: its return is inferred as dict | list; without ``detail`` a list
    keys = cast("list[str]", with_retries(path, lambda: fs.find(path.key, withdirs=False)))
    if path.key not in keys and with_retries(path, lambda: fs.isfile(path.key)):
        keys.append(path.key)
    if keys:
        with_retries(path, lambda: fs.rm(keys))


def move_tree(path: ObjectPath, target: ObjectPath) -> None:
    """Copy every key under the prefix ``path`` to ``target``, then delete the keys under ``path``.

    A group's root ``zarr.json`` (its commit marker) is copied last: a move cut short leaves
    ``target`` uncommitted and ``path`` whole. Call it through
    :func:`rlpipe.artifacts.removal.set_aside`, beside the one door of every delete.
    """
    fs = path.fs
    keys = cast("list[str]", with_retries(path, lambda: fs.find(path.key, withdirs=False)))
    marker = f"{path.key}/zarr.json"
    for key in sorted(keys, key=lambda k: k == marker):  # stable: the marker alone goes to the end
        dest = target.key + key[len(path.key) :]
        with_retries(path, lambda key=key, dest=dest: fs.copy(key, dest))
    remove_tree(path)


# -- conditional writes -------------------------------------------------------------------------
def _split(path: ObjectPath) -> tuple[str, str]:
    bucket, _, key = path.key.partition("/")
    return bucket, key


def _put(path: ObjectPath, data: bytes, **condition: str) -> str:
    """One PUT with an S3 precondition; the new ETag. ``PreconditionFailed`` when it does not hold."""
    fs = path.fs
    if not isinstance(fs, _S3Calls):  # another fsspec store: best effort, create-only is its one guarantee
        if "IfNoneMatch" in condition:
            try:
                with_retries(path, lambda: fs.pipe_file(path.key, data, mode="create"))
            except FileExistsError:
                raise PreconditionFailed(f"{path}: already exists") from None
        else:
            with_retries(path, lambda: fs.pipe_file(path.key, data))
        return ""
    bucket, key = _split(path)
    try:
        out = with_retries(
            path, lambda: fs.call_s3("put_object", Bucket=bucket, Key=key, Body=data, **condition)
        )
    except (FileExistsError, OSError) as exc:
        if isinstance(exc, StorageUnavailable) or not _is_precondition(exc):
            raise
        raise PreconditionFailed(f"{path}: changed since it was read") from None
    return str(out.get("ETag", ""))


def _is_precondition(exc: BaseException) -> bool:
    return isinstance(exc, FileExistsError) or "pre-condition" in str(exc) or "PreconditionFailed" in str(exc)


def create_exclusive(path: ObjectPath, data: bytes) -> str:
    """Create ``path`` only if no object is there (``If-None-Match: *``); its ETag."""
    return _put(path, data, IfNoneMatch="*")


def replace_if(path: ObjectPath, data: bytes, etag: str | None) -> str:
    """Overwrite ``path`` only if it still has ``etag`` (``None``: only if absent); the new ETag."""
    if etag is None:
        return create_exclusive(path, data)
    return _put(path, data, IfMatch=etag)


def read_versioned(path: ObjectPath) -> tuple[bytes, str] | None:
    """``(bytes, ETag)`` of the object at ``path``, or ``None`` when there is none."""
    fs = path.fs
    if not isinstance(fs, _S3Calls):
        try:
            return path.read_bytes(), ""
        except FileNotFoundError:
            return None
    bucket, key = _split(path)

    def get() -> tuple[bytes, str]:
        out = fs.call_s3("get_object", Bucket=bucket, Key=key)
        loop = cast("AsyncFileSystem", fs).loop  # s3fs makes ``call_s3`` at runtime: no static class has both
        return _read_body(loop, out["Body"]), str(out.get("ETag", ""))

    try:
        return with_retries(path, get)
    except FileNotFoundError:
        return None


def _read_body(loop: AbstractEventLoop | None, body: AbstractAsyncContextManager[_Stream]) -> bytes:
    async def read() -> bytes:
        async with body as stream:
            return await stream.read()

    return _sync(loop, read)


# -- Zarr over the store ------------------------------------------------------------------------
def zarr_store(path: AnyPath, read_only: bool = False) -> LocalStore | FsspecStore:
    """The Zarr v3 store rooted at ``path``: ``LocalStore`` or an ``FsspecStore`` on the async filesystem.

    Call inside a coroutine run by :func:`run_coroutine` with the same ``path``.
    """
    if not is_object(path):
        from zarr.storage import LocalStore

        return LocalStore(path, read_only=read_only)
    from zarr.storage import FsspecStore

    return FsspecStore(fs=_async_fs(path.protocol), path=path.key, read_only=read_only)


def _async_fs(protocol: str) -> AsyncFileSystem:
    """An async twin of the process's filesystem, bound to fsspec's I/O loop (where its coroutines run)."""
    sync_fs = filesystem(protocol)
    fields = vars(sync_fs)  # the twin lives on the filesystem it mirrors
    if "_async_twin" not in fields:
        import fsspec
        from fsspec.asyn import get_loop

        from rlpipe.object_store import storage_options

        twin = fsspec.filesystem(protocol, asynchronous=True, loop=get_loop(), **storage_options(protocol))
        if not getattr(twin, "async_impl", False):
            from zarr.storage._fsspec import _make_async

            twin = _make_async(sync_fs)
        fields["_async_twin"] = twin
        atexit.register(_close_twin, twin)
    return fields["_async_twin"]


def _close_twin(twin: AsyncFileSystem) -> None:
    """Close the async twin's HTTP session at exit (else aiohttp warns about an unclosed session)."""
    from fsspec.asyn import get_loop, sync

    client = getattr(twin, "_s3", None)
    if client is not None:
        with contextlib.suppress(Exception):
            sync(get_loop(), client.__aexit__, None, None, None, timeout=2)


def run_coroutine(
    path: AnyPath, make: Callable[[], Coroutine[Any, Any, T]], local: Callable[[Coroutine[Any, Any, T]], T]
) -> T:
    """Run ``make()`` where ``path``'s store can serve it: ``local(coro)`` for a folder, else fsspec's loop.

    Retried as a whole on transient store failures (a rollout write is idempotent until committed).
    """
    if not is_object(path):
        return local(make())
    from fsspec.asyn import get_loop

    return with_retries(path, lambda: _sync(get_loop(), make))


def chunk_sizes(folder: AnyPath) -> dict[str, int]:
    """``{relative key: size}`` of every file below ``folder`` but ``zarr.json`` files (one listing)."""
    if not is_object(folder):
        import os

        return {
            os.path.relpath(os.path.join(root, f), folder): os.path.getsize(os.path.join(root, f))
            for root, _, files in os.walk(folder)
            for f in files
            if f != "zarr.json"
        }
    found = _listing(folder)
    prefix = folder.key.rstrip("/") + "/"
    return {
        name.removeprefix(prefix): int(info.get("size") or 0)
        for name, info in found.items()
        if not name.endswith("/zarr.json") and name != folder.key
    }


class UnusableLocation(ValueError):
    """A run location that cannot be used at all: no endpoint, no bucket, refused credentials (exit 2)."""


def probe(path: AnyPath) -> None:
    """One quick request before anything is written: the store answers, the bucket exists, we may list it.

    Raises :class:`UnusableLocation` naming the URL (one line); a local path passes untouched.
    """
    if not is_object(path):
        return
    problem = url_problem(str(path))
    if problem:
        raise UnusableLocation(problem)
    fs = path.fs
    bucket = path.key.split("/")[0]
    try:
        if isinstance(fs, _S3Calls):
            fs.call_s3("list_objects_v2", Bucket=bucket, MaxKeys=1)
        else:
            fs.ls(bucket, detail=False)
    except Exception as exc:
        raise UnusableLocation(f"{path}: {_why(exc, bucket)}") from None


def _why(exc: BaseException, bucket: str) -> str:
    import os

    text = " ".join(str(exc).split())[:160]
    endpoint = (
        os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT_URL_S3") or "the default endpoint"
    )
    if isinstance(exc, PermissionError) or any(
        code in text
        for code in (
            "InvalidAccessKeyId",
            "SignatureDoesNotMatch",
            "AccessDenied",
            "Forbidden",
            "credentials",
            "Access Key",
        )
    ):
        return (
            f"the store refused the credentials ({text}); check AWS_ACCESS_KEY_ID / "
            "AWS_SECRET_ACCESS_KEY / AWS_PROFILE"
        )
    if isinstance(exc, FileNotFoundError) or "NoSuchBucket" in text or "does not exist" in text:
        return f"bucket {bucket!r} does not exist at {endpoint}; create it or fix trainer.data_dir"
    lowered = text.lower()
    if "connect" in lowered or "timeout" in lowered or isinstance(exc, ConnectionError | TimeoutError):
        return f"cannot reach the object store at {endpoint} ({text}); check AWS_ENDPOINT_URL and the network"
    return f"the object store cannot be used ({type(exc).__name__}: {text})"


def tree_bytes(path: AnyPath) -> int:
    """Bytes of every file below ``path`` (an object store: one listing, not a request per file)."""
    if not is_object(path):
        return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())
    found = _listing(path)
    return sum(int(info.get("size") or 0) for info in found.values())


def folder_problem(path: AnyPath) -> str | None:
    """Why no run directory can be made at the local ``path``, else ``None`` (an object store: ``None``).

    Checked before anything is built or written: the nearest existing part of ``path`` is a file, or
    no folder can be created in it (``/proc``, a vanished mount). A folder made for the check is
    removed at once; a folder merely closed to writes is left to the write that will name it.
    """
    import errno
    import os
    import tempfile

    if is_object(path):
        return None
    path = Path(path).absolute()
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is None:
        return None
    if not existing.is_dir():
        return f"{existing} is a file, not a directory"
    if existing == path:
        return None
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".rlpipe-probe-", dir=existing))
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EINVAL):
            return f"no folder can be created in {existing} ({exc.strerror})"
    return None


def disk_free(path: AnyPath) -> int | None:
    """Free bytes on the file system of ``path`` (its nearest existing folder); ``None`` on object storage."""
    if is_object(path):
        return None
    folder = Path(path).absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return shutil.disk_usage(folder).free
