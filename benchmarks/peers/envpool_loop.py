"""rlpipe against a plain single-file torch PPO loop on envpool tasks: env steps per wall and CPU second.

    .venv/bin/python benchmarks/peers/envpool_loop.py [--ids PandaPickCube-v1 Go1JoystickFlatTerrain-v1
        HalfCheetah-v5] [--num-envs 64] [--horizon 64] [--epochs 4] [--minibatches 4] [--hidden 256 256]
        [--warmup 1] [--rounds 5] [--iterations 2] [--threads 1] [--breakdown-iterations 3]
        [--no-breakdown] [--profile-top 15] [--json PATH]

The same work on both sides, each on its own envpool pool of the id (``envpool.make(id,
env_type="gymnasium", num_envs=N, num_threads=1)``, seeded alike), per iteration: N envs × T steps
with a Gaussian actor (state-independent log-std, starting at std 1) and a critic, both ``--hidden``
ELU, on observations normalized with running mean and variance (clipped to ±10, frozen while
collecting, merged from the rollout after the update); an env whose episode ends is reset right
after the step, and a time-limit truncation bootstraps with the critic's value of its true last
observation; GAE (γ 0.99, λ 0.95), advantages normalized over the batch; E epochs × M shuffled
minibatches of the clipped surrogate (0.2) + 0.5 × value MSE − 0.01 × entropy, the gradient norm
clipped to 0.5, Adam at lr 3e-4. Dict observations (Go1's ``state`` and ``privileged_state``): the
actor reads ``state``, the critic every key.

* ``plain``: :class:`PlainPPO` below, a CleanRL-style loop written out in this file (per step: the
  actor and critic on the step's observations, ``envs.step``, the rollout tensors filled in place).
* ``rlpipe``: a :class:`rlpipe.trainer.Trainer` from ``params.yaml`` with the workload as overrides
  and the defaults otherwise — every rollout stored (Zarr, under a temporary ``trainer.data_dir``),
  MLflow on (a temporary sqlite store) — eval off, checkpoints out of reach, ``env.cfg``
  ``{mode: sync, num_threads: 1}``. One iteration is ``Trainer.step()``.

Timing: ``--warmup`` iterations per side, then ``--rounds`` rounds alternating plain, rlpipe, each
side running ``--iterations`` iterations per round; an rlpipe round ends once its store has written
the round's last rollout. Per round: wall seconds (``perf_counter``) and CPU seconds — the process's
(``process_time``: every thread, envpool's and the store writer's included), and for rlpipe also
its MLflow tracking process's (a child process that writes each iteration's metrics after the
iteration: its CPU over all rounds, read after a pause, is shared out over rlpipe's rounds).
Reported: median env steps per wall and per CPU second, and the medians of the per-round ratios
rlpipe / plain. With torch and envpool at one thread each, the CPU figures hold on a loaded machine
where the wall figures drift.

Breakdown (``--no-breakdown`` skips it): after the timed rounds, ``--breakdown-iterations`` more
of each side with a timer around each phase's function, in CPU and wall ms per iteration (exclusive:
a timed call inside another is subtracted from the outer one; the rest of an iteration is
``other``; CPU time is the process's, so the envpool thread's simulation counts in the phase it
overlaps, mostly the env step's ``recv``), the store writer thread's own time and the MLflow
process's CPU beside them; and a cProfile pass (CPU clock) over as many rlpipe iterations: the
top functions by own time. The plain loop uses torch's defaults (``Normal`` distributions, Adam
without ``fused``), as a single-file loop would; rlpipe's own fast paths are part of what it is.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import pstats
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

import numpy as np
import psutil
import torch
from _bench import (
    DEFAULT_PARAMS,
    NEVER,
    load_cfg,
    median,
    paired_ratios,
    print_machine,
    print_table,
    write_json,
)
from torch import nn
from torch.distributions import Normal

import rlpipe.artifacts.store as store_module
import rlpipe.envs.backends.envpool_env as envpool_module
import rlpipe.trainer.trainer as trainer_module
from rlpipe.tracking.background import prewarm
from rlpipe.trainer import Trainer

IDS = ("PandaPickCube-v1", "Go1JoystickFlatTerrain-v1", "HalfCheetah-v5")
SEED = 1
SETTLE_S = 1.0
"""Pause before reading the tracking process's CPU time, so it has written what was logged."""
ACTOR_KEY = "state"
"""The observation group the actor reads when observations are a dict (the critic reads every group)."""


@dataclass(frozen=True)
class Workload:
    """Both sides' settings: ``--num-envs``, ``--horizon``, ``--epochs``, ``--minibatches``, ``--hidden``."""

    num_envs: int
    horizon: int
    epochs: int
    minibatches: int
    hidden: tuple[int, ...]
    lr: float = 3e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip: float = 0.2
    vf_coef: float = 0.5
    ent_coef: float = 0.01
    max_grad_norm: float = 0.5


# ------------------------------------------------------------------------------------ the plain loop


class RunningNorm:
    """Observation normalization: running mean and variance (float64, merged per rollout), clipped to ±10."""

    def __init__(self, dim: int) -> None:
        self.mean, self.var = torch.zeros(dim, dtype=torch.float64), torch.ones(dim, dtype=torch.float64)
        self.count = 0

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        return ((obs - self.mean.float()) / (self.var + 1e-8).sqrt().float()).clamp(-10.0, 10.0)

    def update(self, obs: torch.Tensor) -> None:  # Chan et al.'s parallel merge
        x, n = obs.double(), obs.shape[0]
        mean, var, total = x.mean(0), x.var(0, unbiased=False), self.count + n
        delta = mean - self.mean
        self.var = (self.var * self.count + var * n + delta.square() * self.count * n / total) / total
        self.mean, self.count = self.mean + delta * n / total, total


def mlp(inputs: int, outputs: int, hidden: tuple[int, ...]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for size in hidden:
        layers += [nn.Linear(inputs, size), nn.ELU()]
        inputs = size
    return nn.Sequential(*layers, nn.Linear(inputs, outputs))


class Agent(nn.Module):
    """Gaussian actor on the first ``actor_dim`` observation columns, critic on all of them."""

    def __init__(self, obs_dim: int, actor_dim: int, act_dim: int, hidden: tuple[int, ...]) -> None:
        super().__init__()
        self.actor, self.critic = mlp(actor_dim, act_dim, hidden), mlp(obs_dim, 1, hidden)
        self.log_std = nn.Parameter(torch.zeros(act_dim))
        self.norm, self.actor_dim = RunningNorm(obs_dim), actor_dim

    def dist(self, x: torch.Tensor) -> Normal:
        return Normal(self.actor(x[:, : self.actor_dim]), self.log_std.exp())

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(self.norm(obs)).squeeze(-1)

    def act(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x = self.norm(obs)
        dist = self.dist(x)
        action = dist.sample()
        return action, dist.log_prob(action).sum(-1), self.critic(x).squeeze(-1)

    def evaluate(self, obs: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, ...]:
        x = self.norm(obs)
        dist = self.dist(x)
        return dist.log_prob(action).sum(-1), dist.entropy().sum(-1), self.critic(x).squeeze(-1)


class PlainPPO:
    """The reference: collect → GAE → epochs × minibatches, in plain torch over one envpool pool."""

    def __init__(self, env_id: str, w: Workload) -> None:
        import envpool

        torch.manual_seed(SEED)
        self.w, n, t = w, w.num_envs, w.horizon
        self.envs = envpool.make(env_id, env_type="gymnasium", num_envs=n, batch_size=n, num_threads=1,
                                 seed=[SEED + i for i in range(n)])
        first = self.envs.reset()[0]
        self.keys = sorted(first, key=lambda k: k != ACTOR_KEY) if isinstance(first, dict) else None
        self.obs = self.to_torch(first)
        actor_dim = first[ACTOR_KEY].shape[1] if self.keys else self.obs.shape[1]
        act_dim = self.envs.action_space.shape[0]
        self.agent = Agent(self.obs.shape[1], actor_dim, act_dim, w.hidden)
        self.optimizer = torch.optim.Adam(self.agent.parameters(), lr=w.lr)
        self.b_obs = torch.zeros(t, n, self.obs.shape[1])
        self.b_action = torch.zeros(t, n, act_dim)
        self.b_logprob, self.b_reward, self.b_value = torch.zeros(t, n), torch.zeros(t, n), torch.zeros(t, n)
        self.b_done = torch.zeros(t, n)
        self.next_value = torch.zeros(n)

    def to_torch(self, obs: Any) -> torch.Tensor:
        """float64 observations (a dict: groups side by side, ``state`` first) → float32 ``[N, D]``."""
        if self.keys is not None:
            obs = np.concatenate([obs[key] for key in self.keys], 1)
        return torch.from_numpy(obs.astype(np.float32))

    def iteration(self) -> dict[str, float]:
        start = time.perf_counter()
        self.collect()
        middle = time.perf_counter()
        self.update()
        return {"collect_s": middle - start, "update_s": time.perf_counter() - middle}

    @torch.no_grad()
    def collect(self) -> None:
        for t in range(self.w.horizon):
            self.b_obs[t] = self.obs
            action, logprob, value = self.agent.act(self.obs)
            obs, reward, terminated, truncated, _ = self.envs.step(action.numpy())
            next_obs = self.to_torch(obs)
            self.b_action[t], self.b_logprob[t], self.b_value[t] = action, logprob, value
            self.b_reward[t] = torch.from_numpy(reward)
            self.b_done[t] = torch.from_numpy(terminated | truncated)
            time_limit = torch.from_numpy(truncated & ~terminated)
            if time_limit.any():  # bootstrap from the true last observation
                self.b_reward[t, time_limit] += self.w.gamma * self.agent.value(next_obs[time_limit])
            done = np.flatnonzero(terminated | truncated)
            if done.size:  # start their next episodes now (envpool would spend the next step on it)
                next_obs[done] = self.to_torch(self.envs.reset(done)[0])
            self.obs = next_obs
        self.next_value = self.agent.value(self.obs)

    def advantages(self) -> tuple[torch.Tensor, torch.Tensor]:
        w, advantage = self.w, torch.zeros_like(self.b_reward)
        last = torch.zeros(w.num_envs)
        for t in reversed(range(w.horizon)):
            next_value = self.next_value if t == w.horizon - 1 else self.b_value[t + 1]
            not_done = 1.0 - self.b_done[t]
            delta = self.b_reward[t] + w.gamma * next_value * not_done - self.b_value[t]
            last = advantage[t] = delta + w.gamma * w.gae_lambda * not_done * last
        return advantage, advantage + self.b_value

    def update(self) -> None:
        w = self.w
        advantage, returns = (x.flatten() for x in self.advantages())
        advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
        obs, action = self.b_obs.flatten(0, 1), self.b_action.flatten(0, 1)
        old_logprob = self.b_logprob.flatten()
        rows = obs.shape[0]
        size = rows // w.minibatches
        for _ in range(w.epochs):
            perm = torch.randperm(rows)
            for start in range(0, rows, size):
                idx = perm[start : start + size]
                logprob, entropy, value = self.agent.evaluate(obs[idx], action[idx])
                ratio = (logprob - old_logprob[idx]).exp()
                clipped = ratio.clamp(1 - w.clip, 1 + w.clip)
                surrogate = torch.min(ratio * advantage[idx], clipped * advantage[idx])
                loss = (-surrogate.mean() + w.vf_coef * (value - returns[idx]).square().mean()
                        - w.ent_coef * entropy.mean())
                self.optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self.agent.parameters(), w.max_grad_norm)
                self.optimizer.step()
        self.agent.norm.update(obs)


# ---------------------------------------------------------------------------------------- rlpipe


def rlpipe_overrides(env_id: str, w: Workload, data_dir: str, groups: list[str] | None) -> list[str]:
    """The workload as ``--set`` overrides of ``params.yaml`` (store and MLflow stay on).

    ``groups``: a dict observation's keys, :data:`ACTOR_KEY` first (``None``: a flat observation).
    """
    net = f"network_cfg: {{hidden_sizes: {list(w.hidden)}, activation: elu}}"
    actor_keys, critic_keys = (f"obs_keys: [{ACTOR_KEY}], ", f"obs_keys: [{', '.join(groups)}], ") if groups \
        else ("", "")
    algo = (f"{{learning_rate: {w.lr}, n_epochs: {w.epochs}, num_mini_batches: {w.minibatches}, "
            f"gamma: {w.gamma}, gae_lambda: {w.gae_lambda}, clip_coef: {w.clip}, ent_coef: {w.ent_coef}, "
            f"vf_coef: {w.vf_coef}, max_grad_norm: {w.max_grad_norm}, normalize_advantage: batch}}")
    return [
        f"env.id={env_id}", "env.backend=envpool", "env.cfg={mode: sync, num_threads: 1}",
        f"trainer.num_envs={w.num_envs}", f"trainer.buffer_size={w.horizon}", "trainer.device=cpu",
        f"trainer.seed={SEED}", f"trainer.num_threads={torch.get_num_threads()}", "trainer.enable_eval=false",
        f"trainer.iterations={NEVER}", f"trainer.save_freq={NEVER}", "trainer.stop_when=[]",
        f"trainer.data_dir={data_dir}", f"trainer.exp_name=envpool_loop_{env_id}",
        "policy.name=actor_critic", "policy.obs_normalization=true", "policy.log_std_init=0.0",
        f"policy.actor={{type: mlp, {actor_keys}{net}}}", f"policy.critic={{type: mlp, {critic_keys}{net}}}",
        "algorithm.name=ppo", f"algorithm.cfg={algo}", "store.enabled=true", "tracking.backend=mlflow",
        f"tracking.uri=sqlite:///{data_dir}/mlflow.db",
    ]


class RlpipeSide:
    """A started ``Trainer`` of the workload; :meth:`iteration` is ``step()``."""

    def __init__(self, env_id: str, w: Workload, data_dir: str) -> None:
        import envpool

        space = envpool.make_spec(env_id).observation_space
        groups = sorted(space.spaces, key=lambda k: k != ACTOR_KEY) if hasattr(space, "spaces") else None
        cfg = load_cfg(DEFAULT_PARAMS, rlpipe_overrides(env_id, w, data_dir, groups))
        self.trainer = Trainer(cfg)
        with contextlib.redirect_stdout(io.StringIO()):  # the banner; the rows go to the same buffer
            self.trainer.start()

    def iteration(self) -> dict[str, float]:
        metrics = self.trainer.step()
        return {"collect_s": metrics["time/collect_s"], "update_s": metrics["time/update_s"]}

    def settle(self) -> None:
        """Wait for the store to write what was submitted (the end of a timed round)."""
        self.trainer.parts.store.flush()

    def close(self) -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            self.trainer.close()


# ---------------------------------------------------------------------------------------- timing


def children_cpu() -> float:
    """CPU seconds of this process's live child processes (rlpipe's MLflow tracking process)."""
    total = 0.0
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            times = child.cpu_times()
            total += times.user + times.system
    return total


def wait_for_idle_children(poll_s: float = 0.5, timeout_s: float = 120.0) -> None:
    """Wait until the child processes stop using CPU: MLflow's start-up (import, opening the store and
    the run) is no iteration's work."""
    deadline, last = time.monotonic() + timeout_s, children_cpu()
    while time.monotonic() < deadline:
        time.sleep(poll_s)
        now = children_cpu()
        if now - last < 0.02 * poll_s:
            return
        last = now


def tracking_cpu(since: float, iterations: int) -> float:
    """The tracking process's CPU seconds per iteration since ``since`` (``children_cpu``), once it is idle.

    It writes each iteration's metrics after the iteration logged them, so its CPU is read after a
    pause and charged to rlpipe's iterations, never to the plain loop's that it overlapped.
    """
    time.sleep(SETTLE_S)
    return (children_cpu() - since) / iterations


def timed_round(side: Any, iterations: int) -> dict[str, float]:
    """Wall and process CPU seconds of ``iterations`` iterations (rlpipe: until its store has written)."""
    wall, cpu, splits = time.perf_counter(), time.process_time(), []
    for _ in range(iterations):
        splits.append(side.iteration())
    getattr(side, "settle", lambda: None)()
    return {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu,
            "collect_s": sum(s["collect_s"] for s in splits), "update_s": sum(s["update_s"] for s in splits)}


class Phases:
    """Exclusive wall and CPU time per phase: a timed call inside another is subtracted from the outer one.

    CPU time is the process's (``process_time``): the envpool thread's work while the training thread
    waits in ``recv`` counts in the env step; a background thread's (the store writer) counts in
    whichever phase it overlaps.
    """

    def __init__(self) -> None:
        self.wall: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self._stack: list[list[float]] = []  # [wall start, cpu start, wall and cpu in nested timed calls]
        self._wrapped: list[tuple[Any, str, Any]] = []

    def wrap(self, owner: Any, name: str, phase: str) -> None:
        """Replace ``owner.name`` by a timed wrapper until :meth:`restore`."""
        fn, stack, wall, cpu = getattr(owner, name), self._stack, self.wall, self.cpu
        self._wrapped.append((owner, name, vars(owner).get(name)))

        def timed(*args: Any, **kwargs: Any) -> Any:
            frame = [time.perf_counter(), time.process_time(), 0.0, 0.0]
            stack.append(frame)
            try:
                return fn(*args, **kwargs)
            finally:
                stack.pop()
                spent_wall, spent_cpu = time.perf_counter() - frame[0], time.process_time() - frame[1]
                wall[phase] += spent_wall - frame[2]
                cpu[phase] += spent_cpu - frame[3]
                if stack:
                    stack[-1][2] += spent_wall
                    stack[-1][3] += spent_cpu

        setattr(owner, name, timed)

    def restore(self) -> None:
        """Put every wrapped attribute back as it was (an instance's own, or its class's again)."""
        for owner, name, own in reversed(self._wrapped):
            if own is None:
                delattr(owner, name)
            else:
                setattr(owner, name, own)
        self._wrapped.clear()


ENV_STEP = "collect: env step (envpool send, recv, reset)"


def instrument_plain(plain: PlainPPO, phases: Phases) -> None:
    phases.wrap(plain.agent, "act", "collect: policy forward (actor, sample, critic)")
    phases.wrap(plain.envs, "step", ENV_STEP)
    phases.wrap(plain, "collect", "collect: rollout writes, conversions, loop")
    phases.wrap(plain, "advantages", "advantage (GAE)")
    phases.wrap(plain.agent, "evaluate", "update: forward")
    phases.wrap(plain.optimizer, "step", "update: optimizer step")
    phases.wrap(plain, "update", "update: loss, backward, grad clip, loop")


def instrument_rlpipe(side: RlpipeSide, phases: Phases) -> None:
    """Wrap rlpipe's phases where the trainer looks them up (its parts, and ``rlpipe.trainer.trainer``)."""
    trainer = side.trainer
    parts, policy = trainer.parts, trainer.parts.algo.policy
    phases.wrap(policy, "sample", "collect: policy forward (actor, sample)")
    phases.wrap(parts.env, "step", "collect: env adapter (actions out, bookkeeping)")
    phases.wrap(envpool_module, "obs_to_torch", "collect: env adapter (numpy → torch)")
    phases.wrap(parts.collector, "_fill_values", "collect: critic values (batched)")
    phases.wrap(trainer, "collect", "collect: rollout writes, conversions, loop")
    phases.wrap(parts.algo, "compute_advantages", "advantage (GAE)")
    for name in ("nonfinite_rollout", "nonfinite_update"):
        phases.wrap(trainer_module, name, "guards (non-finite checks)")
    phases.wrap(trainer.state, "rollout_attrs", "store: submit (checks, host copy, attrs)")
    phases.wrap(parts.store, "submit", "store: submit (checks, host copy, attrs)")
    phases.wrap(policy, "evaluate", "update: forward")
    phases.wrap(parts.algo.optimizer, "step", "update: optimizer step")
    phases.wrap(policy, "update_normalization", "update: obs normalization merge")
    phases.wrap(parts.algo, "update", "update: loss, backward, grad clip, loop")
    phases.wrap(trainer.tracker, "log", "tracking (console row, curve.csv, MLflow queue)")


def breakdown(name: str, side: Any, iterations: int, pool_class: type) -> list[dict[str, Any]]:
    """ms per iteration of each phase over ``iterations`` instrumented iterations (see the docstring)."""
    phases, writer = Phases(), [0.0, 0.0]
    real_write = store_module._write_checked

    def write(*args: Any, **kwargs: Any) -> None:  # on the writer thread: beside the table
        wall, cpu = time.perf_counter(), time.thread_time()
        real_write(*args, **kwargs)
        writer[0] += time.perf_counter() - wall
        writer[1] += time.thread_time() - cpu

    try:
        for method in ("send", "recv", "reset"):  # the pool class both sides' pools of this id share
            phases.wrap(pool_class, method, ENV_STEP)
        if name == "plain":
            instrument_plain(side, phases)
        else:
            instrument_rlpipe(side, phases)
            store_module._write_checked = write
        wall, cpu, children = time.perf_counter(), time.process_time(), children_cpu()
        for _ in range(iterations):
            side.iteration()
        getattr(side, "settle", lambda: None)()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        phases.restore()
        store_module._write_checked = real_write
    per = 1e3 / iterations

    def row(phase: str, cpu_s: float, wall_s: float | None) -> dict[str, Any]:
        wall_ms = None if wall_s is None else per * wall_s
        return {"side": name, "phase": phase, "cpu_ms": per * cpu_s, "wall_ms": wall_ms}

    rows = [row(phase, phases.cpu[phase], phases.wall[phase]) for phase in sorted(phases.wall)]
    rows.append(row("other (iteration bookkeeping, metrics)", cpu - sum(phases.cpu.values()),
                    wall - sum(phases.wall.values())))
    rows.append(row("= the iteration (process)", cpu, wall))
    if name == "rlpipe":
        rows.append(row("  of which the store writer thread (Zarr write)", writer[1], writer[0]))
        rows.append(row("+ the MLflow tracking process", tracking_cpu(children, 1), None))
    return rows


def profile_top(side: RlpipeSide, iterations: int, top: int) -> list[dict[str, Any]]:
    """cProfile of rlpipe's ``iterations`` iterations: the ``top`` functions by own time, per iteration."""
    profiler = cProfile.Profile(time.process_time)  # CPU: a loaded machine's preemptions stay out
    profiler.runcall(lambda: [side.iteration() for _ in range(iterations)])
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]  # pstats keeps its table here
    rows = sorted(stats.items(), key=lambda item: -item[1][2])[:top]
    return [{"function": f"{Path(file).name}:{line}({fn})", "calls": calls / iterations,
             "own_ms": 1e3 * own / iterations, "cumulative_ms": 1e3 * cumulative / iterations}
            for (file, line, fn), (_, calls, own, cumulative, _) in rows]


# ------------------------------------------------------------------------------------------ main


def run_id(env_id: str, w: Workload, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="rlpipe-envpool-loop-") as data_dir:
        prewarm()  # as `rlpipe run` does: the MLflow process starts while the envs are built
        sides: dict[str, Any] = {"plain": PlainPPO(env_id, w)}
        sides["rlpipe"] = RlpipeSide(env_id, w, data_dir)
        try:
            for side in sides.values():
                timed_round(side, args.warmup)
            wait_for_idle_children()
            samples: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
            children = children_cpu()
            for index in range(args.rounds):
                for name, side in sides.items():
                    samples[name].append(timed_round(side, args.iterations))
                print(f"  {env_id} round {index + 1}/{args.rounds}: " + ", ".join(
                    f"{n} {samples[n][-1]['wall_s']:.2f} s wall, {samples[n][-1]['cpu_s']:.2f} s process CPU"
                    for n in sides), flush=True)
            tracking = tracking_cpu(children, args.rounds)  # per rlpipe round
            for sample in samples["rlpipe"]:
                sample["tracking_cpu_s"], sample["cpu_s"] = tracking, sample["cpu_s"] + tracking
            extra: dict[str, Any] = {}
            if not args.no_breakdown:
                n, pool_class = args.breakdown_iterations, type(sides["plain"].envs)
                extra["profile"] = profile_top(sides["rlpipe"], n, args.profile_top)
                extra["breakdown"] = [row for name, side in sides.items()
                                      for row in breakdown(name, side, n, pool_class)]
        finally:
            sides["rlpipe"].close()
    return summarize(env_id, w, args, samples) | extra


def summarize(env_id: str, w: Workload, args: argparse.Namespace,
              samples: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    steps = w.num_envs * w.horizon * args.iterations
    row: dict[str, Any] = {"id": env_id, "num_envs": w.num_envs, "horizon": w.horizon}
    for name, rounds in samples.items():
        row[f"{name}_sps_wall"] = median([steps / r["wall_s"] for r in rounds])
        row[f"{name}_sps_cpu"] = median([steps / r["cpu_s"] for r in rounds])
        for key in ("collect_s", "update_s"):
            row[f"{name}_{key}"] = median([r[key] / args.iterations for r in rounds])
    for unit in ("wall", "cpu"):
        mine, theirs = ([r[f"{unit}_s"] for r in samples[n]] for n in ("rlpipe", "plain"))
        row[f"ratio_{unit}"] = median(paired_ratios(theirs, mine))  # env steps/s: rlpipe over plain
    return row | {"rounds": samples}


COLUMNS = (("id", "id", ""), ("plain_sps_wall", "plain steps/s", ",.0f"),
           ("rlpipe_sps_wall", "rlpipe steps/s", ",.0f"), ("ratio_wall", "wall ratio", ".2f"),
           ("plain_sps_cpu", "plain steps/CPU s", ",.0f"), ("rlpipe_sps_cpu", "rlpipe steps/CPU s", ",.0f"),
           ("ratio_cpu", "CPU ratio", ".2f"), ("plain_collect_s", "plain collect s", ".3f"),
           ("rlpipe_collect_s", "rlpipe collect s", ".3f"), ("plain_update_s", "plain update s", ".3f"),
           ("rlpipe_update_s", "rlpipe update s", ".3f"))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--ids", nargs="+", default=list(IDS), help="envpool ids")
    add("--num-envs", type=int, default=64, help="N (default 64)")
    add("--horizon", type=int, default=64, help="T, steps per env per iteration (default 64)")
    add("--epochs", type=int, default=4, help="E (default 4)")
    add("--minibatches", type=int, default=4, help="M (default 4)")
    add("--hidden", type=int, nargs="+", default=[256, 256], help="hidden sizes of actor and critic")
    add("--warmup", type=int, default=1, help="untimed iterations per side (default 1)")
    add("--rounds", type=int, default=5, help="timed rounds (default 5)")
    add("--iterations", type=int, default=2, help="iterations per side per round (default 2)")
    add("--threads", type=int, default=1, help="torch threads (default 1)")
    add("--breakdown-iterations", type=int, default=3, help="breakdown iterations per side (default 3)")
    add("--no-breakdown", action="store_true", help="skip the phase breakdown and the profile")
    add("--profile-top", type=int, default=15, help="functions listed by the profile (default 15)")
    add("--json", type=Path, default=None, help="also write the results as JSON here")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    w = Workload(args.num_envs, args.horizon, args.epochs, args.minibatches, tuple(args.hidden))
    print(f"plain torch PPO vs rlpipe (store + MLflow on) on envpool: N={w.num_envs} T={w.horizon} "
          f"{list(w.hidden)} ELU, {w.epochs} epochs x {w.minibatches} minibatches, "
          f"{args.iterations} iterations x {args.rounds} rounds, threads={torch.get_num_threads()}")
    rows = [run_id(env_id, w, args) for env_id in args.ids]
    print_table(rows, COLUMNS)
    for row in rows:
        if "breakdown" in row:
            print(f"\n{row['id']}: ms per iteration")
            print_table(row["breakdown"], (("side", "side", ""), ("phase", "phase", ""),
                                           ("cpu_ms", "CPU ms", ".1f"), ("wall_ms", "wall ms", ".1f")))
            print(f"{row['id']}: rlpipe's top functions by own CPU time (cProfile), per iteration")
            print_table(row["profile"], (("function", "function", ""), ("calls", "calls", ".0f"),
                                         ("own_ms", "own ms", ".1f"), ("cumulative_ms", "cum ms", ".1f")))
    print_machine()
    write_json(args.json, {"benchmark": "envpool_loop", "workload": vars(w) | {"hidden": list(w.hidden)},
                           "args": {k: str(v) for k, v in vars(args).items()}, "rows": rows})


if __name__ == "__main__":
    main()
