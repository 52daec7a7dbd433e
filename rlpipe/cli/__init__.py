"""The ``rlpipe`` command line: each command parses, loads config and calls the online or offline driver.

One module per kind of command: :mod:`~rlpipe.cli.train` (``run``), :mod:`~rlpipe.cli.offline`
(``collect``, ``advantage``, ``update``, ``eval``, ``export``, ``inspect``, ``replay``),
:mod:`~rlpipe.cli.distill` (``distill``), :mod:`~rlpipe.cli.dataset` (``dataset``),
:mod:`~rlpipe.cli.manage` (``compare``, ``gc``, ``envs``); :mod:`~rlpipe.cli.common` holds the
shared error wrapper and options. Start-up is kept instant: these modules import only click at the
top; config (pydantic), torch, tensordict, zarr and mlflow are imported inside the command bodies,
after the params were validated, so ``rlpipe --help``, ``rlpipe <command> --help`` and a params
error never load them (tests/cli/test_startup.py).
"""

from __future__ import annotations

import click

from rlpipe import fast
from rlpipe.cli import dataset, distill, manage, offline, train
from rlpipe.cli.common import load_config
from rlpipe.cli.exits import MAX_LINE, bounded

__all__ = ["cli", "load_config", "main"]

_USAGE_ROOM = 200
"""Characters kept for what click prints around a usage error's message (``Error: Invalid value …``)."""


def _bound_message(exc: click.ClickException) -> None:
    """Cut ``exc``'s message, which click's ``show`` prints, to the room a line has."""
    message = bounded(exc.message, MAX_LINE - _USAGE_ROOM)
    exc.message = message  # pyright: ignore[reportAttributeAccessIssue]  # Final in click's stubs; show() reads it


class BoundedGroup(click.Group):
    """A click group whose own usage errors (an unknown option or command, a bad value) are bounded too.

    click prints them itself; their message is cut as every line rlpipe prints is
    (:func:`~rlpipe.cli.exits.bounded`), so a pasted megabyte argument is not echoed back.
    """

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: object,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.ClickException as exc:
            _bound_message(exc)
            raise

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:
            _bound_message(exc)
            raise


@click.group(cls=BoundedGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show the full traceback of a failure (also RLPIPE_DEBUG=1).")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """rlpipe: reproducible PPO/GRPO training with every rollout stored.

    Exit codes: 0 done, 1 runtime failure (disk, memory, a run dir in use), 2 bad input, 3 refused
    data (NaN/Inf, checksum mismatch, rejected rollout), 130/143 stopped by SIGINT/SIGTERM.
    """
    ctx.meta["rlpipe.debug"] = debug


for _command in (
    train.run,
    manage.compare,
    offline.collect,
    offline.advantage,
    offline.update,
    offline.evaluate,
    offline.export,
    offline.inspect,
    offline.replay,
    distill.distill,
    dataset.dataset,
    manage.gc,
    manage.envs,
    manage.exps,
):
    cli.add_command(_command)


def main() -> None:
    """Console-script entry point: run the command, then end the process with its exit code.

    The process ends through :func:`rlpipe.fast.run_then_exit`: a normal exit (``sys.exit``), or with
    ``RLPIPE_FAST`` on, the steps of one that matter (threads joined, ``atexit`` handlers run,
    streams flushed) without tearing down torch's and tensordict's modules, after everything the
    command wrote is closed. An exception that escaped the command takes the normal exit, traceback
    included.
    """
    fast.run_then_exit(cli)
