"""SAC and TD3 learn the torch Pendulum through the Trainer, from ``configs/sac_pendulum.yaml``.

A uniformly random policy returns about −1200 per 200-step episode and an untrained deterministic
actor about −1500; a swung-up pendulum held upright returns about −150. TD3 with 4 envs and one
gradient step per env step gets there in about 7000 env steps; the default suite runs one seed,
the slow suite sweeps seeds and SAC.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rlpipe.config import load
from rlpipe.trainer import Trainer

ROOT = Path(__file__).resolve().parents[2]
LEARNED = -400.0
"""Far above an untrained or random policy, well below what seeds 0–3 reach (−150 to −185)."""


def pendulum_run(tmp_path: Path, name: str, seed: int, iterations: int) -> Trainer:
    overrides = [
        f"trainer.data_dir={tmp_path}",
        "tracking.backend=none",
        "store.enabled=false",
        "trainer.device=cpu",
        f"trainer.seed={seed}",
        f"trainer.iterations={iterations}",
        "trainer.num_envs=4",
        "trainer.buffer_size=50",
        "trainer.eval_freq=1000000",  # one eval, at the end
        "trainer.save_freq=1000000",
        "trainer.num_eval_envs=8",
        f"algorithm.name={name}",
        "policy.actor.network_cfg.hidden_sizes=[64, 64]",
        "algorithm.cfg.critic.hidden_sizes=[64, 64]",
        "algorithm.cfg.batch_size=128",
        "algorithm.cfg.learning_starts=1000",
        "algorithm.cfg.random_steps=1000",
        "algorithm.cfg.updates_per_step=4",  # one gradient step per env step of the 4 envs
    ]
    if name == "td3":
        overrides.append("policy.distribution=tanh_deterministic")
    return Trainer(load(ROOT / "configs" / "sac_pendulum.yaml", overrides))


def test_td3_swings_the_pendulum_up(tmp_path):
    trainer = pendulum_run(tmp_path, "td3", 0, 35)
    before = trainer.evaluate(film=False)["eval/return_mean"]
    summary = trainer.train()
    assert before < -900.0, before  # the untrained actor does not (so the bar below means learning)
    assert summary["env_steps"] == 35 * 200
    assert summary["eval/return_mean"] > LEARNED, summary


@pytest.mark.slow
@pytest.mark.parametrize(("name", "iterations"), [("td3", 35), ("sac", 50)])
def test_sac_and_td3_learn_on_every_seed(tmp_path, name, iterations):
    returns = {
        seed: pendulum_run(tmp_path / str(seed), name, seed, iterations).train()["eval/return_mean"]
        for seed in range(3)
    }
    assert all(value > LEARNED for value in returns.values()), returns
