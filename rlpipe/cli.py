"""The ``rlpipe`` command line: each command parses, loads config and calls the pipeline or a stage."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from rlpipe import config as config_mod
from rlpipe.distributed import get_rank, shutdown

__all__ = ["main"]

F = TypeVar("F", bound=Callable[..., Any])
USER_ERRORS: tuple[type[Exception], ...] = (ValueError, FileNotFoundError, PermissionError)
"""ConfigError, RolloutError and StoreError are ValueErrors: a user-caused problem, shown in one line."""


def user_errors(func: F) -> F:
    """Show user-caused errors as one ``Error: …`` line on stderr and exit with code 2."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except USER_ERRORS as exc:
            click.echo(f"Error: {exc}".splitlines()[0], err=True)
            sys.exit(2)

    return wrapper  # type: ignore[return-value]  # functools.wraps keeps the signature


params_argument = click.argument("params", type=click.Path(path_type=Path))


def run_params(ctx: click.Context | None, param: click.Parameter | None, value: Path) -> Path:
    """``RUN`` → its params file: a params file as given, or a run dir's ``params.yaml``."""
    if value.is_dir():
        inside = value / "params.yaml"
        if not inside.is_file():
            raise click.BadParameter(f"{value}: a run dir needs params.yaml inside (or pass the params file)")
        return inside
    return value


run_argument = click.argument("run", type=click.Path(path_type=Path), callback=run_params)
set_option = click.option(
    "--set", "overrides", multiple=True, metavar="KEY=VALUE",
    help="Override a param, VALUE parsed as YAML (like `dvc exp run -S`); repeatable.",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """rlpipe: reproducible PPO/GRPO training with every rollout stored."""


@cli.command()
@params_argument
@set_option
@click.option("--resume", is_flag=True, help="Continue from the last complete checkpoint.")
@click.option("--overwrite", is_flag=True,
              help="Delete an earlier run's rollouts and checkpoints under the same exp_name first.")
@click.option("--distributed", is_flag=True,
              help="Join torch.distributed (trainer.distributed=true); launch with torchrun.")
@user_errors
def run(params: Path, overrides: tuple[str, ...], resume: bool, overwrite: bool, distributed: bool) -> None:
    """Train: collect → advantage → update [→ eval] [→ checkpoint] for trainer.iterations."""
    from rlpipe.pipeline import run as run_pipeline

    cfg = config_mod.load(params, (*overrides, *(["trainer.distributed=true"] if distributed else [])))
    summary = run_pipeline(cfg, resume=resume, overwrite=overwrite)
    if get_rank() == 0:  # the other ranks of a distributed run stay silent
        click.echo(
            f"done: {summary['iterations']} iterations, {summary['env_steps']} env steps in "
            f"{summary['wall_s']:.1f}s → {cfg.run_dir / 'metrics.json'}"
        )
    shutdown()


@cli.command()
@click.option("--experiment", "experiments", multiple=True, metavar="NAME",
              help="MLflow experiment (trainer.exp_name); repeatable. Default: every experiment.")
@click.option("--metric", "metrics", multiple=True, metavar="KEY",
              help="Metric to show (default: eval/return_mean, train/episode_return_mean); repeatable.")
@click.option("--runs", "run_ids", multiple=True, metavar="ID",
              help="Only these run ids (repeatable, or comma-separated).")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the learning curves (one line per run) to this PNG.")
@click.option("--uri", default=None,
              help="Tracking URI (default: $MLFLOW_TRACKING_URI, else <project>/data/mlflow.db).")
@user_errors
def compare(experiments: tuple[str, ...], metrics: tuple[str, ...], run_ids: tuple[str, ...],
            plot: Path | None, uri: str | None) -> None:
    """Compare MLflow runs: the params that differ, final and best metrics, env steps, wall time."""
    from rlpipe import compare as compare_mod

    ids = tuple(i for item in run_ids for i in item.replace(",", " ").split())
    comparison = compare_mod.compare(uri, experiments, ids, metrics)
    compare_mod.render_table(comparison)
    if plot is not None:
        click.echo(f"curves → {compare_mod.plot_curves(comparison, plot)}")


# --------------------------------------------------------- one stage on stored data, offline replay

checkpoint_option = click.option(
    "--checkpoint", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help="Checkpoint file (ckpt-NNNNNN.pt) to start from.",
)
rollout_argument = click.argument("rollout", type=click.Path(path_type=Path))


def _out_option(default: str) -> Callable[[F], F]:
    return click.option("--out", type=click.Path(path_type=Path), default=None,
                        help=f"Where to write (default: {default}).")


def _parse_span(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, int] | None:
    """``A:B`` (both included) or ``K`` → ``(A, B)``; anything else names the option."""
    if value is None:
        return None
    first, sep, last = value.partition(":")
    try:
        span = (int(first), int(last) if sep else int(first))
    except ValueError:
        span = (0, 0)
    if not 1 <= span[0] <= span[1]:
        raise click.BadParameter(f"{value!r}: expected A:B with 1 <= A <= B (both included) or one "
                                 "iteration K, e.g. 3:7")
    return span


@cli.command()
@params_argument
@set_option
@checkpoint_option
@_out_option("<run_dir>/collected")
@user_errors
def collect(params: Path, overrides: tuple[str, ...], checkpoint: Path | None, out: Path | None) -> None:
    """Collect one rollout with a checkpoint (default: the run's latest) → iter-NNNNNN.zarr."""
    from rlpipe import offline

    cfg = config_mod.load(params, overrides)
    click.echo(f"rollout → {offline.collect_rollout(cfg, checkpoint, out or cfg.run_dir / 'collected')}")


@cli.command()
@params_argument
@rollout_argument
@set_option
@_out_option("iter-NNNNNN.advantage.zarr beside the rollout")
@user_errors
def advantage(params: Path, rollout: Path, overrides: tuple[str, ...], out: Path | None) -> None:
    """Compute a stored rollout's advantages/returns into a separate store (the rollout is not changed)."""
    from rlpipe import offline

    cfg = config_mod.load(params, overrides)
    click.echo(f"advantages → {offline.compute_advantages(cfg, rollout, out)}")


@cli.command()
@params_argument
@rollout_argument
@set_option
@checkpoint_option
@_out_option("<run_dir>/updated")
@user_errors
def update(params: Path, rollout: Path, overrides: tuple[str, ...], checkpoint: Path | None,
           out: Path | None) -> None:
    """Advantage + update on one stored rollout → a new checkpoint and the losses.

    Without --checkpoint it starts from the checkpoint the rollout was collected with.
    """
    from rlpipe import offline

    cfg = config_mod.load(params, overrides)
    path, metrics = offline.update_from_rollout(cfg, rollout, checkpoint, out or cfg.run_dir / "updated")
    for key in sorted(k for k in metrics if k.startswith("update/")):
        click.echo(f"{key:<28} {metrics[key]:.6g}")
    click.echo(f"checkpoint → {path}")


@cli.command("eval")
@run_argument
@set_option
@checkpoint_option
@click.option("--video", is_flag=True, help="Film the first eval.video_envs envs to <run_dir>/eval/*.mp4 "
              "(eval.video=true).")
@click.option("--policy", "policy_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Evaluate an exported policy.onnx / policy.pt (from `rlpipe export`) instead of a checkpoint.")
@_out_option("<run_dir>/eval/metrics.json; with --policy <run_dir>/eval/policy-metrics.json")
@user_errors
def evaluate(run: Path, overrides: tuple[str, ...], checkpoint: Path | None, video: bool,
             policy_file: Path | None, out: Path | None) -> None:
    """Evaluate a checkpoint (default: the run's latest) or an exported policy with the eval params.

    RUN is the run's params file or its run dir (holding params.yaml).
    """
    from rlpipe import offline, shipping

    cfg = config_mod.load(run, (*overrides, *(["eval.video=true"] if video else [])))
    if policy_file is not None and checkpoint is not None:
        raise click.UsageError("--policy and --checkpoint: give one of them")
    if policy_file is not None:
        metrics = shipping.evaluate_policy_file(cfg, policy_file, out)
        out = out or cfg.run_dir / "eval" / "policy-metrics.json"
    else:
        metrics = offline.evaluate_checkpoint(cfg, checkpoint, out)
        out = out or cfg.run_dir / "eval" / "metrics.json"
    for key in sorted(metrics):
        click.echo(f"{key:<20} {metrics[key]:.6g}")
    click.echo(f"metrics → {out}")


def _checkpoint_ref(ctx: click.Context, param: click.Parameter, value: str | None) -> Path | int | None:
    """``--checkpoint``: an iteration number N (``ckpt-N``) or a checkpoint file."""
    if value is None:
        return None
    return int(value) if value.isdigit() else Path(value)


@cli.command()
@run_argument
@set_option
@click.option("--checkpoint", callback=_checkpoint_ref, default=None, metavar="N|FILE",
              help="Iteration N (checkpoints/ckpt-N.pt) or a checkpoint file (default: the run's latest).")
@click.option("--format", "fmt", type=click.Choice(["onnx", "torchscript"]), default="onnx",
              show_default=True, help="onnx (onnxruntime) or torchscript (libtorch, torch::jit::load).")
@_out_option("<run_dir>/export")
@user_errors
def export(run: Path, overrides: tuple[str, ...], checkpoint: Path | int | None, fmt: str,
           out: Path | None) -> None:
    """Export the deterministic actor (normalizer and action handling baked in), verified.

    Writes policy.onnx (or policy.pt) and a metadata JSON beside it, after running the file on
    stored observations: exit code 3, and no file, if an action differs by more than 1e-5.
    """
    from rlpipe import shipping

    cfg = config_mod.load(run, overrides)
    try:
        result = shipping.export_run(cfg, checkpoint, fmt, out)
    except shipping.ExportMismatch as exc:
        click.echo(f"Error: {exc}".splitlines()[0], err=True)
        sys.exit(3)
    click.echo(f"verified on {result.observations} observations ({result.source}): "
               f"max |Δaction| = {result.max_abs_diff:.3g}")
    click.echo(f"policy → {result.path}, metadata → {result.metadata_path}")


@cli.command()
@rollout_argument
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@user_errors
def inspect(rollout: Path, as_json: bool) -> None:
    """Show a stored rollout: keys, shapes, dtypes, chunks, stats, attributes and episodes."""
    import json

    from rlpipe import offline
    from rlpipe.shards import is_sharded, shard_paths

    sharded = is_sharded(rollout)  # a distributed run's iteration: one store per rank
    infos = [offline.inspect_rollout(path) for path in (shard_paths(rollout) if sharded else [rollout])]
    if as_json:
        click.echo(json.dumps({"path": str(rollout), "shards": infos} if sharded else infos[0], indent=2))
    else:
        for info in infos:
            _render_rollout(info)


def _render_rollout(info: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{info['path']}  [N={info['num_envs']}, T+1={info['horizon'] + 1}]")
    for column in ("key", "shape", "dtype", "chunks", "codec", "bytes"):
        table.add_column(column, justify="right" if column == "bytes" else "left", no_wrap=True)
    table.add_column("stats", ratio=1)
    for key, meta in info["keys"].items():
        table.add_row(key, str(meta["shape"]), meta["dtype"], str(meta["chunks"]), meta["codec"],
                      f"{meta['bytes_on_disk']:,}", _format_stats(meta["stats"]))
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 150)
    console.print(table)
    console.print(f"schema version {info['schema_version']}, {info['transitions']:,} transitions, "
                  f"{info['bytes_on_disk']:,} bytes on disk")
    for title, values in (("attrs", info["attrs"]), ("episodes", info["episodes"])):
        console.print(f"{title}: " + ", ".join(f"{k}={_short(v)}" for k, v in values.items()))


def _format_stats(stats: dict[str, Any]) -> str:
    if "true" in stats:
        return f"true {stats['true']:,} / false {stats['false']:,}"
    if "mean" in stats:
        bad = f", {stats['nonfinite']} non-finite" if stats["nonfinite"] else ""
        return (f"{stats['min']:.4g} … {stats['max']:.4g}, mean {stats['mean']:.4g} ± "
                f"{stats['std']:.4g}{bad}")
    if "counts" in stats:
        return "counts " + ", ".join(f"{k}: {v:,}" for k, v in stats["counts"].items())
    return ", ".join(f"{k} {_short(v)}" for k, v in stats.items())


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


@cli.command()
@params_argument
@set_option
@click.option("--rollouts", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder of iter-NNNNNN.zarr stores (default: <run_dir>/rollouts).")
@click.option("--iterations", "span", callback=_parse_span, default=None, metavar="A:B",
              help="Replay rollouts A to B, both included, or one K (default: every stored one).")
@click.option("--chain", is_flag=True,
              help="Update each rollout from the previous replayed weights, not from its own checkpoint.")
@click.option("--from", "start", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Checkpoint the chain starts from (implies --chain; default: the one before A).")
@_out_option("<run_dir>/reupdate")
@user_errors
def replay(params: Path, overrides: tuple[str, ...], rollouts: Path | None, span: tuple[int, int] | None,
           chain: bool, start: Path | None, out: Path | None) -> None:
    """Re-run advantage + update over stored rollouts with the params plus replay.algorithm overrides."""
    from rlpipe import offline

    cfg = config_mod.load(params, overrides)
    out = out or cfg.run_dir / "reupdate"
    summary = offline.replay(cfg, rollouts or cfg.run_dir / "rollouts", out, span,
                             chain=chain or start is not None, start=start)
    click.echo(f"replayed {summary['iterations']} rollouts ({summary['transitions']:,} transitions, "
               f"{summary['transitions_per_s']:,.0f}/s) → {out / 'checkpoints'}, {out / 'metrics.json'}")


def main() -> None:
    """Console-script entry point."""
    cli()
