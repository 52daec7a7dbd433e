"""``rlpipe distill``: a student from a teacher's stored rollouts, resumed bit for bit; bad stores refused."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml
from _offline_fixtures import assert_same_learner, tiny_cfg
from click.testing import CliRunner

from rlpipe.cli import cli
from rlpipe.offline.distill import distill_config, distill_offline, store_order, update_plan
from rlpipe.trainer import Trainer

STUDENT = ("policy.name=recurrent_actor_critic", "policy.actor.obs_keys=[proprio]",
           "policy.critic.obs_keys=[proprio]", "policy.recurrent.hidden_size=16",
           "algorithm.cfg.batch_size=64", "algorithm.cfg.learning_rate=0.003", "algorithm.cfg.seq_len=8")


def teacher_run(root: Path, *extra: str) -> Path:
    cfg = tiny_cfg(root, "trainer.exp_name=teacher", "trainer.iterations=3", *extra)
    Trainer(cfg).train()
    return cfg.run_dir


@pytest.fixture(scope="module")
def teacher(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3 stored rollouts of a teacher that reads positions and the privileged velocities."""
    return teacher_run(tmp_path_factory.mktemp("teacher"), "env.cfg={obs_groups: true}")


def test_offline_distillation_trains_names_its_lineage_and_resumes_bit_for_bit(tmp_path, teacher):
    def cfg(name: str, passes: int):
        return distill_config(teacher, [f"trainer.data_dir={tmp_path}", f"trainer.exp_name={name}", *STUDENT,
                                        f"algorithm.cfg.offline_passes={passes}"])

    whole = distill_offline(cfg("whole", 3))
    distill_offline(cfg("split", 1))
    split = distill_offline(cfg("split", 3), resume=True)
    assert whole["iterations"] == split["iterations"] == 9
    assert_same_learner(Path(whole["checkpoint"]), Path(split["checkpoint"]))
    run = tmp_path / "split"
    with (run / "curve.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["iteration"] for r in rows] == [str(i) for i in range(1, 10)]
    assert {r["offline/store"] for r in rows[:3]} == {"1", "2", "3"}  # a pass visits every store once
    losses = [float(r["update/action_loss"]) for r in rows]
    assert losses[-1] < 0.5 * losses[0], losses
    params = yaml.safe_load((run / "params.yaml").read_text())["algorithm"]
    assert params["name"] == "distillation" and params["cfg"]["stores"] == str(teacher / "rollouts")
    assert params["cfg"]["teacher"] == str(teacher / "checkpoints" / "ckpt-000003.pt")
    summary = json.loads((run / "metrics.json").read_text())
    assert len(summary["stores"]) == 3 and summary["teacher"]["path"].endswith("ckpt-000003.pt")
    assert store_order([1, 2, 3], 2, 0) != store_order([1, 2, 3], 2, 1)


def test_an_update_can_mix_stores_and_every_pass_visits_each_once(tmp_path, teacher):
    order = store_order([1, 2, 3], 2, 0)
    assert update_plan([1, 2, 3], 2, 0, 2) == [order[:2], order[2:3], order[3:5], order[5:]]

    def cfg(name: str, passes: int):
        return distill_config(teacher, [f"trainer.data_dir={tmp_path}", f"trainer.exp_name={name}", *STUDENT,
                                        f"algorithm.cfg.offline_passes={passes}",
                                        "algorithm.cfg.stores_per_update=2"])

    whole = distill_offline(cfg("whole", 2))
    distill_offline(cfg("split", 1))
    split = distill_offline(cfg("split", 2), resume=True)
    assert whole["iterations"] == split["iterations"] == 4  # ⌈3 / 2⌉ updates per pass
    assert_same_learner(Path(whole["checkpoint"]), Path(split["checkpoint"]))
    with (tmp_path / "whole" / "curve.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["offline/stores"] for r in rows] == ["2", "1", "2", "1"]
    seen = [float(r["offline/transitions"]) for r in rows]
    # the rows of 2, 3, 5 and 6 stores: a joined rollout counts every store it holds
    assert seen == [2 * seen[1] / 3, seen[1], seen[1] + 2 * seen[1] / 3, 2 * seen[1]]


def test_cli_distills_then_continues_online(tmp_path, teacher):
    sets = [arg for item in (f"trainer.data_dir={tmp_path}", *STUDENT) for arg in ("--set", item)]
    result = CliRunner().invoke(cli, ["distill", str(teacher), *sets, "--online-iterations", "1"])
    assert result.exit_code == 0, result.output
    online = yaml.safe_load((tmp_path / "teacher-student-online" / "params.yaml").read_text())
    assert online["algorithm"]["cfg"]["student_init"] == str(tmp_path / "teacher-student" / "checkpoints"
                                                             / "ckpt-000003.pt")
    assert (tmp_path / "teacher-student-online" / "checkpoints" / "ckpt-000001.pt").is_file()


def test_stores_without_the_students_groups_are_refused(tmp_path):
    flat = teacher_run(tmp_path / "flat", "trainer.iterations=1")  # CartPole's flat observations
    sets = ["--set", f"trainer.data_dir={tmp_path}", "--set", "policy.actor.obs_keys=[proprio]"]
    result = CliRunner().invoke(cli, ["distill", str(flat), *sets])
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1
    assert "iter-000001.zarr: no observation group 'proprio'" in result.output
    assert not (tmp_path / "teacher-student").exists()  # nothing written


def test_distill_refuses_stores_of_different_env_subsets_naming_the_first_that_differs(tmp_path):
    from rlpipe.artifacts.errors import StoreError
    from rlpipe.offline.distill import _same_env_subset

    stored = {k: tmp_path / f"iter-{k:06d}.zarr" for k in (1, 2, 3)}
    same = {1: {"stored_envs": 4, "num_envs": 8}, 2: {"stored_envs": 4, "num_envs": 8}}
    _same_env_subset(same, stored)  # one subset: valid samples
    with pytest.raises(StoreError, match=r"iter-000003\.zarr: keeps every env, iter-000001\.zarr keeps the "
                                         r"first 4 of 8 envs; distill reads stores of one env subset"):
        _same_env_subset({**same, 3: {}}, stored)
