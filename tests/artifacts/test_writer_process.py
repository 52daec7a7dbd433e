"""The store's writer process (rlpipe/artifacts/writer_process.py) and the proxies of a writer that
leaves the training interpreter alone: allocation per rollout, Python calls per submit, no write in
the training process."""

from __future__ import annotations

import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch
from _rollouts import assert_same, make_rollout

import rlpipe.artifacts.store as store_mod
from rlpipe import fast
from rlpipe.artifacts import zarr_local, zarr_write
from rlpipe.artifacts.store import RolloutStore, StoreError, WriterDiedError
from rlpipe.artifacts.zarr_read import read_rollout
from rlpipe.cli.exits import describe
from rlpipe.config import StoreCfg
from rlpipe.rollout import DIM_NAMES


def big_rollout(n: int, obs: int = 48, t: int = 24):
    """A schema-valid rollout of ``n`` envs with ``obs``-wide observations (``[n, t+1, obs]`` float32)."""
    from rlpipe.rollout import allocate_rollout

    rollout = allocate_rollout(n, t, (obs,), (), torch.int64, "cpu")
    rollout["obs"].copy_(torch.randn(n, t + 1, obs, generator=torch.Generator().manual_seed(n)))
    return rollout


def test_a_writer_process_killed_mid_write_is_one_error_naming_the_store(tmp_path, monkeypatch):
    monkeypatch.setenv("RLPIPE_FAULT_KILL_AT", "store.write:2")  # read by the writer process only
    store = RolloutStore(tmp_path, StoreCfg(writer="process"))
    store.submit(make_rollout(seed=1), {"iteration": 1})
    store.flush()
    store.submit(make_rollout(seed=2), {"iteration": 2})
    with pytest.raises(
        WriterDiedError,
        match=r"iter-000002\.zarr: the rollout store's writer process died "
        r"\(killed by SIGKILL\) while writing it",
    ) as info:
        store.flush()
    code, line = describe(info.value, "rlpipe run … --resume")
    assert code == 1 and "iter-000002.zarr" in line and "\n" not in line
    with pytest.raises(WriterDiedError):
        store.close()
    assert store.iterations() == [1]
    assert_same(read_rollout(tmp_path / "iter-000001.zarr")[0], make_rollout(seed=1))


def test_an_error_in_the_writer_process_is_the_stores_error_with_its_os_cause(tmp_path):
    root = tmp_path / "rollouts"
    store = RolloutStore(root, StoreCfg(writer="process"))
    if root.exists():
        root.rmdir()
    root.write_text("not a folder")  # the writer process cannot make the store's temporary there
    store.submit(make_rollout(), {"iteration": 1})
    message = r"writing .*iter-000001\.zarr failed: \[Errno 17\] File exists: '.*rollouts'"
    with pytest.raises(StoreError, match=message) as info:
        store.flush()
    assert isinstance(info.value.__cause__, OSError)
    assert describe(info.value)[0] == 1  # a runtime failure, as in the thread
    with pytest.raises(StoreError):
        store.close()


def test_process_mode_writes_nothing_in_the_training_process(tmp_path, monkeypatch):
    called = []

    def must_not_run(*args, **kwargs):
        called.append(args[:1])
        raise AssertionError("a write-path function ran in the training process")

    for owner, name in (
        (store_mod, "_write_checked"),
        (zarr_write, "write_rollout"),
        (zarr_local, "write_arrays"),
        (fast, "write_zarr_store"),
        (fast, "write_chunk"),
        (fast, "crc32c_of"),
    ):
        monkeypatch.setattr(owner, name, must_not_run)
    rollouts = [make_rollout(seed=k) for k in (1, 2, 3)]
    with RolloutStore(tmp_path, StoreCfg(writer="process", queue_size=2)) as store:
        for k, rollout in enumerate(rollouts, start=1):
            store.submit(rollout, {"iteration": k})
        store.flush()
    monkeypatch.undo()
    assert called == []
    assert store.iterations() == [1, 2, 3]
    for k, rollout in enumerate(rollouts, start=1):
        assert_same(read_rollout(tmp_path / f"iter-{k:06d}.zarr")[0], rollout)


def calls_per_submit(tmp_path: Path, writer: str, n: int) -> int:
    """Python calls (and C calls) on the training thread during the third ``submit`` of ``n``-env rollouts."""
    with RolloutStore(tmp_path / f"{writer}-{n}", StoreCfg(writer=writer)) as store:
        for k in (1, 2):
            store.submit(big_rollout(n), {"iteration": k})
        store.flush()
        rollout = big_rollout(n)
        calls = []
        sys.setprofile(lambda frame, event, arg: calls.append(1) if event in ("call", "c_call") else None)
        try:
            store.submit(rollout, {"iteration": 3})
        finally:
            sys.setprofile(None)
        store.flush()
    return len(calls)


@pytest.mark.parametrize("writer", ["thread", "process"])
def test_python_calls_per_submit_do_not_grow_with_the_envs(tmp_path, writer):
    small, large = calls_per_submit(tmp_path, writer, 64), calls_per_submit(tmp_path, writer, 4096)
    assert large == small, (small, large)


def test_the_copy_free_writer_allocates_under_1_mb_per_rollout(tmp_path):
    """What the writer process runs (numpy views in, files out): its peak Python/numpy allocation."""
    arrays = {name: t.numpy() for name, t in zarr_write.rollout_arrays(big_rollout(2048)).items()}
    assert sum(a.nbytes for a in arrays.values()) > 10e6
    attrs = {"schema_version": 1, "iteration": 1}
    zarr_local.write_arrays(tmp_path / "warm.zarr", arrays, attrs, "none", "none", 1024, DIM_NAMES)
    tracemalloc.start()
    try:
        zarr_local.write_arrays(tmp_path / "iter.zarr", arrays, attrs, "none", "none", 1024, DIM_NAMES)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= 1e6, f"{peak / 1e6:.1f} MB"
    back, _ = read_rollout(tmp_path / "iter.zarr")
    assert np.array_equal(back["obs"].numpy(), arrays["obs"])


def test_the_writer_thread_allocates_under_1_mb_per_rollout(tmp_path):
    with RolloutStore(tmp_path, StoreCfg(writer="thread")) as store:
        store.submit(big_rollout(2048), {"iteration": 1})  # warm: buffers, zarr's metadata
        store.flush()
        rollout = big_rollout(2048)
        tracemalloc.start()
        try:
            store.submit(rollout, {"iteration": 2})
            store.flush()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak <= 1e6, f"{peak / 1e6:.1f} MB"


def test_the_crc_on_the_arrays_memory_is_google_crc32cs():
    import google_crc32c

    block = np.random.default_rng(0).random((5, 7, 3)).astype(np.float32)
    assert fast.crc32c_of(block) == google_crc32c.value(block.tobytes())
    assert fast._crc32c_library() is not None, "the copy-free checksum fell back to a copy"


def test_auto_is_the_process_here_and_the_thread_on_an_object_store():
    from rlpipe.artifacts.fs import as_path

    assert store_mod.writer_mode(StoreCfg(), Path("/tmp/x")) == "process"
    assert store_mod.writer_mode(StoreCfg(writer="thread"), Path("/tmp/x")) == "thread"
    assert store_mod.writer_mode(StoreCfg(writer="process"), as_path("s3://bucket/run")) == "thread"


def test_close_ends_the_writer_process_cleanly_after_its_writes(tmp_path):
    """The process exits by itself (code 0) at close, not by the death signal bound to its starting thread."""
    store = RolloutStore(tmp_path, StoreCfg(writer="process"))
    store.submit(make_rollout(), {"iteration": 1})
    store.flush()
    handle = store._process._process  # the Popen of the running writer process
    store.close()
    assert handle.returncode == 0
    assert_same(read_rollout(tmp_path / "iter-000001.zarr")[0], make_rollout())


def test_the_writer_process_runs_below_the_training_process_priority(tmp_path):
    """On a machine with fewer free cores than busy processes, training keeps its core."""
    import os

    from rlpipe.runtime.threads import HELPER_NICENESS

    store = RolloutStore(tmp_path, StoreCfg(writer="process"))
    store.submit(make_rollout(), {"iteration": 1})
    store.flush()
    handle = store._process._process
    assert handle is not None
    try:
        ours = os.getpriority(os.PRIO_PROCESS, 0)
        assert os.getpriority(os.PRIO_PROCESS, handle.pid) == min(ours + HELPER_NICENESS, 19)
    finally:
        store.close()


def test_a_prewarmed_writer_process_is_the_one_the_store_writes_through(tmp_path, monkeypatch):
    """Started with the run's build (``prewarm``), the process is taken over by the store's first write."""
    from rlpipe.artifacts import writer_process

    monkeypatch.setattr(writer_process, "_prewarmed", None)  # none left over by an earlier test
    writer_process.prewarm(StoreCfg(writer="process"), tmp_path)
    started = writer_process._prewarmed
    assert started is not None and started[0].poll() is None
    with RolloutStore(tmp_path, StoreCfg(writer="process")) as store:
        store.submit(make_rollout(), {"iteration": 1})
        store.flush()
        assert store._process._process is started[0]
        assert writer_process._prewarmed is None
    assert started[0].returncode == 0
    assert_same(read_rollout(tmp_path / "iter-000001.zarr")[0], make_rollout())


def test_a_prewarmed_writer_process_started_under_another_environment_is_not_taken(tmp_path, monkeypatch):
    """It read its environment (fault points, ``RLPIPE_FAST``) at start: a changed one gets a new process."""
    from rlpipe.artifacts import writer_process

    monkeypatch.setattr(writer_process, "_prewarmed", None)
    writer_process.prewarm(StoreCfg(writer="process"), tmp_path)
    assert writer_process._prewarmed is not None
    stale = writer_process._prewarmed[0]
    monkeypatch.setenv("RLPIPE_FAULT_KILL_AT", "store.write:1")
    store = RolloutStore(tmp_path, StoreCfg(writer="process"))
    store.submit(make_rollout(), {"iteration": 1})
    with pytest.raises(WriterDiedError, match="iter-000001"):
        store.flush()
    assert store._process._process is not stale
    assert stale.wait(timeout=10) == 0  # its input closed: it exited by itself
    with pytest.raises(WriterDiedError):
        store.close()


@pytest.mark.parametrize("cfg", [StoreCfg(enabled=False), StoreCfg(writer="thread")])
def test_no_writer_process_is_prewarmed_for_a_run_that_will_not_use_one(tmp_path, cfg, monkeypatch):
    from rlpipe.artifacts import writer_process

    monkeypatch.setattr(writer_process, "_prewarmed", None)
    writer_process.prewarm(cfg, tmp_path)
    assert writer_process._prewarmed is None


_ZARR_FREE_WRITE = """
import sys
import numpy as np
from pathlib import Path
from rlpipe.artifacts.zarr_local import write_arrays
arrays = {"reward": np.ones((4, 9), np.float32), "done": np.zeros((4, 9), bool)}
arrays["final_obs/index"] = np.zeros((0, 2), np.int64)
write_arrays(Path(sys.argv[1]), arrays, {"iteration": 1}, "none", "none", 1024, ("env", "time"))
print("zarr" in sys.modules, "torch" in sys.modules)
"""


def test_the_writer_process_writes_an_uncompressed_store_without_importing_zarr(tmp_path):
    """What the writer process imports and runs for codec ``none``: neither zarr nor torch is loaded."""
    import subprocess

    path = tmp_path / "iter-000001.zarr"
    out = subprocess.run(
        [sys.executable, "-c", _ZARR_FREE_WRITE, str(path)], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["False", "False"]
    import zarr

    group = zarr.open_group(path, mode="r")
    assert group["reward"][:].sum() == 36 and group["final_obs/index"].shape == (0, 2)


_COUNTED_RUN = """
import json, os, sys
from pathlib import Path
from rlpipe.artifacts import writer_process

started, writes = [], []
start, write = writer_process._start, writer_process.WriterProcess.write


def zombies():
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z" and int(fields[1]) == os.getpid():
            found.append(int(stat.parent.name))
    return found


def counted_start():
    process, conn = start()
    started.append(process.pid)
    return process, conn


def counted_write(self, request):
    write(self, request)
    writes.append({"pid": self._process.pid, "zombies": zombies()})


writer_process._start = counted_start
writer_process.WriterProcess.write = counted_write
from rlpipe.cli import cli
code = 0
try:
    cli()
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "started": started, "writes": writes, "zombies": zombies()}))
"""


def test_rlpipe_run_writes_through_its_prewarmed_writer_process_and_leaves_no_zombie(tmp_path):
    """The process ``rlpipe run`` starts before importing torch is the one that writes every store."""
    import json
    import os
    import subprocess

    from _fault_harness import ROOT, run_command

    out = subprocess.run(
        [sys.executable, "-c", _COUNTED_RUN, *run_command(tmp_path, "store.writer=process")],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.splitlines()[-1])
    assert seen["code"] in (0, None) and len(seen["writes"]) == 4, seen
    assert len(seen["started"]) == 1, f"a second writer process started cold: {seen}"
    assert {w["pid"] for w in seen["writes"]} == set(seen["started"])
    assert all(not w["zombies"] for w in seen["writes"]) and not seen["zombies"], seen


@pytest.mark.parametrize("queue_size", [1, 2])  # 1: the write reuses a shared buffer, 2: shares a new one
def test_a_writer_process_killed_between_writes_is_said_dead_by_its_signal(tmp_path, queue_size):
    store = RolloutStore(tmp_path, StoreCfg(writer="process", queue_size=queue_size))
    store.submit(make_rollout(seed=1), {"iteration": 1})
    store.flush()
    assert store._process is not None
    writer = store._process._process
    assert writer is not None
    writer.kill()
    writer.wait()
    store.submit(make_rollout(seed=2), {"iteration": 2})
    with pytest.raises(WriterDiedError) as info:
        store.flush()
    code, line = describe(info.value, "rlpipe run … --resume")
    assert (code, line) == (
        1,
        f"{tmp_path / 'iter-000002.zarr'}: the rollout store's writer process died (killed by SIGKILL) "
        "before writing it; resume with: rlpipe run … --resume",
    )
    with pytest.raises(WriterDiedError):
        store.close()
    assert store.iterations() == [1]
