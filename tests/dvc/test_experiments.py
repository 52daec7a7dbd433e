"""rlpipe.dvc.experiments: each DVC experiment's own run dir, the files published to the workspace, gc."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from rlpipe.config import ConfigError
from rlpipe.dvc.experiments import ACTIVE_LOCK, ExperimentsUnreadable, gc, run_stage, stage_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """A DVC-like temporary workspace (with params.yaml) of the main repo ``main``."""
    main, temp = tmp_path / "main", tmp_path / "main" / ".dvc" / "tmp" / "exps" / "tmpabc"
    temp.mkdir(parents=True)
    (main / "dvc.yaml").write_text("stages: {}\n")
    (temp / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    monkeypatch.chdir(temp)
    monkeypatch.setenv("DVC_ROOT", str(main))
    monkeypatch.setenv("DVC_EXP_NAME", "clip01")
    return main, temp


def fake_train(cfg, out=None) -> None:
    for rel in ("rollouts/iter-000001.zarr/zarr.json", "checkpoints/ckpt-000001.pt"):
        (cfg.run_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (cfg.run_dir / rel).write_text("x")
    (cfg.run_dir / "metrics.json").write_text('{"mlflow_run_id": "r1"}')
    (cfg.run_dir / "curve.csv").write_text("iteration\n1\n")


def test_train_stage_of_an_experiment_writes_outside_the_temporary_workspace(workspace):
    main, temp = workspace
    run_stage("train", fake_train)
    run_dir = main / "data" / "exps" / "clip01" / "cartpole_ppo"
    assert (run_dir / "rollouts" / "iter-000001.zarr").is_dir()
    published = temp / "results" / "cartpole_ppo"
    assert sorted(p.name for p in published.iterdir()) == ["curve.csv", "metrics.json", "run.json"]
    assert json.loads((published / "run.json").read_text()) == {
        "dvc_exp_name": "clip01",
        "run_dir": "data/exps/clip01/cartpole_ppo",
    }


def fake_eval(cfg, out) -> None:
    out.eval_dir.mkdir(parents=True, exist_ok=True)
    out.eval_metrics.write_text(json.dumps({"eval/return_mean": 9.0, "read": str(cfg.run_dir)}))


def test_downstream_stages_work_in_the_run_dir_run_json_names(workspace, monkeypatch):
    main, temp = workspace
    run_stage("train", fake_train)
    run_dir = main / "data" / "exps" / "clip01" / "cartpole_ppo"
    monkeypatch.delenv("DVC_EXP_NAME")  # e.g. `dvc repro evaluate` after `dvc exp apply clip01`
    dirs = stage_config("params.yaml", "evaluate")
    assert dirs.cfg.run_dir == dirs.out == run_dir
    run_stage("evaluate", fake_eval)
    evaluated = json.loads((temp / "results/cartpole_ppo/eval/metrics.json").read_text())
    assert evaluated["eval/return_mean"] == 9.0
    assert (run_dir / "eval" / "metrics.json").is_file()


def test_an_experiment_that_only_reevaluates_writes_to_its_own_folder(workspace, monkeypatch):
    main, temp = workspace
    run_stage("train", fake_train)
    before = (temp / "results/cartpole_ppo/run.json").read_text()
    monkeypatch.setenv("DVC_EXP_NAME", "eval2")  # train skipped: its outputs are clip01's
    run_stage("evaluate", fake_eval)
    clip01, own = (main / "data" / "exps" / name / "cartpole_ppo" for name in ("clip01", "eval2"))
    assert not (clip01 / "eval").exists()  # clip01's outputs are not overwritten
    assert json.loads((own / "eval" / "metrics.json").read_text())["read"] == str(clip01)
    assert json.loads((own / "run.json").read_text())["run_dir"] == "data/exps/clip01/cartpole_ppo"
    assert (temp / "results/cartpole_ppo/run.json").read_text() == before  # train's output untouched
    from rlpipe.dvc.runs import resolve_run_dir

    assert resolve_run_dir("eval2", main) == clip01  # its name reaches the data it evaluated


def test_run_json_of_another_exp_name_is_refused(workspace):
    _, temp = workspace
    run_stage("train", fake_train)
    params = yaml.safe_load((temp / "params.yaml").read_text())
    params["trainer"]["exp_name"] = "other"
    (temp / "params.yaml").write_text(yaml.safe_dump(params))
    (temp / "results" / "other").mkdir()
    (temp / "results" / "cartpole_ppo" / "run.json").rename(temp / "results" / "other" / "run.json")
    with pytest.raises(ConfigError, match=r"run.json: names .* not a run of trainer.exp_name='other'"):
        stage_config("params.yaml", "evaluate")


def test_plain_repro_keeps_the_workspace_run_dir(workspace, monkeypatch):
    _, temp = workspace
    monkeypatch.delenv("DVC_EXP_NAME")
    monkeypatch.setenv("DVC_ROOT", str(temp))
    dirs = stage_config("params.yaml", "train")
    assert dirs.cfg.run_dir == dirs.out == Path("data/cartpole_ppo")
    assert dirs.workspace == Path("results/cartpole_ppo")  # the small files DVC commits, apart from the data


def test_dvc_exp_apply_stash_keeps_every_rollout(tmp_path):
    """``dvc exp apply`` stashes untracked files through libgit2 (pygit2), which deletes an untracked
    folder whole, ignored files included. With the project's ``.gitignore`` the run data sits in the
    ignored ``data/`` and the untracked small files in ``results/``: the stash takes only those."""
    from scmrepo.git import Git
    from scmrepo.git.stash import Stash

    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy(ROOT / ".gitignore", repo / ".gitignore")
    git(repo, "init", "-q")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "baseline")
    rollouts = [
        repo / "data" / "cartpole_ppo" / "rollouts" / "iter-000001.zarr" / "zarr.json",
        repo / "data" / "exps" / "clip03" / "cartpole_ppo" / "checkpoints" / "ckpt-000002.pt",
    ]
    small = [repo / "results" / "cartpole_ppo" / name for name in ("metrics.json", "curve.csv", "run.json")]
    for path in rollouts + small:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")
    assert git(repo, "status", "--porcelain") == "?? results/"  # data/ is ignored as a whole
    stash = Stash(Git(repo, backends=["pygit2"]), "refs/exps/apply/stash")
    stash.push(message="apply", include_untracked=True)
    assert all(path.is_file() for path in rollouts)  # untouched by the stash
    assert not any(path.exists() for path in small)  # stashed (dvc exp apply then restores them)


# ----------------------------------------------------------------------------------------------- gc


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def pointer(repo: Path, name: str | None) -> None:
    folder = repo / "results" / "cartpole_ppo"
    folder.mkdir(parents=True, exist_ok=True)
    target = f"data/exps/{name}/cartpole_ppo" if name else "data/cartpole_ppo"
    (folder / "run.json").write_text(json.dumps({"dvc_exp_name": name, "run_dir": target}))


def test_gc_frees_only_what_no_experiment_branch_or_workspace_names(tmp_path, monkeypatch):
    monkeypatch.delenv("DVC_ROOT", raising=False)
    repo = tmp_path / "repo"
    for name in ("exp_kept", "branch_kept", "ws_kept", "running", "removed", "failed", "eval_only"):
        (repo / "data" / "exps" / name / "cartpole_ppo" / "rollouts").mkdir(parents=True)
        (repo / "data" / "exps" / name / "cartpole_ppo" / "rollouts" / "x").write_bytes(b"1" * 1000)
    (repo / "dvc.yaml").write_text("stages: {}\n")
    (repo / ".dvc").mkdir()
    git(repo, "init", "-q")
    git(repo, "commit", "-q", "--allow-empty", "-m", "baseline")
    for name, ref in (
        ("exp_kept", "refs/exps/ab/cdef/exp_kept"),
        ("branch_kept", "refs/heads/promoted"),
        ("removed", "refs/exps/ab/cdef/removed"),
    ):
        pointer(repo, name)
        git(repo, "add", "-f", "results/cartpole_ppo/run.json")
        tree = git(repo, "write-tree")
        git(repo, "update-ref", ref, git(repo, "commit-tree", tree, "-m", name))
        git(repo, "rm", "-q", "--cached", "results/cartpole_ppo/run.json")
    git(repo, "update-ref", "-d", "refs/exps/ab/cdef/removed")  # what `dvc exp remove removed` does
    git(repo, "update-ref", "refs/exps/ab/cdef/eval_only", "HEAD")  # an experiment, kept by its name
    pointer(repo, "ws_kept")
    with open(repo / "data" / "exps" / "running" / ACTIVE_LOCK, "a") as held:
        fcntl.flock(held, fcntl.LOCK_SH)
        assert [p.name for p, _ in gc(repo, dry_run=True)] == ["failed", "removed"]
        assert (repo / "data" / "exps" / "removed").is_dir()
        freed = gc(repo)
    assert [(p.name, size) for p, size in freed] == [("failed", 1000), ("removed", 1000)]
    left = sorted(p.name for p in (repo / "data" / "exps").iterdir())
    assert left == ["branch_kept", "eval_only", "exp_kept", "running", "ws_kept"]
    assert [p.name for p, _ in gc(repo)] == ["running"]  # its stage has ended without an experiment


def exps_repo(tmp_path: Path, *names: str) -> Path:
    """A DVC project (git + ``.dvc/``) whose ``data/exps`` holds one 1000-byte run dir per name."""
    repo = tmp_path / "repo"
    for name in names:
        (repo / "data" / "exps" / name / "cartpole_ppo").mkdir(parents=True)
        (repo / "data" / "exps" / name / "cartpole_ppo" / "x").write_bytes(b"1" * 1000)
    (repo / ".dvc").mkdir(parents=True)
    (repo / "dvc.yaml").write_text("stages: {}\n")
    git(repo, "init", "-q")
    git(repo, "commit", "-q", "--allow-empty", "-m", "baseline")
    return repo


def failing_git(tmp_path: Path, monkeypatch, but: str = "") -> None:
    """A ``git`` first on PATH that fails as git does on a repo it may not read (exit 128).

    ``but``: a git subcommand passed to the real git (the repository looks fine up to there).
    """
    bin_dir, real = tmp_path / "bin", shutil.which("git")
    bin_dir.mkdir()
    (bin_dir / "git").write_text(
        "#!/bin/sh\n"
        f'case " $* " in *" {but or "-"} "*) exec {real} "$@";; esac\n'
        'echo "fatal: detected dubious ownership in repository" >&2\nexit 128\n'
    )
    (bin_dir / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


@pytest.mark.parametrize("but", ["", "rev-parse"], ids=["every-call", "listing-the-refs"])
def test_gc_refuses_when_git_fails_and_deletes_nothing(tmp_path, monkeypatch, but):
    monkeypatch.delenv("DVC_ROOT", raising=False)
    repo = exps_repo(tmp_path, "myexp")
    git(repo, "update-ref", "refs/exps/ab/cdef/myexp", "HEAD")  # the experiment exists
    failing_git(tmp_path, monkeypatch, but)
    for dry_run in (True, False):
        with pytest.raises(
            ExperimentsUnreadable,
            match=r"cannot tell which DVC experiments exist: git "
            r".*exit 128: fatal: detected dubious ownership",
        ):
            gc(repo, dry_run=dry_run)
    assert (repo / "data" / "exps" / "myexp" / "cartpole_ppo" / "x").is_file()


def test_gc_refuses_outside_a_git_and_dvc_project(tmp_path, monkeypatch):
    monkeypatch.delenv("DVC_ROOT", raising=False)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # no repository above tmp_path either
    folder = tmp_path / "plain"
    (folder / "data" / "exps" / "myexp" / "cartpole_ppo").mkdir(parents=True)
    (folder / "pyproject.toml").write_text("")
    with pytest.raises(ExperimentsUnreadable, match=r"not a git repository"):
        gc(folder, dry_run=True)  # it used to offer every run dir under data/exps
    git(folder, "init", "-q")
    with pytest.raises(ExperimentsUnreadable, match=r"not a DVC project \(no \.dvc/ folder"):
        gc(folder)
    assert (folder / "data" / "exps" / "myexp" / "cartpole_ppo").is_dir()


def test_gc_refuses_a_workspace_run_json_it_cannot_read(tmp_path, monkeypatch):
    monkeypatch.delenv("DVC_ROOT", raising=False)
    repo = exps_repo(tmp_path, "ws_named")
    (repo / "results" / "cartpole_ppo").mkdir(parents=True)
    (repo / "results" / "cartpole_ppo" / "run.json").write_text('{"run_dir": "data/exps/ws_na')  # cut short
    with pytest.raises(ExperimentsUnreadable, match=r"results/cartpole_ppo/run.json: unreadable"):
        gc(repo)
    assert (repo / "data" / "exps" / "ws_named").is_dir()


def test_gc_unlinks_a_link_under_data_exps_and_frees_the_rest(tmp_path, monkeypatch):
    monkeypatch.delenv("DVC_ROOT", raising=False)
    repo = exps_repo(tmp_path, "removed")
    elsewhere = tmp_path / "elsewhere" / "cartpole_ppo"
    elsewhere.mkdir(parents=True)
    (elsewhere / "keep.txt").write_text("not rlpipe's")
    (repo / "data" / "exps" / "linked").symlink_to(elsewhere.parent, target_is_directory=True)
    (repo / "data" / "exps" / "dangling").symlink_to(tmp_path / "gone")
    freed = gc(repo)
    assert [(p.name, size) for p, size in freed] == [("dangling", 0), ("linked", 0), ("removed", 1000)]
    assert list((repo / "data" / "exps").iterdir()) == []
    assert (elsewhere / "keep.txt").read_text() == "not rlpipe's"  # never followed
    assert gc(repo) == []  # nothing renamed and left behind for the next run
