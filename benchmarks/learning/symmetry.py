"""Symmetry on a symmetric task: the torch Pendulum, PPO with and without mirroring, same budget.

    .venv/bin/python benchmarks/learning/symmetry.py [--seeds 0 1 2] [--iterations 15]
        [--arms plain augment mirror_loss] [--set KEY=VALUE ...] [--threads N] [--json PATH]

Pendulum swing-up is symmetric under θ → −θ (``rlpipe.envs.tasks.symmetry:pendulum_mirror``:
``(cos θ, sin θ, θ̇) → (cos θ, −sin θ, −θ̇)``, torque → −torque). Each arm loads
``configs/ppo_pendulum.yaml`` with ``trainer.iterations``, ``trainer.seed``, ``tracking.backend=none``,
the rollout store off and a temporary ``trainer.data_dir``, and steps a ``rlpipe.trainer.Trainer``:

* ``plain``: PPO as configured;
* ``augment``: ``algorithm.cfg.symmetry`` with ``data_augmentation: true`` (mirrored minibatches);
* ``mirror_loss``: ``mirror_loss: true``, ``mirror_loss_coef`` 1.0 (the augmentation off).

Reported per run (same env steps for every arm): the training return at the end
(``train/episode_return_mean``, the last 200 finished episodes), the final deterministic eval return,
the mean mirror loss of the last update (``update/symmetry_loss``, logged by every symmetric arm), and
the wall and CPU time of the training.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

from _bench import NEVER, PROJECT_ROOT, load_cfg, print_table, set_threads, start_quietly, write_json

from rlpipe.trainer import Trainer

PARAMS = PROJECT_ROOT / "configs" / "ppo_pendulum.yaml"
MIRROR = "rlpipe.envs.tasks.symmetry:pendulum_mirror"
ARMS = {
    "plain": [],
    "augment": [f"algorithm.cfg.symmetry={{function: '{MIRROR}', data_augmentation: true}}"],
    "mirror_loss": [f"algorithm.cfg.symmetry={{function: '{MIRROR}', mirror_loss: true, "
                    "mirror_loss_coef: 1.0}"],
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="trainer.seed values")
    parser.add_argument("--iterations", type=int, default=15, help="iterations of 64 envs × 128 steps")
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS), help="arms to run")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="extra config override for every arm (repeatable), as rlpipe run --set")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    return parser.parse_args()


def run_one(arm: str, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """Train one arm for one seed; report its returns, mirror loss and time."""
    with tempfile.TemporaryDirectory(prefix="rlpipe-symmetry-") as data_dir:
        cfg = load_cfg(PARAMS, [f"trainer.iterations={args.iterations}", f"trainer.seed={seed}",
                                "tracking.backend=none", "store.enabled=false",
                                f"trainer.data_dir={data_dir}", f"trainer.eval_freq={NEVER}",
                                *ARMS[arm], *args.overrides])
        trainer = start_quietly(Trainer(cfg))
        wall, cpu, metrics = time.perf_counter(), time.process_time(), {}
        try:
            while trainer.iteration < cfg.trainer.iterations:
                metrics = trainer.step()
        finally:
            trainer.close()
    return {"arm": arm, "seed": seed, "env_steps": trainer.env_steps,
            "final_return": metrics.get("train/episode_return_mean"),
            "final_eval": metrics.get("eval/return_mean"),
            "symmetry_loss": metrics.get("update/symmetry_loss"),
            "wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}


COLUMNS = [
    ("arm", "arm", ""), ("seed", "seed", ""), ("env_steps", "env steps", ","),
    ("final_return", "train return", ".1f"), ("final_eval", "eval return", ".1f"),
    ("symmetry_loss", "mirror loss", ".4f"), ("wall_s", "wall s", ".1f"), ("cpu_s", "cpu s", ".1f"),
]


def main() -> None:
    args = parse_args()
    set_threads(args.threads)
    rows = []
    for seed in args.seeds:  # the arms alternate within a seed: load drift hits all alike
        for arm in args.arms:
            rows.append(run_one(arm, seed, args))
            print(f"{arm} seed {seed}: train return {rows[-1]['final_return']}, "
                  f"eval {rows[-1]['final_eval']}", flush=True)
    print(f"\nPendulum PPO with and without symmetry, {args.iterations} iterations × 8192 steps")
    print_table(rows, COLUMNS)
    summary = {}
    for arm in args.arms:
        mine = [r for r in rows if r["arm"] == arm]
        summary[arm] = {key: sum(r[key] for r in mine) / len(mine)
                        for key in ("final_return", "final_eval", "wall_s")}
    print(summary)
    write_json(args.json, {"task": "Pendulum (torch)", "params": "configs/ppo_pendulum.yaml",
                           "iterations": args.iterations, "arms": {a: ARMS[a] for a in args.arms},
                           "overrides": args.overrides, "rows": rows, "summary": summary})


if __name__ == "__main__":
    main()
