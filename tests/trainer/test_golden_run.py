"""The default ``rlpipe run`` and its ``rlpipe replay`` reproduce the recorded fixture bit for bit."""

from __future__ import annotations

import json
from pathlib import Path

from golden import FIXTURE, run_default, run_fingerprint

REPO = Path(__file__).resolve().parents[2]


def _first_difference(expected: object, got: object, path: str = "") -> str | None:
    if isinstance(expected, dict) and isinstance(got, dict):
        for key in sorted(set(expected) | set(got)):
            if key not in got or key not in expected:
                return f"{path}/{key}: only in {'the fixture' if key in expected else 'this run'}"
            found = _first_difference(expected[key], got[key], f"{path}/{key}")
            if found:
                return found
        return None
    if isinstance(expected, list) and isinstance(got, list):
        if len(expected) != len(got):
            return f"{path}: {len(expected)} entries recorded, {len(got)} now"
        for i, (a, b) in enumerate(zip(expected, got)):
            found = _first_difference(a, b, f"{path}/{i}")
            if found:
                return found
        return None
    return None if expected == got else f"{path}: {expected!r} recorded, {got!r} now"


def test_default_run_and_replay_reproduce_the_recorded_fixture(tmp_path: Path) -> None:
    expected = json.loads(FIXTURE.read_text())
    run_dir = run_default(tmp_path, REPO / "params.yaml", env={"RLPIPE_FAST": "1"})
    got = json.loads(json.dumps(run_fingerprint(run_dir)))
    assert _first_difference(expected, got) is None, _first_difference(expected, got)
    assert got["checkpoints"] and len(got["rollouts"]) == len(got["curve"]) >= 10
