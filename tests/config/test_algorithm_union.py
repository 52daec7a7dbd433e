"""``algorithm``: a discriminated union on ``name``, one typed block per registered algorithm, torch-free."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rlpipe.config import AlgorithmBlock, ConfigError, GRPOCfg, PPOCfg, RunConfig, load, replay_algorithm
from rlpipe.config.algorithm_block import GRPOBlock, PPOBlock

ROOT = Path(__file__).resolve().parents[2]
PARAMS = ROOT / "params.yaml"


def test_the_block_of_the_name_types_cfg_by_that_algorithms_class():
    ppo = load(PARAMS)
    assert type(ppo.algorithm) is PPOBlock and type(ppo.algorithm.cfg) is PPOCfg
    assert ppo.algorithm.cfg.learning_rate == 2.0e-3 and ppo.algorithm.cfg.target_kl is None  # file, default
    grpo = load(PARAMS, ["algorithm.name=GRPO", "algorithm.cfg={group_size: 8}", "policy.name=actor_only"])
    assert type(grpo.algorithm) is GRPOBlock and grpo.algorithm.name == "grpo"
    assert isinstance(grpo.algorithm.cfg, GRPOCfg) and grpo.algorithm.cfg.group_size == 8
    default = RunConfig()
    assert type(default.algorithm) is PPOBlock
    assert default.to_dict()["algorithm"] == {"name": "ppo", "cfg": {}}


def test_validating_the_base_class_picks_the_block():
    assert type(AlgorithmBlock.model_validate({"name": "grpo"})) is GRPOBlock
    block = AlgorithmBlock(name="grpo", cfg={"kl_coef": 0.0})
    assert type(block) is GRPOBlock and block.cfg.kl_coef == 0.0
    assert AlgorithmBlock.model_validate(block) is block


def test_params_keep_the_keys_as_written_so_snapshots_and_hashes_do_not_grow():
    written = yaml.safe_load(PARAMS.read_text())["algorithm"]
    cfg = load(PARAMS)
    assert cfg.to_dict()["algorithm"] == written
    assert RunConfig.model_validate(cfg.to_dict()) == cfg and pickle.loads(pickle.dumps(cfg)) == cfg


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("algorithm.name=dqn", "algorithm.name: unknown algorithm 'dqn'; accepted: "),
        ("algorithm.name=[ppo]", "algorithm.name: Input should be a valid string"),
        ("algorithm=[ppo]", "algorithm: Input should be a mapping {name, cfg}"),
        (
            "algorithm.cfg.kl_coeff=0.1",
            "algorithm.cfg.kl_coeff: unknown key; accepted: device, learning_rate",
        ),
        ("algorithm.cfg.clip_coef=-1", "algorithm.cfg.clip_coef: Input should be greater than 0 (got -1)"),
    ],
)
def test_errors_name_the_key_inside_the_block(override, expected):
    with pytest.raises(ConfigError) as info:
        load(PARAMS, [override])
    assert str(info.value).startswith(f"{PARAMS}: {expected}")


def test_an_unknown_key_lists_the_keys_of_the_named_algorithm():
    typo = r"algorithm\.cfg\.kl_coeff: unknown key \(did you mean 'kl_coef'\?\); accepted: .*group_size"
    with pytest.raises(ConfigError, match=typo):
        load(PARAMS, ["algorithm.name=grpo", "algorithm.cfg={kl_coeff: 0.1}"])


def test_replay_overrides_merge_over_the_block():
    block = load(PARAMS).algorithm
    assert replay_algorithm(block, {"cfg": {"clip_coef": None}}) is block  # null keeps the run's value
    changed = replay_algorithm(block, {"cfg": {"clip_coef": 0.3}})
    assert changed.cfg.clip_coef == 0.3 and changed.cfg.learning_rate == block.cfg.learning_rate
    other = replay_algorithm(block, {"name": "grpo"})
    assert type(other) is GRPOBlock and other.cfg.learning_rate == GRPOCfg().learning_rate
    with pytest.raises(ConfigError, match=r"^replay\.algorithm\.nme: unknown key; accepted: name, cfg$"):
        replay_algorithm(block, {"nme": "grpo"})


def test_loading_params_imports_no_torch():
    code = (
        "import sys; from rlpipe.config import load; "
        "c = load('params.yaml', ['algorithm.name=grpo', 'algorithm.cfg={group_size: 2}']); "
        "assert type(c.algorithm.cfg).__name__ == 'GRPOCfg'; assert 'torch' not in sys.modules, 'torch'"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
