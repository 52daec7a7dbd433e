"""rlpipe's drop-in ``OnPolicyRunner`` beside rsl_rl's own, on the same env object: env steps/s of ``learn``.

    .venv/bin/python benchmarks/peers/runner_vs_rsl_rl.py [--env module:factory] [--num-envs 64]
        [--horizon 24] [--iterations 10] [--rounds 5] [--hidden 128 128] [--threads 1]
        [--tracking none|mlflow] [--json benchmarks/results/runner_vs_rsl_rl.json]

``--env`` names a factory ``f(num_envs=N, device="cpu")`` returning an rsl_rl ``VecEnv``
(default: ``examples.rsl_rl_counting_env:make``, a torch env costing almost nothing, so the runners
are measured); the Isaac Lab and mjlab lanes pass a factory building their task's wrapped env. One
env object serves both sides, as a train script hands one env to its runner.

Both sides get the same rsl_rl 5.x ``train_cfg``: rsl_rl's PPO defaults (5 epochs × 4
minibatches, adaptive KL schedule, clipped value loss), ELU MLPs of ``--hidden`` on the ``policy``
group (the critic on every group), Gaussian actions at std 1. Each round builds a fresh runner per
side (untimed) and times ``runner.learn(--iterations)``: rsl_rl's with ``log_dir=None`` (no writer),
rlpipe's on a temporary ``log_dir`` with every rollout stored and its checkpoints (what a user
gets), tracking ``--tracking``. Sides alternate order every round; the table gives median env
steps/s per side and the median (min–max) of the per-round ratios rlpipe / rsl_rl.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the default env factory lives in examples/

import torch
from _bench import median, print_machine, print_table, set_threads, write_json

SIDES = ("rsl_rl", "rlpipe")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    add = parser.add_argument
    add("--env", default="examples.rsl_rl_counting_env:make", help="module:factory of an rsl_rl VecEnv")
    add("--num-envs", type=int, default=64, help="N (default 64)")
    add("--horizon", type=int, default=24, help="num_steps_per_env (default 24)")
    add("--iterations", type=int, default=10, help="iterations per timed learn() (default 10)")
    add("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    add("--hidden", type=int, nargs="+", default=[128, 128], help="hidden sizes of actor and critic")
    add("--threads", type=int, default=1, help="torch threads (default 1)")
    add("--tracking", choices=("none", "mlflow"), default="none", help="rlpipe's tracking backend")
    add("--json", type=Path, default=None, help="write the results here")
    return parser.parse_args()


def load_factory(spec: str) -> Any:
    """The callable ``module:attr`` names."""
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)


def train_cfg(env: Any, horizon: int, hidden: list[int], iterations: int) -> dict[str, Any]:
    """rsl_rl's PPO defaults as a 5.x train config for ``env``'s observation groups."""
    groups = [str(k) for k in env.get_observations().keys()]
    model = {"class_name": "MLPModel", "hidden_dims": hidden, "activation": "elu"}
    return {
        "class_name": "OnPolicyRunner",
        "num_steps_per_env": horizon,
        "max_iterations": iterations,
        "save_interval": 10**6,
        "obs_groups": {"actor": ["policy"], "critic": groups},
        "logger": "tensorboard",
        "actor": {**model, "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0}},
        "critic": {**model, "distribution_cfg": None},
        "algorithm": {"class_name": "PPO", "rnd_cfg": None, "symmetry_cfg": None},
    }


def build(side: str, env: Any, cfg: dict[str, Any], log_dir: Path, tracking: str) -> Any:
    """A fresh runner of ``side`` over ``env`` (its model printout and banner swallowed)."""
    import copy

    with contextlib.redirect_stdout(io.StringIO()):
        if side == "rsl_rl":
            from rsl_rl.runners import OnPolicyRunner

            return OnPolicyRunner(env, copy.deepcopy(cfg), log_dir=None, device="cpu")
        from rlpipe.rsl_rl import OnPolicyRunner as RlpipeRunner

        return RlpipeRunner(
            env, cfg, log_dir=str(log_dir), device="cpu", overrides={"tracking.backend": tracking}
        )


def timed_learn(runner: Any, iterations: int) -> float:
    """Seconds of ``runner.learn(iterations)`` (console output swallowed)."""
    with contextlib.redirect_stdout(io.StringIO()):
        start = time.perf_counter()
        runner.learn(iterations)
        return time.perf_counter() - start


def main() -> None:
    args = parse_args()
    set_threads(args.threads)
    env = load_factory(args.env)(num_envs=args.num_envs, device="cpu")
    cfg = train_cfg(env, args.horizon, args.hidden, args.iterations)
    steps = args.iterations * args.num_envs * args.horizon
    sps: dict[str, list[float]] = {side: [] for side in SIDES}
    with tempfile.TemporaryDirectory() as tmp:
        for side in SIDES:  # warm-up: imports, first allocations
            timed_learn(build(side, env, cfg, Path(tmp) / f"warmup-{side}", args.tracking), 1)
        for r in range(args.rounds):
            for side in SIDES if r % 2 == 0 else SIDES[::-1]:
                runner = build(side, env, cfg, Path(tmp) / f"round-{r}", args.tracking)
                sps[side].append(steps / timed_learn(runner, args.iterations))
                print(f"round {r + 1}/{args.rounds} {side}: {sps[side][-1]:,.0f} env steps/s", flush=True)
    ratios = [a / b for a, b in zip(sps["rlpipe"], sps["rsl_rl"], strict=True)]
    rows = [
        {"side": side, "env_steps_per_s": median(sps[side]), "min": min(sps[side]), "max": max(sps[side])}
        for side in SIDES
    ]
    rows[1] |= {"vs_rsl_rl": median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios)}
    print_machine()
    print(f"env {args.env}, N={args.num_envs}, T={args.horizon}, {args.iterations} iterations per learn()")
    print_table(
        rows,
        [
            ("side", "side", "s"),
            ("env_steps_per_s", "env steps/s", ",.0f"),
            ("min", "min", ",.0f"),
            ("max", "max", ",.0f"),
            ("vs_rsl_rl", "rlpipe/rsl_rl", ".2f"),
            ("ratio_min", "ratio min", ".2f"),
            ("ratio_max", "ratio max", ".2f"),
        ],
    )
    results = {
        "benchmark": "runner_vs_rsl_rl",
        "args": {k: str(v) for k, v in vars(args).items()},
        "rows": rows,
        "ratios": ratios,
        "torch_version": torch.__version__,
    }
    write_json(args.json, results)


if __name__ == "__main__":
    main()
