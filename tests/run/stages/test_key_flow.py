"""The build-time key-flow check: a stage that reads a key no earlier stage writes is refused."""

from __future__ import annotations

import pytest
from _offline_fixtures import tiny_cfg

from rlpipe.config import ConfigError
from rlpipe.run import build
from rlpipe.run.stages import AdvantageStage, Stage, UpdateStage, check_key_flow


def test_the_built_pipeline_declares_what_its_stages_really_read(tmp_path):
    exp = build(tiny_cfg(tmp_path), store=False, evaluate=False)
    # GAE's time-limit bootstrap reads truncated and final_value: both must be declared
    assert {"reward", "done", "value", "truncated", "final_value"} <= set(exp.advantage.reads)
    assert {"obs", "action", "sample_log_prob", "advantage", "return"} <= set(exp.update.reads)
    check_key_flow([exp.collect, exp.advantage, exp.update])  # the real order passes


def test_a_stage_reading_a_key_nobody_wrote_names_the_stage_and_the_key(tmp_path):
    exp = build(tiny_cfg(tmp_path), store=False, evaluate=False)
    with pytest.raises(ConfigError, match=r"stage UpdateStage reads 'advantage'"):
        check_key_flow([exp.collect, exp.update, exp.advantage])  # update before advantage


def test_a_collector_that_writes_no_final_value_breaks_the_advantage_stage(tmp_path):
    exp = build(tiny_cfg(tmp_path), store=False, evaluate=False)

    class NoFinalValue(Stage):
        writes = tuple(k for k in exp.collect.writes if k != "final_value")

    with pytest.raises(ConfigError, match=r"AdvantageStage reads 'final_value'"):
        check_key_flow([NoFinalValue(), AdvantageStage(exp.learner), UpdateStage(exp.learner)])
