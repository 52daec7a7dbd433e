"""The object store behind a URL: one fsspec filesystem per endpoint and credentials, calls retried.

:func:`filesystem` gives one fsspec filesystem per protocol, process and endpoint/credential
variables (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_DEFAULT_REGION``, ``AWS_PROFILE``, …), with no listing cache and short client retries.
:func:`with_retries` retries a call with backoff on transient failures (server down, throttling)
and raises :class:`StorageUnavailable` after the last: ``RLPIPE_STORE_RETRIES`` (default 5
attempts) and ``RLPIPE_STORE_BACKOFF_S`` (first wait, default 0.5 s, doubling) tune it. fsspec is
imported only when a filesystem is asked for.
"""

from __future__ import annotations

import errno
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from rlpipe.extras import require

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

__all__ = ["S3_SCHEMES", "StorageUnavailable", "filesystem", "storage_options", "with_retries"]

T = TypeVar("T")
S3_SCHEMES = ("s3", "s3a")
"""URL schemes served by s3fs (the ``s3`` extra)."""


class StorageUnavailable(OSError):
    """The object store kept failing after every retry (a runtime failure, exit code 1)."""


_FILESYSTEMS: dict[tuple[Any, ...], Any] = {}
_LOCK = threading.Lock()


_ENV = (
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
    "AWS_PROFILE",
)
"""Variables that pick the endpoint and credentials: a change makes a new filesystem (tests, scripts)."""


def filesystem(protocol: str) -> AbstractFileSystem:
    """One fsspec filesystem per protocol, process and endpoint/credential variables (short retries)."""
    key = (protocol, os.getpid(), *(os.environ.get(name) for name in _ENV))
    with _LOCK:
        if key not in _FILESYSTEMS:
            import fsspec

            if protocol in S3_SCHEMES:
                require("s3fs", f"{protocol}://")

            _FILESYSTEMS[key] = fsspec.filesystem(protocol, **storage_options(protocol))
        return _FILESYSTEMS[key]


def storage_options(protocol: str) -> dict[str, Any]:
    """Fsspec options: no listing cache (other nodes write the same run), bounded S3 client retries."""
    if protocol in S3_SCHEMES:
        return {
            "use_listings_cache": False,
            "skip_instance_cache": True,
            "config_kwargs": {
                "connect_timeout": 5,
                "read_timeout": 60,
                "retries": {"max_attempts": 2, "mode": "standard"},
            },
        }
    return {"skip_instance_cache": True}


_PERMANENT = (
    FileNotFoundError,
    FileExistsError,
    PermissionError,
    IsADirectoryError,
    NotADirectoryError,
    KeyError,
    ValueError,
    TypeError,
)


def with_retries(path: object, call: Callable[[], T], what: str = "") -> T:
    """``call()``, retried with exponential backoff on transient failures; then ``StorageUnavailable``.

    Missing keys, failed preconditions and refused credentials are answers, not outages: they are
    raised at once. After ``RLPIPE_STORE_RETRIES`` attempts the error names ``path`` in one line.
    """
    attempts = max(1, int(os.environ.get("RLPIPE_STORE_RETRIES", "5")))
    wait = float(os.environ.get("RLPIPE_STORE_BACKOFF_S", "0.5"))
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except _PERMANENT:
            raise
        except Exception as exc:
            if _permanent(exc):
                raise
            if attempt == attempts:
                detail = (str(exc).strip().splitlines() or [""])[0][:200]
                raise StorageUnavailable(
                    errno.EIO,
                    f"object store failed after {attempts} attempts{what} ({type(exc).__name__}: {detail})",
                    str(path),
                ) from exc
            print(
                f"Warning: {path}: {type(exc).__name__} (attempt {attempt}/{attempts}); retrying in "
                f"{wait:.1f}s",
                file=sys.stderr,
            )
            time.sleep(wait)
            wait *= 2
    raise AssertionError("unreachable")


def _permanent(exc: BaseException) -> bool:
    """Refused credentials and access: retrying cannot help."""
    text = str(exc)
    return any(
        code in text
        for code in (
            "InvalidAccessKeyId",
            "SignatureDoesNotMatch",
            "AccessDenied",
            "NoSuchBucket",
            "PreconditionFailed",
            "pre-conditions",
        )
    )
