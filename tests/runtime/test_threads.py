"""``trainer.num_threads: auto`` (one thread for small workloads) and the oversubscription warning."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch

from rlpipe.build import build_algorithm, largest_batch, set_threads
from rlpipe.config import ConfigError, load
from rlpipe.runtime import threads

W1 = [
    "env.id=CartPole-v1",
    "trainer.num_envs=8",
    "trainer.buffer_size=128",
    "trainer.device=cpu",
    "algorithm.cfg.batch_size=256",
    "algorithm.cfg.n_epochs=4",
]
W1_LAYERS = [(4, 64), (64, 64), (64, 2), (4, 64), (64, 64), (64, 1)]
CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def _restore_threads(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.setattr(threads, "_warned", False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    yield
    torch.set_num_threads(before)


def test_auto_runs_small_workloads_on_one_thread_and_large_forwards_on_every_core():
    assert threads.forward_macs(256, W1_LAYERS) == 256 * 8896
    assert threads.auto_threads(256, W1_LAYERS, cores=16) == 1  # 2.3 M MACs
    assert threads.auto_threads(1024, W1_LAYERS, cores=16) == 1  # 9.1 M: the default CartPole's update
    assert threads.auto_threads(256, [(32, 256), (256, 256), (256, 2)] * 2, cores=16) == 16  # 38 M
    big = [(32, 256), (256, 256), (256, 2), (32, 256), (256, 256), (256, 1)]
    assert threads.auto_threads(16384, big, cores=16) == 16  # 2.4 G: the massive batch
    huge = [(32, 512), (512, 512), (512, 2), (32, 512), (512, 512), (512, 1)]
    assert threads.auto_threads(16384, huge, cores=16) == 16
    assert threads.resolve_threads(3, 256, W1_LAYERS, cores=16, current=2) == 3
    assert threads.resolve_threads(None, 256, W1_LAYERS, cores=16, current=2) == 2


def test_w1_learner_sets_one_thread_where_torch_had_more(monkeypatch, capsys):
    monkeypatch.setattr(threads, "load_average", lambda: 0.0)
    cfg = load("params.yaml", W1)
    assert cfg.trainer.num_threads == "auto"
    algo = build_algorithm(cfg, gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), CPU)
    assert (cfg.trainer.num_envs, cfg.trainer.buffer_size) == (8, 128) and largest_batch(cfg, algo) == 256
    torch.set_num_threads(2)
    assert set_threads(cfg, algo) == 1
    assert torch.get_num_threads() == 1
    two = cfg.model_copy(update={"trainer": cfg.trainer.replace(num_threads=2)})
    assert set_threads(two, algo) == 2 and torch.get_num_threads() == 2  # still settable


def test_a_busy_machine_is_named_once_in_one_line(monkeypatch, capsys):
    monkeypatch.setattr(threads, "load_average", lambda: 6.5)
    monkeypatch.setattr(threads, "available_cores", lambda: 2)
    assert threads.configure_threads("auto", 256, W1_LAYERS) == 1
    threads.configure_threads("auto", 256, W1_LAYERS)
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("Warning: the CPU is oversubscribed (load average 6.5 on 2 cores before this run)")


def test_threads_times_processes_over_the_cores_is_named_with_the_fix(monkeypatch, capsys):
    monkeypatch.setattr(threads, "load_average", lambda: 0.2)
    monkeypatch.setattr(threads, "available_cores", lambda: 2)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    cfg = load("params.yaml", W1)
    algo = build_algorithm(cfg, gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), CPU)
    set_threads(cfg.model_copy(update={"trainer": cfg.trainer.replace(num_threads=2)}), algo)
    err = capsys.readouterr().err.strip()
    assert err == (
        "Warning: the CPU is oversubscribed (2 torch threads × 2 processes > 2 cores): "
        "set trainer.num_threads: 1"
    )


def test_a_quiet_machine_gets_no_warning_and_rank_other_than_zero_stays_silent(monkeypatch, capsys):
    monkeypatch.setattr(threads, "load_average", lambda: 0.5)
    monkeypatch.setattr(threads, "available_cores", lambda: 2)
    threads.configure_threads("auto", 256, W1_LAYERS)
    monkeypatch.setattr(threads, "load_average", lambda: 9.0)
    threads.configure_threads("auto", 256, W1_LAYERS, announce=False)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("value", ['"2"', "0", "true", "-3", "fast"])
def test_num_threads_accepts_auto_a_positive_int_or_null_only(value):
    with pytest.raises(ConfigError, match=r"trainer.num_threads: got .*; accepted: auto, a positive integer"):
        load("params.yaml", [f"trainer.num_threads={value}"])
    assert load("params.yaml", ["trainer.num_threads=3"]).trainer.num_threads == 3
    assert load("params.yaml", ["trainer.num_threads=null"]).trainer.num_threads is None


def test_rlpipe_load_warning_zero_leaves_the_load_out(monkeypatch):
    monkeypatch.setenv("RLPIPE_LOAD_WARNING", "0")
    assert threads.load_average() is None
    monkeypatch.setenv("RLPIPE_LOAD_WARNING", "1")
    assert threads.load_average() is not None


def test_the_reason_names_the_setting_or_the_rules_input():
    assert threads.thread_reason(None, 256, W1_LAYERS) == "torch's default"
    assert threads.thread_reason(2, 256, W1_LAYERS) == "trainer.num_threads"
    small = threads.thread_reason("auto", 256, W1_LAYERS)
    assert small == "auto: 2.28 M forward MACs < 33.6 M"
    big = threads.thread_reason("auto", 10**6, [(512, 512)] * 40)
    assert big.startswith("auto: 10.5 T forward MACs ≥ ")


def test_yield_to_training_lowers_only_the_calling_process():
    import os
    import subprocess
    import sys

    from rlpipe.runtime.threads import HELPER_NICENESS

    code = "import os; from rlpipe.runtime import threads; threads.yield_to_training(); print(os.nice(0))"
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    ours = os.nice(0)
    assert int(child.stdout) == min(ours + HELPER_NICENESS, 19)
    assert os.nice(0) == ours
