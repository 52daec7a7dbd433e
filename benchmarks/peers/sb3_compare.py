"""Small-batch speed against Stable-Baselines3 (workload W1): env steps per second with updates.

    .venv/bin/python benchmarks/peers/sb3_compare.py [--total-steps 100000] [--rounds 3] [--threads N]
        [--backends auto envpool sync] [--sb3-python benchmarks/.venv-sb3/bin/python] [--eval] [--json PATH]

Workload W1 (SB3's and CleanRL's classic CartPole setting): gymnasium ``CartPole-v1``, 8 envs × 128
steps per rollout, PPO with 4 epochs × 4 minibatches of 256, separate 64×64 tanh actor and critic,
lr 2.5e-4, CPU, the same total env steps on every side (rounded up to whole rollouts of 1024 steps).

* rlpipe, in this process: ``params.yaml`` through ``rlpipe.config.load`` with ``env.id=CartPole-v1``
  and the simulator from ``--backends`` (``auto`` is what ``rlpipe run`` picks for that id:
  gymnasium's vectorized ``CartPoleVectorEnv``; ``envpool``; ``sync``: gymnasium's ``SyncVectorEnv``
  of one Python env each, as SB3 steps them), ``trainer.num_threads`` as
  configured (``auto`` unless ``--threads``), evaluation off (SB3's ``learn`` does not evaluate
  either; ``--eval`` keeps it on), a new ``trainer.data_dir`` per run, all deleted after the last
  round (deleting a run's thousands of files just before the next row would charge that row where
  the file system scans recently freed inodes when it creates files: ext4 without a journal, as on
  the machine of the recorded figures, does for about 30 s). Two rows per backend: the
  defaults — every rollout stored, MLflow on (a sqlite store and the runs' experiment made before
  the rounds, as a user's ``data/mlflow.db`` holds them after the first run), the console row per
  iteration (captured) — and everything off (``store.enabled=false``, ``tracking.backend=none``). It runs a
  :class:`rlpipe.trainer.Trainer` as ``rlpipe run`` does (``start``, ``step`` until ``done``,
  ``finish``). Timed: from the first iteration to the end of ``finish`` (the store flushed, the
  MLflow run ended), building and ``start`` excluded.
* SB3, in a subprocess of its own virtualenv (``--sb3-python``; see benchmarks/README.md):
  ``PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=8), n_steps=128, batch_size=256,
  n_epochs=4, learning_rate=2.5e-4, policy_kwargs=dict(net_arch=[64, 64], activation_fn=nn.Tanh),
  device="cpu")``. Timed: ``learn(total_timesteps=...)``, construction and interpreter start-up excluded.

The rows run one after another, round after round (``--rounds``), rotating which goes first so none
always runs on a cooler or hotter machine. The table gives the median steps/s per row and, per
rlpipe row, the median over rounds of its speed relative to SB3's in the same round; beside it the
CPU seconds each side used (rlpipe: every thread of this process plus the MLflow process; SB3: its
process), whose ratio a loaded machine distorts less than the wall time's.
Target: rlpipe (stores and MLflow on) ≥ 1.6× SB3's steps/s.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

from _bench import (
    DEFAULT_PARAMS,
    PROJECT_ROOT,
    W1_BACKENDS,
    backend_overrides,
    load_cfg,
    median,
    prepare_tracking,
    print_machine,
    print_table,
    set_threads,
    write_json,
)

from rlpipe.tracking.background import prewarm_tracking
from rlpipe.trainer import Trainer

N_ENVS, N_STEPS, BATCH_SIZE, N_EPOCHS, LR = 8, 128, 256, 4, 2.5e-4
SPEEDUP_TARGET = 1.6
DEFAULT_SB3_PYTHON = PROJECT_ROOT / "benchmarks" / ".venv-sb3" / "bin" / "python"

SB3_SCRIPT = """
import json, resource, sys, time
import torch
from torch import nn
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env

a = json.loads(sys.argv[1])
if a["threads"]:
    torch.set_num_threads(a["threads"])
env = make_vec_env("CartPole-v1", n_envs=a["n_envs"], seed=a["seed"])
model = PPO("MlpPolicy", env, n_steps=a["n_steps"], batch_size=a["batch_size"], n_epochs=a["n_epochs"],
            learning_rate=a["lr"], policy_kwargs=dict(net_arch=[64, 64], activation_fn=nn.Tanh),
            device="cpu", seed=a["seed"])
start, cpu = time.perf_counter(), time.process_time()
model.learn(total_timesteps=a["total_steps"])
seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
print(json.dumps({"env_steps": int(model.num_timesteps), "seconds": seconds, "cpu_s": cpu,
                  "torch_threads": torch.get_num_threads()}))
"""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--params", type=Path, default=DEFAULT_PARAMS, help="params file (default: params.yaml)")
    add("--total-steps", type=int, default=100_000, help="env steps per run (default 100000)")
    add("--rounds", type=int, default=3, help="times each row runs, interleaved (default 3)")
    add("--seed", type=int, default=0, help="seed of every run (default 0)")
    add(
        "--threads",
        type=int,
        default=None,
        help="torch threads on both sides (default: rlpipe's trainer.num_threads auto, SB3 torch's default)",
    )
    add(
        "--backends",
        nargs="+",
        default=["auto"],
        choices=sorted(W1_BACKENDS),
        help="rlpipe simulator rows (default: auto)",
    )
    add("--sb3-python", type=Path, default=DEFAULT_SB3_PYTHON, help="python of the SB3 virtualenv")
    add("--eval", action="store_true", help="keep rlpipe's periodic evaluation on")
    add("--json", type=Path, default=None, help="also write the results as JSON here")
    return parser.parse_args()


def rlpipe_run(
    args: argparse.Namespace, backend: str, defaults: bool, uri: str, scratch: Path
) -> dict[str, Any]:
    """One rlpipe run of ``--total-steps`` through ``Trainer``; ``defaults``: store and MLflow on.

    Its data directory is a new folder in ``scratch``, deleted with it after the last round.
    """
    iterations = math.ceil(args.total_steps / (N_ENVS * N_STEPS))
    net = "{hidden_sizes: [64, 64], activation: tanh}"
    threads = args.threads if args.threads is not None else "auto"
    data_dir = tempfile.mkdtemp(dir=scratch, prefix="run-")
    cfg = load_cfg(
        args.params,
        [
            "env.id=CartPole-v1",
            *backend_overrides(backend),
            f"trainer.num_envs={N_ENVS}",
            f"trainer.buffer_size={N_STEPS}",
            f"trainer.iterations={iterations}",
            f"trainer.seed={args.seed}",
            "trainer.device=cpu",
            f"trainer.num_threads={threads}",
            "trainer.stop_when=[]",
            f"trainer.enable_eval={str(args.eval).lower()}",
            f"trainer.data_dir={data_dir}",
            f"policy.actor.network_cfg={net}",
            f"policy.critic.network_cfg={net}",
            f"algorithm.cfg.batch_size={BATCH_SIZE}",
            f"algorithm.cfg.n_epochs={N_EPOCHS}",
            f"algorithm.cfg.learning_rate={LR}",
            f"store.enabled={str(defaults).lower()}",
            f"tracking.backend={'mlflow' if defaults else 'none'}",
            f"tracking.uri={uri}",
        ],
    )
    if defaults:
        prewarm_tracking(cfg, True)  # as `rlpipe run` does: MLflow's import overlaps the build
    trainer = Trainer(cfg)
    with contextlib.redirect_stdout(io.StringIO()):
        trainer.start()  # builds the parts: untimed, as the construction on SB3's side
        children = _children_cpu()
        start, cpu = time.perf_counter(), time.process_time()
        while not trainer.done:
            trainer.step()
        trainer.finish()
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    env_steps = trainer.env_steps
    return {
        "env_steps": env_steps,
        "seconds": seconds,
        "sps": env_steps / seconds,
        "cpu_s": cpu + _children_cpu() - children,
    }


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def sb3_run(args: argparse.Namespace) -> dict[str, Any]:
    """One SB3 run in its own interpreter; the child times ``learn`` and prints JSON."""
    payload = {
        "n_envs": N_ENVS,
        "n_steps": N_STEPS,
        "batch_size": BATCH_SIZE,
        "n_epochs": N_EPOCHS,
        "lr": LR,
        "total_steps": args.total_steps,
        "seed": args.seed,
        "threads": args.threads,
    }
    proc = subprocess.run(
        [str(args.sb3_python), "-c", SB3_SCRIPT, json.dumps(payload)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"SB3 run failed ({args.sb3_python}):\n{proc.stderr[-2000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return {**result, "sps": result["env_steps"] / result["seconds"]}


def check_sb3_python(path: Path) -> None:
    if not path.is_file():
        raise SystemExit(
            f"{path}: no SB3 virtualenv; create it with `make -C benchmarks sb3-venv` "
            "(see benchmarks/README.md) or pass --sb3-python"
        )


def run_rounds(args: argparse.Namespace, uri: str, scratch: Path) -> dict[str, list[dict[str, Any]]]:
    """Every row once per round, the starting row rotating from round to round."""
    rows: dict[str, Any] = {}
    for backend in args.backends:
        rows[f"rlpipe {backend} (store+MLflow on)"] = lambda b=backend: rlpipe_run(
            args, b, True, uri, scratch
        )
        rows[f"rlpipe {backend} (store+MLflow off)"] = lambda b=backend: rlpipe_run(
            args, b, False, uri, scratch
        )
    rows["sb3"] = lambda: sb3_run(args)
    names = list(rows)
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            samples[name].append(rows[name]())
            last = samples[name][-1]
            print(
                f"  round {r + 1}/{args.rounds}: {name} {last['sps']:,.0f} steps/s "
                f"({last['seconds']:.1f} s, {last['cpu_s']:.1f} CPU s)",
                flush=True,
            )
    return samples


def summarize(samples: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    sb3 = samples["sb3"]
    table = []
    for name, runs in samples.items():
        sps = [s["sps"] for s in runs]
        table.append(
            {
                "row": name,
                "median_sps": median(sps),
                "min_sps": min(sps),
                "max_sps": max(sps),
                "median_s": median([s["seconds"] for s in runs]),
                "median_cpu_s": median([s["cpu_s"] for s in runs]),
                "env_steps": runs[0]["env_steps"],
                "vs_sb3": median([a["sps"] / b["sps"] for a, b in zip(runs, sb3)]),
                "cpu_vs_sb3": median([b["cpu_s"] / a["cpu_s"] for a, b in zip(runs, sb3)]),
                "runs": runs,
            }
        )
    return table


COLUMNS = [
    ("row", "row", ""),
    ("median_sps", "median steps/s", ",.0f"),
    ("min_sps", "min", ",.0f"),
    ("max_sps", "max", ",.0f"),
    ("median_s", "median s", ".2f"),
    ("median_cpu_s", "median CPU s", ".2f"),
    ("vs_sb3", "x SB3 (paired)", ".2f"),
    ("cpu_vs_sb3", "x SB3 per CPU s", ".2f"),
]


def main() -> None:
    args = parse_args()
    check_sb3_python(args.sb3_python)
    set_threads(args.threads)
    print(
        f"CartPole-v1, {N_ENVS} envs x {N_STEPS} steps, {N_EPOCHS} epochs x batch {BATCH_SIZE}, "
        f"64x64 tanh, lr {LR:g}, {args.total_steps:,} env steps per run, {args.rounds} rounds"
    )
    with tempfile.TemporaryDirectory(prefix="rlpipe-sb3cmp-") as scratch:
        uri = f"sqlite:///{scratch}/mlflow.db"
        prepare_tracking(uri, load_cfg(args.params, []).trainer.exp_name)  # as after a user's first run
        table = summarize(run_rounds(args, uri, Path(scratch)))
    print_table(table, COLUMNS)
    for row in table[:-1]:
        verdict = "meets" if row["vs_sb3"] >= SPEEDUP_TARGET else "misses"
        print(f"{row['row']}: {row['vs_sb3']:.2f}x SB3 — {verdict} the >= {SPEEDUP_TARGET:g}x target")
    print_machine()
    write_json(
        args.json,
        {
            "benchmark": "sb3_compare",
            "total_steps": args.total_steps,
            "rounds": args.rounds,
            "eval": args.eval,
            "backends": args.backends,
            "threads": args.threads,
            "rows": table,
            "target_vs_sb3": SPEEDUP_TARGET,
        },
    )


if __name__ == "__main__":
    main()
