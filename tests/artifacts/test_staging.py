"""Host staging of rollouts (rlpipe/artifacts/staging.py) and the store's wait when its queue is full."""

from __future__ import annotations

import contextlib
import io
import time
from pathlib import Path

import pytest
import torch
from _offline_fixtures import tiny_cfg
from _rollouts import N, T, assert_same, make_rollout

import rlpipe.artifacts.store as store_mod
from rlpipe.artifacts.staging import HostStaging
from rlpipe.artifacts.store import RolloutStore
from rlpipe.artifacts.zarr_read import read_rollout
from rlpipe.config import StoreCfg
from rlpipe.trainer import Trainer


def test_the_staged_copy_equals_the_source_bit_for_bit_and_owns_its_memory() -> None:
    source = make_rollout(box=True, seed=3)
    source["value"][0, 0] = float("nan")  # a NaN's bits are copied too
    source["sample_log_prob"][1, 1] = -0.0
    want = source.apply(torch.clone)  # TensorDict.clone would turn the -0.0 into +0.0
    staged = HostStaging(capacity=1).stage(source)
    host = staged.wait()
    assert staged.copied is None and staged.device_clone is None  # a CPU copy is done on return
    assert host.device == torch.device("cpu") and host.batch_size == source.batch_size
    for key, value in want.items(include_nested=True, leaves_only=True):
        got = host.get(key)
        assert got.dtype == value.dtype and got.shape == value.shape, key
        assert torch.equal(
            got.view(torch.uint8) if got.dtype != torch.bool else got,
            value.view(torch.uint8) if value.dtype != torch.bool else value,
        ), key
        assert got.data_ptr() != source.get(key).data_ptr(), key
    source.zero_()  # the collector refills its buffer: the staged copy keeps the rollout
    assert torch.equal(host["obs"], want["obs"])
    assert torch.equal(host["recurrent", "h"], want["recurrent", "h"])


def test_buffers_are_allocated_once_per_slot_and_reused() -> None:
    staging = HostStaging(capacity=2)
    first, second = staging.stage(make_rollout(seed=1)), staging.stage(make_rollout(seed=2))
    pointers = {first.host["obs"].data_ptr(), second.host["obs"].data_ptr()}
    assert len(pointers) == 2 and staging.allocated == 2
    for seed in range(3, 10):  # the store's loop: a write ends, its buffer returns, the next rollout comes
        staging.release(first.wait())
        first, second = second, staging.stage(make_rollout(seed=seed))
        assert second.host["obs"].data_ptr() in pointers
        assert_same(second.wait(), make_rollout(seed=seed))
    assert staging.allocated == 2


def test_a_new_layout_gets_new_buffers_and_old_ones_are_dropped() -> None:
    staging = HostStaging(capacity=1)
    old = staging.stage(make_rollout())
    wide = staging.stage(make_rollout(n=N + 2))
    assert wide.host.batch_size == torch.Size([N + 2, T + 1]) and staging.allocated == 2
    staging.release(old.wait())  # of the previous layout: not kept
    staging.release(wide.wait())
    again = staging.stage(make_rollout(n=N + 2, seed=4))
    assert again.host["obs"].data_ptr() == wide.host["obs"].data_ptr() and staging.allocated == 2


def slow_disk(monkeypatch: pytest.MonkeyPatch, seconds: float) -> list[float]:
    """Every store write takes ``seconds`` longer; returns the write start times."""
    real, starts = store_mod._write_checked, []

    def slow(*args: object, **kwargs: object) -> None:
        starts.append(time.perf_counter())
        time.sleep(seconds)
        real(*args, **kwargs)

    monkeypatch.setattr(store_mod, "_write_checked", slow)
    return starts


def test_a_full_queue_makes_submit_wait_never_drop_and_says_how_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow_disk(monkeypatch, 0.3)
    rollouts = [make_rollout(seed=it) for it in range(1, 5)]
    with RolloutStore(tmp_path, StoreCfg(queue_size=1, writer="thread")) as store:  # slow_disk: the thread's
        waits = [store.submit(r, {"iteration": it}) for it, r in enumerate(rollouts, start=1)]
        store.flush()
        assert store.iterations() == [1, 2, 3, 4]  # nothing dropped
    assert waits[0] < 0.1  # the first finds a free slot
    assert all(wait > 0.2 for wait in waits[1:]), waits  # the others wait for the write before them
    for it, want in enumerate(rollouts, start=1):
        assert_same(read_rollout(tmp_path / f"iter-{it:06d}.zarr")[0], want)


def test_a_disabled_store_never_waits(tmp_path: Path) -> None:
    assert RolloutStore(tmp_path, StoreCfg(enabled=False)).submit(make_rollout(), {"iteration": 1}) == 0.0


def test_the_iteration_row_shows_the_wait_for_a_slow_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow_disk(monkeypatch, 1.0)
    trainer = Trainer(tiny_cfg(tmp_path, "trainer.iterations=3", "store.queue_size=1", "store.writer=thread"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        summary = trainer.train()
    rows = [line.split() for line in out.getvalue().splitlines() if line.split()[:1] in (["1"], ["2"], ["3"])]
    header = next(line.split() for line in out.getvalue().splitlines() if line.split()[:1] == ["iter"])
    assert "wait_s" in header and len(rows) == 3
    waits = [float(row[header.index("wait_s")]) for row in rows]
    assert waits[0] < 0.1 and max(waits[1:]) > 0.3, waits  # iteration 1 found the slot free
    assert trainer.metrics["time/store_wait_s"] == pytest.approx(waits[2], abs=0.01)
    assert summary["iterations"] == 3
    assert sorted(p.name for p in (tmp_path / "cartpole_ppo" / "rollouts").glob("iter-*")) == [
        "iter-000001.zarr",
        "iter-000002.zarr",
        "iter-000003.zarr",
    ]


def test_the_writer_returns_each_buffer_before_freeing_its_slot(tmp_path: Path) -> None:
    with RolloutStore(tmp_path, StoreCfg(queue_size=1)) as store:
        for it in range(1, 6):
            store.submit(make_rollout(seed=it), {"iteration": it})
        store.flush()
        assert store._staging.allocated == 1  # one slot, one buffer, reused by every iteration
    assert store.iterations() == [1, 2, 3, 4, 5]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the pinned, side-stream path needs a CUDA device")
def test_a_cuda_rollout_is_copied_to_pinned_memory_exactly_while_the_caller_refills_its_buffer() -> None:
    source = make_rollout(box=True, seed=5).to("cuda")
    want = source.apply(torch.clone).cpu()
    staging = HostStaging(capacity=1)
    staged = staging.stage(source)
    source.zero_()  # the next collection, queued on the compute stream right after submit
    host = staged.wait()
    assert staged.device_clone is None
    assert all(t.is_pinned() for t in host.values(include_nested=True, leaves_only=True))
    assert_same(host, want)
    staging.release(host)
    again = staging.stage(make_rollout(box=True, seed=6).to("cuda"))
    assert again.host["obs"].data_ptr() == host["obs"].data_ptr() and staging.allocated == 1
    assert_same(again.wait(), make_rollout(box=True, seed=6))
