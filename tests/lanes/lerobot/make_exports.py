"""The datasets the LeRobot lane reads: tiny runs trained and exported by rlpipe, in rlpipe's own venv.

    python tests/lanes/lerobot/make_exports.py OUT

writes under ``OUT`` (emptied first):

- ``cartpole/``: PPO CartPole (a flat state, no camera) as LeRobot v3.0;
- ``pixels-png/`` and ``pixels-video/``: PixelCartPole (a gray 32×32 camera, 2 frames stacked, beside
  a state group; the policy's mean action stored) with ``--images png`` and with AV1 video;
- ``<name>.npz`` beside each: the exported episodes read from the run's stores with zarr alone
  (``state``, ``action``, ``reward``, ``done``, and ``pixels``, the newest gray frame ``[N, H, W]``,
  all episodes one after the other in export order, ``lengths`` their lengths), so the lane compares
  what LeRobot reads with what the stores hold, not with what the exporter wrote.

LeRobot itself is not needed here; the lane reads these files in LeRobot's own venv.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import zarr
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/: the shared tiny-run fixtures

from _dataset_runs import tiny_run  # noqa: E402
from _pixel_fixtures import PIXEL_PARAMS, TINY_PIXELS  # noqa: E402

from rlpipe.cli import cli  # noqa: E402


def _invoke(args: list[str]) -> None:
    result = CliRunner().invoke(cli, args)
    if result.exit_code != 0:
        raise SystemExit(f"rlpipe {' '.join(args)} failed ({result.exit_code}):\n{result.output}")


def pixel_run(data: Path) -> Path:
    """The tiny PixelCartPole run of the offline tests, storing the policy's mean action."""
    args = ["run", str(PIXEL_PARAMS)]
    for item in (*TINY_PIXELS, f"trainer.data_dir={data}", "store.action_mean=true"):
        args += ["--set", item]
    _invoke(args)
    return next(data.iterdir())


def stored_episodes(run: Path, keys: dict[str, str]) -> dict[str, np.ndarray]:
    """Whole episodes of a single-process run, read with zarr alone, in export order (env, then time).

    ``keys`` maps the name saved to the store's array (``{"state": "obs/state", ...}``); an episode
    continues across stores unless the store begins with a reset, and a fragment never ended is left
    out, as the export does.
    """
    stores = [zarr.open_group(str(p), mode="r") for p in sorted((run / "rollouts").glob("iter-*.zarr"))]
    names = [*keys, "reward", "done"]
    episodes: list[list[tuple[np.ndarray, ...]]] = []
    for env in range(stores[0]["reward"].shape[0]):
        steps: list[tuple[np.ndarray, ...]] = []
        for store in stores:
            if store.attrs["reset_at_start"]:
                steps = []
            arrays = [store[keys[n]][env] if n in keys else store[n][env] for n in names]
            for t in range(arrays[0].shape[0] - 1):
                steps.append(tuple(a[t] for a in arrays))
                if arrays[-1][t]:
                    episodes.append(steps)
                    steps = []
    out = {name: np.stack([step[i] for ep in episodes for step in ep]) for i, name in enumerate(names)}
    out["lengths"] = np.array([len(ep) for ep in episodes], dtype=np.int64)
    return out


def export(run: Path, out: Path, *options: str) -> None:
    _invoke(["dataset", str(run), "--format", "lerobot", "--out", str(out), *options])


def main(out: Path) -> None:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    cartpole = tiny_run(out / "runs")
    export(cartpole, out / "cartpole")
    np.savez(out / "cartpole.npz", **stored_episodes(cartpole, {"state": "obs", "action": "action"}))
    pixels = pixel_run(out / "pixel-runs")
    keys = {"state": "obs/state", "action": "action_mean", "pixels": "obs/pixels"}
    episodes = stored_episodes(pixels, keys)
    episodes["pixels"] = episodes["pixels"][:, -1]  # the newest of the stacked gray frames
    for images in ("png", "video"):
        export(pixels, out / f"pixels-{images}", "--images", images, "--action", "mean")
        np.savez(out / f"pixels-{images}.npz", **episodes)
    print(f"LeRobot lane: exports written under {out}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: make_exports.py OUT")
    main(Path(sys.argv[1]))
