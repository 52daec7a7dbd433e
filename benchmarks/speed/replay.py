"""Offline replay throughput against the online update, on the massive-batch workload.

    .venv/bin/python benchmarks/speed/replay.py [--warmup 1] [--blocks 3] [--block 2] [--threads N]
        [--num-envs 4096] [--horizon 32] [--hidden 256 256] [--epochs 4] [--batch-size 16384]
        [--device cpu] [--data-dir DIR] [--json PATH]

Workload (as ``throughput.py``): torch CartPole, N=4096 envs × T=32 steps, actor and critic
256×256 ReLU, PPO with 4 epochs × minibatches of 16384. rlpipe is built from ``params.yaml`` with
``--set``-style overrides only: the store on, ``checkpoint.every_iteration=true`` (so replay starts
every rollout from its own checkpoint), no eval, ``tracking.backend=none``.

Online: one ``rlpipe.trainer.Trainer`` (its console rows captured), ``--warmup`` untimed iterations
of ``Trainer.step``, then ``--blocks`` blocks of ``--block`` iterations; a block's online figure is
the sum of its iterations' ``time/update_s`` (advantage + update only: collection, store and
checkpoint excluded).
Offline: after each block, ``rlpipe.offline.replay`` re-updates that block's rollouts with the same
params (non-chain: each from the online checkpoint before it); its figure is the replay loop's
wall time — reading the rollout (prefetched on a thread), loading the checkpoint, advantage +
update, writing the re-updated checkpoint and the metrics row — build excluded. Online and offline
alternate block by block, so a drifting machine load hits both; the ratio is the median of the
per-block ratios of transitions re-optimized per second offline to those optimized per second
online. A warm-up replay of the warm-up rollouts runs first, untimed. Every replayed checkpoint is
compared with the online one (``identical`` column: policy and optimizer equal bit for bit).
Target: ≥ 0.9×.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

import torch
from _bench import (
    NEVER,
    add_workload_args,
    load_cfg,
    median,
    print_table,
    set_threads,
    start_quietly,
    write_json,
)

from rlpipe.artifacts.checkpoints import load_checkpoint
from rlpipe.config import RunConfig
from rlpipe.offline.replay import replay
from rlpipe.trainer import Trainer

RATIO_TARGET = 0.9


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add_workload_args(parser, "trainer.device (default cpu)")
    add("--warmup", type=int, default=1, help="untimed online iterations (default 1)")
    add("--blocks", type=int, default=3, help="online/offline block pairs (default 3)")
    add("--block", type=int, default=2, help="iterations per block (default 2)")
    add("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    add("--data-dir", type=Path, default=None, help="where rollouts and checkpoints go (default: temp)")
    add("--json", type=Path, default=None, help="also write the results as JSON here")
    return parser.parse_args()


def workload(args: argparse.Namespace, data_dir: Path) -> RunConfig:
    net = f"{{hidden_sizes: {list(args.hidden)}, activation: relu}}"
    return load_cfg(
        args.params,
        [
            f"trainer.num_envs={args.num_envs}",
            f"trainer.buffer_size={args.horizon}",
            f"policy.actor.network_cfg={net}",
            f"policy.critic.network_cfg={net}",
            f"algorithm.cfg.n_epochs={args.epochs}",
            f"algorithm.cfg.batch_size={args.batch_size}",
            "store.enabled=true",
            "checkpoint.every_iteration=true",
            "tracking.backend=none",
            "trainer.enable_eval=false",
            f"trainer.device={args.device}",
            f"trainer.data_dir={data_dir}",
            f"trainer.iterations={NEVER}",
            f"trainer.save_freq={NEVER}",
        ],
    )


def same_learner(a: Path, b: Path) -> bool:
    """Policy and algorithm (optimizer) state of two checkpoints equal bit for bit."""

    def flat(obj: Any, key: str = "") -> dict[str, Any]:
        if isinstance(obj, dict):
            return {k: v for name, sub in obj.items() for k, v in flat(sub, f"{key}/{name}").items()}
        if isinstance(obj, list | tuple):
            return {k: v for i, sub in enumerate(obj) for k, v in flat(sub, f"{key}/{i}").items()}
        return {key: obj}

    sa, sb = (load_checkpoint(p) for p in (a, b))
    fa, fb = (flat({"policy": s["policy"], "algo": s["algo"]}) for s in (sa, sb))
    return fa.keys() == fb.keys() and all(
        torch.equal(v, fb[k]) if isinstance(v, torch.Tensor) else v == fb[k] for k, v in fa.items()
    )


def run_blocks(args: argparse.Namespace, data_dir: Path) -> list[dict[str, Any]]:
    cfg = workload(args, data_dir)
    trainer = start_quietly(Trainer(cfg))
    store = trainer.parts.store
    assert store is not None  # the workload stores every rollout
    rollouts, online_ckpts = cfg.run_dir / "rollouts", cfg.run_dir / "checkpoints"
    rows = []
    try:
        for _ in range(args.warmup):
            trainer.step()
        if args.warmup:
            store.flush()
            replay(cfg, rollouts, data_dir / "replay-warmup", iterations=(1, args.warmup))
        for block in range(args.blocks):
            online_s = sum(trainer.step()["time/update_s"] for _ in range(args.block))
            store.flush()
            first, last = trainer.iteration - args.block + 1, trainer.iteration
            out = data_dir / f"replay-{block}"
            summary = replay(cfg, rollouts, out, iterations=(first, last))
            transitions = summary["transitions"]
            identical = all(
                same_learner(online_ckpts / f"ckpt-{k:06d}.pt", out / "checkpoints" / f"ckpt-{k:06d}.pt")
                for k in range(first, last + 1)
            )
            rows.append(
                {
                    "block": block,
                    "iterations": f"{first}-{last}",
                    "transitions": transitions,
                    "online_update_s": online_s,
                    "online_tps": transitions / online_s,
                    "replay_s": summary["wall_s"],
                    "replay_update_s": summary["update_s"],
                    "replay_tps": summary["transitions_per_s"],
                    "ratio": summary["transitions_per_s"] / (transitions / online_s),
                    "identical": "yes" if identical else "NO",
                }
            )
    finally:
        trainer.close()
    return rows


def main() -> None:
    args = parse_args()
    set_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        rows = run_blocks(args, args.data_dir or Path(tmp))
    print_table(
        rows,
        [
            ("block", "block", ""),
            ("iterations", "iters", ""),
            ("transitions", "transitions", ","),
            ("online_update_s", "online update s", ".2f"),
            ("online_tps", "online trans/s", ",.0f"),
            ("replay_s", "replay s", ".2f"),
            ("replay_update_s", "of which update s", ".2f"),
            ("replay_tps", "replay trans/s", ",.0f"),
            ("ratio", "replay/online", ".3f"),
            ("identical", "identical", ""),
        ],
    )
    ratio = median([r["ratio"] for r in rows])
    verdict = "meets" if ratio >= RATIO_TARGET else "misses"
    print(f"median replay/online throughput: {ratio:.3f}× ({verdict} the ≥ {RATIO_TARGET}× target)")
    write_json(
        args.json,
        {
            "args": {k: str(v) for k, v in vars(args).items()},
            "rows": rows,
            "median_ratio": ratio,
            "target": RATIO_TARGET,
        },
    )


if __name__ == "__main__":
    main()
