"""``rlpipe run --resume``: bit for bit equal to an uninterrupted run, also after SIGKILL mid-run."""

from __future__ import annotations

import csv
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from _offline_fixtures import PARAMS, ROOT, STEPS, leaves, same_leaves, set_args, tiny_cfg

from rlpipe.artifacts.checkpoints import load_checkpoint
from rlpipe.artifacts.zarr_read import read_rollout
from rlpipe.config import ConfigError
from rlpipe.rollout_checks import validate
from rlpipe.trainer import Trainer

EVERY_3 = (f"trainer.save_freq={3 * STEPS}", "trainer.enable_eval=true", f"trainer.eval_freq={3 * STEPS}")
"""Checkpoint and evaluate at iterations 3, 6, …: the 3-iteration run's last ones fall there too."""


def full_state(path: Path) -> dict:
    """Every leaf of a checkpoint (policy, optimizer, collector, env, RNGs, counters).

    Not the wall time, nor ``params_hash`` (it covers ``trainer.data_dir`` and ``iterations``).
    """
    return {k: v for k, v in leaves(load_checkpoint(path)) if k not in ("/wall_s", "/params_hash")}


def curve_without_timing(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "curve.csv").open(newline="") as fh:
        return [{k: v for k, v in row.items() if not k.startswith("time/")} for row in csv.DictReader(fh)]


def assert_same_rollouts(a: Path, b: Path, iterations: range) -> None:
    for k in iterations:
        ra, attrs_a = read_rollout(a / "rollouts" / f"iter-{k:06d}.zarr")
        rb, attrs_b = read_rollout(b / "rollouts" / f"iter-{k:06d}.zarr")
        assert attrs_a.pop("params_hash") != attrs_b.pop("params_hash")  # data_dir differs
        assert attrs_a == attrs_b
        assert all(torch.equal(ra[key], rb[key]) for key in ra.keys()), k


def test_resumed_run_equals_the_uninterrupted_one(tmp_path, capsys):
    whole = tiny_cfg(tmp_path / "whole", "trainer.iterations=6", *EVERY_3)
    Trainer(whole).train()
    Trainer(tiny_cfg(tmp_path / "split", "trainer.iterations=3", *EVERY_3)).train()
    split = tiny_cfg(tmp_path / "split", "trainer.iterations=6", *EVERY_3)
    summary = Trainer(split, resume=True).train()
    assert "resume: continuing from" in capsys.readouterr().err and summary["iterations"] == 6
    for k in (3, 6):
        a, b = (cfg.run_dir / "checkpoints" / f"ckpt-{k:06d}.pt" for cfg in (whole, split))
        state = full_state(a)
        assert any(key.startswith("/collector/env") for key in state) and "/evaluator_calls" in state
        assert same_leaves(state, full_state(b)), k
    assert_same_rollouts(whole.run_dir, split.run_dir, range(1, 7))
    rows = curve_without_timing(split.run_dir)
    assert [r["iteration"] for r in rows] == [str(i) for i in range(1, 7)]
    assert rows == curve_without_timing(whole.run_dir)
    assert rows[5]["eval/return_mean"]  # evaluated at 6 in both, with the same eval seed


def test_gymnasium_vectorized_cartpole_resumes_bit_for_bit(tmp_path):
    """gymnasium's CartPoleVectorEnv keeps its state in plain arrays: its episodes continue exactly."""
    every_2 = ("env.id=CartPole-v1", f"trainer.save_freq={2 * STEPS}")
    whole = tiny_cfg(tmp_path / "whole", "trainer.iterations=4", *every_2)
    Trainer(whole).train()
    Trainer(tiny_cfg(tmp_path / "split", "trainer.iterations=2", *every_2)).train()
    split = tiny_cfg(tmp_path / "split", "trainer.iterations=4", *every_2)
    Trainer(split, resume=True).train()
    a, b = (cfg.run_dir / "checkpoints" / "ckpt-000004.pt" for cfg in (whole, split))
    state = full_state(a)
    assert "/collector/env/arrays/state" in state
    assert same_leaves(state, full_state(b))
    assert_same_rollouts(whole.run_dir, split.run_dir, range(1, 5))


def test_resume_drops_what_the_stopped_run_wrote_after_its_checkpoint(tmp_path):
    cfg = tiny_cfg(tmp_path, "trainer.iterations=3")
    Trainer(cfg).train()  # checkpoints 2 and 3, rollouts 1–3, curve rows 1–3
    (cfg.run_dir / "checkpoints" / "ckpt-000003.pt").unlink()
    (cfg.run_dir / "checkpoints" / "latest").write_text("ckpt-000002.pt\n")
    leftover = cfg.run_dir / "checkpoints" / ".ckpt-000003.pt.tmp-999999999-0a0b0c0d"
    leftover.write_bytes(b"half a checkpoint")
    before = read_rollout(cfg.run_dir / "rollouts" / "iter-000003.zarr")[0]
    Trainer(cfg, resume=True).train()  # resumes from 2: rollout 3 and curve row 3 are written again
    assert not leftover.exists()
    after = read_rollout(cfg.run_dir / "rollouts" / "iter-000003.zarr")[0]
    assert all(torch.equal(before[key], after[key]) for key in before.keys())
    assert [r["iteration"] for r in curve_without_timing(cfg.run_dir)] == ["1", "2", "3"]


def test_resume_without_a_checkpoint_sets_the_stores_aside_and_starts_over(tmp_path, capsys):
    cfg = tiny_cfg(tmp_path, "trainer.iterations=1")
    Trainer(cfg).train()
    shutil.rmtree(cfg.run_dir / "checkpoints")  # as if killed before its first checkpoint
    stored = read_rollout(cfg.run_dir / "rollouts" / "iter-000001.zarr")[0]
    for aside in ("superseded-1", "superseded-2"):  # a second stop before a checkpoint takes the next folder
        summary = Trainer(cfg, resume=True).train()
        assert summary["iterations"] == 1 and (cfg.run_dir / "checkpoints" / "ckpt-000001.pt").is_file()
        assert f"moved to {cfg.run_dir / 'rollouts' / aside}" in capsys.readouterr().err
        kept = read_rollout(cfg.run_dir / "rollouts" / aside / "iter-000001.zarr")[0]
        assert all(torch.equal(stored[key], kept[key]) for key in stored.keys())
        shutil.rmtree(cfg.run_dir / "checkpoints")
    again = read_rollout(cfg.run_dir / "rollouts" / "iter-000001.zarr")[0]  # the fresh start's own
    assert all(torch.equal(stored[key], again[key]) for key in stored.keys())


def test_resume_without_a_checkpoint_or_stores_starts_from_scratch(tmp_path, capsys):
    cfg = tiny_cfg(tmp_path, "trainer.iterations=1")
    Trainer(cfg).train()
    for folder in ("checkpoints", "rollouts"):  # as if killed before its first store and checkpoint
        shutil.rmtree(cfg.run_dir / folder)
    summary = Trainer(cfg, resume=True).train()
    assert "no checkpoint under" in capsys.readouterr().err
    assert summary["iterations"] == 1 and (cfg.run_dir / "checkpoints" / "ckpt-000001.pt").is_file()


def test_resume_refuses_other_params(tmp_path):
    Trainer(tiny_cfg(tmp_path, "trainer.iterations=1")).train()
    with pytest.raises(
        ConfigError,
        match=r"ckpt-000001.pt: checkpoint was written with other training "
        r"params \(algorithm.cfg.clip_coef: 0.2 in the checkpoint, 0.1",
    ):
        cfg = tiny_cfg(tmp_path, "trainer.iterations=2", "algorithm.cfg.clip_coef=0.1")
        Trainer(cfg, resume=True).train()


def test_gymnasium_resume_is_reproducible(tmp_path):
    """Gymnasium envs cannot be snapshotted: resume restarts their episodes (reproducibly)."""
    gym = (
        "env.id=CartPole-v1",
        "env.backend=gymnasium",
        "env.cfg.vectorization_mode=sync",
        f"trainer.save_freq={STEPS}",
    )
    Trainer(tiny_cfg(tmp_path / "a", "trainer.iterations=1", *gym)).train()
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    finals = []
    for name in ("a", "b"):
        cfg = tiny_cfg(tmp_path / name, "trainer.iterations=2", *gym)
        Trainer(cfg, resume=True).train()
        finals.append(full_state(cfg.run_dir / "checkpoints" / "ckpt-000002.pt"))
    assert same_leaves(*finals)


def test_gymnasium_collector_continues_from_the_restarted_episodes(tmp_path):
    exp = Trainer(
        tiny_cfg(tmp_path, "env.id=CartPole-v1", "env.backend=gymnasium", "env.cfg.vectorization_mode=sync")
    ).parts
    exp.collector()
    state = exp.collector.state_dict()
    exp.collector.load_state_dict(state)
    assert not torch.equal(exp.collector.obs, state["obs"])  # the running episodes were reset ...
    assert torch.equal(exp.collector.obs, exp.env.last_obs)  # ... so collection starts from there
    episodes = exp.collector.episodes
    assert not episodes.episode_return.any() and not episodes.episode_length.any()


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_completes_like_an_uninterrupted_run(tmp_path):
    iterations = 12
    args = set_args(tmp_path / "killed", f"trainer.iterations={iterations}")
    run_dir = tmp_path / "killed" / "cartpole_ppo"
    command = [sys.executable, "-m", "rlpipe", "run", str(PARAMS), *args]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        stored_after_checkpoint = wait_for_rollout_after_checkpoint(run_dir, proc)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        stderr = proc.communicate(timeout=60)[1].decode()
    assert proc.returncode == -signal.SIGKILL, f"the run ended before it was killed: {stderr}"
    assert stored_after_checkpoint and not (run_dir / "metrics.json").exists()

    resumed = subprocess.run([*command, "--resume"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert "resume: continuing from" in resumed.stderr
    names = sorted(p.name for p in (run_dir / "rollouts").iterdir())
    assert names == [f"iter-{k:06d}.zarr" for k in range(1, iterations + 1)]  # no temporaries
    assert not [p for p in (run_dir / "checkpoints").iterdir() if p.name.startswith(".")]
    for k in range(1, iterations + 1):
        rollout, attrs = read_rollout(run_dir / "rollouts" / f"iter-{k:06d}.zarr")
        validate(rollout, k)
        assert attrs["iteration"] == k
    rows = curve_without_timing(run_dir)
    assert [r["iteration"] for r in rows] == [str(k) for k in range(1, iterations + 1)]

    whole = tiny_cfg(tmp_path / "whole", f"trainer.iterations={iterations}")
    Trainer(whole).train()
    final = f"ckpt-{iterations:06d}.pt"
    assert same_leaves(
        full_state(whole.run_dir / "checkpoints" / final), full_state(run_dir / "checkpoints" / final)
    )
    assert_same_rollouts(whole.run_dir, run_dir, range(1, iterations + 1))
    assert json.loads((run_dir / "metrics.json").read_text())["iterations"] == iterations


def wait_for_rollout_after_checkpoint(run_dir: Path, proc: subprocess.Popen, timeout: float = 240) -> bool:
    """Poll until a checkpoint exists and a newer rollout is stored (the run is mid-way)."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        checkpoints = [int(p.name[5:11]) for p in (run_dir / "checkpoints").glob("ckpt-*.pt")]
        rollouts = [int(p.name[5:11]) for p in (run_dir / "rollouts").glob("iter-*.zarr")]
        if checkpoints and rollouts and max(rollouts) > max(checkpoints):
            return True
        time.sleep(0.005)
    return False


def test_a_resumed_run_storing_every_kth_iteration_stores_what_the_uninterrupted_one_does(tmp_path):
    policy = ("store.every=2", "store.envs=3")
    whole = tiny_cfg(tmp_path / "whole", "trainer.iterations=6", *EVERY_3, *policy)
    Trainer(whole).train()
    Trainer(tiny_cfg(tmp_path / "split", "trainer.iterations=3", *EVERY_3, *policy)).train()
    split = tiny_cfg(tmp_path / "split", "trainer.iterations=6", *EVERY_3, *policy)
    Trainer(split, resume=True).train()
    for cfg in (whole, split):
        assert sorted(p.name for p in (cfg.run_dir / "rollouts").glob("iter-*")) == [
            "iter-000002.zarr",
            "iter-000004.zarr",
            "iter-000006.zarr",
        ]
    assert_same_rollouts(whole.run_dir, split.run_dir, range(2, 7, 2))
    last = [full_state(cfg.run_dir / "checkpoints" / "ckpt-000006.pt") for cfg in (whole, split)]
    assert same_leaves(*last)
