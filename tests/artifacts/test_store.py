"""The background rollout writer (rlpipe/artifacts/store.py): queue, back-pressure, errors, retention."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from _rollouts import N, T, assert_same, make_rollout

import rlpipe.artifacts.store as store_mod
from rlpipe.artifacts import intake
from rlpipe.artifacts.store import RolloutStore, StoreError
from rlpipe.artifacts.zarr_read import read_rollout
from rlpipe.config import StoreCfg

if TYPE_CHECKING:
    from tensordict import TensorDict

WRITERS = ("thread", "process")


@pytest.fixture(params=WRITERS)
def writer(request: pytest.FixtureRequest) -> str:
    """The store's writer mode (``store.writer``): every background-writer test runs in both."""
    return request.param


def patch_write(monkeypatch: pytest.MonkeyPatch, store: RolloutStore, wrap: object) -> None:
    """Route the store's writes through ``wrap(real, path, *args)`` on the store's hand-over thread.

    Thread mode: the write itself; process mode: the request to the writer process.
    """
    if store.mode == "thread":
        real = store_mod._write_checked
        monkeypatch.setattr(store_mod, "_write_checked", lambda path, *a, **k: wrap(real, path, *a, **k))
    else:
        real_process = store._process.write

        def through(request: Any) -> None:
            wrap(lambda _path, r: real_process(r), Path(request.path), request)

        monkeypatch.setattr(store._process, "write", through)


# ---------------------------------------------------------------------------- background writer


def test_submit_flush_writes_everything_and_caller_may_reuse_buffer(tmp_path: Path, writer: str) -> None:
    buffer = make_rollout(seed=0)
    expected = []
    with RolloutStore(tmp_path, StoreCfg(queue_size=2, writer=writer)) as store:
        assert store.mode == writer
        for it in range(1, 6):
            buffer.update(make_rollout(seed=it))  # the collector refills its one buffer in place
            expected.append(buffer.clone())
            store.submit(buffer, {"iteration": it, "env_steps": it * N * T})
            buffer.zero_()
        store.flush()
        assert store.iterations() == [1, 2, 3, 4, 5]
    for it, want in enumerate(expected, start=1):
        got, attrs = read_rollout(tmp_path / f"iter-{it:06d}.zarr")
        assert_same(got, want)
        assert attrs["env_steps"] == it * N * T
    assert store._thread is None
    with pytest.raises(StoreError, match="closed"):
        store.submit(make_rollout(), {"iteration": 9})


def test_the_store_holds_at_most_queue_size_rollouts_and_submit_blocks_before_copying(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    cfg = StoreCfg(queue_size=2, writer=writer)
    store = RolloutStore(tmp_path, cfg)
    entered, gate = threading.Event(), threading.Event()
    held: list[int] = []  # rollouts the store holds (queued + being written) at each write

    def slow_write(real: Any, *args: object, **kwargs: object) -> None:
        held.append(sum(job is not None for job in list(store._queue.queue)) + 1)  # not close()'s stop mark
        entered.set()
        gate.wait(timeout=30)
        real(*args, **kwargs)

    patch_write(monkeypatch, store, slow_write)
    store.submit(make_rollout(), {"iteration": 1})
    assert entered.wait(timeout=30)  # the writer holds rollout 1 ...
    store.submit(make_rollout(), {"iteration": 2})  # ... and rollout 2 fills the second slot
    third = make_rollout()
    copies: list[int] = []
    real_stage = store._staging.stage

    def counting_stage(rollout: TensorDict, *final_obs: TensorDict | None) -> object:
        copies.append(1)
        return real_stage(rollout, *final_obs)

    monkeypatch.setattr(store._staging, "stage", counting_stage)
    blocked = threading.Thread(target=store.submit, args=(third, {"iteration": 3}))
    blocked.start()
    blocked.join(timeout=0.5)
    assert blocked.is_alive(), "submit returned although the store held queue_size rollouts"
    assert copies == [], "submit copied before a slot was free"
    gate.set()
    blocked.join(timeout=30)
    store.close()
    assert copies == [1]
    assert max(held) <= cfg.queue_size
    assert store.iterations() == [1, 2, 3]


def test_the_default_keeps_one_rollout_beyond_the_collectors_buffer() -> None:
    assert StoreCfg().queue_size == 1


def test_write_error_surfaces_on_flush_and_keeps_earlier_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    def disk_full_at_3(real: Any, path: Path, *args: object, **kwargs: object) -> None:
        if path.name == "iter-000003.zarr":
            raise (
                OSError(28, "No space left on device")
                if writer == "thread"
                else StoreError(f"writing {path} failed: [Errno 28] No space left on device")
            )
        real(path, *args, **kwargs)

    store = RolloutStore(tmp_path, StoreCfg(queue_size=1, writer=writer))
    patch_write(monkeypatch, store, disk_full_at_3)
    for it in (1, 2, 3):
        store.submit(make_rollout(), {"iteration": it})
    message = r"writing .*iter-000003\.zarr failed: \[Errno 28\] No space left on device"
    with pytest.raises(StoreError, match=message):  # on the next submit or, if the write is slower, on flush
        store.submit(make_rollout(), {"iteration": 4})
        store.flush()
    assert store.iterations() == [1, 2]  # earlier stores kept, nothing written after the error
    with pytest.raises(StoreError, match=message):
        store.submit(make_rollout(), {"iteration": 5})
    with pytest.raises(StoreError, match=message):
        store.close()
    assert store.iterations() == [1, 2]


def test_submit_checks_schema_and_write_once_on_callers_thread(tmp_path: Path, writer: str) -> None:
    with RolloutStore(tmp_path, StoreCfg(writer=writer)) as store:
        with pytest.raises(StoreError, match="lacks schema key 'reward'"):
            store.submit(make_rollout().exclude("reward"), {"iteration": 1})
        with pytest.raises(StoreError, match="integer attrs\\['iteration'\\]"):
            store.submit(make_rollout(), {"env_steps": 3})
        store.submit(make_rollout(), {"iteration": 1})
        store.flush()
        with pytest.raises(StoreError, match="iter-000001.zarr: already exists"):
            store.submit(make_rollout(), {"iteration": 1})


def test_a_rollout_is_checked_once_on_its_way_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    checked = []
    real = intake.check_schema
    monkeypatch.setattr(intake, "check_schema", lambda *args: (checked.append(1), real(*args)))
    with RolloutStore(tmp_path, StoreCfg(writer=writer)) as store:
        store.submit(make_rollout(), {"iteration": 1})
        store.flush()
        assert checked == [1]  # on submit; the writer thread writes it without checking again
    store_mod.write_rollout(tmp_path / "iter-000002.zarr", make_rollout(), {"iteration": 2})
    assert checked == [1, 1]
    assert store.iterations() == [1, 2]


def test_context_exit_keeps_the_body_exception(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store_mod, "_write_checked", broken)
    with pytest.raises(KeyboardInterrupt) as info:
        with RolloutStore(tmp_path, StoreCfg(writer="thread")) as store:
            store.submit(make_rollout(), {"iteration": 1})
            raise KeyboardInterrupt
    assert any("No space left" in note for note in info.value.__notes__)


def test_retention_keeps_the_newest(tmp_path: Path, writer: str) -> None:
    with RolloutStore(tmp_path, StoreCfg(keep_last=2, writer=writer)) as store:
        for it in range(1, 6):
            store.submit(make_rollout(), {"iteration": it})
        store.flush()
        assert store.iterations() == [4, 5]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["iter-000004.zarr", "iter-000005.zarr"]


def test_discard_after_frees_names_for_a_resumed_run(tmp_path: Path, writer: str) -> None:
    with RolloutStore(tmp_path, StoreCfg(writer=writer)) as store:
        for it in range(1, 5):
            store.submit(make_rollout(seed=it), {"iteration": it})
        assert store.discard_after(2) == [3, 4]
        assert store.iterations() == [1, 2]
        store.submit(make_rollout(seed=9), {"iteration": 3})  # the resumed run rewrites 3
    assert_same(read_rollout(tmp_path / "iter-000003.zarr")[0], make_rollout(seed=9))
    assert sorted(p.name for p in tmp_path.iterdir())[-1] == "iter-000003.zarr"


def test_disabled_store_writes_nothing(tmp_path: Path) -> None:
    with RolloutStore(tmp_path, StoreCfg(enabled=False)) as store:
        store.submit(make_rollout(), {"iteration": 1})
        store.flush()
    assert store.iterations() == []
