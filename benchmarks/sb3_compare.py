"""Small-batch speed against Stable-Baselines3: gymnasium CartPole-v1, env steps per second with updates.

    .venv/bin/python benchmarks/sb3_compare.py [--total-steps 100000] [--rounds 3] [--threads N]
        [--sb3-python benchmarks/.venv-sb3/bin/python] [--eval] [--json PATH]

Workload (SB3's classic CartPole setting): gymnasium ``CartPole-v1``, 8 envs × 128 steps per
rollout, PPO with 4 epochs × 4 minibatches of 256, separate 64×64 tanh actor and critic, CPU, the
same total env steps on every side (rounded up to whole rollouts of 1024 steps).

* rlpipe, in this process: ``params.yaml`` through ``rlpipe.config.load`` with ``env.id=CartPole-v1``
  (rlpipe's gymnasium adapter, sync vectorization), ``trainer.num_envs=8``,
  ``trainer.buffer_size=128``, ``algorithm.cfg.batch_size=256``, ``algorithm.cfg.n_epochs=4``,
  ``tracking.backend=none``, ``trainer.enable_eval=false`` (SB3's ``learn`` does not evaluate
  either; ``--eval`` keeps it on) and a temporary ``trainer.data_dir``; two rows, ``store.enabled``
  false and true. Timed: every ``rlpipe.run.loop.run_iteration`` plus closing the rollout store
  (its last writes), build excluded.
* SB3, in a subprocess of its own virtualenv (``--sb3-python``; see benchmarks/README.md):
  ``PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=8), n_steps=128, batch_size=256,
  n_epochs=4, policy_kwargs=dict(net_arch=[64, 64], activation_fn=nn.Tanh), device="cpu")``.
  Timed: ``learn(total_timesteps=...)``, construction and interpreter start-up excluded.

The three rows run one after another, round after round (``--rounds``), rotating which goes first
so none always runs on a cooler or hotter machine. The table gives the median steps/s per row
and, per rlpipe row, the median over rounds of its speed relative to SB3's in the same round.
Target: rlpipe ≥ 1.5× SB3's steps/s (SB3 does about 10,000 steps/s on a 2-core CPU).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from _bench import (
    DEFAULT_PARAMS,
    PROJECT_ROOT,
    load_cfg,
    median,
    print_machine,
    print_table,
    set_threads,
    write_json,
)

from rlpipe.run import build, run_iteration

N_ENVS, N_STEPS, BATCH_SIZE, N_EPOCHS = 8, 128, 256, 4
SPEEDUP_TARGET = 1.5
DEFAULT_SB3_PYTHON = PROJECT_ROOT / "benchmarks" / ".venv-sb3" / "bin" / "python"

SB3_SCRIPT = """
import json, sys, time
import torch
from torch import nn
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env

a = json.loads(sys.argv[1])
if a["threads"]:
    torch.set_num_threads(a["threads"])
env = make_vec_env("CartPole-v1", n_envs=a["n_envs"], seed=a["seed"])
model = PPO("MlpPolicy", env, n_steps=a["n_steps"], batch_size=a["batch_size"], n_epochs=a["n_epochs"],
            policy_kwargs=dict(net_arch=[64, 64], activation_fn=nn.Tanh), device="cpu", seed=a["seed"])
start = time.perf_counter()
model.learn(total_timesteps=a["total_steps"])
seconds = time.perf_counter() - start
print(json.dumps({"env_steps": int(model.num_timesteps), "seconds": seconds,
                  "torch_threads": torch.get_num_threads()}))
"""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--params", type=Path, default=DEFAULT_PARAMS, help="params file (default: params.yaml)")
    add("--total-steps", type=int, default=100_000, help="env steps per run (default 100000)")
    add("--rounds", type=int, default=3, help="times each row runs, interleaved (default 3)")
    add("--seed", type=int, default=0, help="seed of every run (default 0)")
    add("--threads", type=int, default=None, help="torch.set_num_threads on both sides (default: torch's)")
    add("--sb3-python", type=Path, default=DEFAULT_SB3_PYTHON, help="python of the SB3 virtualenv")
    add("--eval", action="store_true", help="keep rlpipe's periodic evaluation on")
    add("--json", type=Path, default=None, help="also write the results as JSON here")
    return parser.parse_args()


def rlpipe_run(args: argparse.Namespace, store: bool) -> dict[str, Any]:
    """One rlpipe run of ``--total-steps``; steps/s over the iterations and the final store flush."""
    iterations = math.ceil(args.total_steps / (N_ENVS * N_STEPS))
    net = "{hidden_sizes: [64, 64], activation: tanh}"
    with tempfile.TemporaryDirectory(prefix="rlpipe-sb3cmp-") as data_dir:
        cfg = load_cfg(args.params, [
            "env.id=CartPole-v1", f"trainer.num_envs={N_ENVS}", f"trainer.buffer_size={N_STEPS}",
            f"trainer.iterations={iterations}", f"trainer.seed={args.seed}", "trainer.device=cpu",
            f"trainer.enable_eval={str(args.eval).lower()}", f"trainer.data_dir={data_dir}",
            f"policy.actor.network_cfg={net}", f"policy.critic.network_cfg={net}",
            f"algorithm.cfg.batch_size={BATCH_SIZE}", f"algorithm.cfg.n_epochs={N_EPOCHS}",
            "tracking.backend=none", f"store.enabled={str(store).lower()}",
        ])
        exp = build(cfg)
        cfg.run_dir.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        try:
            while exp.iteration < cfg.trainer.iterations:
                run_iteration(exp)
        finally:
            if exp.store is not None:
                exp.store.close()
        seconds = time.perf_counter() - start
    return {"env_steps": exp.env_steps, "seconds": seconds, "sps": exp.env_steps / seconds}


def sb3_run(args: argparse.Namespace) -> dict[str, Any]:
    """One SB3 run in its own interpreter; the child times ``learn`` and prints JSON."""
    payload = {"n_envs": N_ENVS, "n_steps": N_STEPS, "batch_size": BATCH_SIZE, "n_epochs": N_EPOCHS,
               "total_steps": args.total_steps, "seed": args.seed, "threads": args.threads}
    proc = subprocess.run([str(args.sb3_python), "-c", SB3_SCRIPT, json.dumps(payload)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"SB3 run failed ({args.sb3_python}):\n{proc.stderr[-2000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return {**result, "sps": result["env_steps"] / result["seconds"]}


def check_sb3_python(path: Path) -> None:
    if not path.is_file():
        raise SystemExit(f"{path}: no SB3 virtualenv; create it with `make -C benchmarks sb3-venv` "
                         "(see benchmarks/README.md) or pass --sb3-python")


def run_rounds(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    """Every row once per round, the starting row rotating from round to round."""
    rows = {"rlpipe (store off)": lambda: rlpipe_run(args, store=False),
            "rlpipe (store on)": lambda: rlpipe_run(args, store=True),
            "sb3": lambda: sb3_run(args)}
    names = list(rows)
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            samples[name].append(rows[name]())
            print(f"  round {r + 1}/{args.rounds}: {name} {samples[name][-1]['sps']:,.0f} steps/s "
                  f"({samples[name][-1]['seconds']:.1f} s)", flush=True)
    return samples


def summarize(samples: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    sb3 = [s["sps"] for s in samples["sb3"]]
    table = []
    for name, runs in samples.items():
        sps = [s["sps"] for s in runs]
        table.append({"row": name, "median_sps": median(sps), "min_sps": min(sps), "max_sps": max(sps),
                      "median_s": median([s["seconds"] for s in runs]), "env_steps": runs[0]["env_steps"],
                      "vs_sb3": median([a / b for a, b in zip(sps, sb3)]), "runs": runs})
    return table


COLUMNS = [
    ("row", "row", ""), ("median_sps", "median steps/s", ",.0f"), ("min_sps", "min", ",.0f"),
    ("max_sps", "max", ",.0f"), ("median_s", "median s", ".2f"), ("env_steps", "env steps", ","),
    ("vs_sb3", "x SB3 (paired)", ".2f"),
]


def main() -> None:
    args = parse_args()
    check_sb3_python(args.sb3_python)
    set_threads(args.threads)
    print(f"CartPole-v1, {N_ENVS} envs x {N_STEPS} steps, {N_EPOCHS} epochs x batch {BATCH_SIZE}, "
          f"64x64 tanh, {args.total_steps:,} env steps per run, {args.rounds} rounds")
    table = summarize(run_rounds(args))
    print_table(table, COLUMNS)
    for row in table[:2]:
        verdict = "meets" if row["vs_sb3"] >= SPEEDUP_TARGET else "misses"
        print(f"{row['row']}: {row['vs_sb3']:.2f}x SB3 — {verdict} the >= {SPEEDUP_TARGET:g}x target")
    print_machine()
    write_json(args.json, {"benchmark": "sb3_compare", "total_steps": args.total_steps,
                           "rounds": args.rounds, "eval": args.eval, "rows": table,
                           "target_vs_sb3": SPEEDUP_TARGET})


if __name__ == "__main__":
    main()
