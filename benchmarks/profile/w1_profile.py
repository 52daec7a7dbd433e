"""Where a small workload's time goes: W1 (gymnasium CartPole-v1, 8 envs × 128 steps) phase by phase.

    .venv/bin/python benchmarks/profile/w1_profile.py [--total-steps 100000] [--backend auto|envpool|sync]
        [--store on|off] [--tracking on|off] [--threads N] [--eval] [--json PATH]

W1 is the small workload of ``benchmarks/peers/sb3_compare.py``: ``CartPole-v1``, 8 envs × 128
steps, PPO with 4 epochs × 4 minibatches of 256, 64×64 tanh actor and critic, lr 2.5e-4, about 100k
env steps, CPU, with the defaults otherwise on: every rollout stored, MLflow tracking (into a
temporary sqlite store holding the run's experiment, as after a user's first run), the console row
per iteration (captured, not shown). The run is a :class:`rlpipe.trainer.Trainer` stepped as
``rlpipe run`` does (``start``, ``step`` until ``done``, ``finish``); timed from the first
iteration to the end of ``finish`` (store flushed, MLflow run ended), start-up excluded.

Each phase is measured by wrapping the function that does it with a timer; times are exclusive
(a wrapped call inside another is subtracted from the outer one), so the rows add up to the wall
time, and "other" is what no wrapper covers (the loop's own bookkeeping). Each wrapper adds a
little time per call to the phase it wraps. Phases:

================================  ================================================================
env step (simulator)              the env's ``step`` minus the conversions below
tensor conversions                numpy ↔ torch in the env adapter (actions out, observations in)
policy forward (actor MLP)        the actor network's forward, one call per env step
sampling                          the policy's ``sample`` minus the forward: distribution, sample,
                                  log-probability
collect bookkeeping               ``Trainer.collect`` and the collector's own work: rollout
                                  writes, episode statistics
values (critic, batched)          the critic over the rollout's observations, once per rollout
advantage (GAE)                   the algorithm's ``compute_advantages``
update                            the algorithm's ``update``: 4 epochs × 4 minibatches
guards                            the non-finite checks around advantage and update (and the
                                  state the guard's ``skip`` mode would restore)
rollout attrs                     the attributes stored with each rollout (hashes of the config)
store (critical path)             ``RolloutStore.submit`` (checks, clone) and the final ``close``
tracking (log call)               ``Tracker.log``: console row, curve.csv, queueing for MLflow
finish                            ``Trainer.finish``: waits for the MLflow process to write what is
                                  queued and end the run; writes metrics.json
checkpoint                        the final checkpoint
================================  ================================================================

Work done off the training thread is reported beside the table, in CPU seconds: the process's other
threads (the store's writer and its Zarr I/O threads, the MLflow feeder) and the MLflow tracking
process. On a 2-core machine that work still competes for the cores.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

from _bench import (
    DEFAULT_PARAMS,
    W1_BACKENDS,
    Phases,
    backend_overrides,
    load_average,
    load_cfg,
    prepare_tracking,
    print_machine,
    set_threads,
    write_json,
)

import rlpipe.trainer.lifecycle as lifecycle_module
import rlpipe.trainer.trainer as trainer_module
from rlpipe.tracking.background import prewarm_tracking
from rlpipe.trainer import Trainer

N_ENVS, N_STEPS, BATCH_SIZE, N_EPOCHS, LR = 8, 128, 256, 4, 2.5e-4
NET = "{hidden_sizes: [64, 64], activation: tanh}"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--params", type=Path, default=DEFAULT_PARAMS, help="params file (default: params.yaml)")
    add("--total-steps", type=int, default=100_000, help="env steps (default 100000)")
    add(
        "--backend",
        default="auto",
        choices=sorted(W1_BACKENDS),
        help="simulator: auto (gymnasium's CartPoleVectorEnv), envpool, sync (gymnasium SyncVectorEnv)",
    )
    add("--store", choices=("on", "off"), default="on", help="store.enabled (default on)")
    add("--tracking", choices=("on", "off"), default="on", help="MLflow tracking (default on)")
    add("--threads", default="auto", help="trainer.num_threads (default auto)")
    add("--eval", action="store_true", help="keep periodic evaluation on (SB3's learn has none)")
    add("--json", type=Path, default=None, help="also write the results as JSON here")
    return parser.parse_args()


def w1_overrides(args: argparse.Namespace, data_dir: Path) -> list[str]:
    iterations = math.ceil(args.total_steps / (N_ENVS * N_STEPS))
    uri = f"sqlite:///{data_dir}/mlflow.db"
    return [
        "env.id=CartPole-v1",
        *backend_overrides(args.backend),
        f"trainer.num_envs={N_ENVS}",
        f"trainer.buffer_size={N_STEPS}",
        f"trainer.iterations={iterations}",
        "trainer.device=cpu",
        f"trainer.data_dir={data_dir}",
        "trainer.exp_name=w1",
        "trainer.stop_when=[]",
        f"trainer.enable_eval={str(args.eval).lower()}",
        f"trainer.num_threads={args.threads}",
        f"policy.actor.network_cfg={NET}",
        f"policy.critic.network_cfg={NET}",
        f"algorithm.cfg.batch_size={BATCH_SIZE}",
        f"algorithm.cfg.n_epochs={N_EPOCHS}",
        f"algorithm.cfg.learning_rate={LR}",
        f"store.enabled={'true' if args.store == 'on' else 'false'}",
        f"tracking.backend={'mlflow' if args.tracking == 'on' else 'none'}",
        f"tracking.uri={uri}",
    ]


def instrument(trainer: Trainer, phases: Phases) -> None:
    """Wrap every phase's function of this started run (see the module docstring).

    The trainer's own calls are wrapped where it looks them up: on the trainer and its parts, and
    the guard checks and checkpoints in the modules ``rlpipe.trainer.trainer`` and ``lifecycle``.
    """
    parts = trainer.parts
    env, algo, collector = parts.env, parts.algo, parts.collector
    policy = algo.policy
    phases.wrap(trainer, "collect", "collect bookkeeping")
    phases.wrap(env, "step", "env step (simulator)")
    for name in ("_to_numpy", "_to_obs", "_to_torch"):  # the adapters' numpy <-> torch helpers
        phases.wrap(env, name, "tensor conversions")
    for module in _conversion_modules():
        phases.wrap(module, "obs_to_torch", "tensor conversions")
    phases.wrap(policy.actor, "forward", "policy forward (actor MLP)")
    phases.wrap(policy, "sample", "sampling")
    phases.wrap(collector.stepper, "finish", "values (critic, batched)")
    phases.wrap(algo, "compute_advantages", "advantage (GAE)")
    phases.wrap(algo, "update", "update")
    for name in ("nonfinite_rollout", "nonfinite_update"):
        phases.wrap(trainer_module, name, "guards")
    phases.wrap(parts.guard, "before_update", "guards")
    phases.wrap(trainer.state, "rollout_attrs", "rollout attrs")
    phases.wrap(lifecycle_module, "checkpoint", "checkpoint")
    if parts.store is not None:
        phases.wrap(parts.store, "submit", "store (critical path)")
        phases.wrap(parts.store, "close", "store (critical path)")
    if trainer.session.tracker is not None:
        phases.wrap(trainer.session.tracker, "log", "tracking (log call)")
    phases.wrap(trainer, "finish", "finish (MLflow flush, metrics.json)")


def _conversion_modules() -> list[Any]:
    modules = []
    for name in ("rlpipe.envs.backends.envpool_env", "rlpipe.envs.backends.gym_adapter"):
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "obs_to_torch"):
            modules.append(module)
    return modules


def profile(args: argparse.Namespace) -> dict[str, Any]:
    """One W1 run, instrumented; returns the phase table and the background CPU."""
    phases = Phases(cpu=False)  # wall time only, as the table shows
    with tempfile.TemporaryDirectory(prefix="rlpipe-w1-") as tmp:
        cfg = load_cfg(args.params, w1_overrides(args, Path(tmp)))
        if args.tracking == "on":
            prepare_tracking(cfg.tracking.uri or "", cfg.trainer.exp_name)  # as after a user's first run
            prewarm_tracking(cfg, True)  # as `rlpipe run` does: MLflow's import overlaps the build
        trainer = Trainer(cfg)
        captured = io.StringIO()
        with contextlib.redirect_stdout(captured):
            trainer.start()
            instrument(trainer, phases)
            process_cpu, thread_cpu = time.process_time(), time.thread_time()
            children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
            load_before = load_average()
            start = time.perf_counter()
            while not trainer.done:
                trainer.step()
            trainer.finish()
            wall = time.perf_counter() - start
            other_threads = (time.process_time() - process_cpu) - (time.thread_time() - thread_cpu)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        threads = trainer.algo.device.type == "cpu" and __import__("torch").get_num_threads()
    covered = sum(phases.wall.values())
    rows = [
        {
            "phase": name,
            "seconds": s,
            "share": s / wall,
            "calls": phases.calls[name],
            "us_per_env_step": s / trainer.env_steps * 1e6,
        }
        for name, s in sorted(phases.wall.items(), key=lambda kv: -kv[1])
    ]
    rows.append(
        {
            "phase": "other (loop, metrics, events)",
            "seconds": wall - covered,
            "share": (wall - covered) / wall,
            "calls": trainer.iteration,
            "us_per_env_step": (wall - covered) / trainer.env_steps * 1e6,
        }
    )
    helpers_user = children.ru_utime - children_before.ru_utime
    helpers_system = children.ru_stime - children_before.ru_stime
    return {
        "env_steps": trainer.env_steps,
        "wall_s": wall,
        "sps": trainer.env_steps / wall,
        "rows": rows,
        "other_threads_cpu_s": other_threads,
        "helper_processes_user_s": helpers_user,
        "helper_processes_system_s": helpers_system,
        "torch_threads": threads,
        "backend": type(trainer.env).__name__,
        "load_at_start": load_before,
        "load_at_end": load_average(),
    }


def main() -> None:
    args = parse_args()
    if args.threads != "auto":
        set_threads(int(args.threads))
    result = profile(args)
    print(
        f"W1: CartPole-v1 ({result['backend']}), {N_ENVS} envs x {N_STEPS} steps, {N_EPOCHS} epochs x "
        f"batch {BATCH_SIZE}, 64x64 tanh, store {args.store}, MLflow {args.tracking}, "
        f"{result['torch_threads']} torch thread(s)"
    )
    print(
        f"{result['env_steps']:,} env steps in {result['wall_s']:.2f} s = {result['sps']:,.0f} steps/s "
        f"(load average {result['load_at_start']} -> {result['load_at_end']})"
    )
    print(f"{'phase':34s} {'s':>8s} {'share':>7s} {'us/step':>8s} {'calls':>8s}")
    for row in result["rows"]:
        print(
            f"{row['phase']:34s} {row['seconds']:8.2f} {row['share']:7.1%} {row['us_per_env_step']:8.1f} "
            f"{row['calls']:8d}"
        )
    print(
        f"off the training thread: other threads {result['other_threads_cpu_s']:.2f} CPU s, "
        "helper processes (MLflow, store writer; their whole life, start-up included) "
        f"{result['helper_processes_user_s']:.2f} user + "
        f"{result['helper_processes_system_s']:.2f} system CPU s"
    )
    print_machine()
    write_json(
        args.json, {"benchmark": "w1_profile", "args": {k: str(v) for k, v in vars(args).items()}, **result}
    )


if __name__ == "__main__":
    main()
