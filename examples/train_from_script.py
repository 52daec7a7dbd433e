"""Train PPO on your own env object from a script: the same run directory, stores, checkpoints and
MLflow run as ``rlpipe run``.

    python examples/train_from_script.py [--iterations 20] [--data-dir data]
"""

from __future__ import annotations

import argparse

from windy_cartpole import WindyCartPole

from rlpipe import Trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--data-dir", default="data")
    args = parser.parse_args()
    trainer = Trainer.from_params(
        "params.yaml",
        overrides={
            "trainer.exp_name": "windy_script",
            "trainer.data_dir": args.data_dir,
            "trainer.iterations": args.iterations,
            "trainer.num_envs": 64,
        },
        env=lambda num_envs, device: WindyCartPole(num_envs, device, wind=1.0),  # training envs
        eval_env=lambda num_envs, device: WindyCartPole(num_envs, device, wind=1.0),  # eval envs
    )
    summary = trainer.train()
    print(
        f"windy CartPole: eval return {summary.get('eval/return_mean', float('nan')):.1f} after "
        f"{summary['env_steps']} env steps → {trainer.run_dir}"
    )


if __name__ == "__main__":
    main()
