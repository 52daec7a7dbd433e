"""``env.id: package.module:ClassOrFactory`` plugins and the ``rlpipe.envs`` entry-point group."""

from __future__ import annotations

import sys
import textwrap
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from rlpipe.config import ConfigError, references
from rlpipe.envs import CartPole, GymnasiumEnv, build_env
from rlpipe.envs.backends import plugins
from rlpipe.envs.backends.rsl_rl_env import RslRlEnv
from rlpipe.envs.listing import env_ids_by_backend

MODULE = textwrap.dedent('''
    import gymnasium as gym
    import numpy as np
    from rlpipe.envs import CartPole

    class MyPole(CartPole):
        """A torch batched env subclass."""

    def make_pole(num_envs, device, max_episode_steps=500):
        return CartPole(num_envs=num_envs, device=device, max_episode_steps=max_episode_steps)

    class Line(gym.Env):
        observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            return np.zeros(2, np.float32), {}

        def step(self, action):
            return np.ones(2, np.float32), 1.0, False, False, {}

    gym.register(id="LineRegistered-v0", entry_point=Line, max_episode_steps=7)

    def make_rsl(num_envs):
        from tests_rsl import CountingVecEnv
        return CountingVecEnv(num_envs)

    def make_nothing(num_envs):
        return 42
''')


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "my_sim.py").write_text(MODULE)
    (tmp_path / "broken_sim.py").write_text("import not_a_module_anywhere\n")
    test_dir = Path(__file__).parent
    (tmp_path / "tests_rsl.py").write_text((test_dir / "test_rsl_rl_env.py").read_text())
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "my_sim"
    for name in ("my_sim", "broken_sim", "tests_rsl"):
        sys.modules.pop(name, None)


def error_of(env_id: str, cfg: dict | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        build_env(env_id, 2, "cpu", cfg)
    assert "\n" not in str(info.value)
    return str(info.value)


def test_batched_env_class_and_factory(user_module: str) -> None:
    env = build_env("my_sim:MyPole", 3, "cpu", {"max_episode_steps": 9})
    assert type(env).__name__ == "MyPole" and env.num_envs == 3 and env.max_episode_steps == 9
    made = build_env("my_sim:make_pole", 2, "cpu", {"max_episode_steps": 4})
    assert isinstance(made, CartPole) and made.max_episode_steps == 4


def test_gymnasium_class_and_gymnasiums_own_module_id_form(user_module: str) -> None:
    env = build_env("my_sim:Line", 2, "cpu")
    assert isinstance(env, GymnasiumEnv) and env.obs_shape == (2,)
    registered = build_env("my_sim:LineRegistered-v0", 2, "cpu")
    assert isinstance(registered, GymnasiumEnv) and registered.max_episode_steps == 7


def test_rsl_rl_factory_is_wrapped(user_module: str) -> None:
    env = build_env("my_sim:make_rsl", 3, "cpu")
    assert isinstance(env, RslRlEnv) and env.num_envs == 3


def test_errors_name_the_module_and_the_problem(user_module: str) -> None:
    assert error_of("broken_sim:make") == (
        "env.id: cannot import module 'broken_sim' "
        "(ModuleNotFoundError: No module named 'not_a_module_anywhere')"
    )
    assert error_of("my_sim:Nope") == (
        "env.id: module 'my_sim' has no attribute 'Nope' and registered no gymnasium id of that name"
    )
    assert error_of("my_sim:make_nothing").startswith("env.id: my_sim:make_nothing returned a int;")
    assert error_of("my_sim:make_pole", {"num_envs": 3}) == (
        "env.cfg.num_envs: set by trainer.num_envs, not env.cfg"
    )
    assert error_of("my_sim:make_pole", {"gravity": 3}) == (
        "env.cfg.gravity: unknown argument of my_sim:make_pole; accepted: max_episode_steps"
    )
    assert error_of(":make").startswith("env.id: ':make' is not of the form")


def test_entry_points_are_built_and_listed(user_module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    point = EntryPoint(name="MyPole-v0", value="my_sim:MyPole", group=plugins.ENTRY_POINT_GROUP)
    # the one place entry points are read (env ids, algorithm and policy names alike)
    monkeypatch.setattr(references, "entry_points", lambda group: [point] if group == point.group else [])
    assert type(build_env("MyPole-v0", 2, "cpu")).__name__ == "MyPole"
    listing = env_ids_by_backend(("torch", "plugins", "gymnasium"))
    assert listing["plugins"] == ["MyPole-v0 = my_sim:MyPole"]
    assert "CartPole" in listing["torch"] and "CartPole-v1" in listing["gymnasium"]


def test_a_module_in_the_working_directory_is_not_imported(tmp_path, monkeypatch):
    (tmp_path / "cwd_sim.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)
    path_before = list(sys.path)
    assert error_of("cwd_sim:make_pole") == (
        "env.id: cannot import module 'cwd_sim' (ModuleNotFoundError: No module named 'cwd_sim'); it is "
        "imported from the installed packages and PYTHONPATH, never the working directory: install its "
        "package or add its folder to PYTHONPATH"
    )
    assert sys.path == path_before and "cwd_sim" not in sys.modules
    monkeypatch.syspath_prepend(str(tmp_path))  # the documented way: PYTHONPATH=.
    assert type(build_env("cwd_sim:MyPole", 2, "cpu")).__name__ == "MyPole"
    sys.modules.pop("cwd_sim", None)
