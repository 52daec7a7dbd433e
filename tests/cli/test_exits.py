"""Exit codes and one-line messages of :mod:`rlpipe.cli.exits`."""

from __future__ import annotations

import errno

import pytest

from rlpipe.artifacts.checkpoints import ChecksumError
from rlpipe.artifacts.errors import StoreError
from rlpipe.cli.exits import describe
from rlpipe.rollout_checks import NonFiniteError
from rlpipe.trainer.signals import Interrupted


@pytest.mark.parametrize(
    ("error", "advice"),
    [
        (errno.ENOSPC, "the disk is full: free space"),
        (errno.EROFS, "the file system is read-only: choose a writable trainer.data_dir / --out"),
        (errno.EACCES, "permission denied: fix the permissions"),
        (errno.EFBIG, "the file-size limit (ulimit -f) was reached: raise it"),
    ],
)
def test_os_errors_name_the_file_and_what_to_do(error, advice):
    error = OSError(error, "strerror", "/data/run/ckpt-000003.pt")
    code, line = describe(error, "rlpipe run p.yaml --resume")
    assert code == 1
    assert line.startswith(f"/data/run/ckpt-000003.pt: strerror — {advice}")
    assert line.endswith("; resume with: rlpipe run p.yaml --resume")


def test_a_store_write_failure_keeps_its_os_error_class():
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as inner:
            raise StoreError("writing /d/iter-000002.zarr failed: [Errno 28] No space left") from inner
    except StoreError as exc:
        code, line = describe(exc)
    assert code == 1 and line.startswith("/d/iter-000002.zarr: No space left on device — the disk is full")


def test_classes_of_failure():
    assert describe(NonFiniteError("non-finite 'reward'", "reward"))[0] == 3
    assert describe(ChecksumError("x: checksum mismatch"))[0] == 3
    assert describe(StoreError("x: no rollout store here")) == (2, "x: no rollout store here")
    assert describe(FileNotFoundError(2, "No such file", "p.yaml"))[0] == 2
    assert describe(MemoryError())[0] == 1
    oom = RuntimeError("CUDA out of memory. Tried to allocate 2 GiB")
    assert describe(oom)[1].startswith("out of memory")
    assert describe(Interrupted(15, 3, "ckpt-000003.pt"), "rlpipe run p --resume") == (
        143,
        "stopped by SIGTERM at the iteration boundary; checkpoint ckpt-000003.pt (iteration 3); "
        "resume with: rlpipe run p --resume",
    )
    code, line = describe(KeyError("boom"))
    assert code == 1 and line == "KeyError: 'boom' (rlpipe --debug … shows the traceback)"
