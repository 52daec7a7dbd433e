"""``rlpipe.runtime.allocator``: glibc keeps large freed blocks mapped; elsewhere nothing changes."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys

import pytest

from rlpipe.runtime import allocator

GLIBC = sys.platform.startswith("linux") and allocator.glibc() is not None

# Allocates, touches and frees a 64 MiB block ten times; prints the minor page faults of the
# last nine (the first always faults: the memory is new to the process).
FAULTS_PER_REPEAT = """
import ctypes, resource, sys
from rlpipe.runtime.allocator import tune_malloc
applied = tune_malloc()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
size = 64 * 2**20

def touch_once():
    block = libc.malloc(size)
    ctypes.memset(block, 1, size)
    libc.free(block)

touch_once()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(9):
    touch_once()
print(applied, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def faults_per_repeat(malloc_env: str) -> tuple[bool, int]:
    """``(tune_malloc() result, page faults of nine repeated 64 MiB allocations)`` in a fresh process."""
    env = {**os.environ, allocator.MALLOC_ENV: malloc_env}
    done = subprocess.run(
        [sys.executable, "-c", FAULTS_PER_REPEAT], env=env, capture_output=True, text=True, check=True
    )
    applied, faults = done.stdout.split()
    return applied == "True", int(faults)


@pytest.mark.skipif(not GLIBC, reason="the remedy applies to glibc only")
def test_large_blocks_stay_mapped_with_the_tuned_allocator():
    tuned_applied, tuned = faults_per_repeat("tuned")
    system_applied, system = faults_per_repeat("system")
    assert tuned_applied and not system_applied
    pages = 9 * 64 * 2**20 // os.sysconf("SC_PAGE_SIZE")
    assert system > pages / 2  # glibc's default maps every 64 MiB block afresh: each page faults
    assert tuned < system / 20  # tuned: the block is reused from the heap, already faulted in


@pytest.mark.skipif(not GLIBC, reason="the remedy applies to glibc only")
def test_settings_are_accepted_by_glibc():
    assert allocator.mallopt(allocator.SETTINGS) is True


def test_without_glibc_nothing_is_applied_and_nothing_raises(monkeypatch):
    def no_libc(*args: object, **kwargs: object) -> ctypes.CDLL:
        raise OSError("no C library here")

    monkeypatch.setattr(allocator.ctypes, "CDLL", no_libc)
    allocator.tune_malloc.cache_clear()
    try:
        assert allocator.glibc() is None
        assert allocator.mallopt(allocator.SETTINGS) is False
        assert allocator.tune_malloc() is False
    finally:
        allocator.tune_malloc.cache_clear()


def test_a_c_library_without_glibc_symbols_is_left_alone(monkeypatch):
    class Musl:  # a C library with mallopt but without gnu_get_libc_version
        def __init__(self, *args: object) -> None:
            pass

        def mallopt(self, param: int, value: int) -> int:  # pragma: no cover - must not be called
            raise AssertionError("mallopt called on a non-glibc C library")

    monkeypatch.setattr(allocator.ctypes, "CDLL", Musl)
    assert allocator.glibc() is None
    assert allocator.mallopt(allocator.SETTINGS) is False


def test_other_platforms_are_left_alone(monkeypatch):
    monkeypatch.setattr(allocator.sys, "platform", "darwin")
    assert allocator.glibc() is None
    allocator.tune_malloc.cache_clear()
    try:
        assert allocator.tune_malloc() is False
    finally:
        allocator.tune_malloc.cache_clear()
