"""Off-policy MuJoCo: rlpipe SAC/TD3 on envpool's v5 tasks at an env-step budget, beside SB3's SAC speed.

    .venv/bin/python benchmarks/learning/offpolicy_mujoco.py [--algos sac td3] [--tasks halfcheetah ...]
        [--seeds 0 1 2] [--steps 1000000] [--jobs 1] [--set KEY=VALUE ...]
        [--sb3 --sb3-steps 5000 | --sb3-only] [--json benchmarks/results/offpolicy_mujoco.json [--append]]

Each (algorithm, task, seed) loads ``configs/zoo/<algo>_<task>.yaml`` with ``trainer.seed=SEED``,
``trainer.iterations`` cut to ``--steps`` env steps, tracking and the rollout store off, and runs as
a ``rlpipe.trainer.Trainer`` stepped with ``Trainer.step`` (evaluation moved to the end), in a
subprocess of this script, ``--jobs`` at a time. Per run: the final deterministic eval return
(``num_eval_envs`` episodes), the training wall and process CPU time (build and the final eval
excluded), env steps/s over the whole run and over the iterations after ``learning_starts`` (the
gradient-step phase), and that phase's wall scaled to 1M env steps. Per task: IQM, mean and median over
seeds with 95 % stratified-bootstrap intervals (``_aggregate.py``), and the ratio of the IQM to
rl-baselines3-zoo's SAC return at 1M steps — only a like-for-like comparison where ``--steps`` is 1M.

With ``--sb3``, Stable-Baselines3's SAC (rl-zoo's HalfCheetah settings: the SB3 defaults with
``learning_starts`` 10,000, batch 256, one gradient step per env step, 256×256) runs on gymnasium's
same task for ``learning_starts + --sb3-steps`` steps in the SB3 virtualenv (``make -C benchmarks
sb3-venv``); its random phase and gradient phase are timed apart and its wall for 1M steps is their
sum scaled (``random wall + (1M − learning_starts) / gradient-phase steps/s``), compared with rlpipe's
scaled the same way, and the process CPU seconds per env step of both gradient phases (the steadier
figure on a machine shared with other jobs). Both sides run one torch thread each; the load average
is recorded per run. ``--append`` keeps the runs already in the ``--json`` file that are not rerun
(more seeds, tasks or a later SB3 timing) and summarizes them all; the file lists every command.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))  # the shared helpers (rlpipe's side only)

TASKS = {"halfcheetah": "HalfCheetah-v5", "hopper": "Hopper-v5", "walker2d": "Walker2d-v5", "ant": "Ant-v5"}
ZOO_SAC = {  # rl-baselines3-zoo benchmark.md, sac row per env: mean ± std of one trained agent, 1M steps
    "halfcheetah": (9535.451, 100.470, "HalfCheetah-v3"),
    "hopper": (2325.547, 1129.676, "Hopper-v3"),
    "walker2d": (3863.203, 254.347, "Walker2d-v3"),
    "ant": (4615.791, 1354.111, "Ant-v3"),
}
"""The references of ``ZOO_SOURCE``; zoo trained on the v3 tasks, rlpipe runs v5 (same models and
rewards up to v5's fixes), so the ratio is a guide, not an identity."""
ZOO_SOURCE = "rl-baselines3-zoo benchmark.md (github.com/DLR-RM/rl-baselines3-zoo), sac rows"
ONE_MILLION = 1_000_000
SB3_LEARNING_STARTS = 10_000


def rlpipe_run(algo: str, task: str, seed: int, steps: int, overrides: list[str]) -> dict[str, Any]:
    """One rlpipe run to ``steps`` env steps; the final eval, timings and the load average."""
    import torch
    from _bench import load_cfg, start_quietly

    from rlpipe.trainer import Trainer

    params = ROOT / "configs" / "zoo" / f"{algo}_{task}.yaml"
    with tempfile.TemporaryDirectory(prefix="rlpipe-offpolicy-") as data_dir:
        probe = load_cfg(params, [f"trainer.data_dir={data_dir}", *overrides])
        per_iteration = probe.trainer.num_envs * probe.trainer.buffer_size
        iterations = -(-steps // per_iteration)
        cfg = load_cfg(
            params,
            [
                f"trainer.data_dir={data_dir}",
                f"trainer.seed={seed}",
                f"trainer.iterations={iterations}",
                f"trainer.eval_freq={10 * steps}",
                f"trainer.save_freq={10 * steps}",
                "tracking.backend=none",
                "store.enabled=false",
                *overrides,
            ],
        )
        learning_starts = cfg.algorithm.cfg.learning_starts
        trainer = start_quietly(Trainer(cfg))
        evaluate, trainer.parts.evaluator = trainer.parts.evaluator, None  # evaluated once, after the clock
        assert evaluate is not None
        try:
            load_start, cpu, start = os.getloadavg(), time.process_time(), time.perf_counter()
            learn_start, learn_steps, learn_cpu = None, 0, 0.0
            for _ in range(iterations):
                if learn_start is None and trainer.env_steps >= learning_starts:
                    learn_start, learn_steps, learn_cpu = (
                        time.perf_counter(),
                        trainer.env_steps,
                        time.process_time(),
                    )
                metrics = trainer.step(checkpoint=False)
                if trainer.iteration % 50 == 0:
                    print(
                        f"{algo} {task} seed {seed}: {trainer.env_steps} steps "
                        f"{time.perf_counter() - start:.0f} s "
                        f"return {metrics.get('train/episode_return_mean')}",
                        file=sys.stderr,
                        flush=True,
                    )
            end, learn_cpu, cpu = (
                time.perf_counter(),
                time.process_time() - learn_cpu,
                time.process_time() - cpu,
            )
            final = evaluate()
        finally:
            trainer.close()
    done = trainer.env_steps
    wall = end - start
    learn_sps = (done - learn_steps) / (end - learn_start) if learn_start is not None else None
    random_wall = (learn_start - start) if learn_start is not None else wall
    return {
        "algo": algo,
        "task": task,
        "env": f"envpool {TASKS[task]}",
        "seed": seed,
        "steps": done,
        "eval_return": final.get("eval/return_mean"),
        "eval_return_std": final.get("eval/return_std"),
        "train_return": metrics.get("train/episode_return_mean"),
        "wall_s": wall,
        "cpu_s": cpu,
        "steps_per_s": done / wall,
        "learn_steps_per_s": learn_sps,
        "learn_cpu_s_per_step": learn_cpu / (done - learn_steps) if learn_sps else None,
        "wall_1m_s": random_wall + (ONE_MILLION - learn_steps) / learn_sps if learn_sps else None,
        "threads": torch.get_num_threads(),
        "load_avg_start": load_start,
        "load_avg_end": os.getloadavg(),
    }


def sb3_run(task: str, seed: int, steps: int, eval_episodes: int) -> dict[str, Any]:
    """SB3 SAC (rl-zoo's settings) for ``learning_starts + steps``; runs in the SB3 venv."""
    import gymnasium as gym
    import numpy as np
    import torch
    from stable_baselines3 import SAC
    from stable_baselines3.common.callbacks import BaseCallback

    torch.set_num_threads(1)

    class Clock(BaseCallback):
        """The time at which the gradient steps start (``learning_starts`` env steps)."""

        learn_start: float | None = None
        learn_cpu = 0.0

        def _on_step(self) -> bool:
            if self.learn_start is None and self.num_timesteps >= SB3_LEARNING_STARTS:
                self.learn_start, self.learn_cpu = time.perf_counter(), time.process_time()
            return True

    env = gym.make(TASKS[task])
    model = SAC("MlpPolicy", env, learning_starts=SB3_LEARNING_STARTS, seed=seed, device="cpu", verbose=0)
    clock = Clock()
    total = SB3_LEARNING_STARTS + steps
    load_start, cpu, start = os.getloadavg(), time.process_time(), time.perf_counter()
    model.learn(total_timesteps=total, callback=clock)
    end, learn_cpu, cpu = (
        time.perf_counter(),
        time.process_time() - clock.learn_cpu,
        time.process_time() - cpu,
    )
    assert clock.learn_start is not None
    learn_sps = steps / (end - clock.learn_start)
    returns = []
    for episode in range(eval_episodes):
        obs, _ = env.reset(seed=10_000 + episode)
        ret, done = 0.0, False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(action)
            ret += float(reward)
            done = terminated or truncated
        returns.append(ret)
    return {
        "algo": "sb3_sac",
        "task": task,
        "env": f"gymnasium {TASKS[task]}",
        "seed": seed,
        "steps": total,
        "eval_return": float(np.mean(returns)),
        "wall_s": end - start,
        "cpu_s": cpu,
        "steps_per_s": total / (end - start),
        "learn_steps_per_s": learn_sps,
        "learn_cpu_s_per_step": learn_cpu / steps,
        "wall_1m_s": (clock.learn_start - start) + (ONE_MILLION - SB3_LEARNING_STARTS) / learn_sps,
        "threads": torch.get_num_threads(),
        "load_avg_start": load_start,
        "load_avg_end": os.getloadavg(),
    }


def child(python: str, args: list[str]) -> dict[str, Any]:
    """Run this script as ``--one`` in a subprocess; its last stdout line is the run's JSON row."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    out = subprocess.run([python, __file__, *args], check=True, stdout=subprocess.PIPE, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def cpu_per_step(row: dict[str, Any]) -> float:
    """Process CPU seconds per env step of the gradient-step phase (of the whole run where not recorded)."""
    return row.get("learn_cpu_s_per_step") or row["cpu_s"] / row["steps"]


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per (algo, task): IQM / mean / median of the eval returns with intervals, timings, the zoo ratio."""
    from _aggregate import with_intervals

    summary: dict[str, Any] = {}
    for key in sorted({(r["algo"], r["task"]) for r in rows if r["algo"] != "sb3_sac"}):
        runs = [r for r in rows if (r["algo"], r["task"]) == key]
        returns = [r["eval_return"] for r in runs]
        stats = with_intervals(returns)
        zoo, zoo_std, zoo_env = ZOO_SAC[key[1]]
        summary[f"{key[0]}/{key[1]}"] = {
            **stats,
            "seeds": [r["seed"] for r in runs],
            "returns": returns,
            "steps": runs[0]["steps"],
            "min": min(returns),
            "max": max(returns),
            "wall_s_mean": sum(r["wall_s"] for r in runs) / len(runs),
            "learn_steps_per_s_mean": sum(r["learn_steps_per_s"] or 0 for r in runs) / len(runs),
            "wall_1m_s_mean": sum(r["wall_1m_s"] or 0 for r in runs) / len(runs),
            "cpu_s_per_step_mean": sum(cpu_per_step(r) for r in runs) / len(runs),
            "zoo_sac": {
                "return": zoo,
                "std": zoo_std,
                "env": zoo_env,
                "steps": ONE_MILLION,
                "source": ZOO_SOURCE,
            },
            "iqm_over_zoo": stats["iqm"][0] / zoo,
        }
    for name, entry in summary.items():
        sb3 = [r for r in rows if r["algo"] == "sb3_sac" and r["task"] == name.split("/")[1]]
        if sb3:
            entry["sb3_wall_1m_s"] = sb3[0]["wall_1m_s"]
            entry["wall_1m_over_sb3"] = entry["wall_1m_s_mean"] / sb3[0]["wall_1m_s"]
            entry["cpu_per_step_over_sb3"] = entry["cpu_s_per_step_mean"] / cpu_per_step(sb3[0])
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", nargs="+", default=["sac"], choices=["sac", "td3"])
    parser.add_argument("--tasks", nargs="+", default=["halfcheetah"], choices=sorted(TASKS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=ONE_MILLION, help="env steps per rlpipe run")
    parser.add_argument("--jobs", type=int, default=1, help="runs at the same time (subprocesses)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--sb3", action="store_true", help="also time SB3's SAC on each task (seed 0)")
    parser.add_argument("--sb3-steps", type=int, default=5_000, help="SB3 env steps after learning_starts")
    parser.add_argument("--sb3-only", action="store_true", help="only the SB3 timing (no rlpipe run)")
    parser.add_argument(
        "--sb3-python",
        default=str(ROOT / "benchmarks" / ".venv-sb3" / "bin" / "python"),
        help="Python of a venv with stable-baselines3 and mujoco (never the project's)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the rows and summary here")
    parser.add_argument(
        "--append",
        action="store_true",
        help="keep the --json file's runs (those not rerun now) and summarize them with the new ones",
    )
    parser.add_argument("--one", nargs=3, metavar=("SIDE", "TASK", "SEED"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:  # a child: one run, its row as the last stdout line
        side, task, seed = args.one[0], args.one[1], int(args.one[2])
        if side == "sb3_sac":
            row = sb3_run(task, seed, args.sb3_steps, 10)
        else:
            row = rlpipe_run(side, task, seed, args.steps, args.overrides)
        print(json.dumps(row))
        return
    common = ["--steps", str(args.steps), "--sb3-steps", str(args.sb3_steps)]
    common += [f"--set={o}" for o in args.overrides]
    jobs = [] if args.sb3_only else [(a, t, s) for a in args.algos for t in args.tasks for s in args.seeds]
    if args.sb3 or args.sb3_only:
        jobs += [("sb3_sac", t, 0) for t in args.tasks]
    load_start = os.getloadavg()

    def launch(job: tuple[str, str, int]) -> dict[str, Any]:
        python = args.sb3_python if job[0] == "sb3_sac" else sys.executable
        return child(python, ["--one", job[0], job[1], str(job[2]), *common])

    with ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(launch, jobs))
    commands = [" ".join(sys.argv)]
    if args.append and args.json and args.json.exists():
        kept = json.loads(args.json.read_text())
        rerun = {(r["algo"], r["task"], r["seed"]) for r in rows}
        rows = [r for r in kept["runs"] if (r["algo"], r["task"], r["seed"]) not in rerun] + rows
        commands = kept.get("commands", []) + commands
    for r in rows:
        print(
            f"{r['algo']:8s} {r['env']:26s} seed {r['seed']}  {r['steps']:>9,} steps  "
            f"eval {r['eval_return']:9.1f}  wall {r['wall_s']:7.0f} s  {r['steps_per_s']:6.0f} steps/s  "
            f"learning {r['learn_steps_per_s'] or 0:6.0f} steps/s  "
            f"1M wall {(r['wall_1m_s'] or 0) / 3600:5.2f} h"
        )
    summary = summarize(rows)
    for name, s in summary.items():
        point, low, high = s["iqm"]
        print(
            f"{name}: {s['steps']:,} steps, IQM {point:.0f} [{low:.0f}, {high:.0f}] over seeds {s['seeds']} "
            f"(zoo SAC {s['zoo_sac']['return']:.0f} at 1M: {s['iqm_over_zoo']:.2f}×)"
            + (f"; 1M wall / SB3's {s['wall_1m_over_sb3']:.2f}" if "wall_1m_over_sb3" in s else "")
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "benchmark": "offpolicy_mujoco",
                    "commands": commands,
                    "cpu": os.cpu_count(),
                    "load_avg_start": load_start,
                    "load_avg_end": os.getloadavg(),
                    "runs": rows,
                    "summary": summary,
                },
                indent=2,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
