"""rsl_rl's OnPolicyRunner against rlpipe on one torch env at robot sizes: env steps/s, time split, memory.

    .venv/bin/python benchmarks/peers/gpu_vs_rsl_rl.py [--device cuda] [--num-envs 4096 16384 65536]
        [--horizon 24] [--warmup 1] [--rounds 3] [--block 3] [--threads N]
        [--sides rsl_rl rlpipe rlpipe+store] [--store-writer process] [--json PATH]

Workload: ``RobotProxy`` (``rlpipe/envs/tasks/robot_proxy.py``), a legged-robot-sized torch task
whose physics costs little — 48 policy and 205 privileged observation floats, 12 actions, falls and
a 1,000-step time limit — so the trainers, not the simulator, are measured. Both sides build their
own instance of the same env class with the same seed, on the same device.

The same learning problem on both sides, rsl_rl's defaults written out: actor 512-256-128 ELU on the
``policy`` group, critic 512-256-128 ELU on ``policy`` + ``privileged``, Gaussian actions starting
at std 1, ``--horizon`` (24) steps per env, 5 epochs × 4 minibatches, Adam at lr 1e-3 under the
adaptive KL schedule (desired KL 0.01), clip 0.2, clipped value loss, value coefficient 1, entropy
0.01, γ 0.99, λ 0.95, gradient-norm clip 1, advantages normalized over the batch.

* ``rsl_rl``: ``rsl_rl.runners.OnPolicyRunner`` (rsl-rl-lib, ``log_dir=None``: no writer) over
  :class:`VecEnvAdapter`, which gives an rlpipe ``BatchedEnv`` rsl_rl's ``VecEnv`` contract (the
  reverse of ``rlpipe.envs.backends.rsl_rl_env``), as shipped (its per-step NaN check on). One
  iteration is ``runner.learn(1)``; its collect/learn split is the one rsl_rl reports to its logger
  (learn includes the returns).
* ``rlpipe`` / ``rlpipe+store``: a ``rlpipe.trainer.Trainer`` built from ``params.yaml`` with the
  workload as overrides (tracking off, no eval, checkpoints out of reach), the rollout store off /
  on (writing under a temporary ``trainer.data_dir``, ``store.writer`` from ``--store-writer``; with
  several writers, one side per writer, ``rlpipe+store[thread]`` …). One iteration is
  ``Trainer.step()``; its ``time/collect_s`` and ``time/update_s`` (advantage, store submit,
  update), and with the store ``time/store_wait_s``, the time the iteration waited for the
  previous write.

For each N the sides are built one after the other, each running ``--warmup`` iterations at once
(memory is measured here: on CUDA the peak of ``torch.cuda.max_memory_allocated`` during the side's
build and warm-up, less what was allocated before it, the other sides idle; on the CPU the
process's peak RSS, which includes the sides built before it); then ``--rounds`` timed rounds run
the sides in turn (A, B, C, A, B, C …), each side a block of ``--block`` iterations timed as a
whole with the side's background work finished inside the timing (a store side's final
``flush``: its figure includes every write of its block, and no write of one side runs while
another is timed). The table gives per iteration (block time / ``--block``) medians over rounds and
``vs_rsl_rl``, the median of the per-round ratios of env steps/s; ``flush_s`` is the block's final
flush. ``rollout_mb`` is the size of the side's rollout buffer, ``minibatch`` its rows per
minibatch (N·T/4).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

import torch
from _bench import (
    DEFAULT_PARAMS,
    NEVER,
    load_cfg,
    median,
    print_machine,
    print_table,
    set_threads,
    start_quietly,
    synchronize,
    timing_only_overrides,
    write_json,
)
from tensordict import TensorDict

from rlpipe.envs.base import BatchedEnv
from rlpipe.envs.tasks.robot_proxy import RobotProxy
from rlpipe.trainer import Trainer

SIDES = ("rsl_rl", "rlpipe", "rlpipe+store")
WRITERS = ("auto", "thread", "process")
"""``store.writer`` values ``--store-writer`` takes."""
HIDDEN = [512, 256, 128]
EPOCHS, MINIBATCHES = 5, 4
SEED = 1
PPO = {
    "learning_rate": 1.0e-3,
    "gamma": 0.99,
    "lam": 0.95,
    "clip_param": 0.2,
    "entropy_coef": 0.01,
    "value_loss_coef": 1.0,
    "max_grad_norm": 1.0,
    "desired_kl": 0.01,
}
"""rsl_rl's PPO defaults, given to both sides."""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="both sides' device")
    add(
        "--num-envs",
        type=int,
        nargs="+",
        default=None,
        help="N values (default 4096 16384 65536 on CUDA, 256 on the CPU)",
    )
    add("--horizon", type=int, default=24, help="T, steps per env per iteration (default 24)")
    add("--warmup", type=int, default=1, help="untimed iterations per side, >= 1 (memory is measured there)")
    add("--rounds", type=int, default=3, help="timed rounds (default 3)")
    add(
        "--block",
        type=int,
        default=3,
        help="iterations per side and round, timed as one block with the final flush inside (default 3)",
    )
    add("--threads", type=int, default=None, help="torch threads (default 1 on the CPU)")
    add("--sides", nargs="+", choices=SIDES, default=list(SIDES), help="which sides run")
    add(
        "--store-writer",
        nargs="+",
        choices=WRITERS,
        default=["process"],
        help="store.writer of the store side; several: one store side each (default process)",
    )
    add("--params", type=Path, default=DEFAULT_PARAMS, help="rlpipe's base params (default params.yaml)")
    add("--json", type=Path, default=None, help="also write the results as JSON here")
    args = parser.parse_args()
    if args.warmup < 1:
        parser.error("--warmup: at least 1 (the memory figures come from the warm-up)")
    if args.block < 1:
        parser.error("--block: at least 1 iteration")
    if args.num_envs is None:
        args.num_envs = [4096, 16384, 65536] if args.device.startswith("cuda") else [256]
    return args


# ----------------------------------------------------------------------------------------- rsl_rl


class VecEnvAdapter:
    """An rlpipe ``BatchedEnv`` behind rsl_rl's ``VecEnv`` contract (``rsl_rl.env.VecEnv``).

    ``get_observations()`` → the env's TensorDict ``[N]`` of groups; ``step(actions [N, A])`` →
    ``(obs, rewards [N], dones [N] int64, extras)`` with ``extras["time_outs"]`` ``[N]``: a time
    limit that was not also a terminal state (rsl_rl bootstraps those).
    """

    def __init__(self, env: BatchedEnv, seed: int) -> None:
        self.env, self.cfg = env, {}
        self.num_envs, self.num_actions = env.num_envs, env.action_shape[0]
        self.max_episode_length = env.max_episode_steps or NEVER
        self.device = env.device
        self.episode_length_buf = torch.zeros(env.num_envs, dtype=torch.long, device=env.device)
        self._obs = env.reset(seed=seed)

    def get_observations(self) -> TensorDict:
        return self._obs

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict[str, Any]]:
        result = self.env.step(actions)
        done = result.terminated | result.truncated
        self._obs = result.obs
        self.episode_length_buf = (self.episode_length_buf + 1).masked_fill(done, 0)
        return result.obs, result.reward, done.long(), {"time_outs": result.truncated & ~result.terminated}


def rsl_rl_cfg(horizon: int) -> dict[str, Any]:
    """The workload as an rsl_rl 5 train config."""
    return {
        "num_steps_per_env": horizon,
        "save_interval": NEVER,
        "obs_groups": {"actor": ["policy"], "critic": ["policy", "privileged"]},
        "algorithm": {
            "class_name": "PPO",
            "num_learning_epochs": EPOCHS,
            "num_mini_batches": MINIBATCHES,
            "schedule": "adaptive",
            "use_clipped_value_loss": True,
            **PPO,
        },
        "actor": {
            "class_name": "MLPModel",
            "hidden_dims": HIDDEN,
            "activation": "elu",
            "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0},
        },
        "critic": {"class_name": "MLPModel", "hidden_dims": HIDDEN, "activation": "elu"},
    }


class RslRlSide:
    """One ``OnPolicyRunner`` of the workload; :meth:`iteration` is ``learn(1)`` with its split."""

    def __init__(self, num_envs: int, horizon: int, device: torch.device) -> None:
        from rsl_rl.runners import OnPolicyRunner

        torch.manual_seed(SEED)
        self.env = VecEnvAdapter(RobotProxy(num_envs, device), SEED)
        with contextlib.redirect_stdout(io.StringIO()):  # it prints its models
            self.runner = OnPolicyRunner(self.env, rsl_rl_cfg(horizon), log_dir=None, device=str(device))
        self.split: tuple[float, float] = (float("nan"), float("nan"))
        real_log = self.runner.logger.log

        def log(*args: Any, collect_time: float, learn_time: float, **kwargs: Any) -> None:
            self.split = (collect_time, learn_time)
            real_log(*args, collect_time=collect_time, learn_time=learn_time, **kwargs)

        self.runner.logger.log = log

    def iteration(self) -> dict[str, float]:
        self.runner.learn(num_learning_iterations=1)
        return {"collect_s": self.split[0], "update_s": self.split[1]}

    def rollout_bytes(self) -> int:
        return sum(_bytes(value) for value in vars(self.runner.alg.storage).values())

    def finish(self) -> None:
        """No background work to wait for."""

    def close(self) -> None:
        pass


# ----------------------------------------------------------------------------------------- rlpipe


def rlpipe_overrides(
    num_envs: int, horizon: int, device: str, store: bool, data_dir: str, writer: str = "auto"
) -> list[str]:
    """The workload as ``--set`` overrides of the base params (``writer``: ``store.writer``)."""
    net = f"network_cfg: {{hidden_sizes: {HIDDEN}, activation: elu}}"
    algo = (
        f"{{learning_rate: {PPO['learning_rate']}, n_epochs: {EPOCHS}, num_mini_batches: {MINIBATCHES}, "
        f"gamma: {PPO['gamma']}, gae_lambda: {PPO['lam']}, clip_coef: {PPO['clip_param']}, "
        f"ent_coef: {PPO['entropy_coef']}, vf_coef: {PPO['value_loss_coef']}, "
        f"max_grad_norm: {PPO['max_grad_norm']}, schedule: adaptive, desired_kl: {PPO['desired_kl']}, "
        f"clip_value_loss: true, vf_clip_coef: {PPO['clip_param']}, normalize_advantage: batch}}"
    )
    return [
        "env.id=RobotProxy",
        "env.cfg={}",
        f"trainer.num_envs={num_envs}",
        f"trainer.buffer_size={horizon}",
        f"trainer.device={device}",
        f"trainer.seed={SEED}",
        f"trainer.num_threads={torch.get_num_threads()}",
        f"policy.actor={{type: mlp, obs_keys: [policy], {net}}}",
        f"policy.critic={{type: mlp, obs_keys: [policy, privileged], {net}}}",
        "policy.log_std_init=0.0",
        "policy.obs_normalization=false",
        "algorithm.name=ppo",
        f"algorithm.cfg={algo}",
        f"store.enabled={str(store).lower()}",
        f"store.writer={writer}",
        *timing_only_overrides(data_dir, "gpu_vs_rsl_rl"),
    ]


class RlpipeSide:
    """One ``Trainer`` of the workload, started as ``rlpipe run`` starts; :meth:`iteration` is ``step()``."""

    def __init__(
        self,
        args: argparse.Namespace,
        num_envs: int,
        device: torch.device,
        store: bool,
        data_dir: str,
        writer: str = "auto",
    ) -> None:
        cfg = load_cfg(
            args.params, rlpipe_overrides(num_envs, args.horizon, str(device), store, data_dir, writer)
        )
        self.trainer = start_quietly(Trainer(cfg))
        self.store = self.trainer.parts.store if store else None

    @property
    def writer(self) -> str | None:
        """Who writes this side's stores (``process`` / ``thread``), ``None`` with the store off."""
        return self.store.mode if self.store is not None else None

    def iteration(self) -> dict[str, float]:
        metrics = self.trainer.step()
        return {
            "collect_s": metrics["time/collect_s"],
            "update_s": metrics["time/update_s"],
            "store_wait_s": metrics.get("time/store_wait_s", float("nan")),
        }

    def rollout_bytes(self) -> int:
        return _bytes(self.trainer.parts.collector.rollout)

    def finish(self) -> None:
        """Wait until every rollout submitted so far is on disk."""
        if self.store is not None:
            self.store.flush()

    def close(self) -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            self.trainer.close()


def _bytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, TensorDict):
        return sum(_bytes(t) for t in value.values(include_nested=True, leaves_only=True))
    return 0


# ---------------------------------------------------------------------------------------- timing


def timed_block(side: Any, device: torch.device, iterations: int) -> dict[str, float]:
    """``iterations`` of ``side`` and its final flush, timed as one block; per iteration.

    ``wall_s``: the block's wall time / ``iterations`` (the flush included); the split keys are
    the iterations' medians, ``flush_s`` the final flush.
    """
    synchronize(device)
    start = time.perf_counter()
    samples = [side.iteration() for _ in range(iterations)]
    synchronize(device)
    flush_start = time.perf_counter()
    side.finish()
    end = time.perf_counter()
    split = {key: median([s[key] for s in samples]) for key in samples[0]}
    return {"wall_s": (end - start) / iterations, "flush_s": end - flush_start, **split}


def side_names(args: argparse.Namespace) -> dict[str, str | None]:
    """Each side's name → its ``store.writer`` (``None``: no store): one store side per writer."""
    names: dict[str, str | None] = {}
    for side in args.sides:
        if side != "rlpipe+store":
            names[side] = None
        elif len(args.store_writer) == 1:
            names[side] = args.store_writer[0]
        else:
            names.update({f"{side}[{writer}]": writer for writer in args.store_writer})
    return names


def build_side(
    name: str,
    args: argparse.Namespace,
    num_envs: int,
    device: torch.device,
    data_dir: str,
    writer: str | None = None,
) -> tuple[Any, float]:
    """The side ``name``, after its warm-up (its writes finished); with the memory it took (MB, see
    the module docstring)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
    builders: dict[str, Callable[[], Any]] = {
        "rsl_rl": lambda: RslRlSide(num_envs, args.horizon, device),
        "rlpipe": lambda: RlpipeSide(args, num_envs, device, False, f"{data_dir}/off"),
        "rlpipe+store": lambda: RlpipeSide(args, num_envs, device, True, f"{data_dir}/on-{writer}", writer),
    }
    side = builders[name.split("[")[0]]()
    timed_block(side, device, args.warmup)
    if device.type == "cuda":
        return side, (torch.cuda.max_memory_allocated(device) - before) / 2**20
    return side, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10  # kB on Linux


def run_n(args: argparse.Namespace, num_envs: int, device: torch.device) -> list[dict[str, Any]]:
    """Every side at ``num_envs``: built and warmed one by one, then timed round by round."""
    steps = num_envs * args.horizon
    with tempfile.TemporaryDirectory(prefix="rlpipe-vs-rsl_rl-") as data_dir:
        sides, memory = {}, {}
        try:
            for name, writer in side_names(args).items():
                sides[name], memory[name] = build_side(name, args, num_envs, device, data_dir, writer)
            samples: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
            for round_index in range(args.rounds):
                for name, side in sides.items():
                    samples[name].append(timed_block(side, device, args.block))
                print(
                    f"  N={num_envs} round {round_index + 1}/{args.rounds}: "
                    + ", ".join(f"{name} {samples[name][-1]['wall_s']:.3f} s" for name in sides),
                    flush=True,
                )
            rows = [
                side_row(name, samples, memory[name], sides[name], num_envs, args.horizon, device)
                for name in sides
            ]
        finally:
            for side in sides.values():
                side.close()
    for row in rows:
        row["sps"] = steps / row["iteration_s"]
    return rows


def side_row(
    name: str,
    samples: dict[str, list[dict[str, float]]],
    memory_mb: float,
    side: Any,
    num_envs: int,
    horizon: int,
    device: torch.device,
) -> dict[str, Any]:
    mine = samples[name]
    ratios = (
        [theirs["wall_s"] / own["wall_s"] for own, theirs in zip(mine, samples["rsl_rl"], strict=True)]
        if "rsl_rl" in samples
        else []
    )  # env steps/s against rsl_rl's in the same round
    memory_key = "peak_gpu_mb" if device.type == "cuda" else "process_peak_rss_mb"
    return {
        "num_envs": num_envs,
        "side": name,
        "iteration_s": median([s["wall_s"] for s in mine]),
        "collect_s": median([s["collect_s"] for s in mine]),
        "update_s": median([s["update_s"] for s in mine]),
        "store_wait_s": median([s["store_wait_s"] for s in mine])
        if name.startswith("rlpipe+store")
        else None,
        "flush_s": median([s["flush_s"] for s in mine]) if name.startswith("rlpipe+store") else None,
        "store_writer": getattr(side, "writer", None),
        "vs_rsl_rl": median(ratios) if ratios else None,
        memory_key: memory_mb,
        "rollout_mb": side.rollout_bytes() / 2**20,
        "minibatch": num_envs * horizon // MINIBATCHES,
    }


COLUMNS = (
    ("num_envs", "N", ""),
    ("side", "side", ""),
    ("sps", "steps/s", ",.0f"),
    ("vs_rsl_rl", "vs rsl_rl", ".2f"),
    ("iteration_s", "iter s", ".3f"),
    ("collect_s", "collect s", ".3f"),
    ("update_s", "update s", ".3f"),
    ("store_wait_s", "wait s", ".3f"),
    ("flush_s", "flush s", ".3f"),
    ("rollout_mb", "rollout MB", ".1f"),
    ("minibatch", "minibatch", ""),
    ("store_writer", "writer", ""),
)


def main() -> None:
    args = parse_args()
    set_threads(args.threads if args.threads is not None or args.device.startswith("cuda") else 1)
    device = torch.device(args.device)
    print(
        f"rsl_rl OnPolicyRunner vs rlpipe on RobotProxy: N={args.num_envs} T={args.horizon} "
        f"{HIDDEN} ELU, {EPOCHS} epochs x {MINIBATCHES} minibatches, adaptive lr, device={device}, "
        f"threads={torch.get_num_threads()}, blocks of {args.block} iterations, "
        f"store.writer {' '.join(args.store_writer)}"
    )
    rows = [row for num_envs in args.num_envs for row in run_n(args, num_envs, device)]
    memory_key = "peak_gpu_mb" if device.type == "cuda" else "process_peak_rss_mb"
    print_table(rows, (*COLUMNS, (memory_key, memory_key, ",.0f")))
    print_machine()
    settings = {k: str(v) for k, v in vars(args).items()}
    write_json(
        args.json, {"benchmark": "gpu_vs_rsl_rl", "device": str(device), "args": settings, "rows": rows}
    )


if __name__ == "__main__":
    main()
