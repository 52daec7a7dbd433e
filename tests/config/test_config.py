import json

import pytest

from rlpipe import config
from rlpipe.config import ConfigError, load


def test_default_params_load_with_seed_blocks(tmp_path):
    cfg = load("params.yaml")
    assert cfg.algorithm.name == "ppo"
    assert cfg.env.id == "CartPole"
    assert cfg.policy.actor.network_cfg.hidden_sizes == [64, 64]
    assert cfg.run_dir.name == cfg.trainer.exp_name


def test_set_overrides_parse_yaml_values():
    cfg = load(
        "params.yaml",
        [
            "trainer.iterations=3",
            "policy.actor.network_cfg.hidden_sizes=[256,256]",
            "algorithm.cfg.clip_coef=0.1",
        ],
    )
    assert cfg.trainer.iterations == 3
    assert cfg.policy.actor.network_cfg.hidden_sizes == [256, 256]
    assert cfg.algorithm.cfg.clip_coef == 0.1


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("trainer.num_envs=0", r"trainer.num_envs: Input should be greater than or equal to 1 \(got 0\)"),
        (
            "trainer.seeed=1",
            r"trainer.seeed: unknown key \(did you mean 'seed'\?\); accepted: exp_name, seed, device",
        ),
        ("trainer.iterations=abc", r"trainer.iterations: Input should be a valid integer"),
        ("store.codec=gzip", r"store.codec: Input should be 'none', 'blosc-lz4', 'blosc-zstd' or 'zstd'"),
        ("trainer.device=tpu", r"trainer.device: got 'tpu'; accepted: auto, cpu, cuda, cuda:N$"),
        ("bogus.key=1", r"bogus: unknown key; accepted: trainer, env, policy, algorithm"),
    ],
)
def test_bad_values_name_the_key_path(override, message):
    with pytest.raises(ConfigError, match=message) as info:
        load("params.yaml", [override])
    assert "\n" not in str(info.value)


def test_missing_block_and_missing_file(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("trainer: {}\nenv: {}\npolicy: {}\n")
    with pytest.raises(ConfigError, match="missing section 'algorithm'"):
        load(path)
    with pytest.raises(ConfigError, match="params file not found"):
        load(tmp_path / "nope.yaml")
    path.write_text("trainer: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load(path)


def test_bad_set_syntax():
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        load("params.yaml", ["trainer.iterations"])


def test_seed_json_format_is_accepted(tmp_path):
    (tmp_path / "gym_config.json").write_text(json.dumps({"id": "CartPole", "cfg": {}}))
    train = {
        "trainer": {
            "exp_name": "push",
            "gym_config": "gym_config.json",
            "seed": 1,
            "device": "cpu",
            "headless": True,
            "enable_rt": False,
            "gpu_id": 0,
            "num_envs": 8,
            "iterations": 2,
            "buffer_size": 16,
            "enable_eval": True,
            "num_eval_envs": 4,
            "num_eval_episodes": 1,
            "eval_freq": 100,
            "save_freq": 100,
            "use_wandb": False,
            "wandb_project_name": "x",
        },
        "policy": {
            "name": "actor_critic",
            "actor": {"type": "mlp", "network_cfg": {"hidden_sizes": [8], "activation": "relu"}},
            "critic": {"type": "mlp", "network_cfg": {"hidden_sizes": [8], "activation": "relu"}},
        },
        "algorithm": {
            "name": "ppo",
            "cfg": {
                "learning_rate": 1e-4,
                "n_epochs": 1,
                "batch_size": 64,
                "gamma": 0.99,
                "gae_lambda": 0.95,
                "clip_coef": 0.2,
                "ent_coef": 0.01,
                "vf_coef": 0.5,
                "max_grad_norm": 0.5,
            },
        },
    }
    path = tmp_path / "train_config.json"
    path.write_text(json.dumps(train))
    cfg = load(path)
    assert cfg.env.id == "CartPole"
    assert cfg.trainer.num_envs == 8


def test_params_hash_changes_with_params():
    a, b = load("params.yaml"), load("params.yaml", ["algorithm.cfg.clip_coef=0.3"])
    assert config.params_hash(a) != config.params_hash(b)
    assert config.params_hash(a) == config.params_hash(load("params.yaml"))


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "trainer.num_envs=true",
            r"trainer.num_envs: Input should be a valid integer, not true/false \(got true\)",
        ),
        ('store.enabled="yes"', r"store.enabled: Input should be true or false \(got 'yes'\)"),
        ("store.enabled=1", r"store.enabled: Input should be true or false \(got 1\)"),
        ('trainer.seed="7"', r"trainer.seed: Input should be a valid integer, not a string"),
        ('trainer.num_threads="2"', r"trainer.num_threads: got '2'; accepted: auto, a positive integer"),
        ("trainer.exp_name=../x", r"trainer.exp_name: got '../x'; a plain folder name"),
        ("trainer.exp_name=/tmp/x", r"trainer.exp_name: got '/tmp/x'; a plain folder name"),
        ("trainer.exp_name=..", r"trainer.exp_name: got '..'; a plain folder name"),
    ],
)
def test_no_coercion_between_bools_numbers_and_strings(override, message):
    with pytest.raises(ConfigError, match=message) as info:
        load("params.yaml", [override])
    assert "\n" not in str(info.value)


def test_strict_types_still_take_ints_for_floats_lists_for_tuples_and_exponents():
    cfg = load(
        "params.yaml",
        ["algorithm.cfg.learning_rate=1e-3", "trainer.exp_name=run_2.b", "policy.log_std_init=0"],
    )
    assert cfg.algorithm.cfg.learning_rate == 0.001 and cfg.policy.log_std_init == 0.0
    from rlpipe.algorithms import resolve_algo_cfg

    algo = resolve_algo_cfg("ppo", {"learning_rate": 1, "lr_schedule": [[0, 1e-3], [100, 1e-4]]}, "cpu")
    assert algo.learning_rate == 1.0 and algo.lr_schedule[1] == (100, 1e-4)
    with pytest.raises(ConfigError, match=r"lr_schedule\.1\.1: Input should be a valid number, not a string"):
        resolve_algo_cfg("ppo", {"lr_schedule": [[0, 1e-3], [100, "2"]]}, "cpu")


def test_binary_and_non_utf8_params_files_name_themselves(tmp_path):
    binary, latin = tmp_path / "p.yaml", tmp_path / "q.yaml"
    binary.write_bytes(b"trainer:\x00\x01\x02")
    latin.write_bytes("trainer: {exp_name: caf\xe9}".encode("latin-1"))
    with pytest.raises(ConfigError, match=rf"{binary}: a binary file \(NUL byte at offset 8\)"):
        load(binary)
    with pytest.raises(ConfigError, match=rf"{latin}: not a UTF-8 text params file"):
        load(latin)
