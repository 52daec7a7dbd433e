"""Symmetry on a symmetric task: PPO with and without mirroring, same budget (Pendulum or Ant-v5).

    .venv/bin/python benchmarks/learning/symmetry.py [--task pendulum|ant] [--seeds 0 1 2]
        [--iterations N] [--arms plain augment mirror_loss] [--set KEY=VALUE ...] [--threads N]
        [--json PATH]

Tasks (``--task``):

* ``pendulum`` (default): the torch Pendulum, ``configs/ppo_pendulum.yaml`` (64 envs × 128 steps an
  iteration), symmetric under θ → −θ (``rlpipe.envs.tasks.symmetry:pendulum_mirror``:
  ``(cos θ, sin θ, θ̇) → (cos θ, −sin θ, −θ̇)``, torque → −torque); 15 iterations by default.
* ``ant``: envpool's ``Ant-v5`` (105 observations with contact forces, 8 actions), symmetric under
  y → −y (``rlpipe.envs.tasks.symmetry:ant_mirror``: legs 1 ↔ 4 and 2 ↔ 3, hips negated).
  ``configs/ppo_halfcheetah_envpool.yaml``'s settings (16 envs × 128 steps, 10 epochs × minibatches
  of 256, lr 3e-4 decayed linearly, 256×256 ReLU, observation and reward normalization) with the
  longer horizon of a task that terminates (γ 0.99, λ 0.95) and a wider initial policy (log-std −1);
  489 iterations (1M env steps) by default.

Each arm loads the task's params with ``trainer.iterations``, ``trainer.seed``,
``tracking.backend=none``, the rollout store and eval off and a temporary ``trainer.data_dir``, and
steps a ``rlpipe.trainer.Trainer``:

* ``plain``: PPO as configured;
* ``augment``: ``algorithm.cfg.symmetry`` with ``data_augmentation: true`` (mirrored minibatches);
* ``mirror_loss``: ``mirror_loss: true``, ``mirror_loss_coef`` 1.0 (the augmentation off).

Reported per run (same env steps for every arm): the training return at the end
(``train/episode_return_mean``, the last 200 finished episodes), the final deterministic eval return,
the mean mirror loss of the last update (``update/symmetry_loss``, logged by every symmetric arm),
and the wall and CPU time of the training.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

from _bench import NEVER, PROJECT_ROOT, load_cfg, print_table, set_threads, start_quietly, write_json

from rlpipe.trainer import Trainer


@dataclass(frozen=True)
class Task:
    """A symmetric task: its params file, the overrides that make it, its mirror and default length."""

    name: str
    params: Path
    overrides: tuple[str, ...]
    mirror: str
    iterations: int


TASKS = {
    "pendulum": Task(
        "Pendulum (torch)",
        PROJECT_ROOT / "configs" / "ppo_pendulum.yaml",
        (),
        "rlpipe.envs.tasks.symmetry:pendulum_mirror",
        15,
    ),
    "ant": Task(
        "Ant-v5 (envpool)",
        PROJECT_ROOT / "configs" / "ppo_halfcheetah_envpool.yaml",
        (
            "env.id=Ant-v5",
            "trainer.exp_name=ant_envpool",
            "algorithm.cfg.gamma=0.99",
            "algorithm.cfg.gae_lambda=0.95",
            "policy.log_std_init=-1.0",
        ),
        "rlpipe.envs.tasks.symmetry:ant_mirror",
        489,
    ),
}
ARMS = {
    "plain": "",
    "augment": "data_augmentation: true",
    "mirror_loss": "mirror_loss: true, mirror_loss_coef: 1.0",
}
"""Each arm's ``algorithm.cfg.symmetry`` options (``plain``: no symmetry)."""


def arm_overrides(arm: str, task: Task) -> list[str]:
    """The ``--set`` overrides of ``arm`` on ``task``."""
    if not ARMS[arm]:
        return []
    return [f"algorithm.cfg.symmetry={{function: '{task.mirror}', {ARMS[arm]}}}"]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="pendulum", choices=list(TASKS), help="the symmetric task")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="trainer.seed values")
    parser.add_argument(
        "--iterations",
        type=int,
        default=None,
        help="trainer.iterations (default: the task's, 15 for pendulum, 489 for ant)",
    )
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS), help="arms to run")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra config override for every arm (repeatable), as rlpipe run --set",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    return parser.parse_args()


def run_one(task: Task, arm: str, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """Train one arm for one seed; report its returns, mirror loss and time."""
    with tempfile.TemporaryDirectory(prefix="rlpipe-symmetry-") as data_dir:
        cfg = load_cfg(
            task.params,
            [
                *task.overrides,
                f"trainer.iterations={args.iterations}",
                f"trainer.seed={seed}",
                "tracking.backend=none",
                "store.enabled=false",
                f"trainer.data_dir={data_dir}",
                f"trainer.eval_freq={NEVER}",
                *arm_overrides(arm, task),
                *args.overrides,
            ],
        )
        trainer = start_quietly(Trainer(cfg))
        wall, cpu, metrics = time.perf_counter(), time.process_time(), {}
        try:
            while trainer.iteration < cfg.trainer.iterations:
                metrics = trainer.step()
        finally:
            trainer.close()
    return {
        "arm": arm,
        "seed": seed,
        "env_steps": trainer.env_steps,
        "final_return": metrics.get("train/episode_return_mean"),
        "final_eval": metrics.get("eval/return_mean"),
        "symmetry_loss": metrics.get("update/symmetry_loss"),
        "wall_s": time.perf_counter() - wall,
        "cpu_s": time.process_time() - cpu,
    }


COLUMNS = [
    ("arm", "arm", ""),
    ("seed", "seed", ""),
    ("env_steps", "env steps", ","),
    ("final_return", "train return", ".1f"),
    ("final_eval", "eval return", ".1f"),
    ("symmetry_loss", "mirror loss", ".4f"),
    ("wall_s", "wall s", ".1f"),
    ("cpu_s", "cpu s", ".1f"),
]


def mean(values: list[float | None]) -> float | None:
    """The mean of the values that were measured (``None`` where a run had no finished episode or eval)."""
    measured = [v for v in values if v is not None]
    return sum(measured) / len(measured) if measured else None


def main() -> None:
    args = parse_args()
    task = TASKS[args.task]
    args.iterations = args.iterations or task.iterations
    set_threads(args.threads)
    rows = []
    for seed in args.seeds:  # the arms alternate within a seed: load drift hits all alike
        for arm in args.arms:
            rows.append(run_one(task, arm, seed, args))
            print(
                f"{arm} seed {seed}: train return {rows[-1]['final_return']}, "
                f"{rows[-1]['wall_s'] / args.iterations:.2f} s/iteration",
                flush=True,
            )
    steps = rows[0]["env_steps"] // args.iterations
    print(f"\n{task.name} PPO with and without symmetry, {args.iterations} iterations × {steps} steps")
    print_table(rows, COLUMNS)
    summary = {
        arm: {
            key: mean([r[key] for r in rows if r["arm"] == arm])
            for key in ("final_return", "final_eval", "wall_s")
        }
        for arm in args.arms
    }
    print(summary)
    write_json(
        args.json,
        {
            "task": task.name,
            "params": str(task.params.relative_to(PROJECT_ROOT)),
            "task_overrides": list(task.overrides),
            "iterations": args.iterations,
            "arms": {a: arm_overrides(a, task) for a in args.arms},
            "overrides": args.overrides,
            "rows": rows,
            "summary": summary,
        },
    )


if __name__ == "__main__":
    main()
