"""Helpers of test_offline.py, test_cli_stages.py and test_resume.py: tiny params, learner comparison."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from rlpipe import config
from rlpipe.artifacts.checkpoints import load_checkpoint
from rlpipe.config import RunConfig

ROOT = Path(__file__).resolve().parents[1]
PARAMS = ROOT / "params.yaml"
STEPS = 8 * 16
"""Env steps per iteration of TINY: N=8 envs × T=16."""
TINY = (
    "trainer.device=cpu",
    "trainer.num_envs=8",
    "trainer.buffer_size=16",
    "trainer.iterations=4",
    f"trainer.save_freq={2 * STEPS}",
    "trainer.enable_eval=false",
    "trainer.num_eval_envs=2",
    "tracking.backend=none",
    "policy.actor.network_cfg.hidden_sizes=[16,16]",
    "policy.critic.network_cfg.hidden_sizes=[16,16]",
    "algorithm.cfg.batch_size=64",
    "algorithm.cfg.n_epochs=2",
    "eval.num_envs=2",
    "eval.num_episodes=1",
)
"""4 iterations of 128 steps, checkpoints at iterations 2 and 4 (save_freq = 2 iterations)."""


def tiny_overrides(data_dir: Path, *extra: str) -> list[str]:
    return [*TINY, f"trainer.data_dir={data_dir}", *extra]


def tiny_cfg(data_dir: Path, *extra: str) -> RunConfig:
    return config.load(PARAMS, tiny_overrides(data_dir, *extra))


def set_args(data_dir: Path, *extra: str) -> list[str]:
    """The same overrides as ``--set`` CLI arguments."""
    return [arg for item in tiny_overrides(data_dir, *extra) for arg in ("--set", item)]


def leaves(obj: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every leaf of a nested state dict, keyed by its path."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from leaves(value, f"{prefix}/{key}")
    elif isinstance(obj, list | tuple):
        for i, value in enumerate(obj):
            yield from leaves(value, f"{prefix}/{i}")
    else:
        yield prefix, obj


def learner(path: Path) -> dict[str, Any]:
    """``{path: leaf}`` of a checkpoint's policy and algorithm (optimizer) state."""
    state = load_checkpoint(path)
    return dict(leaves({"policy": state["policy"], "algo": state["algo"]}))


def same_leaves(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Same keys; tensors equal bit for bit (``torch.equal``), other leaves equal."""
    if a.keys() != b.keys():
        return False
    return all(torch.equal(x, b[k]) if isinstance(x, torch.Tensor) else x == b[k] for k, x in a.items())


def assert_same_learner(a: Path, b: Path) -> None:
    la, lb = learner(a), learner(b)
    assert la.keys() == lb.keys()
    tensors = [k for k, v in la.items() if isinstance(v, torch.Tensor)]
    assert len(tensors) >= 12  # 6 weights/biases per network (+ Adam state): not a vacuous pass
    differ = [k for k in la if not same_leaves({k: la[k]}, {k: lb[k]})]
    assert not differ, f"{a} and {b} differ in {differ[:5]}"
