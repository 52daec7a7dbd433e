"""The drop-in ``OnPolicyRunner`` on an rsl_rl ``VecEnv``: stored rollouts, checkpoints, replay, play, export.

One run (3 iterations, 6 envs × 8 steps, MLflow on a SQLite file) is shared by the module; the
tests read what it left in ``log_dir`` and use its runner as a play script would.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from _offline_fixtures import assert_same_learner
from _rsl_rl_fixtures import NUM_ACTIONS, NUM_ENVS, ReachVecEnv, train_cfg

from rlpipe.artifacts.zarr_read import read_rollout
from rlpipe.errors import ConfigError
from rlpipe.rsl_rl import OnPolicyRunner

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``runner.learn(3)`` as Isaac Lab's train script calls it, into ``<tmp>/reach/<run>``."""
    tmp = tmp_path_factory.mktemp("runner")
    log_dir = tmp / "logs" / "rsl_rl" / "reach" / "2026-01-01_00-00-00"
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    (log_dir / "params").mkdir(parents=True)  # mjlab writes its configs there before building the runner
    (log_dir / "params" / "agent.yaml").write_text("seed: 7\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        env = ReachVecEnv()
        runner = OnPolicyRunner(env, train_cfg(), log_dir=str(log_dir), device="cpu")
        runner.add_git_repo_to_log(__file__)
        runner.learn(num_learning_iterations=3, init_at_random_ep_len=True)
    return {"runner": runner, "env": env, "log_dir": log_dir, "uri": uri}


def test_every_rollout_is_stored_in_log_dir(trained: dict[str, Any]) -> None:
    log_dir = trained["log_dir"]
    assert sorted(p.name for p in (log_dir / "rollouts").iterdir()) == [
        f"iter-00000{i}.zarr" for i in (1, 2, 3)
    ]
    rollout, attrs = read_rollout(log_dir / "rollouts" / "iter-000003.zarr")
    assert attrs["bootstrap"] == "approximate" and attrs["critic_obs_keys"] == ["policy", "critic"]
    assert rollout["obs", "critic"].shape == (NUM_ENVS, 9, 4) and rollout["action"].shape[-1] == NUM_ACTIONS
    assert trained["runner"].current_learning_iteration == 3
    first, _ = read_rollout(log_dir / "rollouts" / "iter-000001.zarr")
    assert first["truncated"].any()  # init_at_random_ep_len: some episodes time out in T=8 < LENGTH steps


def test_checkpoints_and_rsl_rl_model_files_are_written(trained: dict[str, Any]) -> None:
    log_dir = trained["log_dir"]
    assert {p.name for p in (log_dir / "checkpoints").glob("ckpt-*.pt")} == {
        "ckpt-000002.pt",
        "ckpt-000003.pt",
    }
    assert {p.name for p in log_dir.glob("model_*.pt")} == {
        "model_2.pt",
        "model_3.pt",
    }  # what play scripts find
    if (ROOT / ".git").exists():  # add_git_repo_to_log recorded this checkout's state
        (diff,) = (log_dir / "git").glob("*.diff")
        assert diff.read_text().startswith("--- commit")


def test_the_mlflow_run_is_recorded(trained: dict[str, Any]) -> None:
    import mlflow

    run_id = trained["runner"].trainer.mlflow_run_id
    run = mlflow.MlflowClient(trained["uri"]).get_run(run_id)
    assert run.info.status == "FINISHED" and "update/policy_loss" in run.data.metrics


def replay(log_dir: Path, uri: str) -> None:
    """``rlpipe replay <log_dir>`` in a subprocess, as a user runs it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MLFLOW_TRACKING_URI": uri}
    done = subprocess.run(
        [sys.executable, "-m", "rlpipe", "replay", str(log_dir)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_replay_of_log_dir_is_bit_exact(trained: dict[str, Any]) -> None:
    log_dir = trained["log_dir"]
    replay(log_dir, trained["uri"])
    for name in ("ckpt-000002.pt", "ckpt-000003.pt"):
        assert_same_learner(log_dir / "checkpoints" / name, log_dir / "reupdate" / "checkpoints" / name)


def test_a_run_resumed_from_another_runs_model_replays_from_the_loaded_weights(
    trained: dict[str, Any], tmp_path: Path
) -> None:
    """Isaac Lab's ``--resume``: a new ``log_dir``, ``runner.load(old model_<it>.pt)``, then ``learn``."""
    log_dir = tmp_path / "resumed"
    runner = OnPolicyRunner(ReachVecEnv(), train_cfg(logger="none", save_interval=1), str(log_dir))
    runner.load(str(trained["log_dir"] / "model_3.pt"))
    runner.learn(2)
    assert runner.current_learning_iteration == 2
    assert (log_dir / "checkpoints" / "ckpt-000000.pt").exists()  # the loaded weights, for replay
    replay(log_dir, trained["uri"])
    for name in ("ckpt-000001.pt", "ckpt-000002.pt"):
        assert_same_learner(log_dir / "checkpoints" / name, log_dir / "reupdate" / "checkpoints" / name)


def test_save_load_round_trip_and_inference_policy(trained: dict[str, Any], tmp_path: Path) -> None:
    runner, env = trained["runner"], trained["env"]
    runner.save(str(tmp_path / "model.pt"), infos={"note": "x"})
    player = OnPolicyRunner(env, train_cfg(), log_dir=None, device="cpu")  # Isaac Lab's play.py
    obs = env.get_observations()
    assert not torch.equal(player.get_inference_policy()(obs), runner.get_inference_policy()(obs))
    assert player.load(str(tmp_path / "model.pt")) == {"note": "x"}
    assert player.current_learning_iteration == 3
    actions = player.get_inference_policy(device="cpu")(obs)
    assert actions.shape == (NUM_ENVS, NUM_ACTIONS)
    assert torch.equal(actions, runner.get_inference_policy()(obs))


def test_exports_give_the_inference_policys_actions(trained: dict[str, Any], tmp_path: Path) -> None:
    runner, env = trained["runner"], trained["env"]
    runner.export_policy_to_jit(str(tmp_path / "exported"), filename="policy.pt")
    runner.export_policy_to_onnx(str(tmp_path / "exported"), filename="policy.onnx")
    obs = env.get_observations()
    scripted = torch.jit.load(str(tmp_path / "exported" / "policy.pt"))
    expected = runner.get_inference_policy()(obs)
    assert torch.allclose(scripted(obs["policy"]), expected, atol=1e-5)  # one input per group the actor reads
    assert (tmp_path / "exported" / "policy.onnx").stat().st_size > 0


def test_rsl_rl_and_rlpipe_runners_take_the_same_train_cfg(trained: dict[str, Any]) -> None:
    from rsl_rl.runners import OnPolicyRunner as RslRlRunner

    cfg = train_cfg()
    theirs = RslRlRunner(ReachVecEnv(), copy.deepcopy(cfg), log_dir=None, device="cpu")
    ours = OnPolicyRunner(ReachVecEnv(), cfg, log_dir=None, device="cpu")
    obs = ReachVecEnv().get_observations()
    assert theirs.get_inference_policy()(obs).shape == ours.get_inference_policy()(obs).shape


def test_an_rsl_rl_checkpoint_and_learning_without_log_dir_are_refused(tmp_path: Path) -> None:
    from rsl_rl.runners import OnPolicyRunner as RslRlRunner

    theirs = RslRlRunner(ReachVecEnv(), train_cfg(), log_dir=None, device="cpu")
    theirs.save(str(tmp_path / "model_0.pt"))
    ours = OnPolicyRunner(ReachVecEnv(), train_cfg(), log_dir=None, device="cpu")
    with pytest.raises(
        ConfigError, match=r"model_0.pt: not a checkpoint rlpipe wrote \(holds actor_state_dict"
    ):
        ours.load(str(tmp_path / "model_0.pt"))
    with pytest.raises(ConfigError, match="^log_dir: None"):
        ours.learn(1)


def test_a_second_learn_continues_the_run(tmp_path: Path) -> None:
    runner = OnPolicyRunner(ReachVecEnv(), train_cfg(logger="none", save_interval=10), str(tmp_path / "run"))
    runner.learn(1)
    runner.learn(1)
    assert runner.current_learning_iteration == 2
    assert sorted(p.name for p in (tmp_path / "run" / "rollouts").iterdir()) == [
        "iter-000001.zarr",
        "iter-000002.zarr",
    ]
