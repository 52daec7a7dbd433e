"""The process's allocator: keep the update's large temporaries mapped from one minibatch to the next.

A CPU update of a large minibatch allocates and frees the same few tensors every minibatch (one
32,768 × 256 fp32 activation is 32 MiB). glibc serves blocks above its mmap threshold — at most
32 MiB even when raised — with a fresh ``mmap`` and returns them with ``munmap`` on free, so every
minibatch faults its activations in again, page by page, and at thousands of envs those faults
are a large part of the iteration. :func:`tune_malloc` switches glibc's mmap off for the process
(``M_MMAP_MAX = 0``: every block comes from the heap, whatever its size), keeps up to
``TRIM_THRESHOLD`` of freed memory at the top of the heap mapped instead of trimming it, and grows
the heap ``TOP_PAD`` at a time. A raised mmap threshold does not do it (the faults come back for
blocks above 32 MiB), and jemalloc/tcmalloc replace malloc only when preloaded (the user sets
``LD_PRELOAD`` or the process re-executes itself); ``benchmarks/profile/allocator.py`` compares
the settings.

Outside Linux/glibc (musl, macOS, Windows) nothing is changed and nothing is reported.
``RLPIPE_MALLOC=system`` leaves glibc's defaults alone too (for comparisons).
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys

__all__ = ["MALLOC_ENV", "SETTINGS", "glibc", "mallopt", "tune_malloc"]

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_MAX = -1, -2, -4
"""``mallopt`` parameter numbers of glibc's ``<malloc.h>``."""
TRIM_THRESHOLD = 2**30
"""Freed memory at the top of the heap below this stays mapped for the next minibatch."""
TOP_PAD = 64 * 2**20
"""Extra bytes the heap grows by at a time, so a growing update asks the kernel rarely."""
SETTINGS: dict[int, int] = {M_MMAP_MAX: 0, M_TRIM_THRESHOLD: TRIM_THRESHOLD, M_TOP_PAD: TOP_PAD}
"""Applied in this order by :func:`tune_malloc`."""
MALLOC_ENV = "RLPIPE_MALLOC"
"""``system``: keep the C library's allocator settings (the default, ``tuned``, applies ``SETTINGS``)."""


def glibc() -> ctypes.CDLL | None:
    """The process's C library when it is glibc (it exports ``gnu_get_libc_version``), else ``None``."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - AttributeError on musl and other C libraries
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    except (OSError, AttributeError):
        return None
    return libc


def mallopt(settings: dict[int, int]) -> bool:
    """``mallopt(param, value)`` for every item on glibc; ``False`` when any is refused or no glibc."""
    libc = glibc()
    if libc is None:
        return False
    return all([bool(libc.mallopt(param, value)) for param, value in settings.items()])


@functools.cache
def tune_malloc() -> bool:
    """Apply ``SETTINGS`` once per process; ``True`` when glibc took them all, ``False`` otherwise.

    Call it before the first large allocation (:func:`rlpipe.trainer.parts.build_parts` and
    :func:`rlpipe.offline.rebuild.rebuild_algorithm` do); blocks mapped earlier are unaffected but
    freed as before. ``RLPIPE_MALLOC=system`` skips it (``False``).
    """
    if os.environ.get(MALLOC_ENV, "tuned") == "system":
        return False
    return mallopt(SETTINGS)
