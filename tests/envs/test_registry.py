"""build_env / register_env: ids, constructor arguments and one-line config errors."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from rlpipe.config import ConfigError
from rlpipe.envs import CartPole, GymnasiumEnv, Pendulum, build_env, register_env, registry
from rlpipe.envs.registry import registered_env_ids


@pytest.fixture
def clean_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    yield


def config_error(env_id: str, cfg: dict | None = None, backend: str = "auto") -> str:
    with pytest.raises(ConfigError) as info:
        build_env(env_id, 2, "cpu", cfg, backend)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_torch_envs_are_registered() -> None:
    assert {"CartPole", "Pendulum"} <= set(registered_env_ids())


def test_registered_id_builds_the_torch_env_with_cfg() -> None:
    env = build_env("CartPole", 8, "cpu", {"max_episode_steps": 50, "physics_dtype": "float64"})
    assert isinstance(env, CartPole)
    assert env.num_envs == 8 and env.max_episode_steps == 50 and env.state.dtype == torch.float64
    pendulum = build_env("Pendulum", 2, torch.device("cpu"), {"g": 9.81})
    assert isinstance(pendulum, Pendulum) and pendulum.g == 9.81
    assert build_env("Pendulum", 2, "cpu").max_episode_steps == 200


def test_gymnasium_id_builds_the_adapter() -> None:
    env = build_env("CartPole-v1", 2, "cpu", {"vectorization_mode": "sync"}, backend="gymnasium")
    assert isinstance(env, GymnasiumEnv) and env.num_envs == 2
    limited = build_env("Pendulum-v1", 2, "cpu", {"max_episode_steps": 9}, "gymnasium")
    assert isinstance(limited, GymnasiumEnv) and limited.max_episode_steps == 9


def test_unknown_id_is_one_line_listing_what_is_accepted() -> None:
    assert config_error("CartPol") == (
        "env.id: unknown env 'CartPol' for backend auto (did you mean 'CartPole'?); accepted: a registered "
        "torch env "
        "(CartPole, DeepSea, Pendulum, PixelCartPole, PushCube, RepeatFirst, RobotProxy); an envpool id "
        "such as HalfCheetah-v5 "
        "(rlpipe envs --backend envpool); a gymnasium id such as CartPole-v1; package.module:Factory"
    )


def test_unknown_argument_names_the_key_and_the_accepted_ones() -> None:
    assert config_error("CartPole", {"max_steps": 10}) == (
        "env.cfg.max_steps: unknown argument of CartPole; "
        "accepted: max_episode_steps, physics_dtype, obs_groups"
    )
    assert config_error("Pendulum", {"gravity": 9.8}).startswith(
        "env.cfg.gravity: unknown argument of Pendulum; accepted: max_episode_steps"
    )


def test_arguments_set_elsewhere_are_refused() -> None:
    assert config_error("CartPole", {"num_envs": 4}) == (
        "env.cfg.num_envs: set by trainer.num_envs, not env.cfg"
    )
    assert config_error("CartPole-v1", {"device": "cpu"}, "gymnasium").startswith("env.cfg.device")
    assert config_error("CartPole-v1", {"device": "cpu"}).startswith("env.cfg.device")


def test_invalid_value_names_the_key_and_the_accepted_values() -> None:
    assert config_error("CartPole", {"physics_dtype": "float16"}) == (
        "env.cfg.physics_dtype: got 'float16'; accepted: float32, float64"
    )
    assert config_error("Pendulum", {"max_episode_steps": -1}).startswith("env.cfg.max_episode_steps: got -1")
    assert config_error("CartPole-v1", {"vectorization_mode": "gpu"}, "gymnasium") == (
        "env.cfg.vectorization_mode: got 'gpu'; accepted: vector_entry_point, sync, async"
    )


def test_bad_gymnasium_make_kwarg_is_a_config_error() -> None:
    message = config_error("CartPole-v1", {"pole_length": 2.0, "vectorization_mode": "sync"}, "gymnasium")
    assert message.startswith("env.cfg: ") and "pole_length" in message


@pytest.mark.usefixtures("clean_registry")
def test_register_env_refuses_duplicates_unless_overridden() -> None:
    @register_env("TestPole")
    class TestPole(CartPole):
        pass

    assert isinstance(build_env("TestPole", 2, "cpu"), TestPole)
    with pytest.raises(ValueError, match="already registered"):
        register_env("TestPole")(CartPole)
    register_env("TestPole", override=True)(Pendulum)
    assert isinstance(build_env("TestPole", 2, "cpu"), Pendulum)
    assert "TestPole" in registered_env_ids()


def test_registry_fixture_leaves_no_trace() -> None:
    assert "TestPole" not in registered_env_ids()


def test_the_shipped_envpool_ids_are_the_installed_envpools() -> None:
    # rlpipe/envs/envpool_ids.txt names envpool's ids without envpool installed (the envpool extra's line)
    envpool = pytest.importorskip("envpool")
    from rlpipe.envs.ids import shipped_envpool_ids

    assert shipped_envpool_ids() == frozenset(envpool.list_all_envs()), "regenerate envs/envpool_ids.txt"


def test_without_envpool_its_ids_name_the_extra_and_other_ids_still_resolve(monkeypatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "envpool", None)
    assert config_error("Humanoid-v5") == "env.id: Humanoid-v5 needs envpool: pip install 'rlpipe[envpool]'"
    assert build_env("CartPole-v1", 2, "cpu").num_envs == 2  # gymnasium's own vector class, as before
    assert config_error("NoSuchEnv-v0").startswith("env.id: unknown env 'NoSuchEnv-v0'")


def test_the_env_listing_skips_built_ins_whose_packages_are_missing() -> None:
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['mujoco'] = None; from rlpipe.envs.registry import registered_env_ids; "
        "ids = registered_env_ids(); assert 'CartPole' in ids and 'PushCube' not in ids, ids"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
