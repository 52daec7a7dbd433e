"""Allocator settings against the update's cliff: CPU seconds and page faults of one PPO minibatch step.

    .venv/bin/python benchmarks/profile/allocator.py [--minibatch 32768 65536] [--steps 3] [--json PATH]

The minibatches of the scaling workload at 8,192 and 16,384 envs (N·T/8 with T=32): actor and
critic 256×256 ReLU MLPs over CartPole observations (rlpipe's ``build_mlp``), clipped surrogate +
value MSE + entropy, backward, grad clipping, Adam. Each allocator setting runs in a fresh process
(mallopt is process-wide): ``system`` (glibc defaults), ``threshold`` (mmap threshold 32 MiB, trim
1 GiB) and ``tuned`` (``rlpipe.runtime.allocator.tune_malloc``: mmap off). After
one warm-up step, ``--steps`` steps are timed in thread CPU time (page faults are system time, so
they count; other processes on a shared machine do not) and their minor page faults counted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

MODES = ("system", "threshold", "tuned")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minibatch", type=int, nargs="+", default=[32768, 65536], help="rows per step")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per process")
    parser.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "ROWS"), help=argparse.SUPPRESS)
    return parser.parse_args()


def child(mode: str, rows: int, steps: int) -> dict[str, float]:
    """One process: apply ``mode``, build the networks, time ``steps`` minibatch steps."""
    from rlpipe.runtime import allocator

    if mode == "tuned":
        assert allocator.tune_malloc()
    elif mode == "threshold":
        assert allocator.mallopt({-3: 32 * 2**20, -1: 2**30})
    import torch
    from torch.distributions import Categorical

    from rlpipe.policies.mlp import build_mlp

    torch.set_num_threads(1)
    torch.manual_seed(0)
    actor, critic = build_mlp(4, 2, [256, 256], "relu"), build_mlp(4, 1, [256, 256], "relu")
    params = [*actor.parameters(), *critic.parameters()]
    opt = torch.optim.Adam(params, lr=3e-4, foreach=True)
    obs, act = torch.randn(rows, 4), torch.randint(0, 2, (rows,))
    old, adv, ret = torch.randn(rows), torch.randn(rows), torch.randn(rows)

    def step() -> None:
        dist = Categorical(logits=actor(obs))
        ratio = (dist.log_prob(act) - old).exp()
        policy_loss = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()
        value_loss = (critic(obs).squeeze(-1) - ret).pow(2).mean()
        loss = policy_loss + 0.5 * value_loss - 0.01 * dist.entropy().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 0.5)
        opt.step()

    step()
    times, faults = [], []
    for _ in range(steps):
        f0, t0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.thread_time()
        step()
        times.append(time.thread_time() - t0)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    return {
        "mode": mode,
        "rows": rows,
        "cpu_s": statistics.median(times),
        "faults": statistics.median(faults),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "load": os.getloadavg()[0],
    }


def main() -> None:
    args = parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), args.steps)))
        return
    rows = []
    for size in args.minibatch:
        for mode in MODES:
            cmd = [sys.executable, __file__, "--child", mode, str(size), "--steps", str(args.steps)]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            rows.append(json.loads(out.strip().splitlines()[-1]))
            r = rows[-1]
            print(
                f"minibatch {size:>6,} {mode:>9}: {r['cpu_s']:.3f} CPU s/step, "
                f"{r['faults']:>9,.0f} faults/step, "
                f"peak RSS {r['peak_rss_mb']:,.0f} MB (load {r['load']:.1f})",
                flush=True,
            )
    for size in args.minibatch:
        by = {r["mode"]: r for r in rows if r["rows"] == size}
        print(
            f"minibatch {size:,}: tuned/threshold {by['tuned']['cpu_s'] / by['threshold']['cpu_s']:.2f}x, "
            f"tuned/system {by['tuned']['cpu_s'] / by['system']['cpu_s']:.2f}x CPU time per step"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"benchmark": "allocator", "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
