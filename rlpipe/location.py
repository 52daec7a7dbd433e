"""Where a run lives: a local folder (``pathlib.Path``) or an fsspec URL (:class:`ObjectPath`).

``trainer.data_dir: s3://bucket/prefix`` makes every run directory an :class:`ObjectPath`: a
path-like value with the subset of ``pathlib.Path`` the run-directory code uses (``/``, ``name``,
``parent``, ``exists``, ``iterdir``, ``read_bytes``, …) over an fsspec filesystem. It deliberately
has no ``__fspath__``: an ``os``-level call on it fails loudly instead of writing a local
``s3:/…`` folder. The object-store semantics (atomic puts, conditional creates/overwrites, commit
markers) live in :mod:`rlpipe.artifacts.fs`; here are only paths, listing and plain reads/writes,
each retried with backoff on transient failures (server down, throttling): the filesystem, its
endpoint, credentials and retries are :mod:`rlpipe.object_store`'s.
"""

from __future__ import annotations

import io
import os
import posixpath
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeAlias, cast

from rlpipe.extras import install_hint, is_installed
from rlpipe.object_store import S3_SCHEMES, filesystem, with_retries

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

__all__ = ["AnyPath", "ObjectPath", "is_url", "location", "url_problem"]


def is_url(value: object) -> bool:
    """True for ``scheme://…`` (``file://`` included: it names a local folder through fsspec)."""
    return isinstance(value, ObjectPath) or (isinstance(value, str) and "://" in value)


def location(value: str | AnyPath) -> AnyPath:
    """``value`` as a run-directory path: an :class:`ObjectPath` for a URL, else a ``Path``."""
    if isinstance(value, ObjectPath):
        return value
    if isinstance(value, str) and "://" in value:
        return ObjectPath(value)
    return Path(value)


def url_problem(value: str) -> str | None:
    """Why ``value`` cannot be a run location (a URL scheme without an installed filesystem), or ``None``."""
    if "://" not in value:
        return None
    scheme, _, rest = value.partition("://")
    if not scheme or not rest.strip("/"):
        return f"got {value!r}; a URL needs a scheme and a bucket or folder (s3://bucket/prefix)"
    if scheme in S3_SCHEMES and not is_installed("s3fs"):
        return install_hint("s3fs", value)
    from fsspec.registry import get_filesystem_class, known_implementations

    try:
        get_filesystem_class(scheme)
    except (ImportError, ValueError):
        known = known_implementations.get(scheme, {})
        hint = f" ({known['err']})" if known.get("err") else ""
        return (
            f"{value}: no filesystem for the URL scheme {scheme!r} is installed{hint}; accepted: a local "
            "folder or a URL of an installed fsspec filesystem such as s3://bucket/prefix"
        )
    return None


class ObjectPath:
    """``protocol://key``: a file or folder (a key prefix) on an fsspec filesystem."""

    __slots__ = ("key", "protocol")

    def __init__(self, url: str, key: str | None = None) -> None:
        if key is None:
            protocol, _, key = url.partition("://")
        else:
            protocol = url
        self.protocol = protocol
        self.key = posixpath.normpath(key.strip("/")) if key.strip("/") else ""

    # -- pure path operations -------------------------------------------------------------------
    def __str__(self) -> str:
        return f"{self.protocol}://{self.key}"

    def __repr__(self) -> str:
        return f"ObjectPath({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectPath) and (self.protocol, self.key) == (other.protocol, other.key)

    def __hash__(self) -> int:
        return hash((self.protocol, self.key))

    def __lt__(self, other: ObjectPath) -> bool:
        return str(self) < str(other)

    def __truediv__(self, part: str | Path) -> ObjectPath:
        return self.joinpath(part)

    def joinpath(self, *parts: str | Path) -> ObjectPath:
        """The path with ``parts`` appended (``/``-joined)."""
        return ObjectPath(self.protocol, posixpath.join(self.key, *(str(p) for p in parts)))

    @property
    def name(self) -> str:
        """The last component (``iter-000001.zarr``)."""
        return posixpath.basename(self.key)

    @property
    def stem(self) -> str:
        """The name without its last suffix."""
        return Path(self.name).stem

    @property
    def suffix(self) -> str:
        """The last suffix of the name (``.zarr``)."""
        return Path(self.name).suffix

    @property
    def parent(self) -> ObjectPath:
        """The enclosing folder (a bucket's parent is the bucket)."""
        return ObjectPath(self.protocol, posixpath.dirname(self.key) or self.key)

    @property
    def parts(self) -> tuple[str, ...]:
        """``(protocol://, bucket, key parts…)``."""
        return (f"{self.protocol}://", *self.key.split("/"))

    def with_name(self, name: str) -> ObjectPath:
        """A sibling named ``name``."""
        return self.parent / name

    def relative_to(self, other: ObjectPath) -> Path:
        """The path below ``other``, as a relative ``Path``."""
        return Path(posixpath.relpath(self.key, other.key))

    def is_relative_to(self, other: object) -> bool:
        """Whether this path lies at or below ``other``."""
        return isinstance(other, ObjectPath) and (self.key + "/").startswith(other.key.rstrip("/") + "/")

    def is_absolute(self) -> bool:
        """A URL is always absolute."""
        return True

    def resolve(self) -> ObjectPath:
        """Itself (no links, no cwd)."""
        return self

    absolute = resolve

    def expanduser(self) -> ObjectPath:
        """Itself."""
        return self

    # -- I/O --------------------------------------------------------------------------------------
    @property
    def fs(self) -> AbstractFileSystem:
        """The process's fsspec filesystem for this protocol (listing cache off: other nodes write too)."""
        return filesystem(self.protocol)

    def exists(self) -> bool:
        """A file, or a folder holding at least one key."""
        return with_retries(self, lambda: self.fs.exists(self.key))

    def is_file(self) -> bool:
        """An object under exactly this key."""
        return with_retries(self, lambda: self.fs.isfile(self.key))

    def is_dir(self) -> bool:
        """A prefix with keys below it (object stores have no empty folders)."""
        return with_retries(self, lambda: self.fs.isdir(self.key))

    def is_symlink(self) -> bool:
        """Never: object stores have no links."""
        return False

    def iterdir(self) -> Iterator[ObjectPath]:
        """The files and folders directly below this folder (none when it does not exist)."""
        try:
            names = with_retries(self, lambda: self.fs.ls(self.key, detail=False))
        except FileNotFoundError:
            return iter(())
        own = self.key.rstrip("/")
        return iter([self / posixpath.basename(n.rstrip("/")) for n in names if n.rstrip("/") != own])

    def glob(self, pattern: str) -> Iterator[ObjectPath]:
        """The entries directly below this folder whose names match ``pattern`` (one level, fnmatch)."""
        import fnmatch

        return iter([p for p in self.iterdir() if fnmatch.fnmatchcase(p.name, pattern)])

    def rglob(self, pattern: str = "*") -> Iterator[ObjectPath]:
        """Every file below this folder (``pattern`` must be ``*``: object stores list keys, not globs)."""
        if pattern != "*":
            raise ValueError(f"{self}: rglob supports only '*', got {pattern!r}")
        keys = with_retries(self, lambda: self.fs.find(self.key))
        return iter([ObjectPath(self.protocol, k) for k in keys if k != self.key])

    def read_bytes(self) -> bytes:
        """The object's bytes (``FileNotFoundError`` when there is none)."""
        return with_retries(self, lambda: cast(bytes, self.fs.cat_file(self.key)))  # whole objects: bytes

    def read_text(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        """The object decoded as text."""
        return self.read_bytes().decode(encoding, errors)

    def write_bytes(self, data: bytes | memoryview) -> int:
        """Put the whole object in one request: readers see the old object or the new one, never a part."""
        with_retries(self, lambda: self.fs.pipe_file(self.key, bytes(data)))
        return len(data)

    def write_text(self, text: str, encoding: str = "utf-8") -> int:
        """Put ``text`` as the whole object."""
        return self.write_bytes(text.encode(encoding))

    def open(self, mode: str = "r", newline: str | None = None, encoding: str = "utf-8") -> IO[Any]:
        """A file object; writes (``w``, ``a``: the old content plus the new) are put whole on close."""
        binary = "b" in mode
        if "r" in mode:
            data = self.read_bytes()
            return io.BytesIO(data) if binary else io.StringIO(data.decode(encoding), newline=newline)
        start = b""
        if "a" in mode:
            try:
                start = self.read_bytes()
            except FileNotFoundError:
                pass
        return _PutOnClose(self, start, binary, encoding, newline)

    def unlink(self, missing_ok: bool = False) -> None:
        """Delete the object."""
        try:
            with_retries(self, lambda: self.fs.rm_file(self.key))
        except FileNotFoundError:
            if not missing_ok:
                raise

    def rmdir(self) -> None:
        """Nothing to do: a prefix disappears with its last key."""

    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        """Nothing to do: prefixes need no creation (the bucket is checked at start)."""

    def stat(self) -> os.stat_result:
        """Size (``st_size``) and modification time (``st_mtime``) of the object."""
        info = with_retries(self, lambda: self.fs.info(self.key))
        modified: datetime | float = info.get("LastModified") or info.get("mtime") or 0
        mtime = modified.timestamp() if isinstance(modified, datetime) else float(modified)
        return os.stat_result((0, 0, 0, 0, 0, 0, int(info.get("size") or 0), 0, int(mtime), 0))


AnyPath: TypeAlias = Path | ObjectPath
"""A run-directory path: local or on an object store."""


class _PutOnClose(io.StringIO):
    """A text (or, with ``binary``, a bytes) buffer put as the whole object when closed."""

    def __init__(
        self, path: ObjectPath, start: bytes, binary: bool, encoding: str, newline: str | None
    ) -> None:
        super().__init__(newline=newline)
        self._path, self._start, self._binary, self._encoding = path, start, binary, encoding
        self._raw = io.BytesIO()

    def write(self, data: str | bytes) -> int:  # type: ignore[override]  # bytes in binary mode
        """Buffer ``data`` (bytes in binary mode)."""
        return self._raw.write(cast(bytes, data)) if self._binary else super().write(cast(str, data))

    def close(self) -> None:
        """Put the old content plus what was written, then close."""
        if not self.closed:
            body = self._raw.getvalue() if self._binary else self.getvalue().encode(self._encoding)
            self._path.write_bytes(self._start + body)
        super().close()
