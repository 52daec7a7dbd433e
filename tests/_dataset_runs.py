"""A tiny CartPole run with every rollout stored, for the dataset tests (about 3 s)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from rlpipe.cli import cli

ROOT = Path(__file__).resolve().parents[1]
TINY = (
    "trainer.device=cpu",
    "trainer.num_envs=4",
    "trainer.buffer_size=32",
    "trainer.iterations=3",
    "trainer.enable_eval=false",
    "tracking.backend=none",
    "policy.actor.network_cfg.hidden_sizes=[16]",
    "policy.critic.network_cfg.hidden_sizes=[16]",
    "algorithm.cfg.batch_size=64",
    "algorithm.cfg.n_epochs=1",
    "trainer.stop_when=[]",
)
"""3 iterations of 4 CartPole envs × 32 steps: episodes end inside and across the stores."""


def tiny_run(data: Path, *extra: str) -> Path:
    args = ["run", str(ROOT / "params.yaml")]
    for item in (*TINY, f"trainer.data_dir={data}", *extra):
        args += ["--set", item]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return data / "cartpole_ppo"
