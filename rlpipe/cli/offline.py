"""The offline commands: one stage on stored data, inspection, export and replay of a run directory.

Each takes ``RUN_DIR|EXP|PARAMS`` and calls :mod:`rlpipe.offline`; none builds the online loop.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from rlpipe.cli.common import (
    RunPath,
    allow_rejected_option,
    checkpoint_option,
    load_config,
    out_option,
    parse_span,
    rollout_argument,
    run_argument,
    set_option,
    user_errors,
)

if TYPE_CHECKING:
    from rlpipe.location import AnyPath

__all__ = ["advantage", "collect", "evaluate", "export", "inspect", "replay", "update"]


@click.command()
@run_argument
@set_option
@checkpoint_option
@out_option("<run_dir>/collected")
@user_errors
def collect(params: Path, overrides: tuple[str, ...], checkpoint: Path | None, out: Path | None) -> None:
    """Collect one rollout with a checkpoint (default: the run's latest) → iter-NNNNNN.zarr."""
    cfg = load_config(params, overrides)
    from rlpipe.artifacts.layout import RunLayout
    from rlpipe.trainer.collect_one import collect_rollout

    click.echo(f"rollout → {collect_rollout(cfg, checkpoint, out or RunLayout(cfg.run_dir).collected)}")


@click.command()
@run_argument
@rollout_argument
@set_option
@out_option("<run_dir>/advantages/iter-NNNNNN.zarr")
@user_errors
def advantage(params: Path, rollout: Path, overrides: tuple[str, ...], out: Path | None) -> None:
    """Compute a stored rollout's advantages/returns into a separate store (the rollout is not changed)."""
    cfg = load_config(params, overrides)
    from rlpipe.offline import commands as offline

    click.echo(f"advantages → {offline.compute_advantages(cfg, rollout, out)}")


@click.command()
@run_argument
@click.argument("rollout", required=False, type=RunPath(path_type=Path))
@set_option
@checkpoint_option
@out_option("<run_dir>/updated")
@allow_rejected_option
@user_errors
def update(
    params: Path,
    rollout: AnyPath | None,
    overrides: tuple[str, ...],
    checkpoint: Path | None,
    out: Path | None,
    allow_rejected: bool,
) -> None:
    """Advantage + update on one stored rollout (default: the run's newest) → a checkpoint and the losses.

    Without --checkpoint it starts from the checkpoint the rollout was collected with.
    """
    cfg = load_config(params, overrides)
    from rlpipe.artifacts.layout import RunLayout
    from rlpipe.offline import commands as offline

    layout = RunLayout(cfg.run_dir)
    if rollout is None:
        stored = layout.rollout_paths()
        if not stored:
            raise click.UsageError(f"{layout.rollouts}: no stored rollout to update; pass ROLLOUT")
        rollout = stored[max(stored)]
    path, metrics = offline.update_from_rollout(
        cfg, rollout, checkpoint, out or layout.updated, allow_rejected
    )
    for key in sorted(k for k in metrics if k.startswith("update/")):
        click.echo(f"{key:<28} {metrics[key]:.6g}")
    click.echo(f"checkpoint → {path}")


@click.command("eval")
@run_argument
@set_option
@checkpoint_option
@click.option("--video", is_flag=True, help="Film the first eval.video_envs envs to <run_dir>/eval/*.mp4.")
@click.option(
    "--policy",
    "policy_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Evaluate an exported policy.onnx / policy.pt (`rlpipe export`) instead of a checkpoint.",
)
@out_option("<run_dir>/eval/metrics.json; with --policy, eval/policy-metrics.json")
@user_errors
def evaluate(
    params: Path,
    overrides: tuple[str, ...],
    checkpoint: Path | None,
    video: bool,
    policy_file: Path | None,
    out: Path | None,
) -> None:
    """Evaluate a checkpoint (default: the run's latest), or an exported policy, with the eval params."""
    if policy_file is not None and checkpoint is not None:
        raise click.UsageError("--policy and --checkpoint: give one of them")
    cfg = load_config(params, (*overrides, *(["eval.video=true"] if video else [])))
    from rlpipe.artifacts.layout import RunLayout
    from rlpipe.offline import commands as offline
    from rlpipe.offline.shipping import evaluate_policy_file

    layout = RunLayout(cfg.run_dir)
    if policy_file is not None:
        metrics, written = evaluate_policy_file(cfg, policy_file, out), out or layout.policy_eval_metrics
    else:
        metrics, written = offline.evaluate_checkpoint(cfg, checkpoint, out), out or layout.eval_metrics
    for key in sorted(metrics):
        click.echo(f"{key:<20} {metrics[key]:.6g}")
    click.echo(f"metrics → {written}")


@click.command()
@run_argument
@set_option
@click.option(
    "--checkpoint",
    default=None,
    metavar="N|FILE",
    help="Iteration N (checkpoints/ckpt-N.pt) or a checkpoint file (default: the run's latest).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["onnx", "torchscript"]),
    default="onnx",
    show_default=True,
    help="onnx (onnxruntime) or torchscript (libtorch: torch::jit::load).",
)
@out_option("<run_dir>/export")
@user_errors
def export(
    params: Path, overrides: tuple[str, ...], checkpoint: str | None, fmt: str, out: Path | None
) -> None:
    """Export the deterministic actor (normalizer, action clipping, argmax inside), verified.

    Writes policy.onnx (or policy.pt) and a metadata JSON beside it after running the file on stored
    observations; if any action differs from the checkpoint's by more than 1e-5: exit 3, no file.
    """
    if fmt == "onnx":
        from rlpipe.extras import ONNX_EXPORT, require_all

        require_all(ONNX_EXPORT, "rlpipe export --format onnx")
    cfg = load_config(params, overrides)
    from rlpipe.offline.shipping import ExportMismatch, export_run

    ref = int(checkpoint) if checkpoint is not None and checkpoint.isdigit() else checkpoint
    try:
        from rlpipe.artifacts.fs import as_path

        result = export_run(cfg, as_path(ref) if isinstance(ref, str) else ref, fmt, out)
    except ExportMismatch as exc:
        click.echo(f"Error: {exc}".splitlines()[0], err=True)
        sys.exit(3)
    click.echo(
        f"verified on {result.observations} observations ({result.source}): "
        f"max |Δaction| = {result.max_abs_diff:.3g}"
    )
    click.echo(f"policy → {result.path}, metadata → {result.metadata_path}")


@click.command()
@click.argument("rollout", metavar="RUN_DIR|EXP|ROLLOUT", type=RunPath(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option(
    "--frames",
    "group",
    default=None,
    metavar="GROUP",
    help="Write the frames of image group GROUP (obs/GROUP, uint8 [N, T+1, C, H, W]) of a stored "
    "rollout instead of the summary: one PNG per time step, or one MP4.",
)
@click.option(
    "--env",
    "env_index",
    type=int,
    default=0,
    show_default=True,
    help="With --frames: the env whose frames are written.",
)
@click.option(
    "--iteration",
    type=int,
    default=None,
    metavar="K",
    help="With --frames on a run: the rollout of iteration K (default: the newest stored).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["png", "mp4"]),
    default="png",
    show_default=True,
    help="With --frames: png (lossless, one per time step, matplotlib) or mp4 (H.264; needs the "
    "video extra: pip install 'rlpipe[video]').",
)
@click.option(
    "--channels",
    type=click.Choice(["all", "first", "rgb"]),
    default="all",
    show_default=True,
    help="With --frames: each channel side by side in gray (a frame stack, oldest first), the "
    "first channel only, or each 3 channels as one colour picture.",
)
@out_option("<run_dir>/frames; files iter-NNNNNN-GROUP-env-E/t-TTTTTT.png or iter-NNNNNN-GROUP-env-E.mp4")
@user_errors
def inspect(
    rollout: Path,
    as_json: bool,
    group: str | None,
    env_index: int,
    iteration: int | None,
    fmt: str,
    channels: str,
    out: Path | None,
) -> None:
    """Show a run (iterations, stores, checkpoints, params hash, last metrics) or one stored rollout.

    With --frames, write the frames of one of its image groups instead.
    """
    import json

    from rlpipe.artifacts.layout import RunLayout
    from rlpipe.artifacts.shards import is_sharded, shard_paths
    from rlpipe.offline import commands as offline
    from rlpipe.offline.render import render_rollout, render_run

    frame_options = {
        "--env": env_index != 0,
        "--iteration": iteration is not None,
        "--format": fmt != "png",
        "--channels": channels != "all",
        "--out": out is not None,
    }
    if group is None and any(frame_options.values()):
        raise click.UsageError(f"{next(k for k, v in frame_options.items() if v)}: only with --frames GROUP")
    if group is not None:
        if as_json:
            raise click.UsageError("--json: not with --frames (it writes pictures, not a summary)")
        _write_frames(rollout, group, env_index, iteration, fmt, channels, out)
        return
    if RunLayout(rollout).params.is_file():
        from rlpipe.offline.run_summary import describe_run

        summary = describe_run(rollout)
        click.echo(json.dumps(summary, indent=2) if as_json else render_run(summary))
        return

    sharded = is_sharded(rollout)  # a distributed run's iteration: one store per rank
    infos = [offline.inspect_rollout(path) for path in (shard_paths(rollout) if sharded else [rollout])]
    if as_json:
        click.echo(json.dumps({"path": str(rollout), "shards": infos} if sharded else infos[0], indent=2))
    else:
        for info in infos:
            render_rollout(info)


def _write_frames(
    target: AnyPath, group: str, env: int, iteration: int | None, fmt: str, channels: str, out: AnyPath | None
) -> None:
    """``inspect --frames``: the rollout of a run (``--iteration``, default the newest) or the one given."""
    from rlpipe.artifacts.layout import RunLayout
    from rlpipe.config import ConfigError
    from rlpipe.offline.frames import write_frames

    layout = RunLayout(target)
    if layout.params.is_file():
        stored = layout.rollout_paths()
        if not stored:
            raise ConfigError(f"{layout.rollouts}: no stored rollout to draw frames from")
        if iteration is not None and iteration not in stored:
            raise ConfigError(
                f"--iteration: {iteration} is not stored; stored: {min(stored)} to "
                f"{max(stored)} ({len(stored)} rollouts)"
            )
        target = stored[max(stored) if iteration is None else iteration]
    elif iteration is not None:
        raise ConfigError("--iteration: give a run directory, or the rollout itself without --iteration")
    result = write_frames(target, group, env, fmt, channels, out)
    where = result.paths[0] if fmt == "mp4" else result.paths[0].parent
    click.echo(f"{result.frames} frames of {group} (env {env}, {target.name}) → {where}")


@click.command()
@run_argument
@set_option
@click.option(
    "--rollouts",
    type=RunPath(file_okay=False, path_type=Path),
    default=None,
    help="Folder of iter-NNNNNN.zarr stores (default: <run_dir>/rollouts).",
)
@click.option(
    "--iterations",
    "span",
    callback=parse_span,
    default=None,
    metavar="A:B",
    help="Replay rollouts A to B, both included, or one K (default: every stored one).",
)
@click.option(
    "--chain",
    is_flag=True,
    help="Update each rollout from the previous replayed weights, not from its own checkpoint.",
)
@click.option(
    "--from",
    "start",
    type=RunPath(dir_okay=False, path_type=Path),
    default=None,
    help="Checkpoint the chain starts from (implies --chain; default: the one before A).",
)
@out_option("<run_dir>/reupdate")
@allow_rejected_option
@user_errors
def replay(
    params: Path,
    overrides: tuple[str, ...],
    rollouts: AnyPath | None,
    span: tuple[int, int] | None,
    chain: bool,
    start: AnyPath | None,
    out: AnyPath | None,
    allow_rejected: bool,
) -> None:
    """Re-run advantage + update over stored rollouts with the params plus replay.algorithm overrides.

    An off-policy replay algorithm (SAC, TD3: the run's, or replay.algorithm.name) trains a fresh
    learner on every stored rollout instead, with the replay.policy overrides.
    """
    cfg = load_config(params, overrides)
    from rlpipe.artifacts.layout import RunLayout
    from rlpipe.offline.replay import replay as replay_rollouts

    layout = RunLayout(cfg.run_dir)
    out = out or layout.reupdate
    summary = replay_rollouts(
        cfg,
        rollouts or layout.rollouts,
        out,
        span,
        chain=chain or start is not None,
        start=start,
        allow_rejected=allow_rejected,
    )
    click.echo(
        f"replayed {summary['iterations']} rollouts ({summary['transitions']:,} transitions, "
        f"{summary['transitions_per_s']:,.0f}/s) → {out / 'checkpoints'}, {out / 'metrics.json'}"
    )
    evaluated = sorted(key for key in summary if key.startswith("eval/") and key != "eval/episodes")
    for key in evaluated:
        online = summary.get(f"online/{key}")
        beside = f"   (online run: {online:.6g})" if online is not None else ""
        click.echo(f"{key:<20} {summary[key]:.6g}{beside}")
