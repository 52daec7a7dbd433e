"""``trainer.compile`` on the CPU: eager against compiled runs, compile time and its cache included.

    .venv/bin/python benchmarks/speed/compile.py [--workloads w1 massive go1] [--rounds 2] [--smoke]
        [--json PATH]

Every run is a subprocess ``python -m rlpipe run PARAMS --set …`` of the working tree, in one of three
modes:

* ``eager``: ``trainer.compile=off``;
* ``cold``: ``trainer.compile=on`` with an empty ``TORCHINDUCTOR_CACHE_DIR`` (the first compiled run of
  these networks on a machine: Dynamo traces, inductor generates and builds every kernel);
* ``warm``: ``trainer.compile=on`` with the cache the ``cold`` run of the same round left (a second run).

Workloads (eval, store and tracking off, no periodic checkpoint, one torch thread):

* ``w1``: gymnasium ``CartPole-v1``, 8 envs × 128 steps, 64×64 tanh, PPO 4 epochs × minibatches of 256
  (SB3's and CleanRL's classic setting; ``benchmarks/peers/sb3_compare.py``), 1 + 7 iterations;
* ``massive``: torch ``CartPole``, 4,096 envs × 32 steps, 256×256 ReLU, 4 epochs × minibatches of
  16,384 (``benchmarks/peers/throughput.py``), 1 + 2 iterations;
* ``go1``: envpool ``Go1JoystickFlatTerrain-v1`` as ``configs/go1_envpool.yaml`` (64 envs × 64 steps,
  dict observations, asymmetric actor-critic, obs normalization), 1 + 3 iterations.

Per round the three modes run one after another, the order rotating between rounds. Figures per run:
``wall_s`` (command to exit, compile included), ``compile_s`` (the ``compile: … ready in`` lines: the
first call of each compiled step), and ``steady_sps``: env steps/s of the iterations after the first,
from ``curve.csv``'s ``time/iteration_s`` (compile excluded). The summary gives each figure's median
and range over the rounds, the steady speed-up (compiled / eager) and, where compiling is faster in
steady state, the iterations after which a cold or warm compile has paid for itself.
"""

from __future__ import annotations

import argparse
import csv
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

from _bench import NEVER, PROJECT_ROOT, load_average, median, print_table, write_json

MODES = ("eager", "cold", "warm")
COMPILE_LINE = re.compile(r"^compile: (.+) ready in ([\d.]+) s$", re.M)
COMMON = (
    "trainer.device=cpu",
    "trainer.stop_when=[]",
    "trainer.enable_eval=false",
    "trainer.num_threads=1",
    "store.enabled=false",
    "tracking.backend=none",
    f"trainer.save_freq={NEVER}",
    "trainer.exp_name=compile_bench",
)


def net(hidden: int, activation: str) -> str:
    return f"{{hidden_sizes: [{hidden}, {hidden}], activation: {activation}}}"


def workloads(smoke: bool) -> dict[str, tuple[Path, list[str], int]]:
    """Name → (params file, overrides, env steps per iteration)."""
    params, go1 = PROJECT_ROOT / "params.yaml", PROJECT_ROOT / "configs" / "go1_envpool.yaml"

    def ppo(envs: int, horizon: int, hidden: int, act: str, batch: int, iters: int) -> list[str]:
        return [
            f"trainer.num_envs={envs}",
            f"trainer.buffer_size={horizon}",
            f"trainer.iterations={iters}",
            f"policy.actor.network_cfg={net(hidden, act)}",
            f"policy.critic.network_cfg={net(hidden, act)}",
            f"algorithm.cfg.batch_size={batch}",
            "algorithm.cfg.n_epochs=4",
        ]

    w1 = ppo(4, 16, 64, "tanh", 32, 2) if smoke else ppo(8, 128, 64, "tanh", 256, 8)
    massive = ppo(64, 8, 256, "relu", 128, 2) if smoke else ppo(4096, 32, 256, "relu", 16384, 3)
    go1_iters, go1_horizon = (2, 8) if smoke else (4, 64)
    return {
        "w1": (params, ["env.id=CartPole-v1", "env.backend=auto", *w1], 64 if smoke else 1024),
        "massive": (params, ["env.id=CartPole", *massive], 512 if smoke else 131_072),
        "go1": (
            go1,
            [f"trainer.iterations={go1_iters}", f"trainer.buffer_size={go1_horizon}"],
            64 * go1_horizon,
        ),
    }


def run_once(params: Path, overrides: list[str], mode: str, cache: Path, data: Path) -> dict[str, Any]:
    """One ``rlpipe run`` in ``mode``: wall seconds, compile seconds per step, steady iteration seconds."""
    sets = [
        *COMMON,
        *overrides,
        f"trainer.data_dir={data}",
        f"trainer.compile={'off' if mode == 'eager' else 'on'}",
    ]
    command = [sys.executable, "-m", "rlpipe", "run", str(params), *(a for s in sets for a in ("--set", s))]
    env = {**_environ(), "PYTHONPATH": str(PROJECT_ROOT), "TORCHINDUCTOR_CACHE_DIR": str(cache)}
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=PROJECT_ROOT)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{mode} run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    compiled = {name: float(s) for name, s in COMPILE_LINE.findall(done.stderr)}
    with (data / "compile_bench" / "curve.csv").open(newline="") as fh:
        seconds = [float(row["time/iteration_s"]) for row in csv.DictReader(fh)]
    shutil.rmtree(data / "compile_bench")
    return {"wall_s": wall, "compile_s": compiled, "iteration_s": seconds}


def _environ() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}


def measure(name: str, spec: tuple[Path, list[str], int], rounds: int, scratch: Path) -> dict[str, Any]:
    """``rounds`` rounds of the three modes, order rotating; the raw runs of each mode."""
    params, overrides, steps = spec
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    for r in range(rounds):
        cache = scratch / f"{name}-cache-{r}"  # empty for this round's cold run, then warm
        order = ["eager", "cold", "warm"] if r % 2 == 0 else ["cold", "warm", "eager"]
        for mode in order:
            run = run_once(params, overrides, mode, cache, scratch / f"{name}-{mode}")
            run["steady_sps"] = steps * (len(run["iteration_s"]) - 1) / sum(run["iteration_s"][1:])
            runs[mode].append(run)
            print(
                f"{name} round {r + 1} {mode}: wall {run['wall_s']:.1f} s, "
                f"steady {run['steady_sps']:,.0f} sps, compile {run['compile_s']}",
                flush=True,
            )
    return {"steps_per_iteration": steps, "overrides": overrides, "params": params.name, "runs": runs}


def spread(values: list[float]) -> dict[str, float]:
    return {"median": median(values), "min": min(values), "max": max(values)}


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    """Medians and ranges per mode; steady speed-up; iterations for a compile to pay for itself."""
    runs, steps = result["runs"], result["steps_per_iteration"]
    out: dict[str, Any] = {}
    for mode in MODES:
        out[mode] = {
            "wall_s": spread([r["wall_s"] for r in runs[mode]]),
            "steady_sps": spread([r["steady_sps"] for r in runs[mode]]),
            "compile_s": spread([sum(r["compile_s"].values()) for r in runs[mode]]),
        }
    eager_sps = out["eager"]["steady_sps"]["median"]
    for mode in ("cold", "warm"):
        sps = out[mode]["steady_sps"]["median"]
        out[mode]["steady_speedup"] = sps / eager_sps
        saved = steps / eager_sps - steps / sps  # seconds per iteration compiling saves
        cost = out[mode]["compile_s"]["median"]
        out[mode]["break_even_iterations"] = cost / saved if saved > 0 else None
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--workloads", nargs="+", default=["w1", "massive", "go1"], choices=["w1", "massive", "go1"]
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--smoke", action="store_true", help="tiny sizes: checks the script (compiles included)"
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    path = args.json or PROJECT_ROOT / (
        "data/bench/compile-smoke.json" if args.smoke else "benchmarks/results/compile.json"
    )
    specs = workloads(args.smoke)
    load_before, results = load_average(), {}
    with tempfile.TemporaryDirectory(prefix="rlpipe-compile-") as scratch:
        for name in args.workloads:
            results[name] = measure(name, specs[name], args.rounds, Path(scratch))
            results[name]["summary"] = summarize(results[name])
    rows = [
        {
            "workload": name,
            "mode": mode,
            **{k: v["median"] for k, v in res["summary"][mode].items() if isinstance(v, dict)},
        }
        for name, res in results.items()
        for mode in MODES
    ]
    print_table(
        rows,
        [
            ("workload", "workload", ""),
            ("mode", "mode", ""),
            ("wall_s", "wall s", ".1f"),
            ("compile_s", "compile s", ".1f"),
            ("steady_sps", "steady sps", ",.0f"),
        ],
    )
    write_json(
        path,
        {
            "benchmark": "compile",
            "date": time.strftime("%Y-%m-%d"),
            "rounds": args.rounds,
            "load_average": [load_before, load_average()],
            "workloads": results,
        },
    )


if __name__ == "__main__":
    main()
