"""``rlpipe run``: train for trainer.iterations (the online driver through :class:`rlpipe.Trainer`)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rlpipe.cli.common import RESUME_KEY, fail, params_argument, seconds_since_start, set_option, user_errors

if TYPE_CHECKING:
    from rlpipe.config import RunConfig
    from rlpipe.trainer import Trainer

__all__ = ["resume_command", "run"]


@click.command()
@params_argument
@set_option
@click.option("--resume", is_flag=True, help="Continue from the last complete checkpoint.")
@click.option(
    "--overwrite",
    is_flag=True,
    help="Delete an earlier run's rollouts and checkpoints under the same exp_name first.",
)
@click.option(
    "--distributed",
    is_flag=True,
    help="Join torch.distributed (trainer.distributed=true); launch with torchrun.",
)
@user_errors
def run(params: Path, overrides: tuple[str, ...], resume: bool, overwrite: bool, distributed: bool) -> None:
    """Train: collect → advantage → update, then eval and checkpoint when due, for trainer.iterations."""
    from rlpipe.artifacts.writer_process import prewarm as prewarm_writer
    from rlpipe.config import load
    from rlpipe.runtime.launch import is_rank_zero
    from rlpipe.tracking.background import prewarm_tracking

    cfg = load(params, (*overrides, *(["trainer.distributed=true"] if distributed else [])))
    main = is_rank_zero()
    prewarm_tracking(cfg, main)  # the tracking process imports MLflow while this one imports torch and builds
    prewarm_writer(cfg.store, cfg.run_dir)  # and the store's writer process starts up
    from rlpipe.runtime.distributed import shutdown  # after the params are valid: torch
    from rlpipe.trainer import EventError, Trainer

    click.get_current_context().meta[RESUME_KEY] = resume_command(params, overrides, distributed)
    try:
        trainer = Trainer(cfg, resume=resume, overwrite=overwrite)
        summary = trainer.train()
    except EventError as exc:
        fail(str(exc), 1)
    if main:  # the other ranks of a distributed run stay silent
        stopped = f", stopped: {summary['stopped_by']}" if summary.get("stopped_by") else ""
        click.echo(
            f"done: {summary['iterations']} iterations, {summary['env_steps']} env steps in "
            f"{summary['wall_s']:.1f}s of training, {seconds_since_start():.1f}s since the command"
            f"{stopped} → {cfg.run_dir / 'metrics.json'}"
        )
        click.echo(_end_summary(cfg, summary, trainer))
    shutdown()


def _end_summary(cfg: RunConfig, summary: dict[str, Any], trainer: Trainer) -> str:
    from rlpipe.tracking.mlflow_store import resolve_uri
    from rlpipe.tracking.summary import end_summary

    run_id = trainer.mlflow_run_id
    uri = resolve_uri(cfg.tracking) if run_id else None
    return end_summary(cfg, summary, run_id, uri, trainer.mlflow_experiment_id)


def resume_command(params: Path, overrides: tuple[str, ...], distributed: bool) -> str:
    """The exact ``rlpipe run … --resume`` that continues this run (printed when it stops early)."""
    args = ["rlpipe", "run", str(params), *(a for item in overrides for a in ("--set", item))]
    return shlex.join([*args, *(["--distributed"] if distributed else []), "--resume"])
