"""Log a metric of your own to MLflow from an event: the pole angle spread of each rollout.

    python examples/custom_metric.py [--iterations 10] [--data-dir data]

``after_collect`` sees the ``[N, T+1]`` rollout; ``ctx.log`` puts a value into the iteration's
metrics, so it lands in the console row, ``curve.csv`` and the run's MLflow metrics at the same step.
"""

from __future__ import annotations

import argparse

from rlpipe import Callback, Trainer


class PoleAngleSpread(Callback):
    """An SB3-style callback object: one method per event it listens to."""

    def on_after_collect(self, ctx):
        angles = ctx.rollout["obs"][:, :-1, 2]  # [N, T] pole angle of every collected step
        ctx.log("custom/pole_angle_std", float(angles.std()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--data-dir", default="data")
    args = parser.parse_args()
    trainer = Trainer.from_params(
        "params.yaml",
        overrides={
            "trainer.exp_name": "custom_metric",
            "trainer.data_dir": args.data_dir,
            "trainer.iterations": args.iterations,
        },
    )
    trainer.add_callback(PoleAngleSpread())
    summary = trainer.train()
    print(
        f"logged custom/pole_angle_std for {summary['iterations']} iterations "
        f"(MLflow run {trainer.mlflow_run_id})"
    )


if __name__ == "__main__":
    main()
