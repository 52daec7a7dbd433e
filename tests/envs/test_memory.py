"""RepeatFirst: the cue is visible only at the first step and must be repeated at the last."""

from __future__ import annotations

import pytest
import torch

from rlpipe.config import ConfigError
from rlpipe.envs import RepeatFirst, build_env


def test_cue_shows_only_first_and_the_last_step_rewards_repeating_it():
    env = build_env("RepeatFirst", 64, "cpu", {"length": 4})
    obs = env.reset(seed=3)
    cue = (obs[:, 0] > 0).long()
    assert obs[:, 1].eq(1).all() and obs[:, 0].abs().eq(1).all() and obs[:, 2].eq(0).all()
    assert 0 < int(cue.sum()) < 64  # both cues occur
    for t in range(1, 4):
        step = env.step(torch.zeros(64, dtype=torch.int64))
        assert step.reward.eq(0).all() and not step.terminated.any()
        expected = torch.tensor([0.0, 0.0, float(t == 3)])
        assert torch.equal(step.obs, expected.expand(64, 3))  # blank: no trace of the cue
    last = env.step(1 - cue)  # the wrong answer everywhere but below
    assert last.reward.eq(0).all() and last.terminated.all() and not last.truncated.any()
    assert last.obs[:, 1].eq(1).all()  # auto-reset: a new cue


def test_correct_answer_scores_one():
    env = RepeatFirst(8, "cpu", length=2)
    cue = (env.reset(seed=0)[:, 0] > 0).long()
    env.step(torch.zeros(8, dtype=torch.int64))
    assert env.step(cue).reward.eq(1).all()


def test_length_is_checked():
    with pytest.raises(ConfigError, match="env.cfg.length: got 1; accepted: an int >= 2"):
        build_env("RepeatFirst", 2, "cpu", {"length": 1})
