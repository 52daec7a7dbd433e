"""The build-time key-flow check: the advantage and the update read only keys written upstream."""

from __future__ import annotations

import pytest
from _offline_fixtures import tiny_cfg

from rlpipe.config import ConfigError
from rlpipe.trainer import Trainer
from rlpipe.trainer.parts import check_key_flow


def test_the_built_pipeline_declares_what_its_stages_really_read(tmp_path):
    parts = Trainer(tiny_cfg(tmp_path), store=False, evaluate=False).parts
    algo = parts.algo
    # GAE's time-limit bootstrap reads truncated and final_value: both must be declared
    assert {"reward", "done", "value", "truncated", "final_value"} <= set(algo.advantage_reads)
    assert {"obs", "action", "sample_log_prob", "advantage", "return"} <= set(algo.update_reads)
    check_key_flow(parts.collector.writes, algo)  # the real order passes


def test_an_update_reading_a_key_nobody_wrote_names_the_stage_and_the_key(tmp_path):
    parts = Trainer(tiny_cfg(tmp_path), store=False, evaluate=False).parts

    class NoAdvantage(type(parts.algo)):
        advantage_keys = ("return",)  # forgets to declare the advantage it writes

    parts.algo.__class__ = NoAdvantage
    with pytest.raises(ConfigError, match=r"NoAdvantage's update reads 'advantage'"):
        check_key_flow(parts.collector.writes, parts.algo)


def test_a_collector_that_writes_no_final_value_breaks_the_advantage_stage(tmp_path):
    parts = Trainer(tiny_cfg(tmp_path), store=False, evaluate=False).parts
    writes = tuple(k for k in parts.collector.writes if k != "final_value")
    with pytest.raises(ConfigError, match=r"PPO's advantage reads 'final_value'"):
        check_key_flow(writes, parts.algo)
