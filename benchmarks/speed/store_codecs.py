"""Compression ratio and write rate of every store codec on collected rollouts of robot tasks and CartPole.

    .venv/bin/python benchmarks/speed/store_codecs.py --json benchmarks/results/store_codecs.json

For each workload (``--workloads``: RobotProxy, envpool's Go1JoystickFlatTerrain-v1 and
PandaPickCube-v1 when envpool has them, CartPole) rlpipe's own collector gathers ``--iterations``
rollouts with an untrained policy (the store's input: the advantage keys left out), and each one
is written with every codec ``store.codec`` accepts, codecs interleaved, ``--repeats`` times.
Per workload and codec: the raw bytes per env step, the ratio raw / on disk, and the write rate
(raw MB per second of ``write_rollout``, median over writes). ``none + obs float16`` rows write
the same rollouts with ``store.precision: {obs: float16}`` applied, to set the codecs beside it.
Short runs sized for a shared 2-core machine; the rates there are indicative, the ratios exact.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import typing
from pathlib import Path

import torch

from rlpipe import config
from rlpipe.artifacts.store_policy import StorePolicy, bytes_per_env_step, layout_of, stored_bytes
from rlpipe.artifacts.zarr_write import write_rollout
from rlpipe.config import StoreCfg
from rlpipe.trainer.parts import build_parts

ROOT = Path(__file__).resolve().parents[2]
CODECS = typing.get_args(StoreCfg.model_fields["codec"].annotation)
"""Every codec ``store.codec`` accepts."""

WORKLOADS: dict[str, tuple[str, tuple[str, ...]]] = {
    "RobotProxy": (
        "params.yaml",
        (
            "env.id=RobotProxy",
            "env.cfg={}",
            "policy.actor={type: mlp, obs_keys: [policy], network_cfg: {hidden_sizes: [64, 64], "
            "activation: elu}}",
            "policy.critic={type: mlp, obs_keys: [policy, privileged], network_cfg: {hidden_sizes: [64, 64], "
            "activation: elu}}",
        ),
    ),
    "Go1JoystickFlatTerrain-v1": ("configs/go1_envpool.yaml", ("env.cfg={mode: sync, num_threads: 1}",)),
    "PandaPickCube-v1": (
        "configs/zoo/playground_panda_pick_cube.yaml",
        ("env.cfg={mode: sync, num_threads: 1, resume: restart}",),
    ),
    "CartPole": ("params.yaml", ("env.id=CartPole",)),
}
"""Workload → (params file, overrides): the task's own config where the repository has one."""


def collected(name: str, num_envs: int, horizon: int, iterations: int) -> list:
    """``iterations`` rollouts of ``name`` from rlpipe's collector (CPU), the advantage keys left out."""
    params, extra = WORKLOADS[name]
    cfg = config.load(
        ROOT / params,
        [
            *extra,
            f"trainer.num_envs={num_envs}",
            f"trainer.buffer_size={horizon}",
            "trainer.device=cpu",
            "trainer.enable_eval=false",
            "tracking.backend=none",
            "trainer.data_dir=/tmp/rlpipe-store-codecs",
            "store.enabled=false",
        ],
    )
    parts = build_parts(cfg, store=False, evaluate=False)
    rollouts = []
    for _ in range(iterations):
        rollout, _ = parts.collector()
        rollouts.append(rollout.exclude(*parts.algo.advantage_keys).clone())
    return rollouts


def envpool_makes(env_id: str) -> bool:
    """Whether the installed envpool makes ``env_id``."""
    try:
        import envpool
    except ImportError:
        return False
    return env_id in envpool.list_all_envs()


def disk_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def measure(rollouts: list, repeats: int, root: Path) -> list[dict[str, object]]:
    """Per codec (and ``none`` with float16 obs): bytes per env step, ratio, median write MB/s."""
    variants = [(codec, StorePolicy()) for codec in CODECS]
    variants.append(("none + obs float16", StorePolicy(precision={"obs": "float16"})))
    raw = stored_bytes(layout_of(rollouts[0]))
    per_step = bytes_per_env_step(layout_of(rollouts[0]))
    times: dict[str, list[float]] = {name: [] for name, _ in variants}
    sizes: dict[str, list[int]] = {name: [] for name, _ in variants}
    count = 0
    for repeat in range(repeats + 1):  # repeat 0 warms zarr, the codecs and the page cache up
        for i, rollout in enumerate(rollouts):
            for name, policy in variants:  # interleaved: a busy moment hits every codec alike
                kept, attrs = policy.shape(rollout)
                path = root / f"{count:06d}.zarr"
                count += 1
                codec = "none" if "float16" in name else name
                start = time.perf_counter()
                write_rollout(path, kept, {"iteration": i + 1, **attrs}, codec)  # the store's write, no check
                elapsed = time.perf_counter() - start
                if repeat:
                    times[name].append(elapsed)
                    sizes[name].append(disk_bytes(path))
    rows = []
    for name, _ in variants:
        median = statistics.median(times[name])
        on_disk = statistics.mean(sizes[name])
        rows.append(
            {
                "codec": name,
                "raw_bytes_per_env_step": round(per_step, 1),
                "disk_bytes_per_env_step": round(per_step * on_disk / raw, 1),
                "ratio": round(raw / on_disk, 3),
                "write_mb_s": round(raw / median / 1e6, 1),
                "write_ms_median": round(median * 1e3, 2),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    parser.add_argument("--num-envs", type=int, default=256, help="envs of RobotProxy and CartPole")
    parser.add_argument("--envpool-envs", type=int, default=32, help="envs of the envpool tasks")
    parser.add_argument("--horizon", type=int, default=24)
    parser.add_argument("--iterations", type=int, default=3, help="rollouts collected per workload")
    parser.add_argument("--repeats", type=int, default=3, help="writes of each rollout per codec")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    results: dict[str, object] = {
        "codecs": list(CODECS),
        "horizon": args.horizon,
        "iterations": args.iterations,
        "repeats": args.repeats,
        "torch_threads": 1,
        "workloads": {},
    }
    for name in args.workloads:
        envpool_task = name.endswith("-v1")
        if envpool_task and not envpool_makes(name):
            results["workloads"][name] = {"skipped": "envpool is not installed or does not make this id"}
            continue
        n = args.envpool_envs if envpool_task else args.num_envs
        rollouts = collected(name, n, args.horizon, args.iterations)
        with tempfile.TemporaryDirectory(prefix="rlpipe-store-codecs-") as tmp:
            rows = measure(rollouts, args.repeats, Path(tmp))
        results["workloads"][name] = {
            "num_envs": n,
            "layout": {k: [list(s), str(d).removeprefix("torch.")] for k, s, d in layout_of(rollouts[0])},
            "rows": rows,
        }
        print(f"{name}: N={n} T={args.horizon}")
        for row in rows:
            print(
                f"  {row['codec']:<20} {row['raw_bytes_per_env_step']:>8.1f} B/step raw  "
                f"{row['disk_bytes_per_env_step']:>8.1f} on disk  ratio {row['ratio']:>6.3f}  "
                f"write {row['write_mb_s']:>8.1f} MB/s"
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
