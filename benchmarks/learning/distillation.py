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

(``push_cube_camera`` replaces 2 and 3 by one route, DAgger from scratch; see below.)

Every policy is then scored the same way: ``evaluate_checkpoint`` (deterministic, ``eval.num_envs``
× ``eval.num_episodes`` fresh episodes, seed ``trainer.seed + EVAL_SEED_OFFSET``). Reported per
seed: each route's eval return (and success for PushCube), the student/teacher ratios (goal ≥ 0.9),
the env steps each route stepped and its wall time.

Tasks:

* ``cartpole``: CartPole with ``obs_groups`` — the teacher reads ``proprio`` (cart position, pole
  angle) and ``privileged`` (their velocities); the student is a GRU that reads ``proprio`` only and
  must infer the velocities from its memory.
* ``push_cube_camera``: ``configs/push_cube_teacher.yaml`` (``proprio`` + ``privileged``: the cube's
  pose) → ``configs/push_cube_camera_student.yaml``, a student reading ``camera`` (uint8 64×64 RGB
  frames through a CNN) + ``proprio``, trained by DAgger from scratch (route ``dagger``: the teacher's
  actions executed with a probability decaying to 0, the student regressing the teacher's means);
  the teacher was trained without rendering, so its stores hold no frames and there is no offline
  route. ``--teacher data/push_cube_teacher`` reuses one teacher for every student seed.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

from _bench import DEFAULT_PARAMS, PROJECT_ROOT, load_cfg, print_table, set_threads, write_json

from rlpipe.artifacts.checkpoints import load_checkpoint
from rlpipe.offline.commands import evaluate_checkpoint
from rlpipe.offline.distill import distill_config, distill_offline, online_config
from rlpipe.trainer import Trainer

TASKS: dict[str, dict[str, Any]] = {
    "cartpole": {
        "params": DEFAULT_PARAMS,
        # 30 iterations, not stopped at the solve: the stores then hold the solved teacher's long episodes
        "teacher": ["env.cfg={obs_groups: true}", "trainer.iterations=30", "trainer.stop_when=[]"],
        "student": [
            "policy.name=recurrent_actor_critic",
            "policy.actor.obs_keys=[proprio]",
            "policy.critic.obs_keys=[proprio]",
            "algorithm.cfg.seq_len=16",
            "algorithm.cfg.learning_rate=0.002",
            "algorithm.cfg.n_epochs=4",
        ],
        "passes": 4,
        "online_iterations": 10,
        "eval": ["eval.num_envs=16", "eval.num_episodes=4"],
        "metric": "eval/return_mean",
    },
    "push_cube_camera": {
        "params": PROJECT_ROOT / "configs" / "push_cube_teacher.yaml",
        "teacher": [],
        "student_params": PROJECT_ROOT / "configs" / "push_cube_camera_student.yaml",
        "student": [],
        "eval": ["eval.num_envs=64", "eval.num_episodes=2", "eval.video=false"],
        "metric": "eval/success_at_end",
    },
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=list(TASKS), default="cartpole")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="trainer.seed values")
    parser.add_argument(
        "--teacher",
        type=Path,
        default=None,
        help="an already trained teacher run to distil (default: train one per seed)",
    )
    parser.add_argument("--passes", type=int, default=None, help="offline passes over the teacher's stores")
    parser.add_argument("--online-iterations", type=int, default=None, help="DAgger iterations after")
    parser.add_argument(
        "--teacher-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra override of the teacher's params (repeatable)",
    )
    parser.add_argument(
        "--student-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra override of the student's params (repeatable)",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    return parser.parse_args()


def score(cfg: Any, checkpoint: Path, eval_overrides: list[str], metric: str, out: Path) -> dict[str, float]:
    """The checkpoint's deterministic eval: return mean (and ``metric``) over fresh episodes."""
    eval_cfg = load_cfg(cfg, eval_overrides)
    metrics = evaluate_checkpoint(eval_cfg, checkpoint, out=out)
    return {"return": metrics["eval/return_mean"], "score": metrics.get(metric, metrics["eval/return_mean"])}


def train_teacher(
    task: dict[str, Any], seed: int, args: argparse.Namespace, data_dir: Path
) -> tuple[Any, dict]:
    """Train (or, with ``--teacher``, reuse) the teacher; its cfg and its score, env steps and time."""
    common = [f"trainer.seed={seed}", "tracking.backend=none", f"trainer.data_dir={data_dir}"]
    if args.teacher is not None:
        from rlpipe.config import load as load_params

        cfg = load_params(args.teacher / "params.yaml")
        checkpoint = max((args.teacher / "checkpoints").glob("ckpt-*.pt"))  # the newest, as distillation's
        state = load_checkpoint(checkpoint)
        curve = (args.teacher / "curve.csv").read_text().splitlines()
        teacher = {
            "env_steps": int(state["env_steps"]),
            "iterations": int(state["iteration"]),
            "wall_s": sum(
                float(row["time/iteration_s"])
                for row in csv.DictReader(curve)
                if int(float(row["iteration"])) <= int(state["iteration"])
            ),
            "reused": str(args.teacher),
            "checkpoint": str(checkpoint),
        }
        return cfg, teacher | score(cfg, checkpoint, task["eval"], task["metric"], data_dir / f"t{seed}.json")
    cfg = load_cfg(
        task["params"], [*common, f"trainer.exp_name=teacher-{seed}", *task["teacher"], *args.teacher_set]
    )
    tick = time.perf_counter()
    trainer = Trainer(cfg)
    summary = trainer.train()
    teacher = {
        "env_steps": trainer.env_steps,
        "wall_s": time.perf_counter() - tick,
        "iterations": trainer.iteration,
    }
    return cfg, teacher | score(
        cfg, Path(summary["checkpoint"]), task["eval"], task["metric"], data_dir / f"t{seed}.json"
    )


def run_seed(task: dict[str, Any], seed: int, args: argparse.Namespace, data_dir: Path) -> dict[str, Any]:
    """Teacher, then the offline and online students (or DAgger from scratch) of one seed."""
    teacher_cfg, teacher = train_teacher(task, seed, args, data_dir)
    if "student_params" in task:
        dagger = run_dagger(task, seed, args, data_dir, teacher_cfg.run_dir)
        return {
            "seed": seed,
            "teacher": teacher,
            "dagger": dagger,
            "dagger_ratio": ratio(dagger["score"], teacher["score"]),
        }
    common = [f"trainer.seed={seed}", "tracking.backend=none", f"trainer.data_dir={data_dir}"]
    passes = args.passes or task["passes"]
    student_cfg = distill_config(
        teacher_cfg.run_dir,
        [
            *common,
            f"trainer.exp_name=student-{seed}",
            f"algorithm.cfg.offline_passes={passes}",
            *task["student"],
            *args.student_set,
        ],
    )
    tick = time.perf_counter()
    offline_summary = distill_offline(student_cfg)
    offline = {"env_steps": 0, "wall_s": time.perf_counter() - tick, "updates": offline_summary["iterations"]}
    offline |= score(
        student_cfg,
        Path(offline_summary["checkpoint"]),
        task["eval"],
        task["metric"],
        data_dir / f"o{seed}.json",
    )

    iterations = args.online_iterations if args.online_iterations is not None else task["online_iterations"]
    online_cfg = online_config(student_cfg, Path(offline_summary["checkpoint"]), iterations)
    tick = time.perf_counter()
    online_trainer = Trainer(online_cfg)
    online_summary = online_trainer.train()
    online = {"env_steps": online_trainer.env_steps, "wall_s": time.perf_counter() - tick}
    online |= score(
        online_cfg,
        Path(online_summary["checkpoint"]),
        task["eval"],
        task["metric"],
        data_dir / f"n{seed}.json",
    )
    return {
        "seed": seed,
        "teacher": teacher,
        "offline": offline,
        "online": online,
        "offline_ratio": ratio(offline["score"], teacher["score"]),
        "online_ratio": ratio(online["score"], teacher["score"]),
    }


def run_dagger(
    task: dict[str, Any], seed: int, args: argparse.Namespace, data_dir: Path, teacher_run: Path
) -> dict[str, Any]:
    """The student's params file trained online from scratch against ``teacher_run``."""
    cfg = load_cfg(
        task["student_params"],
        [
            f"trainer.seed={seed}",
            "tracking.backend=none",
            f"trainer.data_dir={data_dir}",
            f"trainer.exp_name=dagger-{seed}",
            f"algorithm.cfg.teacher={Path(teacher_run).resolve()}",
            *task["student"],
            *args.student_set,
        ],
    )
    tick = time.perf_counter()
    trainer = Trainer(cfg)
    summary = trainer.train()
    dagger = {
        "env_steps": trainer.env_steps,
        "wall_s": time.perf_counter() - tick,
        "iterations": trainer.iteration,
    }
    return dagger | score(
        cfg, Path(summary["checkpoint"]), task["eval"], task["metric"], data_dir / f"d{seed}.json"
    )


def ratio(student: float, teacher: float) -> float:
    """Student / teacher (``nan`` for a teacher scoring 0)."""
    return student / teacher if teacher else float("nan")


def mean_std(values: list[float]) -> dict[str, float]:
    """Mean and sample standard deviation (0 for one value)."""
    return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else 0.0}


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean ± std over seeds of every route's score, ratio, env steps and wall time."""
    out: dict[str, Any] = {}
    for route in ("teacher", "offline", "online", "dagger"):
        if route in rows[0]:
            for key in ("score", "return", "env_steps", "wall_s"):
                out[f"{route}_{key}"] = mean_std([float(r[route][key]) for r in rows])
    for key in ("offline_ratio", "online_ratio", "dagger_ratio"):
        if key in rows[0]:
            out[key] = mean_std([r[key] for r in rows])
    return out


COLUMNS = [
    ("seed", "seed", ""),
    ("teacher_score", "teacher", ".3f"),
    ("teacher_steps", "teacher steps", ","),
    ("teacher_s", "teacher s", ".0f"),
    ("offline_score", "offline", ".3f"),
    ("offline_s", "offline s", ".0f"),
    ("offline_ratio", "offline/teacher", ".3f"),
    ("online_score", "online", ".3f"),
    ("online_steps", "online steps", ","),
    ("online_s", "online s", ".0f"),
    ("online_ratio", "online/teacher", ".3f"),
]


def flat(row: dict[str, Any]) -> dict[str, Any]:
    """One table row of a seed's nested result."""
    if "dagger" in row:
        return {
            "seed": row["seed"],
            "teacher_score": row["teacher"]["score"],
            "teacher_steps": row["teacher"]["env_steps"],
            "teacher_s": row["teacher"]["wall_s"],
            "online_score": row["dagger"]["score"],
            "online_steps": row["dagger"]["env_steps"],
            "online_s": row["dagger"]["wall_s"],
            "online_ratio": row["dagger_ratio"],
        }
    return {
        "seed": row["seed"],
        "teacher_score": row["teacher"]["score"],
        "teacher_steps": row["teacher"]["env_steps"],
        "teacher_s": row["teacher"]["wall_s"],
        "offline_score": row["offline"]["score"],
        "offline_s": row["offline"]["wall_s"],
        "offline_ratio": row["offline_ratio"],
        "online_score": row["online"]["score"],
        "online_steps": row["online"]["env_steps"],
        "online_s": row["online"]["wall_s"],
        "online_ratio": row["online_ratio"],
    }


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
    print(
        ", ".join(
            f"{key} {value['mean']:.3f} ± {value['std']:.3f}"
            for key, value in summary.items()
            if key.endswith("_ratio")
        )
        + " (goal ≥ 0.9)"
    )
    write_json(
        args.json,
        {
            "benchmark": "distillation",
            "task": args.task,
            "metric": task["metric"],
            "teacher_overrides": [*task["teacher"], *args.teacher_set],
            "student_overrides": [*task["student"], *args.student_set],
            "seeds": rows,
            "summary": summary,
        },
    )


if __name__ == "__main__":
    main()
