"""rsl_rl 5.x ``train_cfg`` → rlpipe params: each key mapped, defaulted as rsl_rl does, or refused by name."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from _rsl_rl_fixtures import DELETE, train_cfg

from rlpipe.config import RunConfig
from rlpipe.errors import ConfigError
from rlpipe.rsl_rl import params_from_train_cfg
from rlpipe.rsl_rl.keys import KEYS, known_paths

ROOT = Path(__file__).resolve().parents[2]


def mirror(obs=None, actions=None, env=None):  # noqa: ANN001, ANN201 - rsl_rl's augmentation signature
    return obs, actions


def test_isaaclab_cfg_maps_onto_ppo_params() -> None:
    params = params_from_train_cfg(train_cfg(), num_envs=6, obs_groups=["policy", "critic"])
    ppo = params["algorithm"]["cfg"]
    assert params["algorithm"]["name"] == "ppo"
    assert (ppo["n_epochs"], ppo["num_mini_batches"], ppo["clip_coef"], ppo["vf_clip_coef"]) == (
        2,
        2,
        0.2,
        0.2,
    )
    assert (ppo["gae_lambda"], ppo["vf_coef"], ppo["ent_coef"], ppo["clip_value_loss"]) == (
        0.95,
        1.0,
        0.005,
        True,
    )
    assert (ppo["schedule"], ppo["desired_kl"], ppo["normalize_advantage"]) == ("adaptive", 0.01, "batch")
    policy = params["policy"]
    assert policy["actor"]["obs_keys"] == ["policy"] and policy["critic"]["obs_keys"] == ["policy", "critic"]
    assert policy["actor"]["network_cfg"] == {"hidden_sizes": [16, 16], "activation": "elu"}
    assert policy["distribution"] == "gaussian" and math.isclose(policy["log_std_init"], math.log(0.8))
    assert policy["obs_normalization"] is True
    trainer = params["trainer"]
    assert (trainer["buffer_size"], trainer["iterations"], trainer["seed"]) == (8, 3, 7)
    assert trainer["save_freq"] == 2 * 6 * 8  # save_interval iterations of N × T env steps
    assert params["tracking"]["backend"] == "mlflow"
    RunConfig.model_validate(params)  # rlpipe's own validation accepts what the mapping gives


def test_absent_keys_take_rsl_rl_defaults_not_rlpipe_ones() -> None:
    cfg = train_cfg(algorithm={"class_name": "PPO"})
    ppo = params_from_train_cfg(cfg)["algorithm"]["cfg"]
    assert (ppo["n_epochs"], ppo["num_mini_batches"], ppo["vf_coef"], ppo["learning_rate"]) == (
        5,
        4,
        1.0,
        1e-3,
    )
    assert (ppo["schedule"], ppo["desired_kl"], ppo["clip_value_loss"], ppo["ent_coef"]) == (
        "adaptive",
        0.01,
        True,
        0.01,
    )


@pytest.mark.parametrize(
    ("changes", "path", "says"),
    [
        ({"algorithm__use_gae_v2": True}, "algorithm.use_gae_v2", "accepted here: "),
        ({"actor__class_name": "RNNModel"}, "actor.class_name", "accepted: MLPModel"),
        ({"critic__activation": "selu"}, "critic.activation", "accepted: elu"),
        (
            {"actor__distribution_cfg": {"class_name": "BetaDistribution"}},
            "actor.distribution_cfg.class_name",
            "Gaussian",
        ),
        ({"actor__distribution_cfg": None}, "actor.distribution_cfg", "PPO samples"),
        ({"critic__obs_normalization": False}, "critic.obs_normalization", "must equal"),
        (
            {"obs_groups": {"actor": ["policy"], "student": ["policy"]}},
            "obs_groups.student",
            "accepted: actor",
        ),
        ({"obs_groups": {"actor": ["proprio"]}}, "obs_groups.actor", "'proprio' is not among"),
        ({"check_for_nan": False}, "check_for_nan", "accepted: True"),
        ({"actor__cnn_cfg": {"output_channels": [8]}}, "actor.cnn_cfg", "accepted: null"),
        ({"critic__rnn_type": "lstm"}, "critic.rnn_type", "accepted: null"),
        ({"torch_compile_mode": "max-autotune"}, "torch_compile_mode", "accepted: None"),
        ({"class_name": "DistillationRunner"}, "class_name", "accepted: 'OnPolicyRunner'"),
        ({"algorithm__class_name": "Distillation"}, "algorithm.class_name", "rlpipe distill"),
        ({"num_steps_per_env": DELETE}, "num_steps_per_env", "missing"),
        (
            {"algorithm__rnd_cfg": {"weight": 1.0, "activation": "relu"}},
            "algorithm.rnd_cfg.activation",
            "'elu'",
        ),
    ],
)
def test_unsupported_keys_are_refused_in_one_line_naming_them(changes: dict, path: str, says: str) -> None:
    with pytest.raises(ConfigError) as raised:
        params_from_train_cfg(train_cfg(**changes), obs_groups=["policy", "critic"])
    message = str(raised.value)
    assert message.startswith(f"train_cfg.{path}: ") and says in message and "\n" not in message
    assert isinstance(raised.value, ValueError)  # exit code 2 through rlpipe's error wrapper


def test_null_cnn_and_rnn_keys_of_an_mlp_model_are_accepted() -> None:
    """mjlab's ``asdict`` of its agent config carries them on every model, null."""
    nulls = {"cnn_cfg": None, "rnn_type": None, "rnn_hidden_dim": 256, "rnn_num_layers": 1}
    changes = {f"{model}__{key}": value for model in ("actor", "critic") for key, value in nulls.items()}
    plain = params_from_train_cfg(train_cfg(), obs_groups=["policy", "critic"])
    assert params_from_train_cfg(train_cfg(**changes), obs_groups=["policy", "critic"]) == plain


def test_isaaclab_3s_empty_policy_block_and_init_at_random_ep_len_are_accepted() -> None:
    plain = params_from_train_cfg(train_cfg(), obs_groups=["policy", "critic"])
    isaaclab = train_cfg(policy={}, init_at_random_ep_len=True)
    assert params_from_train_cfg(isaaclab, obs_groups=["policy", "critic"]) == plain


def test_rnd_and_symmetry_map_where_rlpipe_has_them() -> None:
    rnd = {
        "weight": 0.5,
        "reward_normalization": True,
        "num_outputs": 8,
        "learning_rate": 1e-3,
        "predictor_hidden_dims": [32],
        "target_hidden_dims": [32],
        "state_normalization": True,
    }
    symmetry = {"data_augmentation_func": mirror, "use_data_augmentation": True, "mirror_loss_coeff": 0.1}
    cfg = train_cfg(algorithm__rnd_cfg=rnd, algorithm__symmetry_cfg=symmetry)
    cfg["obs_groups"]["rnd_state"] = ["critic"]
    ppo = params_from_train_cfg(cfg, step_dt=0.02)["algorithm"]["cfg"]
    assert ppo["rnd"]["obs_keys"] == ["critic"] and ppo["rnd"]["hidden_sizes"] == [32]
    assert math.isclose(ppo["rnd"]["weight"], 0.01)  # rsl_rl scales the weight by the env's step_dt
    assert ppo["rnd"]["reward_normalization"] == "running" and ppo["rnd"]["embedding_dim"] == 8
    assert ppo["symmetry"] == {
        "function": f"{__name__}:mirror",
        "data_augmentation": True,
        "mirror_loss": False,
        "mirror_loss_coef": 0.1,
    }


def test_rsl_rl_before_4s_policy_block_and_set_names_map_too() -> None:
    cfg = train_cfg(
        actor=DELETE, critic=DELETE, obs_groups={"policy": ["policy"], "critic": ["policy", "critic"]}
    )
    cfg["policy"] = {
        "class_name": "ActorCritic",
        "init_noise_std": 1.0,
        "noise_std_type": "scalar",
        "actor_obs_normalization": False,
        "critic_obs_normalization": False,
        "actor_hidden_dims": [32, 32],
        "critic_hidden_dims": [64],
        "activation": "lrelu",
    }
    policy = params_from_train_cfg(cfg)["policy"]
    assert policy["actor"]["network_cfg"] == {"hidden_sizes": [32, 32], "activation": "leaky_relu"}
    assert policy["critic"]["network_cfg"]["hidden_sizes"] == [64] and policy["log_std_init"] == 0.0
    assert policy["actor"]["obs_keys"] == ["policy"] and policy["obs_normalization"] is False


def test_missing_observation_sets_resolve_as_rsl_rl_does() -> None:
    policy = params_from_train_cfg(train_cfg(obs_groups={}), obs_groups=["policy", "critic"])["policy"]
    assert policy["actor"]["obs_keys"] == ["policy"] and policy["critic"]["obs_keys"] == ["critic"]


def test_unset_configclass_fields_count_as_absent() -> None:
    cfg = train_cfg(policy=dataclasses.MISSING, empirical_normalization=dataclasses.MISSING)
    assert params_from_train_cfg(cfg)["policy"]["obs_normalization"] is True


def test_logger_none_turns_tracking_off() -> None:
    assert params_from_train_cfg(train_cfg(logger="none"))["tracking"]["backend"] == "none"


def test_the_docs_page_lists_every_key_the_mapping_knows() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "rsl_rl_keys_hook", ROOT / "docs" / "hooks" / "rsl_rl_keys.py"
    )
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    page = (ROOT / "docs" / "rsl-rl-runner.md").read_text()
    assert hook.MARKER in page
    rendered = hook.render(page)
    assert hook.MARKER not in rendered
    for key in KEYS:
        (row,) = [line for line in rendered.splitlines() if line.startswith(f"| `{key.path}` |")]
        assert row.count("|") == 4, row  # three cells: a "|" inside one would split the table
    assert {k.path for k in KEYS} <= known_paths()
