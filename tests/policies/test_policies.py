import gymnasium as gym
import pytest
import torch
from tensordict import TensorDict

from rlpipe.config import ConfigError
from rlpipe.policies import ActorCritic, ActorOnly, build_mlp_from_cfg, build_policy

OBS = gym.spaces.Box(-1, 1, (4,))


def test_categorical_log_prob_and_entropy_match_torch():
    torch.manual_seed(0)
    policy = build_policy({"name": "actor_critic"}, OBS, gym.spaces.Discrete(3), "cpu")
    obs, action = torch.randn(5, 4), torch.randint(0, 3, (5,))
    log_prob, entropy, value = policy.evaluate(obs, action)
    ref = torch.distributions.Categorical(logits=policy.actor(obs))
    torch.testing.assert_close(log_prob, ref.log_prob(action))
    torch.testing.assert_close(entropy, ref.entropy())
    torch.testing.assert_close(value, policy.critic(obs).squeeze(-1))


def test_gaussian_log_prob_sums_over_action_dims_with_learnable_std():
    torch.manual_seed(0)
    policy = build_policy(
        {"name": "actor_critic", "log_std_init": -0.5}, OBS, gym.spaces.Box(-2, 2, (2,)), "cpu"
    )
    obs, action = torch.randn(5, 4), torch.randn(5, 2)
    log_prob, entropy, _ = policy.evaluate(obs, action)
    ref = torch.distributions.Normal(policy.actor(obs), torch.full((2,), -0.5).exp())
    torch.testing.assert_close(log_prob, ref.log_prob(action).sum(-1))
    torch.testing.assert_close(entropy, ref.entropy().sum(-1))
    assert policy.head.log_std.requires_grad


def test_deterministic_action_is_mode():
    policy = build_policy({"name": "actor_critic"}, OBS, gym.spaces.Discrete(3), "cpu")
    obs = torch.randn(6, 4)
    action, _ = policy.sample(obs, deterministic=True)
    assert torch.equal(action, policy.actor(obs).argmax(-1))


def test_tensordict_api_writes_seed_keys():
    policy = build_policy({"name": "actor_critic"}, OBS, gym.spaces.Discrete(2), "cpu")
    td = TensorDict({"obs": torch.randn(3, 4)}, batch_size=[3])
    policy.get_action(td)
    assert set(td.keys()) >= {"action", "sample_log_prob", "value"}
    out = policy.evaluate_actions(td)
    assert set(out.keys()) == {"sample_log_prob", "entropy", "value"}
    torch.testing.assert_close(out["sample_log_prob"], td["sample_log_prob"])
    assert isinstance(policy, ActorCritic)


def test_actor_only_has_zero_value_and_no_critic():
    policy = build_policy({"name": "actor_only", "critic": None}, OBS, gym.spaces.Discrete(2), "cpu")
    assert isinstance(policy, ActorOnly) and not policy.has_critic
    assert not any("critic" in name for name, _ in policy.named_parameters())
    assert torch.equal(policy.value(torch.randn(4, 4)), torch.zeros(4))


def test_mlp_builder_shapes_and_errors():
    block = {"type": "mlp", "network_cfg": {"hidden_sizes": [8, 8], "activation": "relu"}}
    net = build_mlp_from_cfg(block, 4, 2)
    assert net(torch.randn(3, 4)).shape == (3, 2)
    assert isinstance(net[1], torch.nn.ReLU)
    with pytest.raises(ConfigError, match="activation: unknown 'swish'; accepted: tanh, relu"):
        build_mlp_from_cfg({"type": "mlp", "network_cfg": {"activation": "swish"}}, 4, 2)
    with pytest.raises(ConfigError, match="type: unknown network type 'cnn'"):
        build_mlp_from_cfg({"type": "cnn"}, 4, 2)
    with pytest.raises(ConfigError, match="hidden_sizes"):
        build_mlp_from_cfg({"network_cfg": {"hidden_sizes": [0]}}, 4, 2)


def test_unknown_policy_name_and_action_dim_mismatch():
    with pytest.raises(ConfigError, match="policy.name: unknown policy 'vla'; accepted: actor_c"):
        build_policy({"name": "vla"}, OBS, gym.spaces.Discrete(2), "cpu")
    with pytest.raises(ConfigError, match="policy.action_dim: 3 does not match"):
        build_policy({"name": "actor_critic", "action_dim": 3}, OBS, gym.spaces.Discrete(2), "cpu")
