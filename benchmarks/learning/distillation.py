"""Teacher → student: a privileged teacher distilled offline from its stores, then corrected online.

    .venv/bin/python benchmarks/learning/distillation.py [--task cartpole|push_cube_camera]
        [--seeds 0 1 2] [--passes P] [--online-iterations K] [--teacher-set KEY=VALUE ...]
        [--student-set KEY=VALUE ...] [--threads N] [--json PATH]

For each seed, three routes, each a normal rlpipe run directory under one temporary ``data_dir``:

1. **teacher**: the task's teacher params (privileged observation groups), trained with every
   rollout stored (``Trainer.train``; the params' ``stop_when`` ends it);
2. **offline student**: ``rlpipe distill``'s Python route (``distill_config`` → ``distill_offline``):
   the student, which does not see the privileged group, regresses the frozen teacher on the
   teacher's stored rollouts alone — no env step;
3. **online student**: ``online_config`` from the offline student's last checkpoint, K iterations
   of DAgger (the student acts, the teacher labels).

Every policy is then scored the same way: ``evaluate_checkpoint`` (deterministic, ``eval.num_envs``
× ``eval.num_episodes`` fresh episodes, seed ``trainer.seed + EVAL_SEED_OFFSET``). Reported per
seed: each route's eval return (and success for PushCube), the student/teacher ratios (goal ≥ 0.9),
the env steps each route stepped and its wall time.

Tasks:

* ``cartpole``: CartPole with ``obs_groups`` — the teacher reads ``proprio`` (cart position, pole
  angle) and ``privileged`` (their velocities); the student is a GRU that reads ``proprio`` only and
  must infer the velocities from its memory.
* ``push_cube_camera``: ``configs/push_cube_teacher.yaml`` (``proprio`` + ``privileged`` cube state)
  → a student reading ``camera`` (uint8 frames through a CNN) + ``proprio``; the teacher's stores
  must hold the camera group, so the teacher is trained with the camera on (it does not read it).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

from _bench import DEFAULT_PARAMS, PROJECT_ROOT, load_cfg, print_table, set_threads, write_json

from rlpipe.offline.commands import evaluate_checkpoint
from rlpipe.offline.distill import distill_config, distill_offline, online_config
from rlpipe.trainer import Trainer

TASKS: dict[str, dict[str, Any]] = {
    "cartpole": {
        "params": DEFAULT_PARAMS,
        "teacher": ["env.cfg={obs_groups: true}"],
        "student": ["policy.name=recurrent_actor_critic", "policy.actor.obs_keys=[proprio]",
                    "policy.critic.obs_keys=[proprio]", "algorithm.cfg.seq_len=16",
                    "algorithm.cfg.learning_rate=0.002", "algorithm.cfg.n_epochs=4"],
        "passes": 3,
        "online_iterations": 10,
        "eval": ["eval.num_envs=16", "eval.num_episodes=4"],
        "metric": "eval/return_mean",
    },
    "push_cube_camera": {
        "params": PROJECT_ROOT / "configs" / "push_cube_teacher.yaml",
        "teacher": ["env.cfg.camera={size: [64, 64]}", "store.enabled=true", "eval.video=false"],
        "student": ["policy.actor.obs_keys=[camera, proprio]", "policy.critic.obs_keys=[camera, proprio]",
                    "policy.obs_normalization=true",
                    "policy.actor.encoders={camera: {channels: [16, 32, 32], kernel_sizes: [8, 4, 3], "
                    "strides: [4, 2, 1], features: 128}}",
                    "algorithm.cfg.loss=mse", "algorithm.cfg.learning_rate=0.0005",
                    "algorithm.cfg.n_epochs=2", "algorithm.cfg.batch_size=1024"],
        "passes": 2,
        "online_iterations": 10,
        "eval": ["eval.num_envs=64", "eval.num_episodes=2", "eval.video=false"],
        "metric": "eval/success_at_end",
    },
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=list(TASKS), default="cartpole")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="trainer.seed values")
    parser.add_argument("--passes", type=int, default=None, help="offline passes over the teacher's stores")
    parser.add_argument("--online-iterations", type=int, default=None, help="DAgger iterations after")
    parser.add_argument("--teacher-set", action="append", default=[], metavar="KEY=VALUE",
                        help="extra override of the teacher's params (repeatable)")
    parser.add_argument("--student-set", action="append", default=[], metavar="KEY=VALUE",
                        help="extra override of the student's params (repeatable)")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    return parser.parse_args()


def score(cfg: Any, checkpoint: Path, eval_overrides: list[str], metric: str, out: Path) -> dict[str, float]:
    """The checkpoint's deterministic eval: return mean (and ``metric``) over fresh episodes."""
    eval_cfg = load_cfg_from(cfg, eval_overrides)
    metrics = evaluate_checkpoint(eval_cfg, checkpoint, out=out)
    return {"return": metrics["eval/return_mean"], "score": metrics.get(metric, metrics["eval/return_mean"])}


def load_cfg_from(cfg: Any, overrides: list[str]) -> Any:
    """``cfg`` with ``overrides`` applied (through the same validation as a params file)."""
    from rlpipe import config as config_mod
    from rlpipe.config import RunConfig

    return RunConfig.model_validate(config_mod.apply_overrides(cfg.to_dict(), overrides))


def run_seed(task: dict[str, Any], seed: int, args: argparse.Namespace, data_dir: Path) -> dict[str, Any]:
    """Teacher, offline student and online student of one seed; their scores, env steps and times."""
    common = [f"trainer.seed={seed}", "tracking.backend=none", f"trainer.data_dir={data_dir}"]
    teacher_cfg = load_cfg(task["params"], [*common, f"trainer.exp_name=teacher-{seed}", *task["teacher"],
                                            *args.teacher_set])
    tick = time.perf_counter()
    trainer = Trainer(teacher_cfg)
    summary = trainer.train()
    teacher = {"env_steps": trainer.env_steps, "wall_s": time.perf_counter() - tick,
               "iterations": trainer.iteration}
    teacher_ckpt = Path(summary["checkpoint"])
    teacher |= score(teacher_cfg, teacher_ckpt, task["eval"], task["metric"], data_dir / f"t{seed}.json")

    passes = args.passes or task["passes"]
    student_cfg = distill_config(teacher_cfg.run_dir, [*common, f"trainer.exp_name=student-{seed}",
                                                       f"algorithm.cfg.offline_passes={passes}",
                                                       *task["student"], *args.student_set])
    tick = time.perf_counter()
    offline_summary = distill_offline(student_cfg)
    offline = {"env_steps": 0, "wall_s": time.perf_counter() - tick, "updates": offline_summary["iterations"]}
    offline |= score(student_cfg, Path(offline_summary["checkpoint"]), task["eval"], task["metric"],
                     data_dir / f"o{seed}.json")

    iterations = args.online_iterations if args.online_iterations is not None else task["online_iterations"]
    online_cfg = online_config(student_cfg, Path(offline_summary["checkpoint"]), iterations)
    tick = time.perf_counter()
    online_trainer = Trainer(online_cfg)
    online_summary = online_trainer.train()
    online = {"env_steps": online_trainer.env_steps, "wall_s": time.perf_counter() - tick}
    online |= score(online_cfg, Path(online_summary["checkpoint"]), task["eval"], task["metric"],
                    data_dir / f"n{seed}.json")
    return {"seed": seed, "teacher": teacher, "offline": offline, "online": online,
            "offline_ratio": ratio(offline["score"], teacher["score"]),
            "online_ratio": ratio(online["score"], teacher["score"])}


def ratio(student: float, teacher: float) -> float:
    """Student / teacher (``nan`` for a teacher scoring 0)."""
    return student / teacher if teacher else float("nan")


def mean_std(values: list[float]) -> dict[str, float]:
    """Mean and sample standard deviation (0 for one value)."""
    return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else 0.0}


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean ± std over seeds of every route's score, ratio, env steps and wall time."""
    out: dict[str, Any] = {}
    for route in ("teacher", "offline", "online"):
        for key in ("score", "return", "env_steps", "wall_s"):
            out[f"{route}_{key}"] = mean_std([float(r[route][key]) for r in rows])
    for key in ("offline_ratio", "online_ratio"):
        out[key] = mean_std([r[key] for r in rows])
    return out


COLUMNS = [
    ("seed", "seed", ""), ("teacher_score", "teacher", ".3f"), ("teacher_steps", "teacher steps", ","),
    ("teacher_s", "teacher s", ".0f"), ("offline_score", "offline", ".3f"), ("offline_s", "offline s", ".0f"),
    ("offline_ratio", "offline/teacher", ".3f"), ("online_score", "online", ".3f"),
    ("online_steps", "online steps", ","), ("online_s", "online s", ".0f"),
    ("online_ratio", "online/teacher", ".3f"),
]


def flat(row: dict[str, Any]) -> dict[str, Any]:
    """One table row of a seed's nested result."""
    return {"seed": row["seed"], "teacher_score": row["teacher"]["score"],
            "teacher_steps": row["teacher"]["env_steps"], "teacher_s": row["teacher"]["wall_s"],
            "offline_score": row["offline"]["score"], "offline_s": row["offline"]["wall_s"],
            "offline_ratio": row["offline_ratio"], "online_score": row["online"]["score"],
            "online_steps": row["online"]["env_steps"], "online_s": row["online"]["wall_s"],
            "online_ratio": row["online_ratio"]}


def main() -> None:
    args = parse_args()
    set_threads(args.threads)
    task = TASKS[args.task]
    rows = []
    for seed in args.seeds:
        with tempfile.TemporaryDirectory(prefix="rlpipe-distill-") as data_dir:
            rows.append(run_seed(task, seed, args, Path(data_dir)))
        print(f"seed {seed}: {flat(rows[-1])}", flush=True)
    print(f"\n{args.task}: teacher → student ({task['metric']}; deterministic eval)")
    print_table([flat(r) for r in rows], COLUMNS)
    summary = summarize(rows)
    print(f"offline/teacher {summary['offline_ratio']['mean']:.3f} ± {summary['offline_ratio']['std']:.3f}, "
          f"online/teacher {summary['online_ratio']['mean']:.3f} ± {summary['online_ratio']['std']:.3f} "
          f"(goal ≥ 0.9)")
    write_json(args.json, {"benchmark": "distillation", "task": args.task, "metric": task["metric"],
                           "teacher_overrides": [*task["teacher"], *args.teacher_set],
                           "student_overrides": [*task["student"], *args.student_set],
                           "seeds": rows, "summary": summary})


if __name__ == "__main__":
    main()
