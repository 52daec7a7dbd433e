"""Cost of one PPO minibatch step in rlpipe's update loop against a bare torch loop, same nets.

The rl-zoo HalfCheetah setting (``benchmarks/peers/sb3_halfcheetah.py``): 512 transitions per update,
20 epochs × minibatches of 64 = 160 optimizer steps per 512 env steps, 256×256 ReLU actor and
critic, observation normalization, obs 17 / action 6. At that ratio the per-minibatch cost of the
update decides the wall time of a 1M-step run, so this measures it in isolation:

* ``rlpipe``: ``PPO.update`` on a synthetic rollout ``[8, 65]`` (the loop, loss, clipping, Adam);
* ``bare``: the same maths written as a plain loop (index tensors, Normal log-prob, Adam,
  ``clip_grad_norm_``): the floor that Python-level overhead is measured against.

The two run interleaved (``--rounds`` alternations) and the script prints process CPU µs per
minibatch step (one torch thread; CPU time is steadier than wall time on a shared machine) and
their ratio. ``--save FILE`` writes the weights after ``--updates`` rlpipe updates from a fixed
seed, so two versions of the loop can be compared bit for bit:

    python benchmarks/peers/update_overhead.py --save /tmp/a.pt   # before a change
    python benchmarks/peers/update_overhead.py --save /tmp/b.pt   # after it
    python benchmarks/peers/update_overhead.py --compare /tmp/a.pt /tmp/b.pt
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict

OBS, ACT, N, T = 17, 6, 8, 64
ZOO = {
    "learning_rate": 2.0633e-05,
    "batch_size": 64,
    "n_epochs": 20,
    "gamma": 0.98,
    "gae_lambda": 0.92,
    "clip_coef": 0.1,
    "ent_coef": 0.000401762,
    "vf_coef": 0.58096,
    "max_grad_norm": 0.8,
}
NET = {"type": "mlp", "network_cfg": {"hidden_sizes": [256, 256], "activation": "relu"}}


def make_rollout(seed: int) -> TensorDict:
    """A synthetic ``[N, T+1]`` rollout with the keys PPO reads (plausible scales, fixed seed)."""
    g = torch.Generator().manual_seed(seed)
    shape = (N, T + 1)
    done = torch.rand(shape, generator=g) < 0.01
    return TensorDict(
        {
            "obs": torch.randn(*shape, OBS, generator=g),
            "action": torch.randn(*shape, ACT, generator=g) * 0.2,
            "sample_log_prob": torch.randn(shape, generator=g) + 5.0,
            "value": torch.randn(shape, generator=g),
            "reward": torch.randn(shape, generator=g),
            "done": done,
            "terminated": torch.zeros(shape, dtype=torch.bool),
            "truncated": done,
            "final_value": torch.randn(shape, generator=g),
        },
        batch_size=list(shape),
    )


def build(seed: int):
    """``(policy, PPO)`` with the zoo settings on CPU."""
    from rlpipe.algorithms import build_algo
    from rlpipe.policies import build_policy

    torch.manual_seed(seed)
    obs_space = gym.spaces.Box(-np.inf, np.inf, (OBS,), np.float32)
    act_space = gym.spaces.Box(-1.0, 1.0, (ACT,), np.float32)
    policy = build_policy(
        {
            "name": "actor_critic",
            "obs_normalization": True,
            "log_std_init": -2.0,
            "actor": NET,
            "critic": NET,
        },
        obs_space,
        act_space,
        "cpu",
    )
    policy.update_normalization(make_rollout(seed + 1)["obs"])
    algo = build_algo("ppo", dict(ZOO), policy, "cpu")
    algo.reseed(seed)
    return policy, algo


def time_rlpipe(algo, rollouts: list[TensorDict]) -> float:
    """Seconds per minibatch step of ``algo.update`` over ``rollouts``."""
    steps = 0
    start = time.process_time()
    for rollout in rollouts:
        steps += int(algo.update(rollout.clone())["minibatch_steps"])
    return (time.process_time() - start) / steps


def time_bare(policy, rollouts: list[TensorDict], generator: torch.Generator) -> float:
    """Seconds per minibatch step of a plain PPO loop over the same networks (the floor)."""
    params = [p for p in policy.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=ZOO["learning_rate"], eps=1e-5)
    steps = 0
    start = time.process_time()
    for rollout in rollouts:
        flat = {
            k: rollout[k][:, :-1].reshape(N * T, *rollout[k].shape[2:])
            for k in ("obs", "action", "sample_log_prob", "value")
        }
        adv, ret = flat["value"] * 0.1, flat["value"]
        for _ in range(ZOO["n_epochs"]):
            perm = torch.randperm(N * T, generator=generator)
            for start_row in range(0, N * T, ZOO["batch_size"]):
                idx = perm[start_row : start_row + ZOO["batch_size"]]
                obs = policy.obs_normalizer(flat["obs"][idx])
                mean = policy.actor(obs)
                std = policy.head.log_std.exp()
                dist = torch.distributions.Normal(mean, std, validate_args=False)
                log_prob = dist.log_prob(flat["action"][idx]).sum(-1)
                ratio = (log_prob - flat["sample_log_prob"][idx]).exp()
                a = adv[idx]
                pg = -torch.min(ratio * a, ratio.clamp(0.9, 1.1) * a).mean()
                v = policy.critic(obs).squeeze(-1)
                entropy = dist.entropy().sum(-1).mean()
                loss = pg + ZOO["vf_coef"] * (v - ret[idx]).pow(2).mean() - ZOO["ent_coef"] * entropy
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, ZOO["max_grad_norm"])
                opt.step()
                opt.zero_grad(set_to_none=True)
                steps += 1
    return (time.process_time() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--updates", type=int, default=4, help="updates (of 160 minibatch steps) per round")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", type=Path, default=None)
    parser.add_argument("--compare", type=Path, nargs=2, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.compare:
        a, b = (torch.load(p, weights_only=True) for p in args.compare)
        diff = [k for k in a if not torch.equal(a[k], b[k])]
        print("bit-identical" if not diff else f"differ: {diff}")
        return
    rollouts = [make_rollout(args.seed + 10 + i) for i in range(args.updates)]
    if args.save:
        policy, algo = build(args.seed)
        time_rlpipe(algo, rollouts)
        state = {f"policy.{k}": v for k, v in policy.state_dict().items()}
        torch.save(state, args.save)
        print(f"weights after {args.updates} updates → {args.save}")
        return
    ours, bare = [], []
    for _ in range(args.rounds):
        policy, algo = build(args.seed)
        ours.append(time_rlpipe(algo, rollouts))
        policy, _ = build(args.seed)
        bare.append(time_bare(policy, rollouts, torch.Generator().manual_seed(args.seed)))
    o, b = np.median(ours) * 1e6, np.median(bare) * 1e6
    print(
        f"CPU per minibatch step (median of {args.rounds} interleaved rounds): rlpipe {o:.0f} µs, "
        f"bare torch loop {b:.0f} µs, ratio {o / b:.2f}; load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
