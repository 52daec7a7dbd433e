"""rlpipe compare: the table shows only the params that differ, final/best metrics; the PNG has the curves."""

import io
import math
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from rlpipe import config
from rlpipe.cli import cli
from rlpipe.tracking import RunRecord, TrackingError
from rlpipe.tracking.compare import (
    Comparison,
    best_value,
    compare,
    differing_params,
    plot_curves,
    render_table,
    run_labels,
)
from rlpipe.trainer import Trainer

ROOT = Path(__file__).resolve().parents[2]
TINY = [
    "trainer.num_envs=8",
    "trainer.buffer_size=8",
    "trainer.iterations=3",
    "trainer.num_eval_envs=2",
    "trainer.eval_freq=64",
    "algorithm.cfg.batch_size=32",
    "algorithm.cfg.n_epochs=1",
]
RATES = ("0.001", "0.0003", "0.003")


@pytest.fixture(autouse=True)
def _no_ambient_tracking(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory):
    """Three short runs that differ only in the learning rate, in one experiment of a fresh store."""
    tmp = tmp_path_factory.mktemp("compare")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    for lr in RATES:
        overrides = [
            f"trainer.data_dir={tmp / lr}",
            f"tracking.uri={uri}",
            "trainer.exp_name=sweep",
            f"algorithm.cfg.learning_rate={lr}",
        ]
        Trainer(config.load(ROOT / "params.yaml", [*TINY, *overrides])).train()
    return uri


def record(run_id, params, tags=None):
    return RunRecord(run_id, run_id, "e", "FINISHED", 0, 1000, params, {}, tags or {})


def test_differing_params_keeps_only_what_changes():
    runs = [
        record("a", {"lr": "1", "clip": "0.2"}),
        record("b", {"lr": "2", "clip": "0.2"}),
        record("c", {"lr": "2", "clip": "0.2", "extra": "x"}, {"rlpipe.kind": "replay"}),
    ]
    assert differing_params(runs) == ["extra", "kind", "lr"]  # a missing key differs from a present one
    assert differing_params(runs[:1]) == []


def test_best_is_max_for_returns_and_min_for_losses():
    assert best_value("eval/return_mean", [1.0, 5.0, 3.0]) == 5.0
    assert best_value("update/value_loss", [4.0, 2.0, 3.0]) == 2.0
    assert best_value("eval/return_mean", [math.nan, 2.0]) == 2.0
    assert best_value("eval/return_mean", []) is None


def test_compare_three_runs_table_and_png(three_runs, tmp_path):
    png = tmp_path / "curves.png"
    metrics = ["--metric", "train/episode_return_mean", "--metric", "update/value_loss"]
    result = CliRunner().invoke(
        cli, ["compare", "--uri", three_runs, "--experiment", "sweep", *metrics, "--plot", str(png)]
    )
    assert result.exit_code == 0, result.output
    out = result.output
    assert "3 runs" in out and "clip_coef" not in out and "num_envs" not in out  # same in every run
    for lr in RATES:  # each run is labelled by what differs: its learning rate (and its data_dir)
        assert any(line.startswith(f"learning_rate={lr} ") for line in out.splitlines()), out
    assert "update/value_loss" in out and "192" in out  # a chosen metric; env steps
    table = out.split("wrote ")[0]
    assert max(len(line) for line in table.splitlines()) <= 120
    assert f"wrote {png} (2 panels: train/episode_return_mean, update/value_loss; 3 runs)" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_labels_name_what_differs_and_never_repeat():
    runs = [
        record("r1", {"algorithm.cfg.lr": "1", "trainer.seed": "0"}),
        record("r2", {"algorithm.cfg.lr": "2", "trainer.seed": "0"}),
        record("r3", {"algorithm.cfg.lr": "2", "trainer.seed": "0"}),
        record("r4", {"algorithm.cfg.lr": "2", "trainer.seed": "0", "replay.algorithm.cfg.lr": "3"}),
    ]
    comparison = Comparison(runs, ("eval/return_mean",), differing_params(runs))
    labels = run_labels(comparison)
    # the shortest unambiguous key: "algorithm.cfg.lr" and "replay.algorithm.cfg.lr" both end in "lr"
    assert labels == {
        "r1": "algorithm.cfg.lr=1 replay.algorithm.cfg.lr=-",
        "r2": "algorithm.cfg.lr=2 replay.algorithm.cfg.lr=-",
        "r3": "algorithm.cfg.lr=2 replay.algorithm.cfg.lr=- #2",
        "r4": "algorithm.cfg.lr=2 replay.algorithm.cfg.lr=3",
    }
    same = [RunRecord(i, "train-1", "e", "FINISHED", 0, 1, {"x": "1"}, {}, {}) for i in ("i1", "i2")]
    assert run_labels(Comparison(same, (), [])) == {"i1": "train-1", "i2": "train-1 #2"}  # same name


def test_compare_api_final_best_and_one_curve_per_run(three_runs, tmp_path):
    comparison = compare(three_runs, ("sweep",), metrics=("update/value_loss",))
    assert comparison.params == ["algorithm.cfg.learning_rate", "trainer.data_dir"]  # each run has its own
    assert len(comparison.runs) == 3
    for run_ in comparison.runs:
        points = comparison.history["update/value_loss"][run_.run_id]
        assert [step for step, _ in points] == [64, 128, 192]
        assert comparison.final(run_, "update/value_loss") == points[-1][1]
        assert comparison.best(run_, "update/value_loss") == min(v for _, v in points)
    import matplotlib.image

    image = matplotlib.image.imread(plot_curves(comparison, tmp_path / "one.png"))
    assert image.shape[0] > 100 and image.shape[1] > 100
    wide = io.StringIO()
    render_table(comparison, Console(file=wide, width=400), wide=True)  # --wide: a column per param
    assert "algorithm.cfg.learning_rate" in wide.getvalue() and "trainer.data_dir" in wide.getvalue()


def test_compare_one_run_by_id(three_runs):
    first = compare(three_runs, ("sweep",)).runs[0]
    only = compare(three_runs, run_ids=(first.run_id,))
    assert [r.run_id for r in only.runs] == [first.run_id] and only.params == []


def test_unknown_experiment_and_missing_store_are_one_line_errors(three_runs, tmp_path):
    with pytest.raises(TrackingError, match="no experiment 'nope'; accepted: .*sweep"):
        compare(three_runs, ("nope",))
    result = CliRunner().invoke(cli, ["compare", "--uri", f"sqlite:///{tmp_path / 'none.db'}"])
    assert result.exit_code == 2 and "no MLflow store at" in result.output
    assert not (tmp_path / "none.db").exists()


@pytest.mark.slow
def test_compare_200_runs(tmp_path):
    import mlflow
    from mlflow.entities import Metric, Param

    uri = f"sqlite:///{tmp_path / 'big.db'}"
    client = mlflow.MlflowClient(uri)
    exp = client.create_experiment("big", artifact_location=str(tmp_path / "art"))
    now = int(time.time() * 1000)
    for i in range(200):
        run_id = client.create_run(exp, run_name=f"r{i}").info.run_id
        metrics = [
            Metric(k, float(i + s), now, 64 * s) for s in (1, 2) for k in ("eval/return_mean", "env_steps")
        ]
        client.log_batch(run_id, metrics=metrics, params=[Param("seed", str(i)), Param("same", "1")])
        client.set_terminated(run_id)
    start = time.perf_counter()
    comparison = compare(uri, ("big",), metrics=("eval/return_mean",))
    png = plot_curves(comparison, tmp_path / "big.png")
    elapsed = time.perf_counter() - start
    assert len(comparison.runs) == 200 and comparison.params == ["seed"]
    last = next(r for r in comparison.runs if r.name == "r199")
    assert comparison.best(last, "eval/return_mean") == 201.0
    assert png.stat().st_size > 10_000
    assert elapsed < 120, f"compare of 200 runs took {elapsed:.0f}s"
