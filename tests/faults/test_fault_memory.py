"""Sizes beyond the machine's memory: one line naming the key, exit 2, before any allocation or write.

The commands run under an 8 GB address-space cap, so a regression fails fast instead of eating the
machine's memory.
"""

from __future__ import annotations

import resource

import pytest
from _fault_harness import error_line, rlpipe, run_command

CAP = 8 * 2**30


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("trainer.num_envs=1000000000", "trainer.num_envs"),
        ("algorithm.cfg.rnd={hidden_sizes: [1000000000]}", "algorithm.cfg.rnd.hidden_sizes"),
    ],
)
def test_sizes_beyond_memory_are_refused_before_allocating(tmp_path, override, key):
    result = rlpipe(*run_command(tmp_path, override), preexec=_capped, timeout=120)
    assert result.returncode == 2, result.stderr[-800:]
    line = error_line(result)
    assert line.startswith(f"Error: {key}: the run needs about ")
    assert line.endswith(f" is available; lower {key}")
    assert list(tmp_path.iterdir()) == []  # no run dir, no params.yaml
