"""Step by step, as rl8 users know it: ``collect()`` returns the ``[N, T+1]`` rollout, ``update()``
optimizes on it — with every rollout stored and every checkpoint written as ``rlpipe run`` does.

    python examples/step_by_step.py [--iterations 10] [--data-dir data]
"""

from __future__ import annotations

import argparse

from rlpipe import Trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--data-dir", default="data")
    args = parser.parse_args()
    trainer = Trainer.from_params(
        "params.yaml",
        overrides={
            "trainer.exp_name": "step_by_step",
            "trainer.data_dir": args.data_dir,
            "trainer.iterations": args.iterations,
            "tracking.backend": "none",
        },
    )
    for _ in range(args.iterations):
        rollout = trainer.collect()  # TensorDict [N, T+1]
        rewards = rollout["reward"][:, :-1].sum(dim=1).mean()  # anything you like between the stages
        metrics = trainer.update(rollout)
        print(
            f"iteration {trainer.iteration}: reward/env {float(rewards):6.1f}, "
            f"policy loss {metrics['update/policy_loss']:+.4f}"
        )
    path = trainer.save_checkpoint()
    trainer.close()
    print(f"checkpoint → {path}")


if __name__ == "__main__":
    main()
