"""A notebook-style loop: iterate over the per-iteration metrics, stop when you like.

python examples/notebook_loop.py [--iterations 20] [--data-dir data]
"""

from __future__ import annotations

import argparse

from rlpipe import Trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--data-dir", default="data")
    args = parser.parse_args()
    trainer = Trainer.from_params(
        "params.yaml",
        overrides={
            "trainer.exp_name": "notebook_loop",
            "trainer.data_dir": args.data_dir,
            "trainer.iterations": args.iterations,
            "tracking.backend": "none",
        },
    )
    returns = []
    for metrics in trainer:  # one dict per iteration, as the console row shows
        returns.append(metrics.get("train/episode_return_mean", 0.0))
        if returns[-1] >= 475:  # a notebook decides when it has seen enough
            break
    print(f"{len(returns)} iterations, last training return {returns[-1]:.1f}; run in {trainer.run_dir}")


if __name__ == "__main__":
    main()
