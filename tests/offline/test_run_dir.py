"""A run directory describes itself: every offline command takes it, and replay is bit-exact."""

from __future__ import annotations

import json

import pytest
import yaml
from _offline_fixtures import PARAMS, assert_same_learner, set_args
from click.testing import CliRunner

from rlpipe.cli import cli

EXP = "selfdesc"


def invoke(*args: object) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    data = tmp_path_factory.mktemp("data")
    code, out = invoke(
        "run",
        PARAMS,
        *set_args(data, f"trainer.exp_name={EXP}", "trainer.iterations=4", "checkpoint.every_iteration=true"),
    )
    assert code == 0, out
    return data / EXP


def test_run_writes_its_resolved_params(run_dir):
    params = yaml.safe_load((run_dir / "params.yaml").read_text())
    assert params["trainer"]["exp_name"] == EXP and params["trainer"]["iterations"] == 4


def test_replay_of_the_run_dir_needs_no_params_file_and_is_bit_exact(run_dir, tmp_path):
    code, out = invoke("replay", run_dir, "--out", tmp_path / "re")
    assert code == 0, out
    for k in range(1, 5):
        assert_same_learner(
            run_dir / "checkpoints" / f"ckpt-{k:06d}.pt", tmp_path / "re" / "checkpoints" / f"ckpt-{k:06d}.pt"
        )


def test_replay_with_the_params_file_and_another_exp_name_is_bit_exact(run_dir, tmp_path):
    # params.yaml names exp_name cartpole_ppo: where a run lives never makes replay refuse
    code, out = invoke(
        "replay",
        PARAMS,
        *set_args(tmp_path),
        "--rollouts",
        run_dir / "rollouts",
        "--iterations",
        "1:4",
        "--out",
        tmp_path / "re",
    )
    assert code == 0, out
    for k in range(1, 5):
        assert_same_learner(
            run_dir / "checkpoints" / f"ckpt-{k:06d}.pt", tmp_path / "re" / "checkpoints" / f"ckpt-{k:06d}.pt"
        )


def test_inspect_the_run_dir_summarizes_the_whole_run(run_dir):
    code, out = invoke("inspect", run_dir, "--json")
    assert code == 0, out
    summary = json.loads(out)
    assert summary["iterations"] == 4 and summary["env_steps"] == 4 * 8 * 16
    assert summary["rollouts"]["count"] == 4 and summary["checkpoints"]["latest"] == "ckpt-000004.pt"
    assert summary["exp_name"] == EXP and len(summary["params_hash"]) == 16


def test_update_and_eval_take_the_run_dir(run_dir, tmp_path):
    code, out = invoke("update", run_dir, "--set", "algorithm.cfg.clip_coef=0.1", "--out", tmp_path / "up")
    assert code == 0, out
    assert (tmp_path / "up" / "ckpt-000004.pt").is_file()
    code, out = invoke("eval", run_dir, "--out", tmp_path / "eval.json")
    assert code == 0, out
    assert json.loads((tmp_path / "eval.json").read_text())["iteration"] == 4


def test_a_folder_without_params_is_a_one_line_error(tmp_path):
    code, out = invoke("replay", tmp_path)
    assert code == 2 and "not a run directory (no params.yaml)" in out


def test_resume_with_other_training_params_names_each_key_and_both_values(run_dir):
    code, out = invoke(
        "run",
        run_dir / "params.yaml",
        "--resume",
        "--set",
        "algorithm.cfg.learning_rate=0.5",
        "--set",
        f"trainer.data_dir={run_dir.parent}",
    )
    assert code == 2
    assert "algorithm.cfg.learning_rate" in out and "0.5" in out and "in the checkpoint" in out
