"""The documents' JSON train-config: every key is mapped to rlpipe's or named in a one-line warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from rlpipe.cli import cli
from rlpipe.config import ConfigError, load
from rlpipe.config.documents import translate

ROOT = Path(__file__).resolve().parents[2]

# The push_cube example of the source documents (its trainer block, as written there).
DOCUMENTS_TRAINER = {
    "exp_name": "push_cube_ppo",
    "gym_config": "gym_config.json",
    "seed": 42,
    "device": "cuda:0",
    "headless": True,
    "enable_rt": False,
    "gpu_id": 0,
    "num_envs": 64,
    "iterations": 1000,
    "buffer_size": 1024,
    "enable_eval": True,
    "num_eval_envs": 16,
    "num_eval_episodes": 3,
    "eval_freq": 100,
    "save_freq": 100,
    "use_wandb": True,
    "wandb_project_name": "embodichain-push_cube",
    "events": {
        "eval": {
            "record_camera": {
                "func": "record_camera_data_async",
                "mode": "interval",
                "interval_step": 1,
                "params": {"name": "main_cam"},
            }
        }
    },
}
POLICY = {
    "name": "actor_critic",
    "actor": {"type": "mlp", "network_cfg": {"hidden_sizes": [256, 256], "activation": "relu"}},
    "critic": {"type": "mlp", "network_cfg": {"hidden_sizes": [256, 256], "activation": "relu"}},
}
ALGORITHM = {
    "name": "ppo",
    "cfg": {
        "learning_rate": 0.0001,
        "n_epochs": 10,
        "batch_size": 8192,
        "gamma": 0.99,
        "gae_lambda": 0.95,
        "clip_coef": 0.2,
        "ent_coef": 0.01,
        "vf_coef": 0.5,
        "max_grad_norm": 0.5,
    },
}
GYM_CONFIG = {
    "id": "PushCube",
    "num_envs": 4,
    "sim_cfg": {"headless": True},
    "cfg": {
        "actions": {"delta_qpos": {"func": "DeltaQposTerm", "params": {"scale": 0.1}}},
        "extensions": {"max_episode_steps": 60},
        "control": "joint_delta",
    },
}


def write_documents(tmp_path: Path, trainer: dict | None = None, gym: dict | None = None) -> Path:
    (tmp_path / "gym_config.json").write_text(json.dumps(gym or GYM_CONFIG))
    path = tmp_path / "train_config.json"
    path.write_text(
        json.dumps({"trainer": trainer or DOCUMENTS_TRAINER, "policy": POLICY, "algorithm": ALGORITHM})
    )
    return path


def test_every_key_of_the_documents_is_mapped_or_warned(tmp_path, capsys):
    cfg = load(write_documents(tmp_path))
    warnings = capsys.readouterr().err.splitlines()
    warned = {line.split(": ")[2].split(" has no effect")[0] for line in warnings}
    assert warned == {
        "trainer.headless",
        "trainer.enable_rt",
        "trainer.gpu_id",
        "trainer.use_wandb",
        "trainer.wandb_project_name",
        "gym_config gym_config.json cfg actions",
        "gym_config gym_config.json sim_cfg",
        "gym_config gym_config.json num_envs",
    }
    assert all(line.startswith(f"Warning: {tmp_path}/train_config.json: ") for line in warnings)
    # mapped: the env file, its cfg and extensions; every other trainer key is rlpipe's own
    assert cfg.env.id == "PushCube" and cfg.env.cfg == {"max_episode_steps": 60, "control": "joint_delta"}
    assert cfg.trainer.num_envs == 64 and cfg.trainer.device == "cuda:0" and cfg.trainer.eval_freq == 100
    assert list(cfg.trainer.events.eval) == ["record_camera"]
    assert cfg.trainer.use_wandb is False and cfg.trainer.gym_config is None  # dropped, not kept silently


def test_the_env_files_num_envs_is_used_when_the_trainer_has_none(tmp_path, capsys):
    trainer = {k: v for k, v in DOCUMENTS_TRAINER.items() if k != "num_envs"}
    assert load(write_documents(tmp_path, trainer)).trainer.num_envs == 4
    assert "num_envs has no effect" not in capsys.readouterr().err


def test_a_run_dirs_params_yaml_loads_without_warnings(tmp_path, capsys):
    snapshot = tmp_path / "params.yaml"
    cfg = load(ROOT / "params.yaml")
    snapshot.write_text(json.dumps(cfg.to_dict()))  # what a run dir holds: every default written out
    snapshot.rename(snapshot := tmp_path / "snap.yaml")
    load(snapshot)
    assert capsys.readouterr().err == ""


def test_a_yaml_file_warns_only_about_values_that_would_matter(tmp_path, capsys):
    data, notes = translate({"trainer": {"use_wandb": True, "headless": True}}, tmp_path / "p.yaml")
    assert data == {"trainer": {}}
    assert notes == [
        f"{tmp_path}/p.yaml: trainer.use_wandb has no effect: rlpipe tracks with MLflow, "
        "not W&B (tracking.backend: mlflow)"
    ]


def test_a_missing_gym_config_names_the_file(tmp_path):
    path = write_documents(tmp_path)
    (tmp_path / "gym_config.json").unlink()
    with pytest.raises(ConfigError, match=r"trainer\.gym_config: env JSON 'gym_config\.json' not found"):
        load(path)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message of a machine without CUDA")
def test_cuda_0_without_cuda_says_so_and_suggests_auto():
    from rlpipe.runtime.distributed import resolve_device

    with pytest.raises(
        ConfigError,
        match=r"^trainer\.device: 'cuda:0' requested but this machine has no "
        r"CUDA .*use trainer\.device: auto",
    ):
        resolve_device("cuda:0")


def test_rlpipe_run_the_shipped_train_config_json(tmp_path):
    args = [
        "run",
        str(ROOT / "configs" / "train_config.json"),
        "--set",
        f"trainer.data_dir={tmp_path}",
        "--set",
        "trainer.iterations=1",
        "--set",
        "trainer.num_envs=8",
        "--set",
        "trainer.buffer_size=8",
        "--set",
        "trainer.enable_eval=false",
        "--set",
        "tracking.backend=none",
        "--set",
        "algorithm.cfg.batch_size=32",
        "--set",
        "algorithm.cfg.n_epochs=1",
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "trainer.use_wandb has no effect" in result.output  # CliRunner mixes stderr in
    assert json.loads((tmp_path / "cartpole_json" / "metrics.json").read_text())["iterations"] == 1
