"""rlpipe.offline.replay.replay_config: the replay overrides merged over the run's algorithm block."""

from __future__ import annotations

from _offline_fixtures import tiny_cfg

from rlpipe.offline.replay import replay_config


def test_a_null_override_keeps_the_runs_value_so_sweeps_replay_bit_exact(tmp_path):
    # params.yaml lists replay.algorithm.cfg.clip_coef: null so that `dvc exp run -S` can set it.
    cfg = tiny_cfg(tmp_path, "algorithm.cfg.clip_coef=0.1", "replay.algorithm={cfg: {clip_coef: null}}")
    assert replay_config(cfg).algorithm == cfg.algorithm
    changed = tiny_cfg(tmp_path, "algorithm.cfg.clip_coef=0.1", "replay.algorithm={cfg: {clip_coef: 0.3}}")
    assert replay_config(changed).algorithm.cfg.clip_coef == 0.3
