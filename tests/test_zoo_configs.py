"""configs/zoo/: every params file loads, keeps the rollout store and MLflow on, and trains for real.

The smoke runs shrink each config to one iteration of 4 envs × 8 steps with 6-step episodes (so
episodes finish, truncate and report success inside the rollout) and track with ``none``: an MLflow
run costs seconds per config, so one test runs a zoo config end to end with MLflow on a temporary
SQLite store instead. An env whose optional package is missing fails with rlpipe's one-line
install hint (``... needs envpool: pip install 'rlpipe[envpool]'``), never a skip.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from rlpipe import config
from rlpipe.artifacts.zarr_read import read_rollout
from rlpipe.trainer import Trainer

ZOO = Path(__file__).resolve().parents[1] / "configs" / "zoo"
CONFIGS = sorted(ZOO.glob("*.yaml"))
OWN = (
    "dmc_cheetah_run",
    "dmc_walker_walk",
    "dmc_cartpole_swingup",
    "dmc_finger_spin",
    "mw_reach",
    "mw_push",
    "mw_pick_place",
    "playground_panda_pick_cube",
    "playground_go1_joystick",
    "push_cube_ppo",
    "push_cube_grpo",
    "cartpole_ppo",
    "cartpole_grpo",
    "pendulum_ppo",
    "pendulum_grpo",
)
"""Stems this file knows by name; the glob covers every other zoo config as well."""
REPORTS_SUCCESS = ("mw_", "push_cube_")
"""Stem prefixes of tasks whose env reports ``info["success"]`` (Meta-World, PushCube)."""
EPISODE, HORIZON = 6, 8


def smoke_cfg(path: Path, data_dir: Path, *extra: str) -> config.RunConfig:
    """``path`` shrunk to one iteration of 4 envs × 8 steps (a group of 4 for GRPO), store on."""
    full = config.load(path)
    envs = max(4, getattr(full.algorithm.cfg, "group_size", 1))
    horizon = getattr(full.algorithm.cfg, "seq_len", None) or HORIZON  # recurrent: one whole sequence
    if hasattr(full.algorithm.cfg, "learning_starts"):  # off-policy: gradient steps inside the one iteration
        extra = ("algorithm.cfg.learning_starts=0", "algorithm.cfg.random_steps=0", *extra)
    return config.load(
        path,
        [
            f"trainer.data_dir={data_dir}",
            "trainer.iterations=1",
            f"trainer.num_envs={envs}",
            f"trainer.buffer_size={horizon}",
            "trainer.num_eval_envs=2",
            "trainer.num_eval_episodes=1",
            "trainer.eval_freq=1000000000",
            "trainer.num_threads=1",
            f"env.cfg.max_episode_steps={EPISODE}",
            "tracking.backend=none",
            *extra,
        ],
    )


def test_the_zoo_has_every_task_of_this_suite():
    stems = {path.stem for path in CONFIGS}
    assert set(OWN) <= stems, sorted(set(OWN) - stems)


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_zoo_config_loads_with_store_and_mlflow_on_and_a_header(path: Path):
    cfg = config.load(path)
    assert cfg.store.enabled and cfg.store.keep_last is None, "the zoo stores every rollout"
    assert cfg.tracking.backend == "mlflow", "the zoo tracks with MLflow"
    assert cfg.trainer.enable_eval
    budget = cfg.trainer.iterations * cfg.trainer.num_envs * cfg.trainer.buffer_size
    assert cfg.trainer.save_freq <= 0.11 * budget, "a stopped run may lose at most ~10 % of its budget"
    header = path.read_text().split("\ntrainer:")[0].splitlines()
    assert len(header) >= 3 and all(line.startswith("#") for line in header), (
        "a header comment (task, budget, settings and why) comes before trainer:"
    )


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_zoo_config_trains_stores_and_evaluates(path: Path, tmp_path: Path):
    cfg = smoke_cfg(path, tmp_path)
    summary = Trainer(cfg).train()
    n, t = cfg.trainer.num_envs, cfg.trainer.buffer_size
    assert summary["iterations"] == 1 and summary["env_steps"] == n * t
    numbers = {k: v for k, v in summary.items() if isinstance(v, float)}
    assert all(math.isfinite(v) for v in numbers.values()), numbers
    for key in ("train/episode_return_mean", "eval/return_mean", "update/policy_loss"):
        assert key in numbers, f"{key} missing from {sorted(summary)}"
    if path.stem.startswith(REPORTS_SUCCESS):
        assert 0 <= summary["train/success_rate"] <= 1 and 0 <= summary["eval/success_rate"] <= 1
    rollout, attrs = read_rollout(cfg.run_dir / "rollouts" / "iter-000001.zarr")
    assert tuple(rollout.batch_size) == (n, t + 1) and attrs["iteration"] == 1
    assert bool(torch.isfinite(rollout["reward"]).all()) and bool(rollout["done"][:, :-1].any())
    assert (cfg.run_dir / "checkpoints" / "latest").exists()


def test_a_zoo_run_logs_to_mlflow_with_its_success_rate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from rlpipe.tracking.mlflow_query import search_runs

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cfg = smoke_cfg(ZOO / "mw_reach.yaml", tmp_path, "tracking.backend=mlflow", f"tracking.uri={uri}")
    summary = Trainer(cfg).train()
    (run,) = search_runs(uri, experiments=(cfg.trainer.exp_name,))
    assert run.status == "FINISHED"
    for key in ("train/success_rate", "eval/success_rate", "train/episode_return_mean"):
        assert run.metrics[key] == pytest.approx(summary[key]), key


DEFAULT_FOR = {
    "hopper": "mujoco_default",
    "walker2d": "mujoco_default",
    "ant_default": "mujoco_default",
    "humanoid": "mujoco_default",
    "ant": "halfcheetah",
}
"""Zoo configs that are another one with only ``env.id`` and ``trainer.exp_name`` changed."""


@pytest.mark.parametrize("stem", sorted(DEFAULT_FOR))
def test_mujoco_task_differs_from_its_base_config_only_in_env_id_and_exp_name(stem: str):
    cfg, base = (config.load(ZOO / f"{name}.yaml").to_dict() for name in (stem, DEFAULT_FOR[stem]))
    assert cfg["env"].pop("id") != base["env"].pop("id")
    assert cfg["trainer"].pop("exp_name") == f"zoo_{stem}" and base["trainer"].pop("exp_name")
    assert cfg == base
