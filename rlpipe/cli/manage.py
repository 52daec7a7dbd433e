"""Commands around runs rather than in them: compare runs and experiments, free run dirs, list envs."""

from __future__ import annotations

from pathlib import Path

import click

from rlpipe.cli.common import user_errors

__all__ = ["compare", "envs", "exps", "gc"]


@click.command()
@click.option(
    "--experiment",
    "experiments",
    multiple=True,
    metavar="NAME",
    help="MLflow experiment (trainer.exp_name); repeatable. Default: every experiment.",
)
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    metavar="KEY",
    help="Metric to show (default: eval/return_mean, train/episode_return_mean); repeatable.",
)
@click.option(
    "--runs",
    "run_ids",
    multiple=True,
    metavar="ID",
    help="Only these run ids (repeatable, or comma-separated).",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the learning curves (one line per run) to this PNG.",
)
@click.option(
    "--uri", default=None, help="Tracking URI (default: $MLFLOW_TRACKING_URI, else <project>/data/mlflow.db)."
)
@click.option(
    "--wide",
    is_flag=True,
    help="Every column (run name, id, one per differing param) at full width, not 120.",
)
@user_errors
def compare(
    experiments: tuple[str, ...],
    metrics: tuple[str, ...],
    run_ids: tuple[str, ...],
    plot: Path | None,
    uri: str | None,
    wide: bool,
) -> None:
    """Compare MLflow runs, labelled by the params that differ: final/best metrics, env steps, wall time."""
    from rlpipe.tracking import compare as compare_mod

    ids = tuple(i for item in run_ids for i in item.replace(",", " ").split())
    comparison = compare_mod.compare(uri, experiments, ids, metrics)
    compare_mod.render_table(comparison, wide=wide)
    if plot is not None:
        path = compare_mod.plot_curves(comparison, plot)
        click.echo(
            f"wrote {path} ({len(comparison.metrics)} panels: {', '.join(comparison.metrics)}; "
            f"{len(comparison.runs)} runs)"
        )


@click.command()
@click.option("--dry-run", is_flag=True, help="Only list what would be freed.")
@user_errors
def gc(dry_run: bool) -> None:
    """Free the run dirs (data/exps/<name>) of DVC experiments that no longer exist.

    Kept: every run dir named by a DVC experiment, a branch or tag (`dvc exp branch`), the
    workspace's data/<exp>/run.json, or held by a running experiment. Run after `dvc exp remove`.
    A symbolic link there is unlinked, never followed. Outside a git/DVC project, or when git fails,
    it refuses and deletes nothing.
    """
    from rlpipe.dvc.experiments import gc as collect_garbage

    freed = collect_garbage(dry_run=dry_run)
    for folder, size in freed:
        click.echo(f"{'would free' if dry_run else 'freed'} {folder} ({size / 2**20:.1f} MB)")
    total = sum(size for _, size in freed) / 2**20
    click.echo(f"{len(freed)} experiment run dirs, {total:.1f} MB{' (dry run)' if dry_run else ''}")


@click.command()
@click.option(
    "--backend",
    "groups",
    multiple=True,
    type=click.Choice(("torch", "plugins", "envpool", "gymnasium")),
    help="Only these groups (repeatable; default: all).",
)
@click.option("--json", "as_json", is_flag=True, help="Print {group: [ids]} as JSON.")
@user_errors
def envs(groups: tuple[str, ...], as_json: bool) -> None:
    """List every env.id available, grouped by backend (in the order backend: auto tries them).

    gymnasium ids with a vectorized class of their own (CartPole-v1) are built with it, even
    under auto where envpool knows the id too: it steps faster.
    """
    import json

    from rlpipe.envs.listing import GROUPS, env_ids_by_backend

    listing = env_ids_by_backend(groups or GROUPS)
    if as_json:
        click.echo(json.dumps(listing, indent=2))
        return
    for group, ids in listing.items():
        click.echo(f"{group} ({len(ids)}):")
        for env_id in ids:
            click.echo(f"  {env_id}")
    click.echo("Any package.module:ClassOrFactory works too (env.id); see README 'Environments'.")


@click.command()
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    default=("eval/return_mean",),
    show_default=True,
    metavar="KEY",
    help="Metric column (a key of the stages' metrics files); repeatable.",
)
@click.option("--wide", is_flag=True, help="Do not fit the table into 120 columns.")
@user_errors
def exps(metrics: tuple[str, ...], wide: bool) -> None:
    """DVC experiments side by side: the params that differ (short names) and the metrics, in 120 columns."""
    from rlpipe.dvc.table import experiment_rows, read_exp_show, render

    click.echo(render(experiment_rows(read_exp_show()), metrics, None if wide else 120), nl=False)
