"""The ``rlpipe`` command line: each command parses, loads config and calls the online or offline driver.

One module per kind of command: :mod:`~rlpipe.cli.train` (``run``), :mod:`~rlpipe.cli.offline`
(``collect``, ``advantage``, ``update``, ``eval``, ``export``, ``inspect``, ``replay``),
:mod:`~rlpipe.cli.manage` (``compare``, ``gc``, ``envs``); :mod:`~rlpipe.cli.common` holds the
shared error wrapper and options. Start-up is kept instant: these modules import only click at the
top; config (pydantic), torch, tensordict, zarr and mlflow are imported inside the command bodies,
after the params were validated, so ``rlpipe --help``, ``rlpipe <command> --help`` and a params
error never load them (tests/test_startup.py).
"""

from __future__ import annotations

import contextlib
from typing import NoReturn

import click

from rlpipe.cli import manage, offline, train
from rlpipe.cli.common import load_config

__all__ = ["cli", "load_config", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show the full traceback of a failure (also RLPIPE_DEBUG=1).")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """rlpipe: reproducible PPO/GRPO training with every rollout stored.

    Exit codes: 0 done, 1 runtime failure (disk, memory, a run dir in use), 2 bad input, 3 refused
    data (NaN/Inf, checksum mismatch, rejected rollout), 130/143 stopped by SIGINT/SIGTERM.
    """
    ctx.meta["rlpipe.debug"] = debug


for _command in (train.run, manage.compare, offline.collect, offline.advantage, offline.update,
                 offline.evaluate, offline.export, offline.inspect, offline.replay, manage.gc, manage.envs):
    cli.add_command(_command)


def main() -> None:
    """Console-script entry point: run the command, then end the process without tearing it down.

    Tearing down torch's and tensordict's modules at interpreter exit took 1.1–1.5 s on the 2-core
    machine (``benchmarks/startup.py``: time from the summary to the exit), after everything the
    command writes is closed. So once the command returned or exited, the non-daemon threads are
    joined, the ``atexit`` handlers run (the MLflow flush among them) and the streams are flushed,
    as at a normal exit; then the process ends with ``os._exit``. An exception that escaped the
    command takes the normal exit, traceback included.
    """
    try:
        cli()
    except SystemExit as exc:
        _exit_now(exc.code)
    _exit_now(0)


def _exit_now(code: object) -> NoReturn:
    """Exit with ``code`` (``SystemExit`` semantics) after the steps of a normal exit that matter."""
    import atexit
    import os
    import sys
    import threading

    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    shutdown = getattr(threading, "_shutdown", None)  # what the interpreter calls first at exit
    if shutdown is not None:
        shutdown()  # joins the non-daemon threads and runs threading's exit hooks (executors' queues)
    else:
        for thread in threading.enumerate():
            if thread is not threading.main_thread() and not thread.daemon:
                thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code or 0)
