"""rlpipe.dvc.runs: a run dir found by path, by the workspace's run.json, or by DVC experiment name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rlpipe.dvc.runs import (
    RunDirError,
    experiment_data_dir,
    project_root,
    resolve_path,
    resolve_run_dir,
    resolve_target,
)


def make_run(run_dir: Path, clip: float = 0.2) -> Path:
    """A minimal run dir: one rollout folder, one checkpoint, the params snapshot, metrics."""
    (run_dir / "rollouts" / "iter-000001.zarr").mkdir(parents=True)
    (run_dir / "checkpoints").mkdir()
    (run_dir / "checkpoints" / "ckpt-000001.pt").write_bytes(b"x")
    params = {
        "trainer": {"exp_name": run_dir.name, "data_dir": "/elsewhere"},
        "env": {"id": "CartPole"},
        "policy": {"name": "actor_critic"},
        "algorithm": {"name": "ppo", "cfg": {"clip_coef": clip}},
    }
    (run_dir / "params.yaml").write_text(yaml.safe_dump(params))
    (run_dir / "metrics.json").write_text("{}")
    return run_dir


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project folder (dvc.yaml) with experiments a and b, and a workspace pointing at b."""
    monkeypatch.delenv("DVC_ROOT", raising=False)
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    make_run(tmp_path / "data" / "exps" / "a" / "cartpole_ppo", clip=0.1)
    make_run(tmp_path / "data" / "exps" / "b" / "cartpole_ppo", clip=0.3)
    workspace = tmp_path / "data" / "cartpole_ppo"
    workspace.mkdir()
    (workspace / "metrics.json").write_text("{}")
    (workspace / "run.json").write_text(
        json.dumps({"dvc_exp_name": "b", "run_dir": "data/exps/b/cartpole_ppo"})
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_project_root_is_dvc_root_inside_an_experiment(project, monkeypatch, tmp_path_factory):
    assert project_root() == project.resolve()
    elsewhere = tmp_path_factory.mktemp("main-repo")
    monkeypatch.setenv("DVC_ROOT", str(elsewhere))
    assert project_root() == elsewhere.resolve()


def test_experiment_name_resolves_to_its_run_dir(project):
    assert resolve_run_dir("a") == project / "data/exps/a/cartpole_ppo"
    assert resolve_run_dir("b/cartpole_ppo") == project / "data/exps/b/cartpole_ppo"
    assert resolve_run_dir("data/exps/a") == Path("data/exps/a/cartpole_ppo")


def test_a_run_dir_path_is_itself_and_the_workspace_follows_run_json(project):
    assert resolve_run_dir("data/exps/a/cartpole_ppo") == Path("data/exps/a/cartpole_ppo")
    assert resolve_run_dir("data/cartpole_ppo") == project / "data/exps/b/cartpole_ppo"
    # a workspace that holds data of its own (plain `rlpipe run`) is not redirected
    (project / "data/cartpole_ppo/checkpoints").mkdir()
    (project / "data/cartpole_ppo/checkpoints/ckpt-000001.pt").write_bytes(b"x")
    assert resolve_run_dir("data/cartpole_ppo") == Path("data/cartpole_ppo")


def test_unknown_name_lists_the_experiments_that_exist(project):
    with pytest.raises(RunDirError, match=r"^nope: no run directory .* \(experiments with data: a, b\)$"):
        resolve_run_dir("nope")


def test_several_runs_in_one_experiment_must_be_named(project):
    make_run(project / "data/exps/a/pendulum_ppo")
    with pytest.raises(RunDirError, match="a/cartpole_ppo, a/pendulum_ppo"):
        resolve_run_dir("a")
    assert resolve_run_dir("a/pendulum_ppo") == project / "data/exps/a/pendulum_ppo"


def test_pointer_to_a_freed_run_dir_says_so(project):
    import shutil

    shutil.rmtree(project / "data/exps/b")
    with pytest.raises(RunDirError, match=r"run dir of experiment b .* no longer exists"):
        resolve_run_dir("data/cartpole_ppo")


def test_paths_below_an_experiment(project):
    assert resolve_path("a/rollouts/iter-000001.zarr") == (
        project / "data/exps/a/cartpole_ppo/rollouts/iter-000001.zarr"
    )
    assert resolve_path("b/cartpole_ppo/checkpoints/ckpt-000001.pt") == (
        project / "data/exps/b/cartpole_ppo/checkpoints/ckpt-000001.pt"
    )
    assert resolve_path("data/cartpole_ppo/rollouts/iter-000001.zarr") == (
        project / "data/exps/b/cartpole_ppo/rollouts/iter-000001.zarr"
    )
    assert resolve_path("a") == project / "data/exps/a/cartpole_ppo"
    assert resolve_path("data/cartpole_ppo") == project / "data/exps/b/cartpole_ppo"
    assert resolve_path("missing/file.zarr") == Path("missing/file.zarr")  # reported by the command
    assert resolve_path("params.yaml") == Path("params.yaml")


def test_an_experiment_name_stands_for_its_run_dir_where_params_are_taken(project):
    from rlpipe.cli import load_config

    assert resolve_target("params.yaml") == Path("params.yaml")  # a params file, even a missing one
    assert resolve_target("a") == project / "data/exps/a/cartpole_ppo"
    cfg = load_config(Path("a"), ())
    assert cfg.run_dir.resolve() == (project / "data/exps/a/cartpole_ppo").resolve()
    assert cfg.algorithm.cfg.clip_coef == 0.1  # the experiment's own params snapshot
    assert load_config(Path("data/cartpole_ppo"), ()).algorithm.cfg.clip_coef == 0.3  # run.json → b


@pytest.mark.parametrize("name", ["", "..", "a/b"])
def test_experiment_names_that_are_not_folder_names_are_refused(project, name):
    with pytest.raises(RunDirError, match="DVC_EXP_NAME"):
        experiment_data_dir(name, project)


def test_experiment_data_dir_follows_trainer_data_dir(project, tmp_path_factory):
    assert experiment_data_dir("x", project) == project / "data/exps/x"
    assert experiment_data_dir("x", project, "out") == project / "out/exps/x"
    scratch = tmp_path_factory.mktemp("scratch")
    assert experiment_data_dir("x", project, scratch) == scratch / "exps/x"


def test_cli_takes_an_experiment_name_for_params_and_paths(project):
    from click.testing import CliRunner

    from rlpipe.cli import cli

    result = CliRunner().invoke(cli, ["inspect", "a/rollouts/iter-000009.zarr"])
    assert result.exit_code == 2
    assert "data/exps/a/cartpole_ppo/rollouts/iter-000009.zarr" in result.output
    result = CliRunner().invoke(cli, ["replay", "nope"])
    assert result.exit_code == 2 and result.output.startswith("Error: nope: no run directory")
