"""HalfCheetah-v5, 1M env steps: rlpipe on envpool against Stable-Baselines3 on gymnasium.

Both sides use rl-baselines3-zoo's tuned PPO hyperparameters for HalfCheetah (``hyperparams/ppo.yml``:
VecNormalize obs + reward, 512 steps per update, 20 epochs × minibatches of 64, gamma 0.98,
lr 2.0633e-5, ent 4.0e-4, clip 0.1, GAE 0.92, max grad norm 0.8, vf 0.58, log_std_init −2,
256×256 ReLU actor and critic). SB3 runs them as published (1 gymnasium env × 512 steps); rlpipe
runs the same 512 transitions per update as ``--rlpipe-envs`` envpool envs × 512/envs steps.
Each side reports the wall and process CPU time of ``learn``/the iterations (build excluded; on
a machine shared with other jobs the CPU time is the steadier figure) and the final
deterministic evaluation return over ``--eval-episodes`` episodes (SB3: normalization statistics
frozen; rlpipe: its evaluator).

The SB3 side runs as a subprocess with ``--sb3-python`` (a separate virtualenv: SB3 is never a
project dependency). Run: ``.venv/bin/python benchmarks/peers/sb3_halfcheetah.py [--steps 1000000]
[--side both|rlpipe|sb3] [--parallel] [--json out.json]``. The two sides run one after the
other (a 1M-step run cannot be interleaved; compare their load averages before quoting the ratio),
or with ``--parallel`` at the same time, so that a machine shared with other jobs loads both alike.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))  # the shared helpers (rlpipe's side only)
ZOO = {
    "n_steps": 512,
    "batch_size": 64,
    "n_epochs": 20,
    "gamma": 0.98,
    "learning_rate": 2.0633e-05,
    "ent_coef": 0.000401762,
    "clip_range": 0.1,
    "gae_lambda": 0.92,
    "max_grad_norm": 0.8,
    "vf_coef": 0.58096,
}
"""rl-baselines3-zoo ``ppo.yml`` HalfCheetah (tuned), plus normalize: true and the policy_kwargs below."""


def sb3_side(steps: int, seed: int, eval_episodes: int) -> dict[str, Any]:
    """SB3 PPO with the zoo hyperparameters on gymnasium HalfCheetah-v5 (runs in the SB3 venv)."""
    import gymnasium as gym
    import numpy as np
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    torch.set_num_threads(1)
    env = VecNormalize(make_vec_env("HalfCheetah-v5", n_envs=1, seed=seed), gamma=ZOO["gamma"])
    policy_kwargs = {
        "log_std_init": -2,
        "ortho_init": False,
        "activation_fn": torch.nn.ReLU,
        "net_arch": {"pi": [256, 256], "vf": [256, 256]},
    }
    model = PPO("MlpPolicy", env, seed=seed, device="cpu", policy_kwargs=policy_kwargs, verbose=1, **ZOO)
    start, cpu = time.perf_counter(), time.process_time()
    model.learn(total_timesteps=steps)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    env.training, env.norm_reward = False, False
    returns = []
    eval_env = gym.make("HalfCheetah-v5")
    for episode in range(eval_episodes):
        obs, _ = eval_env.reset(seed=10_000 + episode)
        total, done = 0.0, False
        while not done:
            action, _ = model.predict(env.normalize_obs(obs[None]), deterministic=True)
            obs, reward, terminated, truncated, _ = eval_env.step(action[0])
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return {
        "side": "sb3",
        "env": "gymnasium HalfCheetah-v5",
        "steps": steps,
        "wall_s": wall,
        "cpu_s": cpu,
        "steps_per_s": steps / wall,
        "eval_return_mean": float(np.mean(returns)),
        "eval_return_std": float(np.std(returns)),
        "load_avg": os.getloadavg(),
    }


def rlpipe_side(
    steps: int, seed: int, eval_episodes: int, num_envs: int, mode: str, params: Path | None = None
) -> dict[str, Any]:
    """rlpipe PPO on envpool HalfCheetah-v5: the zoo's hyperparameters, or those of ``params`` (a YAML)."""
    from _bench import start_quietly  # here: the SB3 side runs where rlpipe is not installed

    from rlpipe import config
    from rlpipe.trainer import Trainer

    if params is not None:
        cfg = config.load(params)
        num_envs, horizon = cfg.trainer.num_envs, cfg.trainer.buffer_size
    else:
        horizon = ZOO["n_steps"] // num_envs
    iterations = -(-steps // (num_envs * horizon))
    net = {"type": "mlp", "network_cfg": {"hidden_sizes": [256, 256], "activation": "relu"}}
    with tempfile.TemporaryDirectory() as tmp:
        common = [
            f"trainer.data_dir={tmp}",
            f"trainer.seed={seed}",
            "trainer.device=cpu",
            "trainer.num_threads=1",
            f"trainer.iterations={iterations}",
            "trainer.enable_eval=true",
            f"trainer.eval_freq={10 * steps}",
            f"trainer.num_eval_envs={eval_episodes}",
            "trainer.num_eval_episodes=1",
            f"trainer.save_freq={10 * steps}",
            "store.enabled=false",
            "tracking.backend=none",
            "env.id=HalfCheetah-v5",
            "env.backend=envpool",
            f"env.cfg={{mode: {mode}, resume: restart}}",
        ]
        overrides = (
            common
            if params is not None
            else [
                *common,
                "trainer.exp_name=halfcheetah_envpool",
                f"trainer.num_envs={num_envs}",
                f"trainer.buffer_size={horizon}",
                "policy.obs_normalization=true",
                "policy.log_std_init=-2.0",
                f"policy.actor={json.dumps(net)}",
                f"policy.critic={json.dumps(net)}",
                "algorithm.name=ppo",
                "algorithm.cfg="
                + json.dumps(
                    {
                        "learning_rate": ZOO["learning_rate"],
                        "batch_size": ZOO["batch_size"],
                        "n_epochs": ZOO["n_epochs"],
                        "gamma": ZOO["gamma"],
                        "gae_lambda": ZOO["gae_lambda"],
                        "clip_coef": ZOO["clip_range"],
                        "ent_coef": ZOO["ent_coef"],
                        "vf_coef": ZOO["vf_coef"],
                        "max_grad_norm": ZOO["max_grad_norm"],
                        "normalize_rewards": True,
                    }
                ),
            ]
        )
        trainer = start_quietly(Trainer(config.load(params or ROOT / "params.yaml", overrides)))
        parts = trainer.parts
        evaluate, parts.evaluator = parts.evaluator, None  # timed like SB3's learn: no evaluation inside
        assert evaluate is not None
        try:
            start, cpu, metrics = time.perf_counter(), time.process_time(), {}
            for i in range(iterations):
                metrics = trainer.step(checkpoint=False)
                if i % 50 == 49:  # progress, so an unfinished run still says something
                    print(
                        f"rlpipe {(i + 1) * num_envs * horizon} steps {time.perf_counter() - start:.0f} s "
                        f"train return {metrics.get('train/episode_return_mean')}",
                        file=sys.stderr,
                        flush=True,
                    )
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu
            metrics = evaluate()
        finally:
            trainer.close()
    done = iterations * num_envs * horizon
    label = f"{params.name}, " if params is not None else "zoo hyperparameters, "
    return {
        "side": "rlpipe",
        "env": f"envpool HalfCheetah-v5 ({label}{num_envs} envs, {mode})",
        "steps": done,
        "wall_s": wall,
        "cpu_s": cpu,
        "steps_per_s": done / wall,
        "eval_return_mean": metrics.get("eval/return_mean"),
        "eval_return_std": metrics.get("eval/return_std"),
        "load_avg": os.getloadavg(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--side", choices=("both", "rlpipe", "sb3"), default="both")
    parser.add_argument("--rlpipe-envs", type=int, default=8)
    parser.add_argument("--mode", choices=("sync", "async"), default="sync")
    parser.add_argument(
        "--rlpipe-params",
        type=Path,
        default=None,
        help="rlpipe's own hyperparameters from this YAML (its num_envs and buffer_size) "
        "instead of the zoo's, e.g. configs/ppo_halfcheetah_envpool.yaml",
    )
    parser.add_argument(
        "--sb3-python",
        default=str(ROOT / "benchmarks" / ".venv-sb3" / "bin" / "python"),
        help="Python of a venv with stable-baselines3 and mujoco (never the project's).",
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--parallel",
        action="store_true",
        help="run the two sides at the same time (a loaded machine loads both alike)",
    )
    args = parser.parse_args()
    rows = []
    load_start = os.getloadavg()
    cmd = [
        args.sb3_python,
        __file__,
        "--side",
        "sb3",
        "--steps",
        str(args.steps),
        "--seed",
        str(args.seed),
        "--eval-episodes",
        str(args.eval_episodes),
    ]
    if args.side == "both" and args.parallel:  # both sides at once: they share the machine's load
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        ours = rlpipe_side(
            args.steps, args.seed, args.eval_episodes, args.rlpipe_envs, args.mode, args.rlpipe_params
        )
        out, _ = child.communicate()
        if child.returncode:
            raise SystemExit(f"the SB3 side failed (exit {child.returncode})")
        rows = [json.loads(out.strip().splitlines()[-1]), ours]
    else:
        if args.side in ("both", "sb3"):
            if Path(sys.executable) == Path(args.sb3_python) or args.side == "sb3":
                rows.append(sb3_side(args.steps, args.seed, args.eval_episodes))
            else:
                out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                rows.append(json.loads(out.strip().splitlines()[-1]))
        if args.side in ("both", "rlpipe"):
            rows.append(
                rlpipe_side(
                    args.steps, args.seed, args.eval_episodes, args.rlpipe_envs, args.mode, args.rlpipe_params
                )
            )
    for row in rows:
        row["load_avg_start"] = load_start
    if args.side == "sb3":
        print(json.dumps(rows[0]))
        return
    for row in rows:
        print(
            f"{row['side']:7s} {row['env']:40s} {row['steps']:>9,} steps  {row['wall_s']:8.0f} s  "
            f"{row['cpu_s']:8.0f} CPU s  {row['steps_per_s']:7.0f} steps/s  "
            f"eval return {row['eval_return_mean']}"
        )
    if len(rows) == 2:
        sb3, ours = rows
        cpu_ratio = (sb3["cpu_s"] / sb3["steps"]) / (ours["cpu_s"] / ours["steps"])
        print(
            f"speed ratio rlpipe/sb3: {ours['steps_per_s'] / sb3['steps_per_s']:.2f}× (wall), "
            f"{cpu_ratio:.2f}× (CPU time per env step)"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
