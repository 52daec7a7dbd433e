"""``rlpipe distill`` under SIGINT/SIGTERM: a checkpoint at the update boundary, exit 130/143, a resume."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from _fault_harness import FAST, error_line, rlpipe
from _offline_fixtures import PARAMS, assert_same_learner

from rlpipe import config
from rlpipe.offline.distill import distill_config, distill_offline


@pytest.fixture(scope="module")
def teacher(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """4 stores of the fast params (observation groups): 4 distillation updates, a checkpoint at the end."""
    from rlpipe.trainer import Trainer

    cfg = config.load(
        PARAMS,
        [
            *FAST,
            f"trainer.data_dir={tmp_path_factory.mktemp('teacher')}",
            "trainer.exp_name=teacher",
            "env.cfg={obs_groups: true}",
        ],
    )
    Trainer(cfg).train()
    return cfg.run_dir


def distill_argv(teacher: Path, data_dir: Path) -> list[str]:
    return ["distill", str(teacher), "--set", f"trainer.data_dir={data_dir}"]


def test_sigint_stops_at_the_update_boundary_and_the_printed_command_resumes_exactly(tmp_path, teacher):
    stopped = rlpipe(
        *distill_argv(teacher, tmp_path / "split"), env={"RLPIPE_FAULT_SIGNAL_AT": "update.start:2:SIGINT"}
    )
    assert stopped.returncode == 130, stopped.stderr
    student = tmp_path / "split" / "teacher-student"
    checkpoint = student / "checkpoints" / "ckpt-000002.pt"
    line = error_line(stopped)
    assert line.startswith(
        f"Error: stopped by SIGINT at the iteration boundary; checkpoint {checkpoint} "
        f"(iteration 2); resume with: rlpipe distill {teacher} --set "
    )
    assert "SIGINT received; stopping after this iteration" in stopped.stderr
    assert sorted(p.name for p in (student / "checkpoints").glob("ckpt-*.pt")) == ["ckpt-000002.pt"]
    assert json.loads((student / "metrics.json").read_text())["interrupted_by"] == "SIGINT"

    command = shlex.split(line.split("; resume with: ", 1)[1])
    assert command[:2] == ["rlpipe", "distill"] and command[-1] == "--resume"
    resumed = rlpipe(*command[1:])
    assert resumed.returncode == 0, resumed.stderr
    assert f"resume: continuing from {checkpoint} (iteration 2 of 4)" in resumed.stderr
    whole = distill_offline(distill_config(teacher, [f"trainer.data_dir={tmp_path / 'whole'}"]))
    assert_same_learner(Path(whole["checkpoint"]), student / "checkpoints" / "ckpt-000004.pt")


def test_a_second_signal_before_the_first_checkpoint_stops_at_once_and_leaves_no_run_dir(tmp_path, teacher):
    stopped = rlpipe(
        *distill_argv(teacher, tmp_path), env={"RLPIPE_FAULT_SIGNAL_AT": "update.start:2:SIGTERM:2"}
    )
    assert stopped.returncode == 143, stopped.stderr
    line = error_line(stopped)
    assert line.startswith(
        "Error: stopped by SIGTERM at once (second signal); no checkpoint yet; "
        f"resume with: rlpipe distill {teacher} "
    )
    assert not (tmp_path / "teacher-student").exists()
