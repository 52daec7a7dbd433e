"""``rlpipe dataset``: a run's stored rollouts as a LeRobot v3 or Minari dataset (``export``: the policy)."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from rlpipe.cli.common import Location, load_config, parse_span, run_argument, user_errors

if TYPE_CHECKING:
    from rlpipe.datasets.indices import EnvIndices

__all__ = ["dataset", "parse_envs"]


def parse_envs(ctx: click.Context, param: click.Parameter, value: str | None) -> EnvIndices | None:
    """``0,2,5:7`` (ranges ``A:B``, both ends included) → their spans, never expanded; else names --envs."""
    if value is None:
        return None
    from rlpipe.cli.exits import bounded
    from rlpipe.datasets.indices import ENVS_FORMAT, EnvIndices

    try:
        return EnvIndices.parse(value)
    except ValueError:
        raise click.BadParameter(f"{bounded(repr(value), 200)}: expected {ENVS_FORMAT}") from None


@click.command()
@run_argument
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["lerobot", "minari"]),
    required=True,
    help="lerobot: LeRobot v3.0 (imitation learning, VLAs); minari: Minari (offline RL; needs "
    "pip install 'rlpipe[minari]').",
)
@click.option(
    "--out",
    type=Location(path_type=Path),
    required=True,
    metavar="DIR",
    help="The dataset folder to create (must not exist; written whole or not at all). Minari: a "
    "datasets folder, MINARI_DATASETS_PATH=DIR.",
)
@click.option(
    "--iterations",
    "span",
    callback=parse_span,
    default=None,
    metavar="A:B",
    help="Only iterations A..B (both included, every one stored), or one iteration K.",
)
@click.option(
    "--last", type=click.IntRange(min=1), default=None, metavar="K", help="Only the last K stored iterations."
)
@click.option(
    "--envs",
    callback=parse_envs,
    default=None,
    metavar="LIST",
    help="Only these env indices (per rank): 0,2,5:7 (default: every stored env).",
)
@click.option(
    "--min-return",
    type=float,
    default=None,
    metavar="X",
    help="Only episodes whose return (sum of rewards) is at least X.",
)
@click.option("--min-success", is_flag=True, help="Only episodes that succeeded (the env reports success).")
@click.option(
    "--action",
    type=click.Choice(["executed", "mean"]),
    default="executed",
    show_default=True,
    help="executed: the sampled action the rewards followed; mean: the policy mean (a clean "
    "behaviour-cloning label; recorded by runs with store.action_mean: true).",
)
@click.option(
    "--keep-last-fragment",
    is_flag=True,
    help="Keep the episode fragment cut by the last exported store, as truncated (its next "
    "observation the exact bootstrap one); dropped by default.",
)
@click.option(
    "--images",
    type=click.Choice(["video", "png"]),
    default=None,
    help="LeRobot: camera groups as AV1 video (default, as LeRobot writes them) or lossless PNGs.",
)
@click.option(
    "--task",
    default=None,
    metavar="TEXT",
    help="LeRobot: the task text of every episode (default: the env id).",
)
@click.option(
    "--dataset-id",
    default=None,
    metavar="ID",
    help="Minari: the dataset id (default: rlpipe/<exp>/rollouts-v0).",
)
@user_errors
def dataset(
    params: Path,
    fmt: str,
    out: Path,
    span: tuple[int, int] | None,
    last: int | None,
    envs: EnvIndices | None,
    min_return: float | None,
    min_success: bool,
    action: str,
    keep_last_fragment: bool,
    images: str | None,
    task: str | None,
    dataset_id: str | None,
) -> None:
    """Export a run's stored rollouts as a dataset of episodes: LeRobot v3.0 or Minari.

    Episodes are split at each done, continued across stores only where the collector recorded no
    reset; the fragment before the first exported store and the one cut by the last are dropped (the
    summary counts them). Each episode keeps its iteration, return and success, so mixed-quality
    training data can be filtered: --iterations/--last, --min-return, --min-success.
    """
    if span is not None and last is not None:
        raise ValueError("--iterations and --last: give one of them")
    if min_return is not None and not math.isfinite(min_return):
        raise ValueError(f"--min-return: {min_return} is not a finite number")
    started = time.perf_counter()
    from rlpipe.datasets.export import Output, check_output, export_dataset

    output = Output(fmt, out, images=images, task=task, dataset_id=dataset_id)
    check_output(output)  # before the params load: an existing --out is refused at once
    from rlpipe.config import describing

    with describing():  # the run's stores are read; none of its code runs
        run_dir = load_config(params, ()).run_dir
    from rlpipe.datasets.episodes import Selection
    from rlpipe.tracking.progress import CountProgress

    selection = Selection(
        iterations=span,
        last=last,
        envs=envs,
        min_return=min_return,
        min_success=min_success,
        action=action,
        keep_last_fragment=keep_last_fragment,
    )
    with CountProgress(f"{fmt} → {out}") as progress:
        summary = export_dataset(run_dir, selection, output, lambda episode: progress.add(episode.length))
    click.echo(
        f"dataset → {out}: {summary.episodes} episodes, {summary.frames} frames, "
        f"{summary.dropped_fragments} fragments dropped, {summary.dropped_by_filter} episodes "
        f"filtered out, {summary.bytes / 1e6:.1f} MB, {time.perf_counter() - started:.1f} s"
    )
