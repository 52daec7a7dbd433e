"""Mixed precision of the PPO update: bf16 autocast against fp32 on the massive-batch workload.

    .venv/bin/python benchmarks/speed/amp.py [--threads 1 2] [--pairs 10] [--iteration] [--json PATH]

Actor and critic are 256×256 ReLU MLPs over CartPole's observation (dim 4) and action space
(Discrete(2)), built with ``rlpipe.policies.build_policy``; two PPOs (``algorithm.cfg.amp`` none and
bf16) start from the same weights.

* ``step`` (always): one minibatch of 16384 transitions — the policy's forward, the PPO loss, the
  backward and one Adam step — timed as ``algo.update`` on a 512 × 32 rollout with
  ``n_epochs: 1, num_mini_batches: 1`` (advantages are computed once, before timing).
* ``iteration`` (``--iteration``): a whole iteration (``Trainer.step`` of a started
  ``rlpipe.trainer.Trainer``, console rows captured) of the throughput workload (torch CartPole,
  N = 4096 envs × T = 32, 4 epochs × 8 minibatches of 16384, store off, no eval): collection stays
  fp32, so this is the ratio a user sees per iteration.

fp32 and bf16 alternate (the order flips every pair) for ``--pairs`` pairs after a warm-up, for each
``--threads`` value (``torch.set_num_threads``); the table gives the median seconds and the median
of the per-pair ratios bf16/fp32. The CPU's bf16 support (``avx512_bf16``, ``amx_bf16`` in
/proc/cpuinfo) is printed: without it bf16 is emulated and slower. Target: ratio ≤ 0.5.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

import gymnasium as gym
import torch
from _bench import (
    DEFAULT_PARAMS,
    NEVER,
    load_cfg,
    median,
    paired_ratios,
    print_table,
    start_quietly,
    timed,
    write_json,
)

from rlpipe.algorithms import build_algo
from rlpipe.policies import build_policy
from rlpipe.rollout import allocate_rollout
from rlpipe.trainer import Trainer

NET = {"type": "mlp", "network_cfg": {"hidden_sizes": [256, 256], "activation": "relu"}}
STEP_ENVS, STEP_T = 512, 32  # one minibatch of 16384
ITERATION_OVERRIDES = [
    "trainer.num_envs=4096",
    "trainer.buffer_size=32",
    "trainer.enable_eval=false",
    f"trainer.save_freq={NEVER}",
    "store.enabled=false",
    "tracking.backend=none",
    "policy.actor.network_cfg={hidden_sizes: [256, 256], activation: relu}",
    "policy.critic.network_cfg={hidden_sizes: [256, 256], activation: relu}",
    "algorithm.cfg.n_epochs=4",
    "algorithm.cfg.num_mini_batches=8",
]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--threads",
        type=int,
        nargs="+",
        default=[1, torch.get_num_threads()],
        help="torch.set_num_threads values to measure (default: 1 and torch's default)",
    )
    parser.add_argument("--pairs", type=int, default=10, help="fp32/bf16 pairs per measurement")
    parser.add_argument("--warmup", type=int, default=2, help="untimed calls of each side first")
    parser.add_argument("--iteration", action="store_true", help="also time whole pipeline iterations")
    parser.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    return parser.parse_args()


def cpu_bf16_flags() -> list[str]:
    """Native bf16 instruction sets the CPU advertises."""
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return []
    return sorted({f for f in flags if f in ("avx512_bf16", "amx_bf16", "amx_tile")})


def step_workload() -> dict[str, Any]:
    """``{amp: zero-argument callable}``: one 16384-transition minibatch update each."""
    obs_space, action_space = gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2)
    torch.manual_seed(0)
    base = build_policy({"name": "actor_critic", "actor": NET, "critic": NET}, obs_space, action_space, "cpu")
    rollout = allocate_rollout(STEP_ENVS, STEP_T, (4,), (), torch.int64, "cpu")
    rollout["obs"].normal_()
    rollout["action"][:, :-1] = torch.randint(0, 2, (STEP_ENVS, STEP_T))
    rollout["sample_log_prob"][:, :-1] = math.log(0.5)
    rollout["reward"][:, :-1] = 1.0
    rollout["value"].normal_()
    calls = {}
    for amp in ("none", "bf16"):
        policy = build_policy(
            {"name": "actor_critic", "actor": NET, "critic": NET}, obs_space, action_space, "cpu"
        )
        policy.load_state_dict(base.state_dict())
        algo = build_algo("ppo", {"amp": amp, "n_epochs": 1, "num_mini_batches": 1}, policy, "cpu")
        algo.compute_advantages(rollout)
        calls[amp] = lambda algo=algo: algo.update(rollout)
    return calls


def iteration_workload(stack: list[Trainer]) -> dict[str, Any]:
    """``{amp: zero-argument callable}``: one iteration of the throughput workload each.

    The started trainers are appended to ``stack`` (the caller closes them).
    """
    calls = {}
    for amp in ("none", "bf16"):
        data_dir = tempfile.mkdtemp(prefix="rlpipe-amp-")
        cfg = load_cfg(
            DEFAULT_PARAMS,
            [
                *ITERATION_OVERRIDES,
                f"algorithm.cfg.amp={amp}",
                f"trainer.data_dir={data_dir}",
                "trainer.iterations=1000000",
            ],
        )
        trainer = start_quietly(Trainer(cfg))
        stack.append(trainer)
        calls[amp] = trainer.step
    return calls


def measure(calls: dict[str, Any], pairs: int, warmup: int) -> dict[str, Any]:
    """Interleaved timing of ``calls['none']`` and ``calls['bf16']``; medians and the paired ratio."""
    for _ in range(warmup):
        calls["none"]()
        calls["bf16"]()
    times: dict[str, list[float]] = {"none": [], "bf16": []}
    for pair in range(pairs):
        for amp in ("none", "bf16") if pair % 2 == 0 else ("bf16", "none"):
            times[amp].append(timed(calls[amp])[0])
    return {
        "fp32_s": median(times["none"]),
        "bf16_s": median(times["bf16"]),
        "ratio": median(paired_ratios(times["bf16"], times["none"])),
        "times": times,
    }


COLUMNS = [
    ("workload", "workload", ""),
    ("threads", "threads", ""),
    ("fp32_s", "fp32 s", ".4f"),
    ("bf16_s", "bf16 s", ".4f"),
    ("ratio", "bf16/fp32", ".3f"),
]


def main() -> None:
    args = parse_args()
    flags = cpu_bf16_flags()
    print(f"CPU bf16 support: {', '.join(flags) if flags else 'none (bf16 is emulated)'}")
    rows = []
    for threads in args.threads:
        torch.set_num_threads(threads)
        rows.append(
            {"workload": "step", "threads": threads, **measure(step_workload(), args.pairs, args.warmup)}
        )
        print(f"step, {threads} thread(s): ratio {rows[-1]['ratio']:.3f}", flush=True)
        if args.iteration:
            keep: list[Trainer] = []
            try:
                rows.append(
                    {
                        "workload": "iteration",
                        "threads": threads,
                        **measure(iteration_workload(keep), max(args.pairs // 3, 2), 1),
                    }
                )
            finally:
                for trainer in reversed(keep):
                    trainer.close()
            print(f"iteration, {threads} thread(s): ratio {rows[-1]['ratio']:.3f}", flush=True)
    print("\nPPO update, bf16 autocast vs fp32 (256x256 ReLU actor+critic, minibatch 16384)")
    print_table(rows, COLUMNS)
    write_json(args.json, {"benchmark": "amp", "cpu_bf16_flags": flags, "rows": rows, "target_ratio": 0.5})


if __name__ == "__main__":
    main()
