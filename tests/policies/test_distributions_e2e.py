"""``policy.distribution`` end to end: PPO with a Beta policy on the torch Pendulum trains, resumes bit for
bit and exports its mode; bad combinations stop ``rlpipe run`` with exit 2 before training."""

from __future__ import annotations

import csv
import json
import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from _offline_fixtures import PARAMS, assert_same_learner, learner, set_args, tiny_cfg
from click.testing import CliRunner

from rlpipe.artifacts.checkpoints import load_checkpoint
from rlpipe.artifacts.zarr_read import read_rollout
from rlpipe.cli import cli
from rlpipe.envs import build_env
from rlpipe.envs.tasks.pendulum import Pendulum
from rlpipe.policies import build_policy
from rlpipe.policies.export import DeployedActor, export_onnx
from rlpipe.policies.export_metadata import export_metadata
from rlpipe.policies.exported import ExportedModel
from rlpipe.trainer import Trainer

BETA = ("env.id=Pendulum", "policy.distribution=beta")


class UnboundedPendulum(Pendulum):
    """Pendulum whose action space claims no bounds (its dynamics still clip the torque)."""

    action_space = gym.spaces.Box(-np.inf, np.inf, shape=(1,), dtype=np.float32)


@pytest.fixture(scope="module")
def beta_run(tmp_path_factory):
    """4 iterations of PPO with a Beta policy on Pendulum; checkpoints at 2 and 4, rollouts stored."""
    cfg = tiny_cfg(tmp_path_factory.mktemp("beta"), *BETA)
    Trainer(cfg).train()
    return cfg


def test_ppo_with_a_beta_policy_trains_with_finite_losses_and_bounded_actions(beta_run):
    run_dir = beta_run.run_dir
    with (run_dir / "curve.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 4
    for key in ("update/policy_loss", "update/value_loss", "update/entropy", "update/approx_kl"):
        assert all(math.isfinite(float(row[key])) for row in rows), key
    a, b = (learner(run_dir / "checkpoints" / f"ckpt-00000{k}.pt") for k in (2, 4))
    weights = {k: v for k, v in b.items() if k.startswith("/policy/actor") and isinstance(v, torch.Tensor)}
    assert weights and all(torch.isfinite(v).all() for v in weights.values())
    assert any(not torch.equal(a[k], v) for k, v in weights.items())  # the updates moved the actor
    assert weights["/policy/actor.4.weight"].shape == (2, 16)  # α and β of the one torque dim
    rollout, _ = read_rollout(run_dir / "rollouts" / "iter-000004.zarr")
    action = rollout["action"][:, :-1]
    assert ((action >= -2) & (action <= 2)).all() and action.std() > 0.1
    assert torch.isfinite(rollout["sample_log_prob"][:, :-1]).all()


def test_a_resumed_beta_run_equals_the_uninterrupted_one(beta_run, tmp_path):
    Trainer(tiny_cfg(tmp_path, *BETA, "trainer.iterations=2")).train()
    split = tiny_cfg(tmp_path, *BETA)
    Trainer(split, resume=True).train()
    assert_same_learner(
        beta_run.run_dir / "checkpoints" / "ckpt-000004.pt", split.run_dir / "checkpoints" / "ckpt-000004.pt"
    )
    for k in (3, 4):
        whole = read_rollout(beta_run.run_dir / "rollouts" / f"iter-{k:06d}.zarr")[0]
        resumed = read_rollout(split.run_dir / "rollouts" / f"iter-{k:06d}.zarr")[0]
        assert all(torch.equal(whole[key], resumed[key]) for key in whole.keys()), k


def test_rlpipe_export_of_a_beta_policy_is_its_mapped_mode_in_onnxruntime(beta_run):
    result = CliRunner().invoke(cli, ["export", str(beta_run.run_dir)])
    assert result.exit_code == 0, result.output
    assert "verified on 128 observations (stored rollout iter-000004.zarr)" in result.output
    path = beta_run.run_dir / "export" / "policy.onnx"
    sidecar = json.loads(path.with_name("policy.onnx.json").read_text())
    assert sidecar["action"]["deterministic"].startswith("Beta mode")
    assert sidecar["verified"]["max_abs_diff"] <= 1e-5
    env = build_env("Pendulum", 2, "cpu")
    policy = build_policy(beta_run.policy, env.observation_space, env.action_space, "cpu")
    policy.load_state_dict(load_checkpoint(beta_run.run_dir / "checkpoints" / "ckpt-000004.pt")["policy"])
    obs = torch.randn(300, 3) * torch.tensor([1.0, 1.0, 8.0])
    with torch.no_grad():  # the mode written out from α and β, not through the head
        alpha, beta = (torch.nn.functional.softplus(h) + 1 for h in policy.actor(obs).chunk(2, -1))
    expected = -2 + 4 * (alpha - 1) / (alpha + beta - 2)
    got = ExportedModel(path)(obs.numpy())[0]
    assert got.shape == (300, 1) and np.abs(got - expected.numpy()).max() <= 1e-5
    assert (np.abs(got) < 2).all() and got.std() > 0  # inside the bounds, and depends on the observation


def test_a_state_std_gaussian_exports_its_mean(tmp_path):
    env = build_env("Pendulum", 2, "cpu")
    torch.manual_seed(0)
    policy = build_policy(
        {"name": "actor_critic", "distribution": "gaussian_state_std"},
        env.observation_space,
        env.action_space,
        "cpu",
    ).eval()
    actor = DeployedActor(policy, env.observation_space, env.action_space)
    path = export_onnx(
        actor,
        tmp_path / "policy.onnx",
        export_metadata(actor, env.observation_space, env.action_space, policy),
    )
    obs = torch.randn(50, 3)
    with torch.no_grad():
        mean = policy.actor(obs)[:, :1].clamp(-2, 2)
    got = ExportedModel(path)(obs.numpy())[0]
    assert got.shape == (50, 1) and np.abs(got - mean.numpy()).max() <= 1e-5


def _run(tmp_path, *overrides: str):
    return CliRunner().invoke(cli, ["run", str(PARAMS), *set_args(tmp_path, *overrides)])


@pytest.mark.parametrize("name", ["beta", "gaussian_state_std"])
def test_a_continuous_distribution_on_cartpole_exits_2_in_one_line(tmp_path, name):
    result = _run(tmp_path, f"policy.distribution={name}")  # params.yaml: CartPole, Discrete(2)
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (
        f"Error: policy.distribution: '{name}' needs a Box action space, "
        "the env's is Discrete(2); accepted for Discrete actions: auto "
        "(categorical)"
    )
    assert not list(tmp_path.rglob("rollouts/iter-*"))  # refused before any iteration


def test_beta_on_an_unbounded_box_and_an_unknown_name_exit_2(tmp_path):
    result = _run(tmp_path, f"env.id={__name__}:UnboundedPendulum", "policy.distribution=beta")
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "policy.distribution: 'beta' needs finite action bounds" in lines[0]
    result = _run(tmp_path, "policy.distribution=gamma")
    assert result.exit_code == 2
    assert (
        "policy.distribution: Input should be 'auto', 'gaussian', 'gaussian_state_std', 'beta', "
        "'tanh_gaussian' or 'tanh_deterministic' (got 'gamma')"
    ) in result.output
