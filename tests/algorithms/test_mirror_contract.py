"""The mirror function checked on a sample batch: every way it can break is one line naming the key."""

from __future__ import annotations

import re

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from rlpipe.algorithms.mirror_contract import check_mirror, check_signature, sample_rows
from rlpipe.algorithms.symmetry import Symmetry
from rlpipe.config import ConfigError
from rlpipe.config.algorithms import SymmetryCfg
from rlpipe.envs.tasks.symmetry import cartpole_mirror, pendulum_mirror

CARTPOLE_OBS, CARTPOLE_ACT = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2)
PENDULUM_OBS, PENDULUM_ACT = gym.spaces.Box(-8.0, 8.0, (3,), np.float32), gym.spaces.Box(-2.0, 2.0, (1,))
GROUPS = gym.spaces.Dict({"proprio": gym.spaces.Box(-1, 1, (2,)), "privileged": gym.spaces.Box(-1, 1, (2,))})
KEY = "algorithm.cfg.symmetry.function: "


def error(function, obs_space=CARTPOLE_OBS, action_space=CARTPOLE_ACT) -> str:
    with pytest.raises(ConfigError) as info:
        check_signature(function, "my:mirror")
        check_mirror(function, "my:mirror", obs_space, action_space, "cpu")
    message = str(info.value)
    assert "\n" not in message and message.startswith(KEY + "my:mirror ")
    assert message.endswith("None for None") or message.endswith("None for None)")  # what is accepted
    return message.removeprefix(KEY + "my:mirror ")


def doubled(x):
    return None if x is None else torch.cat([x, x])


def test_the_shipped_mirrors_pass():
    check_mirror(cartpole_mirror, "cartpole", CARTPOLE_OBS, CARTPOLE_ACT, "cpu")
    check_mirror(pendulum_mirror, "pendulum", PENDULUM_OBS, PENDULUM_ACT, "cpu")


def test_a_function_that_does_not_take_the_keywords_is_never_called():
    import os

    assert error(os.system).startswith(
        "takes (command), not obs=, actions=, env=; accepted: a function "
        "f(obs=None, actions=None, env=None) returning (obs, actions)"
    )
    assert error(lambda batch: batch).startswith("takes (batch), not obs=")


def test_returning_none_or_raising_names_what_happened():
    assert error(lambda obs=None, actions=None, env=None: None).startswith(
        "returned None, not a pair (obs, actions); accepted: "
    )

    def boom(obs=None, actions=None, env=None):
        raise RuntimeError("kaboom")

    assert error(boom).startswith("raised RuntimeError: kaboom (called with obs [3, 4], actions [3]); ")

    def no_none(obs=None, actions=None, env=None):  # crashes on the mirror loss's call (actions=None)
        return doubled(obs), torch.cat([actions, 1 - actions])

    assert error(no_none).startswith("raised TypeError: ")
    assert "(called with obs [3, 4], actions None)" in error(no_none)


def test_wrong_width_rows_order_and_copies_are_refused():
    def narrow(obs=None, actions=None, env=None):
        return (None if obs is None else doubled(obs)[:, :2]), doubled(actions)

    assert error(narrow).startswith("returned [6, 2] observations for [3, 4]; expected [K·3, 4] (accepted: ")

    def mirrored_first(obs=None, actions=None, env=None):
        return (None if obs is None else torch.cat([-obs, obs])), cartpole_mirror(actions=actions)[1]

    assert error(mirrored_first).startswith(
        "returned observations whose first 3 rows are not the ones it was given; "
    )

    def uneven(obs=None, actions=None, env=None):
        return doubled(obs), (None if actions is None else torch.cat([actions, 1 - actions, actions]))

    assert error(uneven).startswith("returns different numbers of copies (observations ×2, actions ×3, ")


def test_a_categorical_mirror_must_permute_the_action_indices():
    def collapse(obs=None, actions=None, env=None):
        return doubled(obs), (None if actions is None else torch.cat([actions, torch.zeros_like(actions)]))

    assert error(collapse).startswith(
        "maps the action indices 0..1 to [0, 0], not to a permutation of them; "
    )


def test_observation_groups_are_checked_per_group():
    def swap(obs=None, actions=None, env=None):
        mirrored = None if obs is None else torch.cat([obs, obs.apply(torch.neg)])
        return mirrored, (None if actions is None else torch.cat([actions, -actions]))

    check_mirror(swap, "swap", GROUPS, PENDULUM_ACT, "cpu")

    def drop_group(obs=None, actions=None, env=None):
        kept = None if obs is None else TensorDict({"proprio": doubled(obs["proprio"])}, batch_size=[6])
        return kept, doubled(actions)

    assert re.match(
        r"returned \[6, \{proprio: \[2\]\}\] observations for \[3, \{privileged: \[2\], "
        r"proprio: \[2\]\}\]",
        error(drop_group, GROUPS, PENDULUM_ACT),
    )


def test_the_sample_leaves_the_envs_space_and_rng_alone():
    space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    space.seed(5)
    expected = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    expected.seed(5)
    torch.manual_seed(0)
    before = torch.rand(1)
    torch.manual_seed(0)
    batch = sample_rows(space, "cpu")
    assert batch.shape == (3, 3) and batch.dtype == torch.float32 and (batch.abs() <= 1).all()
    assert torch.rand(1) == before
    assert np.array_equal(space.sample(), expected.sample())
    assert sample_rows(gym.spaces.Box(0, 255, (2, 4, 4), np.uint8), "cpu").dtype == torch.uint8
    assert sample_rows(gym.spaces.MultiBinary(3), "cpu") is None


def test_a_failure_during_training_names_the_key_too(monkeypatch):
    spec = "rlpipe.envs.tasks.symmetry:pendulum_mirror"
    symmetry = Symmetry(SymmetryCfg(function=spec, data_augmentation=True))
    monkeypatch.setattr(symmetry, "function", lambda obs=None, actions=None, env=None: 1 / 0)
    mb = {"obs": torch.randn(4, 3), "action": torch.randn(4, 1)}
    with pytest.raises(
        ConfigError,
        match="^" + KEY + r"rlpipe\.envs\.tasks\.symmetry:pendulum_mirror raised "
        "ZeroDivisionError: division by zero",
    ):
        symmetry.augment(mb)
