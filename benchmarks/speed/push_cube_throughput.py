"""PushCube CPU throughput: env steps/s of the C engine (rollout thread pool) and of MuJoCo Warp.

For every (engine, threads, num_envs) configuration the env is built once, then the
configurations are timed in turns (interleaved, ``--repeats`` rounds) so that a change in machine
load hits all of them alike; the median of the rounds is reported, plus the ratio to the
one-thread C engine at the same N. "physics" times the batched ``PhysicsBatch.step`` alone (5
MuJoCo steps per control step), "env" the whole ``PushCube.step`` (controller, kinematics,
reward, auto-reset).

    python benchmarks/speed/push_cube_throughput.py                       # C engine, 1 thread and all cores
    python benchmarks/speed/push_cube_throughput.py --engines mujoco warp # + Warp on CPU (first run compiles
                                                                    #   its kernels for minutes)
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from rlpipe.envs import PushCube, build_env
from rlpipe.envs.tasks.push_cube.physics import default_threads


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--engines", nargs="+", default=["mujoco"], choices=["mujoco", "warp"])
    parser.add_argument(
        "--threads",
        type=int,
        nargs="+",
        default=None,
        help="rollout threads of the C engine (default: 1 and every usable core)",
    )
    parser.add_argument("--steps", type=int, default=20, help="control steps per timing")
    parser.add_argument("--repeats", type=int, default=3)
    return parser.parse_args()


def time_steps(env: PushCube, steps: int, physics_only: bool) -> float:
    """Control steps per second ×N over ``steps`` steps of random actions."""
    gen = torch.Generator().manual_seed(0)
    actions = [torch.rand(env.num_envs, *env.action_shape, generator=gen) * 2 - 1 for _ in range(steps)]
    ctrl = env._ctrl(actions[0].to(env.dtype))
    start = time.perf_counter()
    for action in actions:
        if physics_only:
            env.physics.step(ctrl)
        else:
            env.step(action)
    return env.num_envs * steps / (time.perf_counter() - start)


def main() -> None:
    args = parse()
    torch.set_num_threads(1)
    threads = args.threads or sorted({1, default_threads()})
    configs = [("mujoco", t, n) for t in threads for n in args.envs] if "mujoco" in args.engines else []
    configs += [("warp", 0, n) for n in args.envs] if "warp" in args.engines else []
    envs = {}
    for engine, nthread, n in configs:
        cfg = {"engine": engine, **({"num_threads": nthread} if engine == "mujoco" else {})}
        env = build_env("PushCube", n, "cpu", cfg)
        env.reset(seed=0)
        time_steps(env, 2, physics_only=False)  # warm-up (Warp compiles its kernels here)
        envs[(engine, nthread, n)] = env
    results: dict[tuple[str, int, int, bool], list[float]] = {}
    for _ in range(args.repeats):
        for key, env in envs.items():
            for physics_only in (True, False):
                results.setdefault((*key, physics_only), []).append(time_steps(env, args.steps, physics_only))
    print("| engine | threads | N | physics steps/s | env steps/s | env vs C 1-thread |")
    print("|---|---|---|---|---|---|")
    for engine, nthread, n in envs:
        phys = statistics.median(results[(engine, nthread, n, True)])
        full = statistics.median(results[(engine, nthread, n, False)])
        base = statistics.median(results.get(("mujoco", 1, n, False), [float("nan")]))
        label = str(nthread) if engine == "mujoco" else "-"
        print(f"| {engine} | {label} | {n} | {phys:,.0f} | {full:,.0f} | {full / base:.2f}x |")


if __name__ == "__main__":
    main()
