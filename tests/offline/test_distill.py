"""``rlpipe distill``: a student from a teacher's stored rollouts, resumed bit for bit; bad stores refused."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
import yaml
from _offline_fixtures import assert_same_learner, tiny_cfg
from click.testing import CliRunner

from rlpipe.cli import cli
from rlpipe.offline.distill import distill_config, distill_offline, store_order, update_plan
from rlpipe.trainer import Trainer

STUDENT = (
    "policy.name=recurrent_actor_critic",
    "policy.actor.obs_keys=[proprio]",
    "policy.critic.obs_keys=[proprio]",
    "policy.recurrent.hidden_size=16",
    "algorithm.cfg.batch_size=64",
    "algorithm.cfg.learning_rate=0.003",
    "algorithm.cfg.seq_len=8",
)


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
        return distill_config(
            teacher,
            [
                f"trainer.data_dir={tmp_path}",
                f"trainer.exp_name={name}",
                *STUDENT,
                f"algorithm.cfg.offline_passes={passes}",
            ],
        )

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
        return distill_config(
            teacher,
            [
                f"trainer.data_dir={tmp_path}",
                f"trainer.exp_name={name}",
                *STUDENT,
                f"algorithm.cfg.offline_passes={passes}",
                "algorithm.cfg.stores_per_update=2",
            ],
        )

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
    assert online["algorithm"]["cfg"]["student_init"] == str(
        tmp_path / "teacher-student" / "checkpoints" / "ckpt-000003.pt"
    )
    assert (tmp_path / "teacher-student-online" / "checkpoints" / "ckpt-000001.pt").is_file()


def test_stores_without_the_students_groups_are_refused(tmp_path):
    flat = teacher_run(tmp_path / "flat", "trainer.iterations=1")  # CartPole's flat observations
    sets = ["--set", f"trainer.data_dir={tmp_path}", "--set", "policy.actor.obs_keys=[proprio]"]
    result = CliRunner().invoke(cli, ["distill", str(flat), *sets])
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1
    assert "iter-000001.zarr: no observation group 'proprio'" in result.output
    assert not (tmp_path / "teacher-student").exists()  # nothing written


@pytest.fixture(scope="module")
def flat_teacher(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2 stored rollouts of a default CartPole teacher: flat observations, no groups."""
    return teacher_run(tmp_path_factory.mktemp("flat"), "trainer.iterations=2")


def distill_args(teacher: Path, data_dir: Path, *extra: str) -> list[str]:
    sets = [arg for item in (f"trainer.data_dir={data_dir}", *extra) for arg in ("--set", item)]
    return ["distill", str(teacher), *sets]


def files_under(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_flat_teacher_distils_offline_then_online(tmp_path, flat_teacher):
    result = CliRunner().invoke(cli, [*distill_args(flat_teacher, tmp_path), "--online-iterations", "1"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "teacher-student" / "checkpoints" / "ckpt-000002.pt").is_file()
    assert (tmp_path / "teacher-student-online" / "checkpoints" / "ckpt-000001.pt").is_file()
    with (tmp_path / "teacher-student" / "curve.csv").open(newline="") as fh:
        assert [r["iteration"] for r in csv.DictReader(fh)] == ["1", "2"]


def test_a_failed_start_leaves_no_run_dir_and_a_retry_works(tmp_path, flat_teacher, monkeypatch):
    import rlpipe.offline.distill as module

    def broken(*args, **kwargs):
        raise RuntimeError("the first update failed")

    cfg = distill_config(flat_teacher, [f"trainer.data_dir={tmp_path}"])
    with monkeypatch.context() as patched:
        patched.setattr(module, "learn", broken)
        with pytest.raises(RuntimeError, match="the first update failed"):
            distill_offline(cfg)
    assert not (tmp_path / "teacher-student").exists()  # no params.yaml, curve or lock left behind
    assert distill_offline(cfg)["iterations"] == 2  # the retry starts clean
    # a start killed before its first checkpoint (no clean-up ran) holds no run: a retry writes over it
    killed = distill_config(flat_teacher, [f"trainer.data_dir={tmp_path}", "trainer.exp_name=killed"])
    (tmp_path / "killed").mkdir()
    (tmp_path / "killed" / "params.yaml").write_text("trainer: {}\n")
    assert distill_offline(killed)["iterations"] == 2
    rewritten = yaml.safe_load((tmp_path / "killed" / "params.yaml").read_text())
    assert rewritten["trainer"]["exp_name"] == "killed"


def test_resume_refuses_other_params_and_other_stores(tmp_path, teacher):
    copy = tmp_path / "teacher"
    shutil.copytree(teacher, copy)
    teacher = copy
    base = distill_args(teacher, tmp_path / "runs")
    assert CliRunner().invoke(cli, base).exit_code == 0
    student = tmp_path / "runs" / "teacher-student"
    before = files_under(student)
    cases = [
        (
            ["--set", "algorithm.cfg.learning_rate=0.01", "--set", "trainer.seed=3"],
            "(algorithm.cfg.learning_rate: 0.001 in the checkpoint, 0.01 now; "
            "trainer.seed: 42 in the checkpoint, 3 now)",
        ),
        (
            ["--set", "algorithm.cfg.stores_per_update=2"],
            "algorithm.cfg.stores_per_update: 1 in the checkpoint",
        ),
    ]
    for extra, expected in cases:
        result = CliRunner().invoke(cli, [*base, *extra, "--resume"])
        assert result.exit_code == 2, result.output
        assert result.output.count("\n") == 1 and expected in result.output, result.output
        assert files_under(student) == before  # nothing rewritten
    # the default made explicit is the same training; more passes are a longer run
    same = CliRunner().invoke(cli, [*base, "--set", "algorithm.cfg.learning_rate=0.001", "--resume"])
    assert same.exit_code == 0, same.output
    shutil.rmtree(teacher / "rollouts" / "iter-000002.zarr")  # the other stores would change the plan
    result = CliRunner().invoke(cli, [*base, "--set", "algorithm.cfg.offline_passes=2", "--resume"])
    assert result.exit_code == 2, result.output
    assert f"{teacher / 'rollouts' / 'iter-000002.zarr'}: is gone since {student}" in result.output
    assert result.output.count("\n") == 1 and files_under(student) == before


def test_params_of_another_env_are_refused_before_training(tmp_path, teacher):
    params = yaml.safe_load((teacher / "params.yaml").read_text())
    params["env"] = {"id": "Pendulum", "cfg": {}}
    params["trainer"] |= {"exp_name": "pendulum_student", "data_dir": str(tmp_path), "enable_eval": True}
    (tmp_path / "pendulum.yaml").write_text(yaml.safe_dump(params))
    args = ["distill", str(teacher), "--params", str(tmp_path / "pendulum.yaml")]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1
    assert (
        f"--params {tmp_path / 'pendulum.yaml'}: env 'Pendulum' observes Box(3,) float32 and acts in "
        "Box(1,) float32, but the stores in"
    ) in result.output
    assert (
        "hold observations {privileged: Box(2,) float32, proprio: Box(2,) float32} and actions Discrete(2)"
    ) in result.output
    assert not (tmp_path / "pendulum_student").exists()


def test_derived_names_are_checked_like_exp_name_and_say_where_they_came_from(tmp_path, flat_teacher):
    long_teacher = tmp_path / ("t" * 195)
    shutil.copytree(flat_teacher, long_teacher)
    result = CliRunner().invoke(cli, distill_args(long_teacher, tmp_path))
    assert result.exit_code == 2, result.output
    assert result.output.startswith("Error: trainer.exp_name: ") and result.output.count("\n") == 1
    assert f"the student's name, derived as <teacher run>-student from {long_teacher}" in result.output
    result = CliRunner().invoke(
        cli,
        [*distill_args(flat_teacher, tmp_path, f"trainer.exp_name={'s' * 195}"), "--online-iterations", "1"],
    )
    assert result.exit_code == 2, result.output
    assert "the online continuation's name, derived as <trainer.exp_name>-online" in result.output
    assert not (tmp_path / ("s" * 195)).exists()  # refused before the offline run started


def test_distill_refuses_stores_of_different_env_subsets_naming_the_first_that_differs(tmp_path):
    from rlpipe.artifacts.errors import StoreError
    from rlpipe.offline.distill_checks import _same_env_subset

    stored = {k: tmp_path / f"iter-{k:06d}.zarr" for k in (1, 2, 3)}
    same = {1: {"stored_envs": 4, "num_envs": 8}, 2: {"stored_envs": 4, "num_envs": 8}}
    _same_env_subset(same, stored)  # one subset: valid samples
    with pytest.raises(
        StoreError,
        match=r"iter-000003\.zarr: keeps every env, iter-000001\.zarr keeps the "
        r"first 4 of 8 envs; distill reads stores of one env subset",
    ):
        _same_env_subset({**same, 3: {}}, stored)


def test_the_online_continuation_starts_from_an_object_store_checkpoint(tmp_path, flat_teacher, monkeypatch):
    """A student checkpoint on an object store reaches ``student_init`` as its URL, not a mangled path."""
    import rlpipe.offline.distill as module
    import rlpipe.trainer as trainer_module

    url = "s3://bucket/runs/teacher-student/checkpoints/ckpt-000002.pt"
    started = []

    class Recorded:
        def __init__(self, cfg, resume=False):
            started.append(cfg)

        def train(self):
            return None

    monkeypatch.setattr(
        module, "distill_offline", lambda *args, **kwargs: {"iterations": 2, "checkpoint": url}
    )
    monkeypatch.setattr(trainer_module, "Trainer", Recorded)
    result = CliRunner().invoke(cli, [*distill_args(flat_teacher, tmp_path), "--online-iterations", "1"])
    assert result.exit_code == 0, result.output
    assert [cfg.algorithm.cfg.student_init for cfg in started] == [url]
