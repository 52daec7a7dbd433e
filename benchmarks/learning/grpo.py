"""GRPO figures: time to solve torch CartPole (shared vs independent group resets) and update memory.

    .venv/bin/python benchmarks/learning/grpo.py                   # both parts
    .venv/bin/python benchmarks/learning/grpo.py --part solve --seeds 0 1 2 --max-iterations 40
    .venv/bin/python benchmarks/learning/grpo.py --part memory

Solve: ``configs/grpo_cartpole.yaml`` (``kl_coef: 0``, from scratch) with an evaluation after every
iteration (16 envs, deterministic actions); a run is solved at the first iteration whose mean eval
return is >= 475. ``stable_it`` also reports when it first held for 3
evaluations in a row, because a lucky greedy policy can score 500 once early. Reported:
iterations, env steps (N·T per iteration, including the steps an env takes after its first done,
which GRPO masks), and the wall and process-CPU seconds of collect + advantage + update (one
``Trainer.step`` of a ``rlpipe.trainer.Trainer`` whose console rows are captured; the evaluation,
by an ``rlpipe.evaluation.Evaluator`` of its own, excluded), with one torch thread by default. On
a shared machine wall time is noisy and CPU time is the steadier figure; iterations and env steps
are exact for a seed.

Memory: one update of GRPO (actor-only) against one update of PPO (actor + a critic of the same
size) on the same all-valid rollout and minibatch size. Measured with ``torch.profiler``'s memory
timeline (``profile_memory=True``; the public ``export_memory_timeline`` JSON): every tensor the
update creates or touches is tracked, pre-existing ones included, and the reported figure is the
peak of their summed bytes, with the breakdown by the profiler's categories at that peak. A
second, earlier update is run unprofiled so the Adam moments exist (steady state, not the first
step). ``tracemalloc`` would miss torch's allocations, and RSS deltas are dominated by allocator
caching at these sizes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

import gymnasium as gym
import torch
from _bench import start_quietly
from torch.profiler import ProfilerActivity, profile

from rlpipe import config
from rlpipe.algorithms import build_algo
from rlpipe.envs import build_env
from rlpipe.evaluation import EVAL_SEED_OFFSET, Evaluator
from rlpipe.policies import build_policy
from rlpipe.rollout import allocate_rollout
from rlpipe.trainer import Trainer

PARAMS = Path(__file__).resolve().parents[2] / "configs" / "grpo_cartpole.yaml"
SOLVED = 475.0
STABLE = 3
"""Evaluations in a row >= SOLVED that count as a stable solve (a lucky greedy policy can hit 500 once)."""
EVAL_ENVS = 16
CATEGORIES = (
    "parameter",
    "optimizer_state",
    "input",
    "temporary",
    "activation",
    "gradient",
    "autograd_detail",
    "unknown",
)


# ---------------------------------------------------------------- solve CartPole


def solve(seed: int, group_reset: str, max_iterations: int, overrides: list[str]) -> dict:
    """Train until the eval return first reaches ``SOLVED`` and until it held for ``STABLE`` evals.

    Returns the iterations, env steps and wall/CPU seconds of the first hit, and the iteration
    at which the eval return had stayed >= ``SOLVED`` for ``STABLE`` evaluations in a row.
    """
    with tempfile.TemporaryDirectory() as data_dir:
        cfg = config.load(
            PARAMS,
            [
                "tracking.backend=none",
                "store.enabled=false",
                f"trainer.data_dir={data_dir}",
                f"trainer.seed={seed}",
                f"trainer.iterations={max_iterations}",
                "trainer.enable_eval=false",
                "trainer.save_freq=1000000000",
                "algorithm.cfg.kl_coef=0",
                f"algorithm.cfg.group_reset={group_reset}",
                *overrides,
            ],
        )
        trainer = start_quietly(Trainer(cfg))
        eval_env = build_env(cfg.env.id, EVAL_ENVS, trainer.algo.device, cfg.env.cfg)
        evaluate = Evaluator(eval_env, trainer.policy, num_episodes=1, seed=seed + EVAL_SEED_OFFSET)
        wall_s = cpu_s = 0.0
        first: dict = {"solved": False}
        curve: list[int] = []
        try:
            while trainer.iteration < max_iterations:
                wall0, cpu0 = time.perf_counter(), time.process_time()
                trainer.step()  # collect → advantage → update, timed without the evaluation
                wall_s += time.perf_counter() - wall0
                cpu_s += time.process_time() - cpu0
                curve.append(round(evaluate()["eval/return_mean"]))
                if curve[-1] >= SOLVED and not first["solved"]:
                    first = {
                        "solved": True,
                        "iterations": trainer.iteration,
                        "env_steps": trainer.env_steps,
                        "wall_s": wall_s,
                        "cpu_s": cpu_s,
                    }
                if len(curve) >= STABLE and min(curve[-STABLE:]) >= SOLVED:
                    break
        finally:
            trainer.close()
        if not first["solved"]:
            first = {
                "solved": False,
                "iterations": trainer.iteration,
                "env_steps": trainer.env_steps,
                "wall_s": wall_s,
                "cpu_s": cpu_s,
            }
        held = len(curve) >= STABLE and min(curve[-STABLE:]) >= SOLVED
        return {**first, "stable": trainer.iteration if held else None, "curve": curve}


def solve_table(seeds: list[int], max_iterations: int, overrides: list[str]) -> None:
    print(
        f"GRPO on torch CartPole from scratch, until mean eval return >= {SOLVED:.0f} on {EVAL_ENVS} "
        f"envs (max {max_iterations} iterations; {' '.join(overrides) or 'example config'}; "
        f"torch threads {torch.get_num_threads()})"
    )
    print(
        f"{'group_reset':<12} {'seed':>4} {'iterations':>10} {'env_steps':>10} {'wall_s':>7} "
        f"{'cpu_s':>7} {'stable_it':>9}  eval return after each iteration"
    )
    results: dict[str, list[dict]] = {"shared": [], "independent": []}
    for seed in seeds:
        for mode in results:
            r = solve(seed, mode, max_iterations, overrides)
            results[mode].append(r)
            its = r["iterations"] if r["solved"] else f">{r['iterations']}"
            stable = r["stable"] or f">{max_iterations}"
            print(
                f"{mode:<12} {seed:>4} {its:>10} {r['env_steps']:>10} {r['wall_s']:>7.1f} "
                f"{r['cpu_s']:>7.1f} {stable:>9}  {r['curve']}",
                flush=True,
            )
    print(
        f"\nside by side: median [min, max] over seeds; first eval >= {SOLVED:.0f}, and stable_it: "
        f"first iteration ending {STABLE} evals >= {SOLVED:.0f} in a row (unsolved: the budget)"
    )
    print(
        f"{'':<12} {'iterations':>12} {'env_steps (k)':>16} {'wall_s':>12} {'cpu_s':>12} "
        f"{'stable_it':>12} {'solved':>7}"
    )
    for mode, rs in results.items():
        cells = [
            _spread([r[key] * scale for r in rs])
            for key, scale in (("iterations", 1), ("env_steps", 1e-3), ("wall_s", 1), ("cpu_s", 1))
        ]
        cells.append(_spread([r["stable"] or max_iterations for r in rs]))
        solved = sum(r["solved"] for r in rs)
        print(
            f"{mode:<12} {cells[0]:>12} {cells[1]:>16} {cells[2]:>12} {cells[3]:>12} "
            f"{cells[4]:>12} {solved:>4}/{len(rs)}"
        )


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.0f} [{min(values):.0f}, {max(values):.0f}]"


# ---------------------------------------------------------------- update memory


def all_valid_rollout(n: int, t: int, obs_dim: int) -> object:
    """``[n, t+1]`` rollout without dones (every step valid for GRPO), random rewards and values."""
    gen = torch.Generator().manual_seed(0)
    ro = allocate_rollout(n, t, (obs_dim,), (), torch.int64, "cpu")
    ro["obs"].copy_(torch.randn(n, t + 1, obs_dim, generator=gen))
    ro["action"][:, :-1] = torch.randint(0, 2, (n, t), generator=gen)
    ro["sample_log_prob"][:, :-1] = -0.6931
    ro["reward"][:, :-1] = torch.rand(n, t, generator=gen)
    ro["value"].copy_(torch.randn(n, t + 1, generator=gen))
    return ro


def peak_update_bytes(
    algo_name: str,
    policy_name: str,
    hidden: list[int],
    rollout_shape: tuple,
    batch_size: int,
    kl_coef: float = 0.0,
) -> dict:
    """Peak live bytes during one (second) update, with the category breakdown at the peak."""
    obs_dim = 4
    net = {"type": "mlp", "network_cfg": {"hidden_sizes": hidden, "activation": "tanh"}}
    block = {"name": policy_name, "actor": net, "critic": net if policy_name == "actor_critic" else None}
    torch.manual_seed(0)
    policy = build_policy(block, gym.spaces.Box(-1, 1, (obs_dim,)), gym.spaces.Discrete(2), "cpu")
    cfg = {"batch_size": batch_size, "n_epochs": 1}
    if algo_name == "grpo":
        cfg["kl_coef"] = kl_coef
    algo = build_algo(algo_name, cfg, policy, "cpu")
    algo.update(all_valid_rollout(*rollout_shape, obs_dim))  # Adam moments now exist
    rollout = all_valid_rollout(*rollout_shape, obs_dim)
    with profile(
        activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True
    ) as prof:
        algo.update(rollout)
    with tempfile.NamedTemporaryFile(suffix=".json") as fh, warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # deprecated for CUDA snapshots; CPU has no other
        prof.export_memory_timeline(fh.name, device="cpu")
        _, sizes = json.loads(Path(fh.name).read_text())
    at_peak = max(sizes, key=lambda row: sum(row[1:]))
    return {
        "peak": sum(at_peak[1:]),
        **dict(zip(CATEGORIES, at_peak[1:])),
        "params": sum(p.numel() * p.element_size() for p in policy.parameters()),
    }


def memory_table() -> None:
    rollout_shape, batch_size = (64, 500), 4096
    print(
        f"\nPeak memory of one update, rollout {rollout_shape[0]} envs x {rollout_shape[1]} steps "
        f"(all valid), minibatch {batch_size}, 1 epoch; torch.profiler memory timeline (CPU)"
    )
    print(
        f"{'hidden':<11} {'update':<20} {'params MB':>9} {'peak MB':>8} {'vs PPO':>7}  "
        "at peak: param / optim / grad / activ+temp+autograd / input+unknown (MB)"
    )
    for hidden in ([64, 64], [256, 256], [1024, 1024]):
        rows = {
            "PPO (actor+critic)": peak_update_bytes("ppo", "actor_critic", hidden, rollout_shape, batch_size),
            "GRPO kl_coef=0": peak_update_bytes("grpo", "actor_only", hidden, rollout_shape, batch_size),
            "GRPO kl_coef=0.02": peak_update_bytes(
                "grpo", "actor_only", hidden, rollout_shape, batch_size, kl_coef=0.02
            ),
        }
        ppo_peak = rows["PPO (actor+critic)"]["peak"]
        for name, r in rows.items():
            mb = {k: v / 1e6 for k, v in r.items()}
            work = mb["activation"] + mb["temporary"] + mb["autograd_detail"]
            print(
                f"{str(hidden):<11} {name:<20} {mb['params']:>9.2f} {mb['peak']:>8.2f} "
                f"{r['peak'] / ppo_peak:>7.2f}  {mb['parameter']:.2f} / {mb['optimizer_state']:.2f} / "
                f"{mb['gradient']:.2f} / {work:.2f} / {mb['input'] + mb['unknown']:.2f}",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("solve", "memory", "all"), default="all")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--max-iterations", type=int, default=40)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads (1: CPU seconds stay meaningful on a shared machine)",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        help="extra params override for the solve runs, e.g. trainer.num_envs=128",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    if args.part in ("solve", "all"):
        solve_table(args.seeds, args.max_iterations, args.overrides)
    if args.part in ("memory", "all"):
        memory_table()
    print(f"\n(benchmark took {time.perf_counter() - start:.0f}s)")


if __name__ == "__main__":
    main()
