"""Resume's comparison of training params: each differing key with both values; defaults are implicit."""

from __future__ import annotations

import pytest
from _offline_fixtures import PARAMS

from rlpipe import config
from rlpipe.config import ConfigError, training_params
from rlpipe.config.hashing import refuse_other_training

DISTILL = ("algorithm.name=distillation", "algorithm.cfg={teacher: t}")


def distill(*extra: str) -> config.RunConfig:
    return config.load(PARAMS, [*DISTILL, *extra])


def test_a_default_made_explicit_is_the_same_training_and_a_change_names_both_values():
    written = {"training_params": training_params(distill())}  # learning_rate left at its default
    refuse_other_training("ckpt", written, distill("algorithm.cfg.learning_rate=0.001"))
    line = r"^ckpt: checkpoint was written with other training params \(algorithm.cfg.learning_rate: 0.001 "
    with pytest.raises(ConfigError, match=line + r"in the checkpoint, 0.01 now\)"):
        refuse_other_training("ckpt", written, distill("algorithm.cfg.learning_rate=0.01"))


def test_a_length_key_may_change_only_where_the_command_says_so():
    written = {"training_params": training_params(distill())}
    longer = distill("algorithm.cfg.offline_passes=3")
    refuse_other_training("ckpt", written, longer, (("algorithm", "cfg", "offline_passes"),))
    with pytest.raises(ConfigError, match=r"algorithm.cfg.offline_passes: 1 in the checkpoint, 3 now\)"):
        refuse_other_training("ckpt", written, longer)
