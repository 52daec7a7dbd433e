"""Isaac Lab 3.0's Cartpole (Newton, CPU) trained by rlpipe: through ``env.id``, the entry script, the runner.

Each training runs in its own process (Isaac Lab holds one simulation per process) and is checked
the same way: every rollout stored, ``rlpipe replay`` bit-exact, a finished MLflow run.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from _lane import (
    NUM_ENVS,
    ROOT,
    TASK,
    assert_every_rollout_stored,
    assert_mlflow_run,
    assert_replay_bit_exact,
    run,
)

ITERATIONS = 3
HERE = Path(__file__).resolve().parent


def test_env_id_trains_isaaclab_cartpole(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    overrides = {
        "env.backend": "isaaclab",
        "env.id": TASK,
        "trainer.num_envs": NUM_ENVS,
        "trainer.device": "cpu",
        "trainer.buffer_size": 16,
        "trainer.iterations": ITERATIONS,
        "trainer.enable_eval": "false",
        "trainer.stop_when": "[]",
        "trainer.data_dir": tmp_path / "data",
        "trainer.exp_name": "cartpole",
        "tracking.uri": uri,
        "algorithm.cfg.batch_size": 64,
    }
    args = [a for key, value in overrides.items() for a in ("--set", f"{key}={value}")]
    output = run("-m", "rlpipe", "run", ROOT / "params.yaml", *args).stdout
    assert "env backend isaaclab" in output, output[-3000:]  # Isaac Lab simulated, not a stand-in
    run_dir = tmp_path / "data" / "cartpole"
    assert_every_rollout_stored(run_dir, ITERATIONS)
    assert_replay_bit_exact(run_dir, tmp_path / "replay")
    assert_mlflow_run(uri)


def test_entry_script_trains_with_the_tasks_agent_config(tmp_path):
    """``python -m rlpipe.isaaclab``: needs ``rlpipe.rsl_rl.params_from_train_cfg`` (the runner's branch)."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    common = ["--task", TASK, "--num_envs", str(NUM_ENVS), "--device", "cpu", "--max_iterations", "2"]
    sets = ["--set", f"trainer.data_dir={tmp_path / 'data'}", "--set", f"tracking.uri={uri}"]
    params = yaml.safe_load(run("-m", "rlpipe.isaaclab", *common, *sets, "--print-params").stdout)
    assert params["env"] == {"id": TASK, "backend": "isaaclab"}
    assert params["trainer"]["buffer_size"] == 16  # Cartpole's agent config: num_steps_per_env 16
    run("-m", "rlpipe.isaaclab", *common, *sets)
    run_dir = tmp_path / "data" / params["trainer"]["exp_name"]
    assert_every_rollout_stored(run_dir, 2)
    assert_replay_bit_exact(run_dir, tmp_path / "replay")
    assert_mlflow_run(uri)


def test_printed_params_train_with_rlpipe_run(tmp_path):
    """docs/isaaclab.md: ``--print-params > cartpole.yaml`` then ``rlpipe run cartpole.yaml``."""
    common = ["--task", TASK, "--num_envs", str(NUM_ENVS), "--device", "cpu", "--max_iterations", "2"]
    printed = run("-m", "rlpipe.isaaclab", *common, "--print-params").stdout
    params_file = tmp_path / "cartpole.yaml"
    params_file.write_text(printed)
    sets = ["--set", f"trainer.data_dir={tmp_path / 'data'}", "--set", "tracking.backend=none"]
    output = run("-m", "rlpipe", "run", params_file, *sets, cwd=tmp_path).stdout
    assert "env backend isaaclab" in output, output[-3000:]
    run_dir = tmp_path / "data" / yaml.safe_load(printed)["trainer"]["exp_name"]
    assert_every_rollout_stored(run_dir, 2)
    assert_replay_bit_exact(run_dir, tmp_path / "replay")


def test_drop_in_runner_trains_isaaclab_cartpole(tmp_path):
    """Isaac Lab's train flow with ``from rlpipe.rsl_rl import OnPolicyRunner`` (the runner's branch)."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    log_dir = tmp_path / "logs"
    done = run(HERE / "drop_in.py", TASK, NUM_ENVS, 2, log_dir, uri).stdout
    assert "drop-in done" in done, done[-3000:]
    stores = sorted(log_dir.rglob("rollouts/iter-*.zarr"))
    assert len(stores) == 2, stores
    run_dir = stores[0].parent.parent
    assert_every_rollout_stored(run_dir, 2)
    assert_replay_bit_exact(run_dir, tmp_path / "replay")
    assert_mlflow_run(uri)
