"""The run banner says where the run trains, which precision ``amp: auto`` chose and why."""

from __future__ import annotations

import pytest
import torch

from rlpipe.algorithms import optim, resolve_algo_cfg
from rlpipe.config import RunConfig
from rlpipe.tracking.banner import run_banner


def banner(monkeypatch: pytest.MonkeyPatch, amp: str, native: bool, malloc_tuned: bool = True) -> str:
    monkeypatch.setattr(optim, "cpu_flags", lambda: {"avx512_bf16"} if native else {"sse2"})
    cfg = RunConfig.model_validate({"algorithm": {"name": "ppo", "cfg": {"amp": amp}}})
    algo_cfg = resolve_algo_cfg("ppo", cfg.algorithm.cfg, torch.device("cpu"))
    return run_banner(cfg, torch.device("cpu"), algo_cfg, malloc_tuned)


def test_auto_on_a_cpu_without_bf16_says_fp32_and_why(monkeypatch):
    line = banner(monkeypatch, "auto", native=False)
    assert "amp auto → none (CPU without avx512_bf16/AMX" in line
    assert "ppo on cpu" in line and "allocator glibc (mmap off)" in line


def test_auto_on_a_bf16_cpu_says_bf16(monkeypatch):
    assert "amp auto → bf16 (CPU has avx512_bf16)" in banner(monkeypatch, "auto", native=True)


def test_an_explicit_precision_is_stated_plainly(monkeypatch):
    line = banner(monkeypatch, "none", native=True, malloc_tuned=False)
    assert "amp none" in line and "auto" not in line and "allocator unchanged" in line


class FakeRun:
    run_id, experiment_id, uri, ready = "5e1d0c2a", "3", "sqlite:////p/data/mlflow.db", True

    def log_metrics(self, metrics, step):
        pass

    def end(self, status):
        pass


def tracker_output(tmp_path, run):
    import io

    from rich.console import Console

    from rlpipe.tracking.tracker import Tracker

    out = io.StringIO()
    tracker = Tracker(
        RunConfig.model_validate({}), tmp_path, Console(file=out, width=300), mlflow_run=run, progress=False
    )
    return tracker, out


def test_where_lines_name_run_dir_backend_params_hash_and_the_mlflow_ui(tmp_path):
    from rlpipe.config import params_hash
    from rlpipe.envs import build_env
    from rlpipe.tracking.banner import where_lines

    cfg = RunConfig.model_validate({})
    env = build_env("CartPole", 2, "cpu", {})
    lines = where_lines(cfg, tmp_path, env, FakeRun()).splitlines()
    assert lines == [f"  run dir {tmp_path} · env backend torch · params {params_hash(cfg)}"]
    tracker, out = tracker_output(tmp_path, FakeRun())
    tracker.announce_mlflow()  # the run is open already: its line at once
    assert out.getvalue().splitlines() == [
        "  MLflow  run 5e1d0c2a (experiment cartpole_ppo): mlflow ui --backend-store-uri "
        "sqlite:////p/data/mlflow.db → http://127.0.0.1:5000/#/experiments/3/runs"
        "?workflowType=machine_learning&viewStateShareKey=rlpipe"
    ]
    tracker.log({"iteration": 1.0}, step=1)
    assert out.getvalue().count("MLflow  run") == 1  # said once
    tracker.end("FINISHED")  # restores the signal handlers
    off = where_lines(cfg, tmp_path, env, None).splitlines()[1]
    assert off == f"  MLflow  off (tracking.backend: none); metrics in {tmp_path / 'curve.csv'}"


def test_the_banner_never_waits_for_mlflow_and_the_link_comes_before_the_next_row(tmp_path):
    run = FakeRun()
    run.ready = False
    tracker, out = tracker_output(tmp_path, run)
    tracker.announce_mlflow()
    assert out.getvalue().splitlines() == [
        "  MLflow  opening a run in experiment cartpole_ppo at sqlite:////p/data/mlflow.db; "
        "its link follows once it is open"
    ]
    tracker.log({"iteration": 1.0}, step=1)
    assert "MLflow  run" not in out.getvalue()  # still opening: only the row
    run.ready = True
    tracker.log({"iteration": 2.0}, step=2)
    tracker.log({"iteration": 3.0}, step=3)
    lines = out.getvalue().splitlines()[1:]
    assert [line.startswith("  MLflow  run 5e1d0c2a (experiment cartpole_ppo)") for line in lines] == [
        False,
        False,
        True,
        False,
        False,
    ]  # header, row 1, the link once, row 2, row 3
    tracker.end("FINISHED")  # restores the signal handlers


def test_progress_bar_only_on_a_terminal():
    import io

    from rich.console import Console
    from rich.text import Text

    from rlpipe.tracking.console import ConsoleTable

    row = {"iteration": 1.0, "env_steps": 64.0}
    for terminal in (True, False):
        out = io.StringIO()
        table = ConsoleTable(Console(file=out, force_terminal=terminal, width=120), total=10)
        table.row(row)
        bar = table._progress
        assert (bar is not None) == terminal
        if terminal:  # iterations done of trainer.iterations, with elapsed time and ETA
            assert (bar.tasks[0].completed, bar.tasks[0].total) == (1, 10)
        table.close()
        plain = Text.from_ansi(out.getvalue()).plain
        assert table._progress is None and "   64" in plain  # the row itself either way
