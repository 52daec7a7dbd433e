"""The default ``rlpipe run``: bit for bit where one machine promises it, to a tolerance across CPUs.

``docs/determinism.md`` states the promise. On one machine and torch build a run is bit-exact: its
replay equals it, and the library calls (``RLPIPE_FAST=0``) equal the fast paths — both checked
against runs made here. The committed fixture was recorded on some CPU; it is held only to what no
CPU changes (``golden.machine_independent``): the first rollout's env-side arrays exactly, the
policy's outputs and the first update's metrics to a tolerance, the layout, and the run solved.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from golden import FIXTURE, machine_independent, run_default, run_fingerprint

REPO = Path(__file__).resolve().parents[2]

REL_TOL = 1e-4
"""Relative tolerance of the policy's outputs and of the first update's metrics across CPUs.

Another CPU's MKL and ATen kernels round matmuls, ``tanh`` and reductions differently in the last
bit (relative 1e-7); the first update's 40 optimizer steps carry that to about 1e-6. The curve
rounds metrics to 6 significant digits, so 1e-4 still catches any change of the maths.
"""
ABS_TOL = 1e-6
"""Absolute tolerance for values near zero (a mean log-probability, a policy loss)."""


@pytest.fixture(scope="module")
def fast_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default run and its replay, fast paths on (``RLPIPE_FAST=1``)."""
    return run_default(tmp_path_factory.mktemp("fast"), REPO / "params.yaml", env={"RLPIPE_FAST": "1"})


def _close(expected: float, got: float) -> bool:
    return math.isclose(expected, got, rel_tol=REL_TOL, abs_tol=ABS_TOL)


def test_the_fixture_holds_what_no_cpu_changes(fast_run: Path) -> None:
    expected = json.loads(FIXTURE.read_text())
    got = machine_independent(fast_run)
    assert got["rollout_1_env"] == expected["rollout_1_env"]
    assert got["rollout_layout"] == expected["rollout_layout"]
    assert got["checkpoint_entries"] == expected["checkpoint_entries"]
    for key, stats in expected["rollout_1_policy_stats"].items():
        pairs = zip(stats, got["rollout_1_policy_stats"][key])
        assert all(_close(a, b) for a, b in pairs), (key, stats, got["rollout_1_policy_stats"][key])
    for key, value in expected["first_update"].items():
        assert _close(value, got["first_update"][key]), (key, value, got["first_update"][key])
    assert expected["solved"] and got["solved"]


def test_replay_reproduces_the_online_run_bit_for_bit(fast_run: Path) -> None:
    got = run_fingerprint(fast_run)
    online = got["checkpoints"]
    replayed = {name: got["replay_checkpoints"][name] for name in online}
    for name, entries in online.items():
        learner = {k: v for k, v in entries.items() if k.startswith(("policy/", "algo/"))}
        assert learner and {k: replayed[name][k] for k in learner} == learner, name
    update = [{k: v for k, v in row.items() if k.startswith("update/")} for row in got["curve"]]
    assert update == [
        {k: v for k, v in row.items() if k.startswith("update/")} for row in got["replay_curve"]
    ]


def _update_columns(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    return [{k: v for k, v in row.items() if k.startswith("update/")} for row in rows]


def test_the_library_calls_give_the_fast_paths_run_bit_for_bit(fast_run: Path, tmp_path: Path) -> None:
    library = run_default(tmp_path, REPO / "params.yaml", env={"RLPIPE_FAST": "0"})
    fast, slow = run_fingerprint(fast_run), run_fingerprint(library)
    assert fast["checkpoints"] and len(fast["rollouts"]) == len(fast["curve"]) >= 10
    assert _differences(fast, slow) == []


def _differences(a: dict, b: dict) -> list[str]:
    """``section/entry`` names (checkpoints, rollouts) or sections (curves) where two fingerprints differ."""
    out = []
    for section in sorted(a.keys() | b.keys()):
        x, y = a.get(section), b.get(section)
        if isinstance(x, dict) and isinstance(y, dict):
            out += [f"{section}/{k}" for k in sorted(x.keys() | y.keys()) if x.get(k) != y.get(k)]
        elif x != y:
            out.append(section)
    return out
