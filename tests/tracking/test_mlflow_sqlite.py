"""The SQLite fast path writes what MLflow writes, serves only where it knows so, and never imports MLflow."""

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from rlpipe import fast
from rlpipe.tracking import mlflow_sqlite, sink
from rlpipe.tracking.mlflow_runs import MlflowRun, open_experiment
from rlpipe.tracking.mlflow_sqlite import SqliteRun, can_write, serves
from rlpipe.tracking.mlflow_store import open_client

EXP = "fastpath"
PARAMS = {
    "env.id": "CartPole-v1",
    "trainer.seed": 3,
    "algorithm.cfg.learning_rate": 0.0003,
    "long": "x" * 7000,
}
TAGS = {"rlpipe.kind": "train", "mlflow.user": "alice", "mlflow.source.git.commit": "abc123"}
TABLES = {
    "runs": "name, source_type, source_name, entry_point_name, user_id, status, source_version,"
    " lifecycle_stage, experiment_id, deleted_time, start_time IS NOT NULL, end_time IS NOT NULL",
    "tags": "key, value",
    "params": "key, value",
    "metrics": "key, value, timestamp, step, is_nan, typeof(value), typeof(timestamp)",
    "latest_metrics": "key, value, timestamp, step, is_nan",
}


@pytest.fixture(scope="module")
def schema_db(tmp_path_factory):
    """A database MLflow created (its schema costs seconds), copied by each test."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('schema') / 'mlflow.db'}"
    open_client(uri)
    return Path(uri.removeprefix("sqlite:///"))


def fresh_store(schema_db, folder, experiment=EXP):
    """The schema copied to ``folder``, ``experiment`` created by MLflow (as rlpipe's first run does)."""
    folder.mkdir(parents=True)
    shutil.copy(schema_db, folder / "mlflow.db")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    if experiment:
        open_experiment(open_client(uri), experiment, uri)
    return uri


@pytest.fixture
def two_stores(schema_db, tmp_path):
    return fresh_store(schema_db, tmp_path / "lib"), fresh_store(schema_db, tmp_path / "fast")


def write_sequence(kind, uri, files):
    """The calls the tracking process makes for a run and for its resumption."""
    run = kind.start(uri, EXP, PARAMS, TAGS, run_name="seq-run")
    run.log_metric_rows([({"a": 1.0, "b": 2.0}, 10, 1000), ({"a": 1.5, "flag": True}, 20, 1001)])
    run.log_metric_rows(
        [
            ({"a": 1.0, "b": 2.0}, 10, 1000),  # identical to rows of the first batch
            ({"a": 0.5, "nan": float("nan"), "inf": float("inf")}, 20, 1001),  # same step and time, lower
            ({"a": 3.0}, 15, 5000),  # an earlier step at a later time: not the latest
            ({"g": 1.0}, 30, 100),
            ({"g": 2.0}, 20, 9000),  # the step decides, not the time
            ({"c": 7, "b": 2.0}, 40, 2000),
            ({"c": 7, "b": 1.0}, 40, 2000),  # identical row within one batch; b lower at the same point
        ]
    )
    run.log_metrics({"d": -1.25}, 50, 3000)
    run.log_artifact(files / "params.yaml")
    run.log_artifact(files / "params.yaml", "config")
    run.log_artifact(files / "folder", "files")
    run.log_artifact(files / "folder")
    run.end("FINISHED")
    again = kind.reopen(uri, run.run_id)
    assert again is not None and again.run_id == run.run_id and again.experiment_id == run.experiment_id
    again.log_metric_rows([({"a": 9.0, "e": 0.0}, 60, 6000), ({"g": 0.5}, 25, 99999)])
    again.log_artifact(files / "params.yaml", "resumed")
    again.end("KILLED")
    assert run.error is None and again.error is None
    return run.run_id


@pytest.fixture
def files(tmp_path):
    (tmp_path / "files" / "folder" / "sub").mkdir(parents=True)
    (tmp_path / "files" / "params.yaml").write_text("trainer:\n  seed: 3\n")
    (tmp_path / "files" / "folder" / "a.txt").write_text("A")
    (tmp_path / "files" / "folder" / "sub" / "b.bin").write_bytes(bytes(range(256)))
    os.chmod(tmp_path / "files" / "folder" / "a.txt", 0o640)
    return tmp_path / "files"


def read_with_mlflow(uri, run_id):
    client = open_client(uri)
    run = client.get_run(run_id)
    info, experiment = run.info, client.get_experiment(run.info.experiment_id)
    root = Path(str(info.artifact_uri))
    return {
        "info": (info.status, info.lifecycle_stage, info.run_name, info.user_id, info.experiment_id),
        "artifact_uri": info.artifact_uri == f"{experiment.artifact_location}/{run_id}/artifacts",
        "times": (
            info.start_time is not None,
            info.end_time is not None and info.end_time >= info.start_time,
        ),
        "params": run.data.params,
        "tags": run.data.tags,
        "latest": run.data.metrics,
        "history": {
            key: sorted((m.value, m.step, m.timestamp) for m in client.get_metric_history(run_id, key))
            for key in run.data.metrics
        },
        "listing": sorted(a.path for a in client.list_artifacts(run_id)),
        "files": {
            str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mode)
            for p in sorted(root.rglob("*"))
            if p.is_file()
        },
        "experiment": (experiment.name, experiment.lifecycle_stage, experiment.tags),
    }


def raw_rows(uri, run_id):
    with sqlite3.connect(uri.removeprefix("sqlite:///")) as conn:
        rows = {
            t: sorted(conn.execute(f"SELECT {cols} FROM {t} WHERE run_uuid = ?", (run_id,)))
            for t, cols in TABLES.items()
        }
        rows["experiments"] = sorted(
            conn.execute("SELECT experiment_id, name, lifecycle_stage FROM experiments")
        )
        rows["experiment_tags"] = sorted(conn.execute("SELECT * FROM experiment_tags"))
        rows["counts"] = [conn.execute(f"SELECT count(*) FROM {t}").fetchone() for t in TABLES]
    return rows


def test_the_fast_path_writes_what_mlflow_writes(two_stores, files):
    lib_uri, fast_uri = two_stores
    assert can_write(fast_uri, EXP)
    lib_id, fast_id = write_sequence(MlflowRun, lib_uri, files), write_sequence(SqliteRun, fast_uri, files)
    lib, quick = read_with_mlflow(lib_uri, lib_id), read_with_mlflow(fast_uri, fast_id)
    assert quick == lib
    assert (
        lib["info"][0] == "KILLED"
        and lib["params"]["long"] == "x" * 6000
        and lib["tags"]["mlflow.runName"] == "seq-run"
    )
    assert lib["latest"] == {"a": 9.0, "b": 2.0, "c": 7.0, "d": -1.25, "e": 0.0, "flag": 1.0, "g": 1.0}
    assert (
        len(lib["history"]["a"]) == 5
        and "config/params.yaml" in lib["files"]
        and "files/folder/sub/b.bin" in lib["files"]
    )
    assert raw_rows(fast_uri, fast_id) == raw_rows(lib_uri, lib_id)


def test_the_view_tags_are_set_where_an_experiment_lacks_them(two_stores):
    for uri in two_stores:
        with sqlite3.connect(uri.removeprefix("sqlite:///")) as conn:
            conn.execute("DELETE FROM experiment_tags WHERE key = 'mlflow.experimentKind'")
            conn.execute("UPDATE experiment_tags SET value = 'old' WHERE key = 'mlflow.note.content'")
    lib, quick = (
        MlflowRun.start(two_stores[0], EXP, {}, {}, "r"),
        SqliteRun.start(two_stores[1], EXP, {}, {}, "r"),
    )
    assert (
        raw_rows(two_stores[1], quick.run_id)["experiment_tags"]
        == raw_rows(two_stores[0], lib.run_id)["experiment_tags"]
    )


def test_a_bad_metric_name_fails_the_run_with_one_warning_as_mlflow_does(two_stores, capsys):
    for kind, uri in zip((MlflowRun, SqliteRun), two_stores, strict=True):
        run = kind.start(uri, EXP, {}, {}, "r")
        run.log_metric_rows([({"ok": 1.0, "../bad": 2.0}, 1, 10)])
        run.end("FINISHED")
        assert run.error is not None
        assert read_with_mlflow(uri, run.run_id)["info"][0] == "FAILED"
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(":")[0] for line in lines] == ["Warning"] * 2
    assert all("metrics write failed, the run will be marked FAILED" in line for line in lines)


def test_a_gone_run_is_not_reopened(two_stores):
    assert SqliteRun.reopen(two_stores[1], "0" * 32) is None
    assert serves({"uri": two_stores[1], "experiment": EXP, "run_name": "r", "run_id": "0" * 32})


def test_parallel_runs_on_one_store_all_land(two_stores):
    uri = two_stores[1]
    ids: list[str] = []

    def one(i):
        run = SqliteRun.start(uri, EXP, {"i": i}, {}, f"r{i}")
        for step in range(20):
            run.log_metrics({"x": float(step)}, step, 1000 + step)
        run.end("FINISHED")
        assert run.error is None
        ids.append(run.run_id)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ids) == 4
    assert {read_with_mlflow(uri, i)["latest"]["x"] for i in ids} == {19.0}


def message(uri, **extra):
    return {"uri": uri, "experiment": EXP, "params": {}, "tags": {}, "run_name": "r", **extra}


def test_mlflow_serves_every_run_the_fast_path_cannot_vouch_for(schema_db, tmp_path, monkeypatch):
    uri = fresh_store(schema_db, tmp_path / "s")
    db = Path(uri.removeprefix("sqlite:///"))
    assert serves(message(uri))
    assert not serves(message(uri, run_name=None))  # MLflow draws a random name
    assert not serves(message(uri, experiment="new"))  # a first run creates its experiment
    assert not can_write("http://127.0.0.1:5000", EXP) and not can_write(f"sqlite:///{tmp_path}/none.db", EXP)
    monkeypatch.setattr(fast, "ENABLED", False)
    assert not serves(message(uri))
    monkeypatch.setattr(fast, "ENABLED", True)
    monkeypatch.setattr(mlflow_sqlite, "SCHEMA_HEADS", {"0.0.1": "dc11669786a5"})  # another MLflow installed
    assert not serves(message(uri))
    monkeypatch.undo()
    monkeypatch.setenv("MLFLOW_ENABLE_WORKSPACES", "true")
    assert not serves(message(uri))
    monkeypatch.delenv("MLFLOW_ENABLE_WORKSPACES")
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '1b5f0d9ad7c1'")
    assert not serves(message(uri))
    with sqlite3.connect(db) as conn:
        conn.execute(f"UPDATE alembic_version SET version_num = '{mlflow_sqlite.SCHEMA_HEADS['3.17.2']}'")
        conn.execute("UPDATE experiments SET lifecycle_stage = 'deleted' WHERE name = ?", (EXP,))
    assert not serves(message(uri))
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE experiments SET lifecycle_stage = 'active', artifact_location = 's3://b/x'"
            " WHERE name = ?",
            (EXP,),
        )
    assert not serves(message(uri))


def test_the_tracking_process_picks_mlflow_where_the_fast_path_does_not_serve(
    schema_db, tmp_path, monkeypatch
):
    uri = fresh_store(schema_db, tmp_path / "s")
    assert isinstance(sink._open(message(uri)), SqliteRun)
    assert isinstance(sink._open(message(uri, experiment="new")), MlflowRun)
    monkeypatch.setattr(fast, "ENABLED", False)
    assert isinstance(sink._open(message(uri)), MlflowRun)


def test_a_prewarmed_tracking_process_on_the_fast_path_never_imports_mlflow(schema_db, tmp_path, files):
    uri = fresh_store(schema_db, tmp_path / "s")
    lines = [
        {"op": "open", **message(uri, tags={"t": "1"}, cwd=str(tmp_path))},
        {"op": "metrics", "metrics": {"x": 1.0}, "step": 8, "ts": 1000},
        {"op": "metrics", "metrics": {"x": 2.0}, "step": 16, "ts": 1001},
        {"op": "text", "name": "params.yaml", "text": "a: 1\n"},
        {"op": "artifact", "path": str(files / "folder"), "artifact_path": None},
        {"op": "end", "status": "FINISHED"},
    ]
    env = {**os.environ, "RLPIPE_SINK_PREWARM": "1", "RLPIPE_SINK_URI": uri, "RLPIPE_SINK_EXPERIMENT": EXP}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "rlpipe.tracking.sink"],
        input="".join(json.dumps(m) + "\n" for m in lines),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    imported = [
        line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")
    ]
    assert "rlpipe.tracking.mlflow_sqlite" in imported
    assert [name for name in imported if name.split(".")[0] in ("mlflow", "sqlalchemy", "alembic")] == []
    assert replies[-1] == {"ended": "FINISHED"}
    run = read_with_mlflow(uri, replies[0]["run_id"])
    assert (
        run["latest"] == {"x": 2.0}
        and run["listing"] == ["folder", "params.yaml"]
        and run["tags"]["t"] == "1"
    )
