"""MLflow tracking: URI resolution, what a run logs (read back by another process), fail-fast, none."""

import csv
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from rlpipe import config
from rlpipe.cli import cli
from rlpipe.config import TrackingCfg
from rlpipe.tracking import MlflowRun, TrackingError, open_tracker, project_root, resolve_uri
from rlpipe.trainer import Trainer

ROOT = Path(__file__).resolve().parents[2]
TINY = [
    "trainer.num_envs=8",
    "trainer.buffer_size=8",
    "trainer.iterations=3",
    "trainer.num_eval_envs=2",
    "algorithm.cfg.batch_size=32",
    "algorithm.cfg.n_epochs=1",
]


def tiny_cfg(tmp_path, *extra):
    return config.load(ROOT / "params.yaml", [*TINY, f"trainer.data_dir={tmp_path / 'data'}", *extra])


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One SQLite store for the module: creating MLflow's schema costs seconds."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


@pytest.fixture(autouse=True)
def _no_ambient_tracking(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("DVC_ROOT", raising=False)
    monkeypatch.delenv("DVC_EXP_NAME", raising=False)


def read_back(uri, experiment):
    """Runs of ``experiment`` read with mlflow.search_runs in a separate process."""
    script = textwrap.dedent(f"""
        import json, mlflow
        mlflow.set_tracking_uri({uri!r})
        client = mlflow.MlflowClient()
        df = mlflow.search_runs(experiment_names=[{experiment!r}])
        out = []
        for run_id in df["run_id"]:
            run = client.get_run(run_id)
            out.append({{
                "run_id": run_id, "status": run.info.status, "params": run.data.params,
                "tags": run.data.tags,
                "steps": [m.step for m in client.get_metric_history(run_id, "env_steps")],
                "returns": len(client.get_metric_history(run_id, "update/policy_loss")),
                "artifacts": sorted(a.path for d in (None, "checkpoints")
                                    for a in client.list_artifacts(run_id, d)),
                "experiment_tags": client.get_experiment(run.info.experiment_id).tags,
            }})
        print(json.dumps(out))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_uri_precedence_env_then_params_then_absolute_project_db(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    assert resolve_uri(TrackingCfg(), root) == f"sqlite:///{root}/data/mlflow.db"
    assert resolve_uri(TrackingCfg(uri="sqlite:///runs/m.db"), root) == f"sqlite:///{root}/runs/m.db"
    assert resolve_uri(TrackingCfg(uri="http://host:5000"), root) == "http://host:5000"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////elsewhere/m.db")
    assert resolve_uri(TrackingCfg(uri="http://host:5000"), root) == "sqlite:////elsewhere/m.db"


@pytest.mark.parametrize("uri", ["./mlruns", "file:///tmp/mlruns"])
def test_file_store_is_refused_with_one_line(uri):
    with pytest.raises(TrackingError, match="file store, which MLflow 3 refuses"):
        resolve_uri(TrackingCfg(uri=uri))


def test_project_root_is_dvc_root_else_nearest_project_folder(tmp_path, monkeypatch):
    (tmp_path / "proj" / "a" / "b").mkdir(parents=True)
    (tmp_path / "proj" / "dvc.yaml").write_text("stages: {}\n")
    assert project_root(tmp_path / "proj" / "a" / "b") == tmp_path / "proj"
    monkeypatch.setenv("DVC_ROOT", str(tmp_path / "real"))  # a queued `dvc exp run` in a temp copy
    assert project_root(tmp_path / "proj" / "a") == tmp_path / "real"


def test_short_run_logs_params_metrics_per_iteration_and_checkpoint(tmp_path, store):
    cfg = tiny_cfg(
        tmp_path, f"tracking.uri={store}", "trainer.exp_name=logged", "algorithm.cfg.clip_coef=0.15"
    )
    summary = Trainer(cfg).train()
    runs = read_back(store, "logged")
    assert len(runs) == 1
    logged = runs[0]
    assert logged["status"] == "FINISHED"
    assert logged["params"]["algorithm.cfg.clip_coef"] == "0.15"
    assert logged["params"]["trainer.num_envs"] == "8"
    assert logged["params"]["policy.actor.network_cfg.hidden_sizes"] == "[64, 64]"
    assert logged["steps"] == [64, 128, 192]  # step = env steps, once per iteration
    assert logged["returns"] == 3  # never per minibatch
    assert "checkpoints/ckpt-000003.pt" in logged["artifacts"] and "params.yaml" in logged["artifacts"]
    tags = logged["tags"]
    assert tags["rlpipe.params_hash"] == config.params_hash(cfg)
    assert tags["rlpipe.rollout_store"] == str((cfg.run_dir / "rollouts").resolve())
    assert len(tags["mlflow.source.git.commit"]) == 40 and tags["rlpipe.git_dirty"] in ("true", "false")
    metrics = json.loads((cfg.run_dir / "metrics.json").read_text())
    assert metrics["mlflow_run_id"] == logged["run_id"]
    # the UI opens the experiment on its runs, with the saved view of key params and metrics
    experiment = logged["experiment_tags"]
    assert experiment["mlflow.experimentKind"] == "custom_model_development"
    assert "rlpipe compare --experiment logged" in experiment["mlflow.note.content"]
    view = json.loads(experiment["mlflow.sharedViewState.rlpipe"])
    assert "params.`algorithm.cfg.clip_coef`" in view["selectedColumns"]
    assert "metrics.`eval/return_mean`" in view["selectedColumns"]
    untracked = Trainer(
        cfg.replace(
            tracking=cfg.tracking.replace(backend="none"),
            trainer=cfg.trainer.replace(data_dir=str(tmp_path / "none")),
        )
    ).train()
    for key in ("update/policy_loss", "update/value_loss", "train/episode_return_mean"):
        assert untracked[key] == summary[key], f"tracking changed the training result ({key})"


def test_backend_none_writes_nothing_and_never_imports_mlflow(tmp_path):
    db = tmp_path / "never.db"
    script = textwrap.dedent(f"""
        import os, sys
        os.environ["MLFLOW_TRACKING_URI"] = "sqlite:///{db}"
        from rlpipe import config
        from rlpipe.trainer import Trainer
        cfg = config.load({str(ROOT / "params.yaml")!r}, {TINY!r} + [
            "trainer.data_dir={tmp_path / "data"}", "tracking.backend=none"])
        Trainer(cfg).train()
        assert "mlflow" not in sys.modules, "backend none imported mlflow"
    """)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert not db.exists() and not (tmp_path / "mlartifacts").exists() and not (tmp_path / "mlruns").exists()
    metrics = json.loads((tmp_path / "data" / "cartpole_ppo" / "metrics.json").read_text())
    assert metrics["mlflow_run_id"] is None


@pytest.fixture
def silent_server():
    """A TCP port that accepts connections but never answers (a hung server)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


def closed_port() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("kind", ["refused", "silent"])
def test_unreachable_server_fails_fast_with_one_line(tmp_path, kind, request):
    uri = closed_port() if kind == "refused" else request.getfixturevalue("silent_server")
    args = [
        "run",
        str(ROOT / "params.yaml"),
        *[a for kv in TINY for a in ("--set", kv)],
        "--set",
        f"trainer.data_dir={tmp_path / 'data'}",
        "--set",
        f"tracking.uri={uri}",
    ]
    start = time.perf_counter()
    result = CliRunner().invoke(cli, args)
    elapsed = time.perf_counter() - start
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and f"MLflow server {uri} does not answer" in lines[0], result.output
    assert elapsed < 15, f"took {elapsed:.1f}s to fail"
    assert not (tmp_path / "data" / "cartpole_ppo" / "curve.csv").exists()


class FakeClient:
    def __init__(self):
        self.batches, self.status = [], None

    def log_batch(self, run_id, metrics=()):
        self.batches.append([(m.key, m.value, m.step) for m in metrics])

    def set_terminated(self, run_id, status):
        self.status = status


def test_one_batched_write_per_iteration_at_env_steps():
    client = FakeClient()
    mlflow_run = MlflowRun(client, "run-1")
    for i in range(1, 6):
        mlflow_run.log_metrics(
            {"update/policy_loss": 0.1 * i, "env_steps": 64.0 * i, "bad": float("nan")}, step=64 * i
        )
    mlflow_run.end()
    assert len(client.batches) == 5
    assert [batch[0][2] for batch in client.batches] == [64, 128, 192, 256, 320]
    assert all({k for k, _, _ in batch} == {"update/policy_loss", "env_steps"} for batch in client.batches)
    assert client.status == "FINISHED"


def test_a_crashed_run_is_marked_failed_not_left_running(tmp_path, store):
    script = textwrap.dedent(f"""
        from pathlib import Path
        from rlpipe import config
        from rlpipe.tracking import open_tracker
        cfg = config.load({str(ROOT / "params.yaml")!r}, ["tracking.uri={store}", "trainer.exp_name=crashed"])
        tracker = open_tracker(cfg, Path({str(tmp_path)!r}))
        tracker.log({{"env_steps": 64.0, "update/policy_loss": 0.5}}, step=64)
        raise RuntimeError("boom")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180)
    assert "boom" in result.stderr
    (crashed,) = read_back(store, "crashed")
    assert crashed["status"] == "FAILED" and crashed["steps"] == [64]


@pytest.mark.slow
def test_replay_runs_point_back_to_their_source(tmp_path, store):
    cfg = tiny_cfg(tmp_path, f"tracking.uri={store}", "trainer.exp_name=sourced")
    tracker = open_tracker(cfg, tmp_path, kind="replay", parent_run_id="abc123", run_name="replay-1")
    tracker.log({"env_steps": 64.0}, step=64)
    tracker.finish({"iterations": 1})
    (replayed,) = read_back(store, "sourced")
    assert replayed["tags"]["rlpipe.source_run_id"] == "abc123"
    assert replayed["tags"]["rlpipe.kind"] == "replay" and replayed["tags"]["mlflow.runName"] == "replay-1"


def test_the_mlflow_modules_are_the_only_ones_that_import_mlflow():
    mlflow_modules = {ROOT / "rlpipe/tracking" / f"mlflow_{name}.py" for name in ("store", "runs", "query")}
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "rlpipe").rglob("*.py")
        if p not in mlflow_modules
        and any(
            line.strip().startswith(("import mlflow", "from mlflow")) for line in p.read_text().splitlines()
        )
    ]
    assert offenders == []


def data_rows(lines):
    """Yield each table row (not the header) of ``rlpipe run``'s stdout as it is printed."""
    for line in lines:
        cells = line.split()
        if cells and cells[0].isdigit():
            yield cells


def test_sigterm_flushes_every_logged_iteration_and_ends_the_run_killed(tmp_path, store):
    data = tmp_path / "data"
    args = [
        "run",
        str(ROOT / "params.yaml"),
        *[a for kv in TINY for a in ("--set", kv)],
        "--set",
        "trainer.iterations=100000",
        "--set",
        f"tracking.uri={store}",
        "--set",
        "trainer.exp_name=killed",
        "--set",
        f"trainer.data_dir={data}",
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlpipe", *args],
        cwd=tmp_path,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    rows = data_rows(proc.stdout)
    for _ in range(3):
        next(rows)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=240)
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    with (data / "killed" / "curve.csv").open() as fh:
        curve_steps = [int(float(row["env_steps"])) for row in csv.DictReader(fh)]
    (killed,) = read_back(store, "killed")
    assert killed["status"] == "KILLED"
    assert len(curve_steps) >= 3
    # Every iteration in curve.csv reached MLflow (MLflow is written first, so it may hold one more).
    assert killed["steps"][: len(curve_steps)] == curve_steps
    assert len(killed["steps"]) - len(curve_steps) in (0, 1)


def test_a_store_that_cannot_be_opened_costs_one_warning_line_and_training_goes_on(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    args = [
        "run",
        str(ROOT / "params.yaml"),
        *[a for kv in TINY for a in ("--set", kv)],
        "--set",
        f"tracking.uri=sqlite:///{blocker}/mlflow.db",
        "--set",
        f"trainer.data_dir={tmp_path / 'data'}",
    ]
    result = subprocess.run(
        [sys.executable, "-m", "rlpipe", *args], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "MLflow" in line]
    assert len(warnings) == 1 and warnings[0].startswith("Warning: MLflow run not opened"), result.stderr
    metrics = json.loads((tmp_path / "data" / "cartpole_ppo" / "metrics.json").read_text())
    assert metrics["iterations"] == 3 and metrics["mlflow_run_id"] is None


def test_training_process_never_imports_mlflow(tmp_path, store):
    script = textwrap.dedent(f"""
        import sys
        from rlpipe import config
        from rlpipe.trainer import Trainer
        cfg = config.load({str(ROOT / "params.yaml")!r}, {TINY!r} + [
            "trainer.data_dir={tmp_path / "data"}", "tracking.uri={store}", "trainer.exp_name=apart"])
        summary = Trainer(cfg).train()
        assert "mlflow" not in sys.modules, "the training process imported mlflow"
    """)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    (logged,) = read_back(store, "apart")
    assert logged["status"] == "FINISHED" and logged["steps"] == [64, 128, 192]


def _open_and_log(uri: str, name: str) -> str:
    from rlpipe.tracking.mlflow_runs import MlflowRun

    run = MlflowRun.start(uri, "concurrent", {"p": 1}, {"t": name}, run_name=name)
    run.log_metrics({"m": 1.0}, step=1)
    run.end()
    return run.run_id


@pytest.mark.slow
def test_processes_creating_one_sqlite_store_at_once_all_succeed(tmp_path):
    # `dvc queue start --jobs 2`: parallel experiments open the same new data/mlflow.db together.
    import multiprocessing

    from rlpipe.tracking import search_runs

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        run_ids = pool.starmap(_open_and_log, [(uri, f"r{i}") for i in range(2)])
    runs = search_runs(uri, ("concurrent",))
    assert sorted(r.run_id for r in runs) == sorted(run_ids)
    assert all(r.status == "FINISHED" and r.metrics == {"m": 1.0} for r in runs)


def test_the_tracking_process_runs_below_the_training_process_priority(store):
    """MLflow's import and writes take the cycles training leaves, not training's core."""
    from rlpipe.runtime.threads import HELPER_NICENESS
    from rlpipe.tracking.background import BackgroundRun

    run = BackgroundRun.start(store, "priority", {}, {}, run_name="priority")
    try:
        assert run.run_id is not None  # the process is past its start-up: the run is open
        ours = os.getpriority(os.PRIO_PROCESS, 0)
        assert os.getpriority(os.PRIO_PROCESS, run._proc.pid) == min(ours + HELPER_NICENESS, 19)
    finally:
        assert run.end() == "FINISHED"
