"""The end of ``rlpipe run``: final metrics, where checkpoint, rollouts and curves are, what to type next."""

from __future__ import annotations

from pathlib import Path

from rlpipe import config
from rlpipe.tracking.summary import end_summary

ROOT = Path(__file__).resolve().parents[2]


def test_end_summary_names_results_places_and_next_commands(tmp_path):
    cfg = config.load(ROOT / "params.yaml", [f"trainer.data_dir={tmp_path}", "trainer.exp_name=demo"])
    for k in (1, 2):
        (cfg.run_dir / "rollouts" / f"iter-{k:06d}.zarr").mkdir(parents=True)
    summary = {
        "eval/return_mean": 499.94,
        "train/episode_return_mean": 132.8,
        "update/value_loss": 5.2,
        "checkpoint": f"{cfg.run_dir}/checkpoints/ckpt-000002.pt",
    }
    text = end_summary(cfg, summary, "abc123", "sqlite:////p/data/mlflow.db", "7")
    run = f"{tmp_path}/demo"
    assert (
        "final       eval/return_mean 499.9 · train/episode_return_mean 132.8 · update/value_loss 5.2"
    ) in text
    assert f"checkpoint  {run}/checkpoints/ckpt-000002.pt" in text
    assert f"rollouts    {run}/rollouts/ (2 stored)" in text
    assert f"curves      {run}/curve.csv" in text
    assert (
        "run abc123: mlflow ui --backend-store-uri sqlite:////p/data/mlflow.db → "
        "http://127.0.0.1:5000/#/experiments/7/runs?workflowType=machine_learning" in text
    )
    for command in (
        f"rlpipe replay {run}",
        f"rlpipe eval {run}",
        f"rlpipe export {run}",
        "rlpipe compare --experiment demo --plot",
    ):
        assert command in text


def test_without_mlflow_or_store_it_says_so(tmp_path):
    cfg = config.load(
        ROOT / "params.yaml", [f"trainer.data_dir={tmp_path}", "tracking.backend=none", "store.enabled=false"]
    )
    text = end_summary(cfg, {}, None)
    assert "not stored (store.enabled: false)" in text and "no finished episode yet" in text
    assert "MLflow" not in text and "rlpipe compare" not in text  # compare reads MLflow
    assert "rlpipe replay" not in text and "  next        rlpipe eval " in text  # replay needs rollouts


def test_a_run_that_ended_before_its_first_stored_iteration_says_so(tmp_path):
    """``trainer.stop_when`` can end a run before the first iteration ``store.every`` keeps."""
    cfg = config.load(
        ROOT / "params.yaml", [f"trainer.data_dir={tmp_path}", "tracking.backend=none", "store.every=50"]
    )
    text = end_summary(cfg, {"iterations": 14}, None)
    assert (
        "  rollouts    none stored: the run ended at iteration 14, before the first iteration that "
        "store.every or store.budget keeps"
    ) in text
    assert "rlpipe replay" not in text
