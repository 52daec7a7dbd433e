"""SIGTERM/SIGINT: stop at the iteration boundary with a checkpoint, exit 143/130, one line to resume."""

from __future__ import annotations

import json
import shlex

import pytest
from _fault_harness import assert_same_as_reference, error_line, rlpipe, run_command, run_dir

RARE_SAVES = "trainer.save_freq=1000"
"""No periodic checkpoint in 4 iterations: what a signal leaves on disk is its own checkpoint."""


def resume_argv(line: str) -> list[str]:
    """The ``rlpipe run … --resume`` an interrupted run printed, as arguments of ``python -m rlpipe``."""
    command = shlex.split(line.split("; resume with: ", 1)[1])
    assert command[0] == "rlpipe" and command[-1] == "--resume"
    return command[1:]


@pytest.mark.parametrize(
    ("sig", "code"),
    [
        ("SIGTERM", 143),
        pytest.param("SIGINT", 130, marks=pytest.mark.slow),
    ],
)
def test_signal_stops_at_the_boundary_with_a_checkpoint_and_resumes_exactly(tmp_path, reference, sig, code):
    stopped = rlpipe(
        *run_command(tmp_path, RARE_SAVES), env={"RLPIPE_FAULT_SIGNAL_AT": f"collect.start:2:{sig}"}
    )
    root = run_dir(tmp_path)
    assert stopped.returncode == code, stopped.stderr
    line = error_line(stopped)
    checkpoint = root / "checkpoints" / "ckpt-000002.pt"
    assert line.startswith(
        f"Error: stopped by {sig} at the iteration boundary; checkpoint {checkpoint} "
        "(iteration 2); resume with: rlpipe run "
    )
    assert f"{sig} received; stopping after this iteration" in stopped.stderr
    assert sorted(p.name for p in (root / "checkpoints").glob("ckpt-*.pt")) == ["ckpt-000002.pt"]
    assert json.loads((root / "metrics.json").read_text())["interrupted_by"] == sig

    resumed = rlpipe(*resume_argv(line))
    assert resumed.returncode == 0, resumed.stderr
    assert "resume: continuing from" in resumed.stderr and "(iteration 2)" in resumed.stderr
    assert_same_as_reference(root, reference)


@pytest.mark.slow
def test_signal_before_the_first_checkpoint_keeps_the_first_iteration(tmp_path):
    stopped = rlpipe(
        *run_command(tmp_path, RARE_SAVES), env={"RLPIPE_FAULT_SIGNAL_AT": "collect.start:1:SIGINT"}
    )
    assert stopped.returncode == 130, stopped.stderr
    assert (run_dir(tmp_path) / "checkpoints" / "ckpt-000001.pt").is_file()  # Ctrl-C loses nothing


@pytest.mark.slow
def test_second_signal_stops_at_once_and_the_last_checkpoint_stands(tmp_path, reference):
    stopped = rlpipe(*run_command(tmp_path), env={"RLPIPE_FAULT_SIGNAL_AT": "update.start:3:SIGTERM:2"})
    root = run_dir(tmp_path)
    assert stopped.returncode == 143, stopped.stderr
    line = error_line(stopped)
    assert line.startswith(
        f"Error: stopped by SIGTERM at once (second signal); checkpoint "
        f"{root / 'checkpoints' / 'ckpt-000002.pt'} (iteration 2); resume with: "
    )
    assert not (root / "checkpoints" / "ckpt-000003.pt").exists()
    resumed = rlpipe(*resume_argv(line))
    assert resumed.returncode == 0, resumed.stderr
    assert_same_as_reference(root, reference)
