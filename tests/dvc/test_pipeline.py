"""The DVC pipeline and experiments, run for real in a temporary git copy of the working tree, tiny params."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from _offline_fixtures import assert_same_learner
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
STAGES = ("train", "evaluate", "reupdate")


def sh_env() -> dict[str, str]:
    """The environment of DVC and git commands: the venv on PATH, this tree first on PYTHONPATH."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("MLFLOW_TRACKING_URI", "DVC_ROOT", "DVC_EXP_NAME", "DVC_STAGE")
    }
    return env | {
        "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        "DVC_NO_ANALYTICS": "1",
        "PYTHONPATH": f"{ROOT}{os.pathsep}{env.get('PYTHONPATH', '')}".rstrip(os.pathsep),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }


def sh(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(args, cwd=repo, env=sh_env(), capture_output=True, text=True, timeout=600)
    if check:
        assert result.returncode == 0, f"{' '.join(args)}\n{result.stdout}\n{result.stderr}"
    return result


def dvc(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return sh(repo, str(BIN / "dvc"), *args, check=check)


def set_params(repo: Path, changes: dict[str, dict]) -> None:
    path = repo / "params.yaml"
    params = yaml.safe_load(path.read_text())
    for section, values in changes.items():
        for key, value in values.items():
            node = params[section]
            *parents, leaf = key.split(".")
            for part in parents:
                node = node[part]
            node[leaf] = value
    path.write_text(yaml.safe_dump(params, sort_keys=False))


def working_tree_files() -> list[str]:
    """What a commit of the working tree would hold: tracked and untracked-but-not-ignored files."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sorted({rel for rel in listed.split("\0") if rel and (ROOT / rel).is_file()})


@pytest.fixture
def repo(tmp_path):
    """A fresh clone-like copy: the working tree (uncommitted work included), tiny params, one commit."""
    copy = tmp_path / "repo"
    for rel in working_tree_files():
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, copy / rel)
    (copy / "dvc.lock").unlink(missing_ok=True)
    set_params(
        copy,
        {
            "trainer": {
                "num_envs": 8,
                "buffer_size": 8,
                "iterations": 2,
                "num_eval_envs": 2,
                "num_threads": 1,
            },
            "algorithm": {"cfg.batch_size": 32, "cfg.n_epochs": 1},
            "eval": {"num_envs": 2, "num_episodes": 1},
        },
    )
    sh(copy, "git", "init", "-q")
    sh(copy, "git", "add", "-A")
    sh(copy, "git", "commit", "-qm", "baseline")
    return copy


def mlflow_runs(repo: Path) -> list:
    from rlpipe.tracking import search_runs

    return search_runs(f"sqlite:///{repo / 'data' / 'mlflow.db'}", ("cartpole_ppo",))


def ran(result: subprocess.CompletedProcess) -> set[str]:
    return {s for s in STAGES if f"Running stage '{s}'" in result.stdout}


def test_dvc_yaml_stages_are_thin_entry_files_with_their_own_params():
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert set(stages) == set(STAGES)
    for name, stage in stages.items():
        entry = ROOT / "dvc_stages" / f"{name}.py"
        assert stage["cmd"] == f"python dvc_stages/{name}.py" and f"dvc_stages/{name}.py" in stage["deps"]
        body = [line for line in entry.read_text().split('"""')[-1].splitlines() if line.strip()]
        assert len(body) <= 5, f"{entry} should only call into rlpipe"
        doc = entry.read_text().split('"""')[1]
        assert all(p in doc for p in stage["params"]), f"{entry} docstring should name its params"
    params = {name: {p.split(".")[0] for p in stage["params"]} for name, stage in stages.items()}
    assert "replay" in params["reupdate"] and all("replay" not in params[s] for s in ("train", "evaluate"))
    assert "eval" in params["evaluate"] and "eval" not in params["train"]
    # Rollouts and checkpoints live in the run dir (data/exps/<exp>/… in an experiment), not in DVC's
    # workspace: only small git-tracked files are outs, so no experiment's data goes with its tmp dir.
    for stage in stages.values():
        for kind in ("outs", "metrics", "plots"):
            for out in stage.get(kind, []):
                ((path, spec),) = out.items()
                assert spec.get("cache") is False, f"{path}: heavy data must not be a DVC out"
                assert path.endswith((".json", ".csv")), path
    outs = {next(iter(o)) for o in stages["train"]["outs"]}
    assert outs == {"results/${trainer.exp_name}/run.json"}


@pytest.mark.parametrize(
    ("stage", "entry"),
    [
        ("train", "rlpipe.trainer.trainer"),
        ("evaluate", "rlpipe.offline.commands"),
        ("reupdate", "rlpipe.offline.replay"),
        ("train", "rlpipe.dvc.experiments"),
        ("evaluate", "rlpipe.dvc.experiments"),
        ("reupdate", "rlpipe.dvc.experiments"),
    ],
)
def test_code_deps_cover_the_import_closure(stage, entry):
    import grimp

    assert (ROOT / (entry.replace(".", "/") + ".py")).is_file(), f"{entry} does not exist"
    deps = set(yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"][stage]["deps"])
    assert entry.split(".")[1] in (ROOT / "dvc_stages" / f"{stage}.py").read_text()  # what the stage runs
    graph = grimp.build_graph("rlpipe")
    for module in graph.find_upstream_modules(entry) | {entry}:
        parts = module.split(".")
        package, file = "/".join(parts[:2]), "/".join(parts) + ".py"
        if module == "rlpipe":
            file = "rlpipe/__init__.py"
        assert package in deps or file in deps, f"dvc.yaml {stage}: {module} is imported but not a dep"


def test_repro_train_noop_metrics_and_plots(repo):
    first = dvc(repo, "repro", "train")
    assert ran(first) == {"train"}
    second = dvc(repo, "repro", "train")
    assert ran(second) == set() and "didn't change" in second.stdout

    shown = json.loads(dvc(repo, "metrics", "show", "--json").stdout)
    (workspace,) = shown.values()  # keyed "" (the workspace) in DVC 3
    metrics = workspace["data"]["results/cartpole_ppo/metrics.json"]["data"]
    assert metrics["env_steps"] == 2 * 8 * 8
    (run,) = mlflow_runs(repo)  # DVC and MLflow point at each other
    assert metrics["mlflow_run_id"] == run.run_id
    plots = json.loads(dvc(repo, "plots", "show", "--json").stdout)
    assert plots["data"]["results/cartpole_ppo/curve.csv"], plots.get("errors")
    assert not [e for e in plots.get("errors", []) if e["name"] == "results/cartpole_ppo/curve.csv"]

    # Outside experiments the run dir is the workspace's data/<exp>, and results/<exp>/run.json says so.
    assert json.loads((repo / "results/cartpole_ppo/run.json").read_text()) == {
        "dvc_exp_name": None,
        "run_dir": "data/cartpole_ppo",
    }
    assert (repo / "data/cartpole_ppo/params.yaml").is_file()  # the params snapshot
    heavy = [
        "data/cartpole_ppo/rollouts",
        "data/cartpole_ppo/checkpoints",
        "data/mlflow.db",
        "data/exps/x/cartpole_ppo/rollouts",
        "data/cartpole_ppo/params.yaml",
        "data/cartpole_ppo/metrics.json",
    ]
    small = [f"results/cartpole_ppo/{name}" for name in ("metrics.json", "curve.csv", "run.json")]
    ignored = sh(repo, "git", "check-ignore", *heavy, *small, check=False)
    assert ignored.stdout.split() == heavy  # data/ is ignored whole; the published copies stay git-trackable


# ---------------------------------------------------------------------------- experiments keep their data


def run_dir_of(repo: Path, name: str) -> Path:
    return repo / "data" / "exps" / name / "cartpole_ppo"


def invoke(repo: Path, monkeypatch, *args: str) -> str:
    """``rlpipe ARGS`` in-process from the repo's folder (its data/mlflow.db); exit 0 asserted."""
    from rlpipe.cli import cli

    for key in ("DVC_ROOT", "DVC_EXP_NAME", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def assert_replays_bit_exact(repo: Path, monkeypatch, name: str) -> None:
    """``rlpipe replay <name>`` from the experiment's stored rollouts equals its online checkpoints."""
    out = repo / "replayed" / name
    invoke(repo, monkeypatch, "replay", name, "--out", str(out))
    assert json.loads((out / "metrics.json").read_text())["params_changed"] is False  # its own params
    online = sorted((run_dir_of(repo, name) / "checkpoints").glob("ckpt-*.pt"))
    assert online, name
    for checkpoint in online:
        assert_same_learner(checkpoint, out / "checkpoints" / checkpoint.name)


def assert_keeps_its_data(repo: Path, name: str, run, clip: float) -> None:
    """An ended experiment's run dir holds rollouts, checkpoints, params and metrics; MLflow names it."""
    run_dir = run_dir_of(repo, name)
    assert sorted(p.name for p in (run_dir / "rollouts").glob("iter-*.zarr")) == [
        "iter-000001.zarr",
        "iter-000002.zarr",
    ]
    assert (run_dir / "checkpoints" / "ckpt-000002.pt").is_file()
    snapshot = yaml.safe_load((run_dir / "params.yaml").read_text())
    assert snapshot["algorithm"]["cfg"]["clip_coef"] == clip
    assert json.loads((run_dir / "metrics.json").read_text())["mlflow_run_id"] == run.run_id
    assert run.status == "FINISHED" and run.params["algorithm.cfg.clip_coef"] == str(clip)
    assert run.tags["rlpipe.run_dir"] == str(run_dir.resolve())
    assert run.tags["rlpipe.rollout_store"] == str((run_dir / "rollouts").resolve())


@pytest.mark.slow
@pytest.mark.timeout(1200)  # three `dvc exp run`s: about a minute on 2 idle cores, many more when loaded
def test_two_workspace_experiments_both_keep_their_data_and_replay_bit_exact(repo, monkeypatch):
    for name, clip in (("clip01", 0.1), ("clip03", 0.3)):
        dvc(repo, "exp", "run", "train", "-n", name, "-S", f"algorithm.cfg.clip_coef={clip}")
    assert sorted(p.name for p in (repo / "data" / "exps").iterdir()) == ["clip01", "clip03"]
    assert json.loads((repo / "results/cartpole_ppo/run.json").read_text()) == {
        "dvc_exp_name": "clip03",
        "run_dir": "data/exps/clip03/cartpole_ppo",
    }
    assert not (repo / "data/cartpole_ppo/rollouts").exists()  # nothing heavy in DVC's workspace
    runs = {r.tags.get("rlpipe.dvc_exp_name"): r for r in mlflow_runs(repo)}
    for name, clip in (("clip01", 0.1), ("clip03", 0.3)):
        assert_keeps_its_data(repo, name, runs[name], clip)
        assert_replays_bit_exact(repo, monkeypatch, name)
    shown = invoke(repo, monkeypatch, "inspect", "clip01/rollouts/iter-000002.zarr", "--json")
    assert json.loads(shown)["attrs"]["iteration"] == 2
    # A replay sweep: train is skipped, reupdate reads clip03's rollouts and writes to its own folder.
    result = dvc(repo, "exp", "run", "reupdate", "-n", "rep01", "-S", "replay.algorithm.cfg.clip_coef=0.1")
    assert ran(result) == {"reupdate"}
    assert not (run_dir_of(repo, "clip03") / "reupdate").exists()
    replayed = json.loads((run_dir_of(repo, "rep01") / "reupdate" / "metrics.json").read_text())
    assert replayed["params_changed"] is True and replayed["iterations"] == 2
    # `dvc exp remove` + `rlpipe gc` free exactly the removed experiment's run dir.
    dvc(repo, "exp", "remove", "clip01")
    assert "would free" in invoke(repo, monkeypatch, "gc", "--dry-run")
    assert (repo / "data/exps/clip01").is_dir()
    freed = invoke(repo, monkeypatch, "gc")
    assert "data/exps/clip01" in freed and "clip03" not in freed
    assert sorted(p.name for p in (repo / "data" / "exps").iterdir()) == ["clip03", "rep01"]


@pytest.mark.slow
def test_exp_run_set_param_in_a_temporary_copy_keeps_its_data(repo, monkeypatch):
    # --temp runs in .dvc/tmp/exps/… like a queued experiment: its data and MLflow run land here.
    dvc(repo, "exp", "run", "train", "--temp", "-n", "lr3e4", "-S", "algorithm.cfg.learning_rate=0.0003")
    runs = {r.tags.get("rlpipe.dvc_exp_name"): r for r in mlflow_runs(repo)}
    assert runs["lr3e4"].params["algorithm.cfg.learning_rate"] == "0.0003"
    assert_keeps_its_data(repo, "lr3e4", runs["lr3e4"], 0.2)
    exps = dvc(repo, "exp", "show", "--json").stdout
    assert "lr3e4" in exps and runs["lr3e4"].run_id in exps  # the exp commit carries metrics.json
    assert_replays_bit_exact(repo, monkeypatch, "lr3e4")


def start_workers(repo: Path, jobs: int) -> None:
    """``dvc queue start --jobs N``; its output goes to a file, since the detached workers it
    starts would keep a captured pipe open until the whole queue has run."""
    with open(repo.parent / "queue-start.log", "w") as log:
        result = subprocess.run(
            [str(BIN / "dvc"), "queue", "start", "--jobs", str(jobs)],
            cwd=repo,
            env=sh_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=600,
        )
    assert result.returncode == 0, (repo.parent / "queue-start.log").read_text()


def wait_for_queue(repo: Path, timeout_s: float = 1500) -> str:
    """Poll ``dvc queue status`` until nothing is queued or running; return the last status."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = dvc(repo, "queue", "status").stdout
        if not any(word in status for word in ("Queued", "Running")):
            return status
        time.sleep(2)
    raise AssertionError(f"queue still busy after {timeout_s} s:\n{status}")


@pytest.mark.slow
@pytest.mark.timeout(3000)  # three experiments of three stages each; many minutes on a loaded 2-core machine
def test_three_queued_experiments_on_two_jobs_all_keep_their_data(repo, monkeypatch):
    clips = {"q1": 0.1, "q2": 0.15, "q3": 0.3}
    for name, clip in clips.items():
        dvc(repo, "exp", "run", "--queue", "-n", name, "-S", f"algorithm.cfg.clip_coef={clip}")
    start_workers(repo, jobs=2)
    status = wait_for_queue(repo)
    assert status.count("Success") == 3, status
    train = {r.tags["rlpipe.dvc_exp_name"]: r for r in mlflow_runs(repo) if r.tags["rlpipe.kind"] == "train"}
    assert set(train) == set(clips)
    for name, clip in clips.items():
        assert_keeps_its_data(repo, name, train[name], clip)
        run_dir = run_dir_of(repo, name)
        for rel in ("eval/metrics.json", "reupdate/metrics.json", "reupdate/checkpoints/ckpt-000002.pt"):
            assert (run_dir / rel).is_file(), (name, rel)
        assert_replays_bit_exact(repo, monkeypatch, name)
    # Two workers: some two experiments ran at the same time (own run dirs, one MLflow store), an
    # experiment spanning its train, eval and replay runs.
    runs = mlflow_runs(repo)
    by_exp = {name: [r for r in runs if r.tags.get("rlpipe.dvc_exp_name") == name] for name in clips}
    spans = sorted((min(r.start_ms for r in rs), max(r.end_ms for r in rs)) for rs in by_exp.values())
    assert all(r.status == "FINISHED" for r in runs)
    assert any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:], strict=False)), spans
    assert not list((repo / ".dvc" / "tmp" / "exps").glob("tmp*")), "temporary workspaces left behind"

    # `dvc exp apply` restores the experiment's results; its data is then the workspace's.
    dvc(repo, "exp", "apply", "q2")
    assert json.loads((repo / "results/cartpole_ppo/run.json").read_text())["dvc_exp_name"] == "q2"
    shown = invoke(repo, monkeypatch, "inspect", "results/cartpole_ppo/rollouts/iter-000001.zarr", "--json")
    stored = run_dir_of(repo, "q2") / "rollouts" / "iter-000001.zarr"
    assert Path(json.loads(shown)["path"]).resolve() == stored.resolve()

    # Cleaning up the DVC way, then rlpipe gc: q1 goes; q2 stays while the workspace holds its results.
    dvc(repo, "exp", "remove", "q1", "q2")
    invoke(repo, monkeypatch, "gc")
    assert sorted(p.name for p in (repo / "data" / "exps").iterdir()) == ["q2", "q3"]


@pytest.mark.slow
def test_full_pipeline_noop_and_replay_param_reruns_only_reupdate(repo):
    assert ran(dvc(repo, "repro")) == set(STAGES)
    assert ran(dvc(repo, "repro")) == set()
    for path in ("eval/metrics.json", "reupdate/metrics.json", "reupdate/curve.csv"):
        assert (repo / "results" / "cartpole_ppo" / path).is_file(), path
    (workspace,) = json.loads(dvc(repo, "metrics", "show", "--json").stdout).values()
    assert "error" not in json.dumps(workspace), workspace
    assert workspace["data"]["results/cartpole_ppo/eval/metrics.json"]["data"]["eval/return_mean"] > 0
    plots = json.loads(dvc(repo, "plots", "show", "--json").stdout)
    assert not plots.get("errors") and plots["data"]["losses"], plots.get("errors")

    set_params(repo, {"replay": {"algorithm": {"cfg": {"clip_coef": 0.1}}}})
    status = dvc(repo, "status", "--json").stdout
    assert set(json.loads(status)) == {"reupdate"}, status
    assert ran(dvc(repo, "repro")) == {"reupdate"}
    kinds = sorted(r.tags.get("rlpipe.kind") for r in mlflow_runs(repo))
    assert kinds.count("train") == 1 and "replay" in kinds and "eval" in kinds


@pytest.mark.slow
@pytest.mark.timeout(1800)  # two full `dvc exp run`s (train → evaluate → reupdate)
def test_make_exps_fits_120_columns_with_both_changed_params_and_the_eval_return(repo):
    dvc(repo, "exp", "run", "-n", "clip01", "-S", "algorithm.cfg.clip_coef=0.1")
    dvc(repo, "exp", "run", "-n", "lr3e3", "-S", "algorithm.cfg.learning_rate=0.003")
    shown = sh(repo, "make", "-s", "exps", f"BIN={BIN}", "STAMP=Makefile").stdout  # the Makefile's own recipe
    lines = shown.strip("\n").splitlines()
    assert max(len(line) for line in lines) <= 120, shown
    header = lines[0].split()
    assert header[0] == "Experiment" and header[-1] == "eval/return_mean", shown
    assert sorted(header[1:-1]) == ["clip_coef", "learning_rate"], shown  # in params.yaml's order
    rows = {line.split()[0]: dict(zip(header[1:], line.split()[1:])) for line in lines[1:]}
    assert rows["clip01"]["clip_coef"] == "0.1" and rows["clip01"]["learning_rate"] == "0.002", shown
    assert rows["lr3e3"]["learning_rate"] == "0.003", shown
    assert float(rows["clip01"]["eval/return_mean"]) > 0 and float(rows["lr3e3"]["eval/return_mean"]) > 0
