"""The ``rlpipe`` command line: each command parses, loads config and calls the pipeline or a stage."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from rlpipe import config as config_mod

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
@user_errors
def run(params: Path, overrides: tuple[str, ...], resume: bool) -> None:
    """Train: collect → advantage → update [→ eval] [→ checkpoint] for trainer.iterations."""
    from rlpipe.pipeline import run as run_pipeline

    cfg = config_mod.load(params, overrides)
    summary = run_pipeline(cfg, resume=resume)
    click.echo(
        f"done: {summary['iterations']} iterations, {summary['env_steps']} env steps in "
        f"{summary['wall_s']:.1f}s → {cfg.run_dir / 'metrics.json'}"
    )


def main() -> None:
    """Console-script entry point."""
    cli()
