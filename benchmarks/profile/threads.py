"""When do intra-op threads pay? An update step (actor + critic MLP, backward, Adam) at 1 thread vs more.

    .venv/bin/python benchmarks/profile/threads.py [--rows 256 1024 4096 16384] [--hidden 64 256 512]
        [--threads 2] [--repeats 7] [--steps 20] [--json PATH]

For every (minibatch rows, hidden width) the script times ``--steps`` update steps of two MLPs
``obs_dim=32 → hidden → hidden → 2`` (tanh, like the default actor and critic): forward of both,
a squared loss, backward and one Adam step (``foreach``, as rlpipe builds it). The thread counts
alternate sample by sample (``--repeats`` samples each) so load changes hit both alike. Reported:
the best (minimum) and the median time per step at each count, and the speed-up of ``--threads``
over 1 thread, best against best (the closest a shared machine gets to a quiet one) and median
against median (what a run on this machine would see). The last column is the rule
``trainer.num_threads: auto`` applies (:func:`rlpipe.runtime.threads.auto_threads`), so a row where the
rule picks more threads but the speed-up is below 1 shows the rule is wrong on this machine.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

import torch
from _bench import median, print_machine, print_table, write_json

from rlpipe.policies.mlp import build_mlp
from rlpipe.runtime.threads import auto_threads, linear_shapes

OBS_DIM, OUT_DIM = 32, 2


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--rows", type=int, nargs="+", default=[256, 1024, 4096, 16384], help="minibatch rows")
    add("--hidden", type=int, nargs="+", default=[64, 256, 512], help="hidden widths (two layers)")
    add("--threads", type=int, default=2, help="the thread count compared with 1 (default 2)")
    add("--repeats", type=int, default=7, help="samples per thread count (default 7)")
    add("--steps", type=int, default=20, help="update steps per sample (default 20)")
    add("--json", type=Path, default=None, help="also write the results as JSON here")
    return parser.parse_args()


def step_timer(rows: int, hidden: int) -> tuple[Any, list[torch.nn.Module]]:
    """A closure running one update step, and the networks it trains."""
    torch.manual_seed(0)
    nets = [
        build_mlp(OBS_DIM, OUT_DIM, [hidden, hidden], "tanh"),
        build_mlp(OBS_DIM, 1, [hidden, hidden], "tanh"),
    ]
    params = [p for net in nets for p in net.parameters()]
    optimizer = torch.optim.Adam(params, lr=1e-4, foreach=True)
    obs = torch.randn(rows, OBS_DIM)

    def step() -> None:
        loss = sum(net(obs).square().mean() for net in nets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step, nets


def sample(step: Any, steps: int, threads: int) -> float:
    torch.set_num_threads(threads)
    step()  # warm the thread pool at this count
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) / steps


def measure(args: argparse.Namespace, rows: int, hidden: int) -> dict[str, Any]:
    step, nets = step_timer(rows, hidden)
    times: dict[int, list[float]] = {1: [], args.threads: []}
    for r in range(args.repeats):
        order = (1, args.threads) if r % 2 == 0 else (args.threads, 1)
        for threads in order:
            times[threads].append(sample(step, args.steps, threads))
    one, many = times[1], times[args.threads]
    return {
        "rows": rows,
        "hidden": hidden,
        "ms_1": min(one) * 1e3,
        "ms_n": min(many) * 1e3,
        "median_ms_1": median(one) * 1e3,
        "median_ms_n": median(many) * 1e3,
        "speedup_best": min(one) / min(many),
        "speedup_median": median(one) / median(many),
        "auto": auto_threads(rows, linear_shapes(*nets), cores=args.threads),
    }


def main() -> None:
    args = parse_args()
    default = torch.get_num_threads()
    rows = [measure(args, r, h) for h in args.hidden for r in args.rows]
    torch.set_num_threads(default)
    n = args.threads
    print_table(
        rows,
        [
            ("rows", "rows", ""),
            ("hidden", "hidden", ""),
            ("ms_1", "best ms 1T", ".2f"),
            ("ms_n", f"best ms {n}T", ".2f"),
            ("speedup_best", f"{n}T speed-up (best)", ".2f"),
            ("median_ms_1", "median ms 1T", ".2f"),
            ("median_ms_n", f"median ms {n}T", ".2f"),
            ("speedup_median", f"{n}T speed-up (median)", ".2f"),
            ("auto", f"auto (of {n})", ""),
        ],
    )
    print_machine()
    write_json(args.json, {"benchmark": "threads", "threads": n, "rows": rows})


if __name__ == "__main__":
    main()
