"""Eval video costs nothing in training: train-iteration time with ``eval.video`` on vs off.

    MUJOCO_GL=egl .venv/bin/python benchmarks/speed/eval_video.py [--pairs 5] [--threads 1]
        [--env Pendulum] [--num-envs 64] [--horizon 32] [--json PATH]

Two runs of the same experiment are started side by side as ``rlpipe.trainer.Trainer`` (console rows
captured; the torch ``--env``, N envs × T steps, an evaluation after every iteration on 4 eval envs ×
1 episode), one with ``eval.video=true`` (``eval.video_envs=2``), and stepped alternately with
``Trainer.step``, iteration by iteration, so a drifting machine load hits both (the order swaps every
pair). Per iteration: the train time is
``time/collect_s + time/update_s`` (collection, store hand-off, advantage and update — what video
must not slow), the eval time is the rest of ``time/iteration_s``. Reported: medians of both per
run and the median of the per-pair ratios (video / no video). Target: train ratio ≈ 1.0 (noise).

Then the cost of one frame: the torch rasterizer of CartPole and Pendulum (2 envs), H.264
encoding of a 640×240 tiled frame, and — with a working ``MUJOCO_GL`` — a MuJoCo frame
(gymnasium's HalfCheetah-v5, 480×480).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

import numpy as np
from _bench import (
    DEFAULT_PARAMS,
    NEVER,
    load_cfg,
    median,
    paired_ratios,
    print_machine,
    print_table,
    set_threads,
    start_quietly,
    write_json,
)

from rlpipe.artifacts.video import Mp4Writer
from rlpipe.envs import RenderUnavailable, build_eval_env
from rlpipe.trainer import Trainer


def overrides(args: argparse.Namespace, data_dir: Path, video: bool) -> list[str]:
    steps = args.num_envs * args.horizon
    return [
        "trainer.device=cpu",
        f"env.id={args.env}",
        f"trainer.num_envs={args.num_envs}",
        f"trainer.buffer_size={args.horizon}",
        f"trainer.iterations={NEVER}",
        f"trainer.eval_freq={steps}",
        f"trainer.save_freq={NEVER}",
        "trainer.num_eval_envs=4",
        "trainer.num_eval_episodes=1",
        "tracking.backend=none",
        "store.enabled=false",
        f"trainer.data_dir={data_dir}",
        f"eval.video={str(video).lower()}",
        "eval.video_envs=2",
        "algorithm.cfg.batch_size=512",
        "algorithm.cfg.n_epochs=4",
    ]


def interleaved(args: argparse.Namespace) -> dict[str, Any]:
    """Train and eval seconds per iteration of both runs, stepped alternately."""
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as running:
        runs = {}
        for video in (False, True):
            cfg = load_cfg(args.params, overrides(args, Path(tmp) / str(video), video))
            runs[video] = start_quietly(Trainer(cfg))
            running.callback(runs[video].close)  # the last started is closed first
        times: dict[bool, dict[str, list[float]]] = {v: {"train": [], "eval": []} for v in runs}
        for i in range(args.warmup + args.pairs):
            for video in (False, True) if i % 2 else (True, False):  # ABBA: no order bias
                m = runs[video].step(checkpoint=False)
                if i >= args.warmup:
                    train = m["time/collect_s"] + m["time/update_s"]
                    times[video]["train"].append(train)
                    times[video]["eval"].append(m["time/iteration_s"] - train)
                assert ("eval/video_frames" in m) == video, "filmed iff eval.video"
        running.close()
        videos = sorted(p.name for p in (Path(tmp) / "True").rglob("*.mp4"))
    return {"times": times, "videos": len(videos)}


def frame_costs(repeats: int) -> list[dict[str, Any]]:
    """Milliseconds per frame of each renderer (and of encoding)."""
    rows = []
    for env_id in ("CartPole", "Pendulum", "HalfCheetah-v5"):
        try:
            backend = "gymnasium" if "-v" in env_id else "torch"  # envpool's MuJoCo cannot draw
            env, problem = build_eval_env(env_id, 2, "cpu", {}, video=True, backend=backend)
        except Exception as exc:  # noqa: BLE001  # a missing optional simulator
            rows.append({"what": f"{env_id} render (2 envs)", "note": str(exc).splitlines()[0][:60]})
            continue
        try:
            if problem is not None:
                raise problem
            env.reset(seed=0)
            env.render([0, 1])  # first frame: renderer set-up
            start = time.perf_counter()
            for _ in range(repeats):
                frames = np.asarray(env.render([0, 1]))
            ms = (time.perf_counter() - start) / repeats * 1e3
            rows.append({"what": f"{env_id} render (2 envs)", "ms": ms, "note": f"{frames.shape[1:3]} each"})
        except RenderUnavailable as exc:
            rows.append({"what": f"{env_id} render (2 envs)", "note": str(exc)[:60]})
        finally:
            env.close()
    with tempfile.TemporaryDirectory() as tmp:
        writer = Mp4Writer(Path(tmp) / "v.mp4", 30)
        frame = np.random.default_rng(0).integers(0, 255, (240, 640, 3), dtype=np.uint8)
        start = time.perf_counter()
        for _ in range(repeats):
            writer.append(frame)
        writer.close()
        rows.append(
            {
                "what": "H.264 encode (640×240)",
                "ms": (time.perf_counter() - start) / repeats * 1e3,
                "note": "noise frames (worst case)",
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=Path, default=DEFAULT_PARAMS)
    parser.add_argument("--env", default="Pendulum")
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--horizon", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--frames", type=int, default=50, help="Frames timed per renderer.")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    set_threads(args.threads)
    print_machine()
    result = interleaved(args)
    t = result["times"]
    rows = [
        {"run": "eval.video=false", "train": median(t[False]["train"]), "eval": median(t[False]["eval"])},
        {"run": "eval.video=true", "train": median(t[True]["train"]), "eval": median(t[True]["eval"])},
        {
            "run": "ratio video/none (median of pairs)",
            "train": median(paired_ratios(t[True]["train"], t[False]["train"])),
            "eval": median(paired_ratios(t[True]["eval"], t[False]["eval"])),
        },
    ]
    print(
        f"{args.env}, N={args.num_envs} × T={args.horizon}, eval after every iteration, "
        f"{args.pairs} interleaved pairs ({result['videos']} videos written)"
    )
    print_table(rows, [("run", "run", ""), ("train", "train s/iter", ".3f"), ("eval", "eval s/iter", ".3f")])
    costs = frame_costs(args.frames)
    print()
    print_table(costs, [("what", "per frame", ""), ("ms", "ms", ".1f"), ("note", "", "")])
    write_json(args.json, {"iterations": rows, "frames": costs, "raw": {str(k): v for k, v in t.items()}})


if __name__ == "__main__":
    main()
