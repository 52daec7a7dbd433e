"""Policy export: the deployed actor equals the policy's deterministic action; ONNX/TorchScript files too."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import onnx
import pytest
import torch
from tensordict import TensorDict

from rlpipe.envs import build_env
from rlpipe.policies import build_policy
from rlpipe.policies.export import (
    FORMATS,
    DeployedActor,
    ExportError,
    export_onnx,
    export_torchscript,
)
from rlpipe.policies.export_metadata import export_metadata
from rlpipe.policies.exported import ExportedModel, ExportedPolicy

SMALL = {"network_cfg": {"hidden_sizes": [16]}}
CASES = {  # name: (env, policy block)
    "mlp-discrete-normalized": ("CartPole", {"name": "actor_critic", "obs_normalization": True}),
    "mlp-continuous": ("Pendulum", {"name": "actor_critic"}),
    "lstm-continuous-normalized": (
        "Pendulum",
        {
            "name": "recurrent_actor_critic",
            "obs_normalization": True,
            "recurrent": {"type": "lstm", "hidden_size": 8},
        },
    ),
    "gru-discrete": (
        "CartPole",
        {"name": "recurrent_actor_critic", "recurrent": {"type": "gru", "hidden_size": 8, "num_layers": 2}},
    ),
}


def trained(case: str):
    """A policy with non-trivial normalizer statistics and a mean that leaves the action bounds."""
    env_id, block = CASES[case]
    torch.manual_seed(0)
    env = build_env(env_id, 4, "cpu")
    policy = build_policy(
        {**block, "actor": SMALL, "critic": SMALL}, env.observation_space, env.action_space, "cpu"
    )
    policy.update_normalization(torch.randn(256, *env.obs_shape) * 2 + 1)
    with torch.no_grad():
        policy.actor[-1].weight.mul_(30)  # Pendulum: means far outside ±2, so clipping matters
    return env, policy.eval()


def reference(
    policy,
    env,
    obs: torch.Tensor | TensorDict,
    state: torch.Tensor | None,
    bounds: tuple[float, float] | None = None,
):
    """The checkpoint's deterministic action (clipped to a Box's bounds) and next state."""
    with torch.no_grad():
        if state is None:
            action, next_state = policy.sample(obs, deterministic=True)[0], None
        else:
            action, _, _, next_state = policy.sample_step(obs, state, deterministic=True)
    if bounds is None and env.action_dtype == torch.float32:
        bounds = float(env.action_space.low[0]), float(env.action_space.high[0])
    return (action if bounds is None else action.clamp(*bounds)), next_state


@pytest.mark.parametrize("case", list(CASES))
def test_deployed_actor_and_torchscript_equal_the_policy_for_any_batch(case, tmp_path):
    env, policy = trained(case)
    actor = DeployedActor(policy, env.observation_space, env.action_space)
    metadata = export_metadata(actor, env.observation_space, env.action_space, policy, params_hash="abc")
    path = export_torchscript(actor, tmp_path / "policy.pt", metadata)
    model = ExportedModel(path)
    assert model.recurrent == policy.is_recurrent and model.metadata["params_hash"] == "abc"
    for batch in (1, 7):
        obs = torch.randn(batch, *env.obs_shape) * 3
        state = torch.randn(batch, policy.state_size) if policy.is_recurrent else None
        expected, expected_state = reference(policy, env, obs, state)
        out = actor(obs, state) if state is not None else (actor(obs),)
        files = model(obs.numpy(), None if state is None else state.numpy())
        for got in (out[0].detach().numpy(), files[0]):
            assert got.dtype == (np.int64 if env.action_dtype == torch.int64 else np.float32)
            assert np.abs(got - expected.numpy()).max() <= 1e-6
        if state is not None:
            assert np.abs(files[1] - expected_state.numpy()).max() <= 1e-6
    if env.action_dtype == torch.float32:
        assert (np.abs(expected.numpy()) == 2.0).any()  # the bounds were hit and applied


@pytest.mark.parametrize("case", ["mlp-discrete-normalized", "lstm-continuous-normalized"])
def test_onnx_file_runs_in_onnxruntime_with_a_dynamic_batch_and_carries_metadata(case, tmp_path):
    env, policy = trained(case)
    actor = DeployedActor(policy, env.observation_space, env.action_space)
    metadata = export_metadata(actor, env.observation_space, env.action_space, policy, rlpipe_version="x")
    path = export_onnx(actor, tmp_path / "policy.onnx", metadata)
    props = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
    assert props["rlpipe_version"] == "x"
    assert json.loads(props["observation"])["sizes"] == {"obs": int(np.prod(env.obs_shape))}
    assert json.loads(props["normalizer"])["mean"] == policy.obs_normalizer.mean.tolist()
    model = ExportedModel(path)
    for batch in (1, 5):
        obs = torch.randn(batch, *env.obs_shape) * 3
        state = torch.randn(batch, policy.state_size) if policy.is_recurrent else None
        expected, expected_state = reference(policy, env, obs, state)
        got = model(obs.numpy(), None if state is None else state.numpy())
        assert np.abs(got[0] - expected.numpy()).max() <= 1e-5
        if state is not None:
            assert json.loads(props["recurrent"])["state_size"] == policy.state_size
            assert np.abs(got[1] - expected_state.numpy()).max() <= 1e-5


def test_exported_policy_acts_like_the_policy_for_the_evaluator(tmp_path):
    env, policy = trained("gru-discrete")
    actor = DeployedActor(policy, env.observation_space, env.action_space)
    path = export_torchscript(
        actor, tmp_path / "policy.pt", export_metadata(actor, env.observation_space, env.action_space, policy)
    )
    shipped = ExportedPolicy(ExportedModel(path), "cpu")
    obs, state = torch.randn(6, 4), shipped.initial_state(6)
    action, _, _, next_state = shipped.sample_step(obs, state)
    expected, expected_state = reference(policy, env, obs, policy.initial_state(6))
    assert torch.equal(action, expected) and torch.allclose(next_state, expected_state, atol=1e-6)


def test_unsupported_policies_and_files_are_one_line_errors(tmp_path):
    env, policy = trained("mlp-continuous")
    del policy.head
    with pytest.raises(ExportError, match="no 'head' module"):
        DeployedActor(policy, env.observation_space, env.action_space)
    (tmp_path / "policy.onnx").write_bytes(b"not onnx")
    with pytest.raises(ExportError, match="not a readable ONNX model"):
        ExportedModel(tmp_path / "policy.onnx")
    (tmp_path / "policy.bin").write_bytes(b"")
    with pytest.raises(ExportError, match="accepted: .onnx, .pt"):
        ExportedModel(tmp_path / "policy.bin")


IMAGE_SPACE = gym.spaces.Dict(
    {
        "camera": gym.spaces.Box(0, 255, (3, 24, 24), np.uint8),
        "joints": gym.spaces.Box(-1, 1, (2, 3), np.float32),
        "privileged": gym.spaces.Box(-1, 1, (5,), np.float32),
    }
)
"""An image group, a 2-D vector group and a group only the critic reads."""
TINY_CNN = {"camera": {"channels": [4], "kernel_sizes": [6], "strides": [3], "features": 8}}


def image_policy(recurrent: bool):
    """A policy over :data:`IMAGE_SPACE` with a Box action, normalized vectors and means past the bounds."""
    torch.manual_seed(1)
    actor = {**SMALL, "obs_keys": ["joints", "camera"], "encoders": TINY_CNN}
    critic = actor if recurrent else {**SMALL, "obs_keys": ["joints", "privileged"]}  # one core: same keys
    block = {
        "name": "recurrent_actor_critic" if recurrent else "actor_critic",
        "obs_normalization": True,
        "actor": actor,
        "critic": critic,
        "recurrent": {"type": "gru", "hidden_size": 8},
    }
    action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    policy = build_policy(block, IMAGE_SPACE, action_space, "cpu")
    policy.update_normalization(random_obs(256))
    with torch.no_grad():
        policy.actor[-1].weight.mul_(20)
    return policy.eval(), action_space


def random_obs(batch: int) -> TensorDict:
    return TensorDict(
        {
            "camera": torch.randint(0, 256, (batch, 3, 24, 24), dtype=torch.uint8),
            "joints": torch.randn(batch, 2, 3) * 2 + 1,
            "privileged": torch.randn(batch, 5),
        },
        batch_size=[batch],
    )


@pytest.mark.parametrize("recurrent", [False, True], ids=["mlp", "gru"])
@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_dict_observations_export_as_one_input_per_group_the_actor_reads(fmt, recurrent, tmp_path):
    policy, action_space = image_policy(recurrent)
    actor = DeployedActor(policy, IMAGE_SPACE, action_space)
    metadata = export_metadata(actor, IMAGE_SPACE, action_space, policy)
    assert metadata["inputs"] == ["obs/joints", "obs/camera", *(["state"] if recurrent else [])]
    assert metadata["observation"]["keys"] == ["joints", "camera"]  # the actor's obs_keys, in its order
    assert metadata["observation"]["groups"]["camera"] == {
        "input": "obs/camera",
        "shape": [3, 24, 24],
        "dtype": "uint8",
        "image": True,
    }
    assert metadata["observation"]["groups"]["joints"]["dtype"] == "float32"
    assert list(metadata["normalizer"]["groups"]) == ["joints"]  # read, not an image
    write = export_onnx if fmt == "onnx" else export_torchscript
    model = ExportedModel(write(actor, tmp_path / FORMATS[fmt], metadata))
    assert model.obs_keys == ("joints", "camera")
    for batch in (1, 5):
        obs = random_obs(batch)
        state = torch.randn(batch, policy.state_size) if recurrent else None
        expected, expected_state = reference(policy, None, obs, state, bounds=(-1.0, 1.0))
        host = {k: obs[k].numpy() for k in obs.keys()}  # the file picks its groups
        got = model(host, None if state is None else state.numpy())
        assert got[0].dtype == np.float32 and np.abs(got[0] - expected.numpy()).max() <= 1e-5
        if recurrent:
            assert np.abs(got[1] - expected_state.numpy()).max() <= 1e-5
    assert (np.abs(expected.numpy()) == 1.0).any() and (np.abs(expected.numpy()) < 1.0).any()
    with pytest.raises(ValueError, match="observation group 'camera' missing"):
        model({"joints": host["joints"]}, None if state is None else state.numpy())


def test_the_exported_policy_feeds_the_envs_dict_observations_to_the_file(tmp_path):
    policy, action_space = image_policy(recurrent=False)
    actor = DeployedActor(policy, IMAGE_SPACE, action_space)
    path = export_torchscript(
        actor, tmp_path / "policy.pt", export_metadata(actor, IMAGE_SPACE, action_space, policy)
    )
    shipped = ExportedPolicy(ExportedModel(path), "cpu")
    obs = random_obs(4)
    action, log_prob = shipped.sample(obs)
    expected, _ = reference(policy, None, obs, None, bounds=(-1.0, 1.0))
    assert torch.allclose(action, expected, atol=1e-6) and torch.equal(log_prob, torch.zeros(4))


def test_onnx_export_on_a_torch_before_2_5_names_the_version(monkeypatch, tmp_path):
    from rlpipe.config import ConfigError
    from rlpipe.policies.export import export_onnx

    monkeypatch.setattr(torch, "__version__", "2.4.1+cu121")
    expected = r"^--format onnx needs torch>=2.5 .*this is torch 2\.4\.1\+cu121: use --format torchscript$"
    with pytest.raises(ConfigError, match=expected):
        export_onnx(None, tmp_path / "policy.onnx", {})
    assert list(tmp_path.iterdir()) == []
