"""SIGKILL at every named point of collect, store write, update, checkpoint and pointer update.

Each case: the run dies at the point (``RLPIPE_FAULT_KILL_AT``), ``--resume`` completes it, nothing
the resumed checkpoint covers changed, and the result equals the uninterrupted run bit for bit.
The fast cases run in the default suite, the whole sweep with ``-m slow``.
"""

from __future__ import annotations

import signal

import pytest
from _fault_harness import (
    assert_same_as_reference,
    covered,
    error_line,
    resumed_from,
    rlpipe,
    run_command,
    run_dir,
    snapshot,
)

from rlpipe.testing.faults import KILL_POINTS

EXTRA = {
    "eval.start": ("trainer.enable_eval=true", "trainer.eval_freq=32"),
    "checkpoint.retention": ("checkpoint.keep_last=2",),
    "store.retention": ("store.keep_last=2",),
}
"""Params under which a point is reached at all (eval on, retention on)."""
VISIT = {"write.params": 1, "write.metrics": 1, "resume.discard": 1, "update.step": 3}
"""Which visit of a point kills (default: the second, mid-run)."""
FAST_POINTS = ("write.latest",)


def kill_and_resume(tmp_path, reference, point: str, writer: str = "auto") -> None:
    extra = (*EXTRA.get(point, ()), f"store.writer={writer}")
    command = run_command(tmp_path, *extra)
    root = run_dir(tmp_path)
    if point == "resume.discard":  # a point of --resume itself: first die elsewhere
        assert rlpipe(*command, env={"RLPIPE_FAULT_KILL_AT": "iteration.end:3"}).returncode == -signal.SIGKILL
        command = [*command, "--resume"]
    killed = rlpipe(*command, env={"RLPIPE_FAULT_KILL_AT": f"{point}:{VISIT.get(point, 2)}"})
    assert killed.returncode == -signal.SIGKILL, f"not killed at {point}: {killed.stderr[-2000:]}"
    before = snapshot(root)
    resumed = rlpipe(*run_command(tmp_path, *extra), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr
    retained = {"store.retention": ("rollouts/",), "checkpoint.retention": ("checkpoints/",)}
    covered(before, snapshot(root), resumed_from(resumed.stderr), retained.get(point, ()))
    assert not [p for p in root.rglob(".*") if p.name != ".lock"], "temporaries left behind"
    assert not (root / ".lock").exists()
    assert_same_as_reference(root, reference)


@pytest.mark.parametrize("writer", ["thread", "process"])
@pytest.mark.parametrize("point", FAST_POINTS)
def test_sigkill_then_resume_is_bit_exact(tmp_path, reference, point, writer):
    kill_and_resume(tmp_path, reference, point, writer)


@pytest.mark.slow
@pytest.mark.parametrize("point", [p for p in KILL_POINTS if p not in FAST_POINTS])
def test_sigkill_sweep_then_resume_is_bit_exact(tmp_path, reference, point):
    in_writer = point in ("store.write", "store.arrays_written")  # the writer process's: see below
    kill_and_resume(tmp_path, reference, point, "thread" if in_writer else "auto")


def test_a_killed_writer_process_is_one_line_exit_1_and_resume_is_bit_exact(tmp_path, reference):
    command = run_command(tmp_path, "store.writer=process")
    root = run_dir(tmp_path)
    killed = rlpipe(*command, env={"RLPIPE_FAULT_KILL_AT": "store.write:2"})  # the writer process's point
    assert killed.returncode == 1, killed.stderr[-2000:]
    line = error_line(killed)
    store = root / "rollouts" / "iter-000002.zarr"
    assert line.startswith(
        f"Error: {store}: the rollout store's writer process "
        "died (killed by SIGKILL) while writing it; resume with: "
    ), line
    assert not (root / "rollouts" / "iter-000002.zarr").exists()
    before = snapshot(root)
    resumed = rlpipe(*command, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    covered(before, snapshot(root), resumed_from(resumed.stderr))
    assert not [p for p in root.rglob(".*") if p.name != ".lock"], "temporaries left behind"
    assert_same_as_reference(root, reference)
