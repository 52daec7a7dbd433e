"""``rlpipe dataset``: MB and seconds per 1M exported transitions, Minari (CartPole) and LeRobot (cameras).

    MUJOCO_GL=egl .venv/bin/python benchmarks/speed/dataset_export.py [--cartpole-envs 64]
        [--pixel-envs 8] [--push-envs 16] [--horizon 64] [--iterations 4] [--repeats 3]
        [--json benchmarks/results/dataset_export.json]

Trains three small runs with every rollout stored (``tracking.backend: none``, one thread): the
default CartPole (``params.yaml``), PixelCartPole (``configs/pixel_cartpole.yaml``: 64×64
grayscale, 3 stacked frames, the newest of which LeRobot keeps) and the PushCube teacher with its
camera on (``configs/push_cube_teacher.yaml``, ``env.cfg.camera: {size: [64, 64]}``: RGB frames
beside the state groups, the docs' LeRobot example). Each is exported ``--repeats`` times through
:func:`rlpipe.datasets.export.export_dataset` (the command's driver: episodes read from the Zarr
stores, written, published): CartPole as Minari, PixelCartPole as LeRobot with AV1 video and with
PNG frames, PushCube as LeRobot with AV1 video. Reported per row: episodes, frames (transitions),
the dataset's MB and the median export seconds, and both scaled to 1M transitions (linear: the
export streams episode by episode, so its cost per transition does not depend on the size).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _bench

from _bench import median, print_machine, print_table, write_json

from rlpipe.datasets.episodes import Selection
from rlpipe.datasets.export import Output, export_dataset
from rlpipe.trainer import Trainer

ROOT = Path(__file__).resolve().parents[2]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cartpole-envs", type=int, default=64)
    parser.add_argument("--pixel-envs", type=int, default=8)
    parser.add_argument("--push-envs", type=int, default=16)
    parser.add_argument("--horizon", type=int, default=64)
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    return parser.parse_args()


def stored_run(params: Path, data: Path, envs: int, args: argparse.Namespace, *extra: str) -> Path:
    """A run of ``params`` with every rollout stored (``extra``: more overrides); its run directory."""
    from rlpipe import config

    overrides = [
        f"trainer.data_dir={data}",
        "trainer.device=cpu",
        f"trainer.num_envs={envs}",
        f"trainer.buffer_size={args.horizon}",
        f"trainer.iterations={args.iterations}",
        "trainer.enable_eval=false",
        "trainer.stop_when=[]",
        "tracking.backend=none",
        "trainer.num_threads=1",
        "store.enabled=true",
        *extra,
    ]
    cfg = config.load(params, overrides)
    Trainer(cfg).train()
    return Path(cfg.run_dir)


def export_row(name: str, run: Path, output: Output, repeats: int, tmp: Path) -> dict[str, object]:
    seconds, summary = [], None
    for i in range(repeats):
        out = tmp / f"{name}-{i}"
        start = time.perf_counter()
        summary = export_dataset(run, Selection(), Output(output.fmt, out, images=output.images))
        seconds.append(time.perf_counter() - start)
    assert summary is not None
    mb, s = summary.bytes / 1e6, median(seconds)
    per_million = 1e6 / summary.frames
    return {
        "dataset": name,
        "format": output.fmt,
        "episodes": summary.episodes,
        "frames": summary.frames,
        "dropped_fragments": summary.dropped_fragments,
        "mb": mb,
        "seconds": s,
        "mb_per_1m": mb * per_million,
        "seconds_per_1m": s * per_million,
    }


def main() -> None:
    args = parse_args()
    import torch

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        cartpole = stored_run(ROOT / "params.yaml", tmp / "cartpole", args.cartpole_envs, args)
        pixels = stored_run(ROOT / "configs" / "pixel_cartpole.yaml", tmp / "pixels", args.pixel_envs, args)
        push = stored_run(
            ROOT / "configs" / "push_cube_teacher.yaml",
            tmp / "push",
            args.push_envs,
            args,
            "env.cfg.camera={size: [64, 64]}",
            "env.cfg.num_threads=1",
        )
        rows = [
            export_row("cartpole-minari", cartpole, Output("minari", tmp), args.repeats, tmp),
            export_row(
                "pixel-cartpole-lerobot-video",
                pixels,
                Output("lerobot", tmp, images="video"),
                args.repeats,
                tmp,
            ),
            export_row(
                "pixel-cartpole-lerobot-png", pixels, Output("lerobot", tmp, images="png"), args.repeats, tmp
            ),
            export_row(
                "push-cube-camera-lerobot-video",
                push,
                Output("lerobot", tmp, images="video"),
                args.repeats,
                tmp,
            ),
        ]
    print_machine()
    print_table(
        rows,
        [
            ("dataset", "dataset", "<31"),
            ("episodes", "episodes", ">9"),
            ("frames", "frames", ">8"),
            ("mb", "MB", ">8.2f"),
            ("seconds", "s", ">7.2f"),
            ("mb_per_1m", "MB/1M", ">9.0f"),
            ("seconds_per_1m", "s/1M", ">8.0f"),
        ],
    )
    write_json(
        args.json,
        {
            "horizon": args.horizon,
            "iterations": args.iterations,
            "cartpole_envs": args.cartpole_envs,
            "pixel_envs": args.pixel_envs,
            "push_envs": args.push_envs,
            "repeats": args.repeats,
            "rows": rows,
        },
    )


if __name__ == "__main__":
    main()
