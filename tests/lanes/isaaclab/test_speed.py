"""Env steps/s of rsl_rl's own runner and of rlpipe on the same Isaac Lab env object (printed, as JSON)."""

from __future__ import annotations

import json

from _lane import NUM_ENVS, ROOT, TASK, run


def test_rsl_rl_and_rlpipe_step_the_same_isaaclab_env(tmp_path):
    out = tmp_path / "isaaclab_vs_rsl_rl.json"
    script = ROOT / "benchmarks" / "peers" / "isaaclab_vs_rsl_rl.py"
    table = run(script, "--task", TASK, "--num-envs", NUM_ENVS, "--iterations", 3, "--json", out).stdout
    print(table)
    results = json.loads(out.read_text())
    assert (results["task"], results["num_envs"], results["device"]) == (TASK, NUM_ENVS, "cpu")
    for side in ("rsl_rl", "rlpipe", "rlpipe+store"):
        assert results[side] > 0, results
