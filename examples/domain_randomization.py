"""Domain randomization with an event: every K iterations a new wind force for the training envs.

    python examples/domain_randomization.py [--iterations 20] [--every 5] [--data-dir data]

The event sees the training env (``ctx.env``) after each update and changes its parameter; the
wind of every iteration is logged as ``dr/wind`` (console row, curve.csv, MLflow).
"""

from __future__ import annotations

import argparse
import random

from windy_cartpole import WindyCartPole

from rlpipe import Trainer


def randomize_wind(ctx, low: float = -2.0, high: float = 2.0, seed: int = 0) -> None:
    """Draw the next wind from a generator seeded by (seed, iteration): the run stays reproducible."""
    ctx.env.wind = random.Random(seed * 1_000_003 + ctx.iteration).uniform(low, high)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--every", type=int, default=5)
    parser.add_argument("--data-dir", default="data")
    args = parser.parse_args()
    trainer = Trainer.from_params(
        "params.yaml",
        overrides={
            "trainer.exp_name": "windy_dr",
            "trainer.data_dir": args.data_dir,
            "trainer.iterations": args.iterations,
            "trainer.num_envs": 64,
        },
        env=lambda num_envs, device: WindyCartPole(num_envs, device),
        eval_env=lambda num_envs, device: WindyCartPole(num_envs, device),
    )
    trainer.add_event("after_update", randomize_wind, every=args.every, low=-2.0, high=2.0)
    trainer.add_event("after_update", lambda ctx: ctx.log("dr/wind", ctx.env.wind))
    summary = trainer.train()
    print(
        f"trained under {args.iterations // args.every + 1} winds; eval return "
        f"{summary.get('eval/return_mean', float('nan')):.1f}"
    )


if __name__ == "__main__":
    main()
