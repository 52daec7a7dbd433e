"""The store's line in the banner, its demanded rate, and the one warning when the writer falls behind."""

from __future__ import annotations

import contextlib
import io
import time

import pytest
import torch
from _offline_fixtures import tiny_cfg

import rlpipe.artifacts.store as store_mod
from rlpipe.artifacts.store_policy import StorePolicy
from rlpipe.tracking.store_rate import LOWER_DEMAND, StoreRate, human_bytes, store_line
from rlpipe.trainer import Trainer

N, T = 8, 4
LAYOUT = (
    ("obs", (N, T + 1, 6), torch.float32),
    ("action", (N, T + 1), torch.int64),
    ("done", (N, T + 1), torch.bool),
)
"""33 B per [env, time] slot."""


def test_human_bytes_uses_decimal_units_and_three_digits():
    assert [human_bytes(b) for b in (812, 13_600, 1.7e9, 2.5e13)] == ["812 B", "13.6 kB", "1.7 GB", "25 TB"]


def test_the_store_line_states_what_is_kept_its_bytes_and_the_free_space():
    line = store_line(StorePolicy(every=4, envs=3), LAYOUT, world_size=1, iterations=10, free=2 * 10**12)
    # 3 envs × 5 slots × 33 B = 495 B per stored iteration, over 3 × 4 env steps: 41.25 B each
    assert line == (
        "  store   every 4th iteration, envs 0–2 of 8 · 41 B per stored env step, 495 B per "
        "stored iteration, 990 B for 2 of 10 iterations · disk free 2 TB"
    )
    two = store_line(StorePolicy(), LAYOUT, world_size=2, iterations=10, free=None)
    assert two.endswith("2.64 kB per stored iteration (all ranks), 26.4 kB for 10 of 10 iterations")


def test_the_demanded_rate_is_printed_once_after_the_first_iterations():
    out = io.StringIO()
    rate = StoreRate(per_iteration=2_000_000, every=2, steps_per_iteration=1000, report_at=3, out=out)
    row = {"time/sps": 10_000.0, "time/iteration_s": 0.1, "time/store_wait_s": 0.0}
    assert rate.observe(1, row, None) == [] and rate.observe(2, row, None) == []
    # 2 MB every 2nd iteration of 1000 env steps at 10,000 env steps/s: 10 MB/s
    demanded = "  store   demands 10 MB/s at 10,000 env steps/s (measured at iteration 3)"
    assert rate.observe(3, row, None) == [demanded]
    assert rate.observe(4, row, None) == []
    assert out.getvalue().count("demands") == 1


def test_one_warning_says_by_how_much_the_writer_falls_behind_and_what_helps():
    out = io.StringIO()
    rate = StoreRate(per_iteration=2_000_000, every=1, steps_per_iteration=1000, report_at=3, out=out)
    slow = {"time/sps": 10_000.0, "time/iteration_s": 0.2, "time/store_wait_s": 0.1}
    assert rate.observe(2, slow, (2_000_000, 0.2)) == []  # the first writes also start the writer
    lines = rate.observe(3, slow, (2_000_000, 0.2))
    assert lines[1] == (
        "Warning: the rollout store's writer falls behind: iteration 3 waited 0.1 s for it "
        "(50% of the iteration); the run demands 20 MB/s, the writer keeps 10 MB/s; "
        f"nothing is dropped (the wait is the row's wait_s); {LOWER_DEMAND}"
    )
    assert rate.observe(4, slow, (2_000_000, 0.2)) == []  # once
    fast = StoreRate(2_000_000, 1, 1000, report_at=1, out=io.StringIO())
    assert fast.observe(5, {**slow, "time/store_wait_s": 0.001}, None)[1:] == []  # 0.5 %: no warning


def test_a_run_on_a_slow_disk_warns_once_and_keeps_every_rollout(tmp_path, monkeypatch):
    real = store_mod._write_checked

    def slow(*args: object, **kwargs: object) -> None:
        time.sleep(0.4)
        real(*args, **kwargs)

    monkeypatch.setattr(store_mod, "_write_checked", slow)  # the thread's write: the slow disk
    out, err = io.StringIO(), io.StringIO()
    cfg = tiny_cfg(tmp_path, "trainer.iterations=5", "store.writer=thread")
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        Trainer(cfg).train()
    assert [line for line in out.getvalue().splitlines() if line.startswith("  store   every iteration")]
    warnings = [line for line in err.getvalue().splitlines() if "falls behind" in line]
    assert len(warnings) == 1 and warnings[0].endswith(LOWER_DEMAND), err.getvalue()
    assert len(list((cfg.run_dir / "rollouts").glob("iter-*"))) == 5


@pytest.mark.parametrize("every", [1, 3])
def test_the_banner_store_line_of_a_run_counts_the_stored_iterations(tmp_path, every):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        Trainer(tiny_cfg(tmp_path, "trainer.iterations=3", f"store.every={every}")).train()
    line = next(line for line in out.getvalue().splitlines() if line.startswith("  store   "))
    assert f"for {3 // every} of 3 iterations · disk free " in line
