"""benchmarks/peers/gpu_vs_rsl_rl.py at a tiny N on the CPU, and its rlpipe env → rsl_rl VecEnv adapter."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import torch

import rlpipe.artifacts.store as store_module
from rlpipe.envs.tasks.robot_proxy import RobotProxy

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "peers" / "gpu_vs_rsl_rl.py"


def load_benchmark():
    spec = importlib.util.spec_from_file_location("gpu_vs_rsl_rl", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_main(bench, monkeypatch, out: Path, *extra: str) -> dict:
    """The script's ``main()`` with its command line, in this process (torch and rlpipe already loaded)."""
    argv = [
        str(SCRIPT),
        "--device",
        "cpu",
        "--num-envs",
        "8",
        "--horizon",
        "4",
        "--warmup",
        "1",
        "--rounds",
        "2",
        "--block",
        "2",
        "--threads",
        "1",
        "--json",
        str(out),
        *extra,
    ]
    monkeypatch.setattr(sys, "argv", argv)
    threads = torch.get_num_threads()
    try:
        bench.main()
    finally:
        torch.set_num_threads(threads)
    return json.loads(out.read_text())


def test_the_benchmark_runs_both_trainers_at_a_tiny_n_and_writes_its_rows(
    tmp_path: Path, monkeypatch, capsys
):
    bench = load_benchmark()
    data = run_main(bench, monkeypatch, tmp_path / "result.json")
    assert data["benchmark"] == "gpu_vs_rsl_rl" and data["device"] == "cpu"
    rows = {row["side"]: row for row in data["rows"]}
    assert set(rows) == {"rsl_rl", "rlpipe", "rlpipe+store"}
    for side, row in rows.items():
        assert row["num_envs"] == 8 and row["minibatch"] == 8 * 4 // 4, side
        assert row["sps"] > 0 and row["collect_s"] > 0 and row["update_s"] > 0, side
        assert row["sps"] == 8 * 4 / row["iteration_s"], side
        assert row["rollout_mb"] > 0 and row["process_peak_rss_mb"] > 0, side
    assert rows["rsl_rl"]["vs_rsl_rl"] == 1.0
    assert rows["rlpipe+store"]["store_wait_s"] >= 0 and rows["rlpipe"]["store_wait_s"] is None
    assert rows["rlpipe+store"]["flush_s"] >= 0 and rows["rlpipe"]["flush_s"] is None
    assert rows["rlpipe+store"]["store_writer"] == "process" and rows["rlpipe"]["store_writer"] is None
    assert data["args"]["block"] == "2" and data["args"]["store_writer"] == "['process']"
    stdout = capsys.readouterr().out
    assert "rlpipe+store" in stdout and "steps/s" in stdout and "round 2/2" in stdout


def test_every_store_writer_gets_its_side_and_no_side_is_timed_while_a_store_still_writes(
    tmp_path: Path, monkeypatch
):
    """``--store-writer thread process``: one store side each; every block starts with every store idle."""
    bench = load_benchmark()
    stores, busy = [], []
    real_init, real_block = bench.RlpipeSide.__init__, bench.timed_block

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        stores.append(self.store)

    def block(side, device, iterations):
        busy.extend(s.root for s in stores if s is not None and s._queue.unfinished_tasks)
        return real_block(side, device, iterations)

    monkeypatch.setattr(bench.RlpipeSide, "__init__", init)
    monkeypatch.setattr(bench, "timed_block", block)
    data = run_main(
        bench,
        monkeypatch,
        tmp_path / "result.json",
        "--sides",
        "rlpipe",
        "rlpipe+store",
        "--store-writer",
        "thread",
        "process",
    )
    rows = {row["side"]: row for row in data["rows"]}
    assert set(rows) == {"rlpipe", "rlpipe+store[thread]", "rlpipe+store[process]"}
    assert rows["rlpipe+store[thread]"]["store_writer"] == "thread"
    assert rows["rlpipe+store[process]"]["store_writer"] == "process"
    assert rows["rlpipe"]["vs_rsl_rl"] is None  # no rsl_rl side to compare with
    assert len([s for s in stores if s is not None]) == 2 and busy == []


def test_a_store_sides_figure_includes_its_writes(tmp_path: Path, monkeypatch):
    """A write of 0.2 s per rollout: a block of 2 iterations takes at least 2 writes, flush included."""
    bench = load_benchmark()
    real_write = store_module._write_checked

    def slow_write(*args, **kwargs):
        time.sleep(0.2)
        real_write(*args, **kwargs)

    pending = []  # rollouts not yet on disk when a block's timing ended
    real_block = bench.timed_block

    def block(side, device, iterations):
        sample = real_block(side, device, iterations)
        pending.append(side.store._queue.unfinished_tasks)
        return sample

    monkeypatch.setattr(store_module, "_write_checked", slow_write)
    monkeypatch.setattr(bench, "timed_block", block)
    data = run_main(
        bench, monkeypatch, tmp_path / "result.json", "--sides", "rlpipe+store", "--store-writer", "thread"
    )
    row = data["rows"][0]
    assert row["side"] == "rlpipe+store" and row["store_writer"] == "thread"
    assert pending == [0, 0, 0]  # the warm-up and both rounds: every write inside its block's time
    # two 0.2 s writes per block are inside its time however fast the iteration itself is; how much of
    # that shows as the final flush depends on the machine's load, so only its presence is checked
    assert row["iteration_s"] >= 0.2 and row["flush_s"] >= 0.0


def test_the_adapter_speaks_rsl_rls_vecenv_contract():
    bench = load_benchmark()
    env = bench.VecEnvAdapter(RobotProxy(4, "cpu", max_episode_steps=3), seed=0)
    assert (env.num_envs, env.num_actions, env.max_episode_length) == (4, 12, 3)
    first = env.get_observations()
    assert set(first.keys()) == {"policy", "privileged"}
    for step in range(3):
        obs, reward, dones, extras = env.step(torch.zeros(4, 12))
        assert reward.shape == dones.shape == extras["time_outs"].shape == (4,)
        assert dones.dtype == torch.int64 and extras["time_outs"].dtype == torch.bool
        assert env.get_observations() is obs
        assert dones.tolist() == ([1] * 4 if step == 2 else [0] * 4)
    assert dones.tolist() == [1, 1, 1, 1]  # the time limit: done, and bootstrapped as a time-out ...
    assert extras["time_outs"].tolist() == [True] * 4  # ... as no body fell within 3 steps
    assert env.episode_length_buf.tolist() == [0, 0, 0, 0]


def test_rsl_rl_and_rlpipe_get_the_same_learning_problem():
    bench = load_benchmark()
    cfg = bench.rsl_rl_cfg(24)
    assert cfg["num_steps_per_env"] == 24 and cfg["obs_groups"]["critic"] == ["policy", "privileged"]
    algo = cfg["algorithm"]
    assert (algo["num_learning_epochs"], algo["num_mini_batches"], algo["schedule"]) == (5, 4, "adaptive")
    from rlpipe.config import load

    run = load(ROOT / "params.yaml", bench.rlpipe_overrides(64, 24, "cpu", False, "/tmp/unused"))
    ppo = run.algorithm.cfg
    assert (ppo.n_epochs, ppo.num_mini_batches, ppo.schedule, ppo.desired_kl) == (5, 4, "adaptive", 0.01)
    assert (ppo.learning_rate, ppo.clip_coef, ppo.ent_coef, ppo.vf_coef, ppo.max_grad_norm) == (
        algo["learning_rate"],
        algo["clip_param"],
        algo["entropy_coef"],
        algo["value_loss_coef"],
        algo["max_grad_norm"],
    )
    assert ppo.clip_value_loss and (ppo.gamma, ppo.gae_lambda) == (algo["gamma"], algo["lam"])
    for net, keys in ((run.policy.actor, ["policy"]), (run.policy.critic, ["policy", "privileged"])):
        assert net.obs_keys == keys and net.network_cfg.hidden_sizes == cfg["actor"]["hidden_dims"]
        assert net.network_cfg.activation == cfg["actor"]["activation"] == "elu"
    assert run.env.id == "RobotProxy" and run.trainer.buffer_size == 24 and run.policy.log_std_init == 0.0
