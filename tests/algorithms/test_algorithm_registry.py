"""``register_algo``: a script's algorithm with its own config class loads from params, validated once."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from pydantic import Field, model_validator

from rlpipe.algorithms import (
    PPO,
    PPOCfg,
    algo_class,
    build_algo,
    get_registered_algo_names,
    register_algo,
    resolve_algo_cfg,
)
from rlpipe.config import AlgorithmCfg, ConfigError, GRPOCfg, load
from rlpipe.policies import build_policy

PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"
VALIDATIONS: list[str] = []


class AnnealedCfg(PPOCfg):
    """PPO whose clip range anneals (a user's config class)."""

    clip_anneal: float = Field(1.0, gt=0, le=1)
    """Factor on the clip range per update."""

    @model_validator(mode="after")
    def _count(self) -> AnnealedCfg:
        VALIDATIONS.append(type(self).__name__)
        return self


@register_algo("annealed_ppo")
class AnnealedPPO(PPO):
    """A user algorithm: PPO's update with its own config class."""

    cfg_class = AnnealedCfg


USER = ("algorithm.name=annealed_ppo", "algorithm.cfg.clip_anneal=0.5", "algorithm.cfg.amp=auto")


def cartpole_policy(cfg):
    spaces = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2)
    return build_policy(cfg.policy, *spaces, "cpu")


def test_a_registered_user_algorithm_loads_from_params_and_builds():
    cfg = load(PARAMS, USER)
    assert type(cfg.algorithm.cfg) is AnnealedCfg and cfg.algorithm.cfg.clip_anneal == 0.5
    assert cfg.algorithm.cfg.learning_rate == 2.0e-3  # the params file's other keys
    algo = build_algo(cfg.algorithm.name, cfg.algorithm.cfg, cartpole_policy(cfg), "cpu")
    assert type(algo) is AnnealedPPO and algo.cfg.clip_anneal == 0.5
    assert "annealed_ppo" in get_registered_algo_names() and algo_class("Annealed_PPO") is AnnealedPPO


def test_the_config_is_validated_once_at_load_and_only_resolved_after():
    VALIDATIONS.clear()
    cfg = load(PARAMS, USER)
    resolved = resolve_algo_cfg(cfg.algorithm.name, cfg.algorithm.cfg, "cpu")
    assert resolved.device == "cpu" and resolved.amp in ("none", "bf16")  # auto → what this CPU runs
    build_algo(cfg.algorithm.name, cfg.algorithm.cfg, cartpole_policy(cfg), "cpu")
    assert VALIDATIONS == ["AnnealedCfg"]
    assert (cfg.algorithm.cfg.device, cfg.algorithm.cfg.amp) == ("auto", "auto")  # the loaded one as written


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        (
            "algorithm.cfg.clip_anneal=true",
            "algorithm.cfg.clip_anneal: Input should be a valid number, not true/false",
        ),
        (
            "algorithm.cfg.clip_aneal=0.5",
            "algorithm.cfg.clip_aneal: unknown key (did you mean 'clip_anneal'?)",
        ),
    ],
)
def test_the_user_config_class_types_its_errors(override, expected):
    with pytest.raises(ConfigError) as info:
        load(PARAMS, [*USER[:1], override])
    assert str(info.value).startswith(f"{PARAMS}: {expected}")


def test_an_unknown_name_lists_the_registered_ones_among_the_accepted():
    with pytest.raises(ConfigError) as info:
        load(PARAMS, ["algorithm.name=annealed"])
    *names, forms = str(info.value).partition("; accepted: ")[2].split(", ")
    assert {"annealed_ppo", "ppo", "grpo"} <= set(names) and names == sorted(names)
    assert forms == "an rlpipe.algorithms entry point or package.module:Class"


def test_a_name_holds_one_algorithm_and_one_config_class():
    with pytest.raises(ValueError, match="already registered by AnnealedPPO"):
        register_algo("annealed_ppo")(type("Other", (AnnealedPPO,), {}))
    with pytest.raises(ValueError, match="already registered with PPOCfg"):
        register_algo("ppo")(type("MyPPO", (PPO,), {"cfg_class": AnnealedCfg}))
    with pytest.raises(ValueError, match="cfg_class must subclass AlgorithmCfg"):
        register_algo("plain")(type("Plain", (), {"cfg_class": dict}))


def test_the_python_api_still_takes_a_dict_and_refuses_another_algorithms_config():
    algo = build_algo("ppo", {"batch_size": 16, "n_epochs": 1}, cartpole_policy(load(PARAMS)), "cpu")
    assert isinstance(algo.cfg, PPOCfg) and algo.cfg.batch_size == 16
    with pytest.raises(ConfigError, match=r"^algorithm\.cfg\.batch_size: Input should be greater"):
        resolve_algo_cfg("ppo", {"batch_size": 0})
    with pytest.raises(ConfigError, match=r"^algorithm\.cfg: 'ppo' takes a PPOCfg, got a GRPOCfg$"):
        resolve_algo_cfg("ppo", GRPOCfg())
    assert isinstance(resolve_algo_cfg("grpo", {}), AlgorithmCfg)
