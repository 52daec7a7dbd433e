"""What every ``rlpipe`` command shares: the one-line error wrapper, the params/run-dir arguments and options.

Imports only click at the top: config (pydantic), torch and the rest load inside the functions,
after the arguments parsed, so ``--help`` and a params error stay instant (tests/cli/test_startup.py).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, ParamSpec, TypeVar

import click

import rlpipe
from rlpipe.cli.exits import bounded
from rlpipe.runtime.launch import is_rank_zero

if TYPE_CHECKING:
    from rlpipe.config import RunConfig
    from rlpipe.location import AnyPath

__all__ = [
    "RESUME_KEY",
    "RunPath",
    "allow_rejected_option",
    "checkpoint_option",
    "load_config",
    "out_option",
    "params_argument",
    "parse_span",
    "rollout_argument",
    "run_argument",
    "seconds_since_start",
    "set_option",
    "user_errors",
    "fail",
]

F = TypeVar("F", bound=Callable[..., Any])
P = ParamSpec("P")
R = TypeVar("R")
OTHER_RANKS_WAIT_S = 2.0
"""How long a failing rank other than 0 waits before it exits (see :func:`fail`)."""
RESUME_KEY = "rlpipe.resume_command"
"""``click`` context meta: the exact command that resumes this run (set by ``rlpipe run``)."""


def user_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Every failure as one ``Error: …`` line on stderr and its exit code (:mod:`rlpipe.cli.exits`).

    2 bad input, 3 refused data, 1 runtime failure, 130/143 stopped by SIGINT/SIGTERM; the
    traceback only with ``rlpipe --debug``.
    """

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except (SystemExit, click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except BaseException as exc:  # noqa: BLE001  # every failure gets its one line and code
            from rlpipe.cli.exits import describe

            ctx = click.get_current_context(silent=True)
            meta = ctx.meta if ctx is not None else {}
            code, line = describe(exc, meta.get(RESUME_KEY))
            if meta.get("rlpipe.debug") or os.environ.get("RLPIPE_DEBUG") == "1":
                traceback.print_exception(exc)
            fail(line, code)

    return wrapper


class Location(click.Path):
    """A local path as :class:`click.Path` gives it, or a URL (``s3://bucket/runs/exp``) kept whole."""

    def convert(
        self, value: str | AnyPath, param: click.Parameter | None, ctx: click.Context | None
    ) -> str | bytes | os.PathLike[str] | AnyPath:
        """A URL becomes an ``ObjectPath`` (never a ``Path``, which would fold ``s3://`` into ``s3:/``)."""
        from rlpipe.location import ObjectPath

        if isinstance(value, ObjectPath):
            return value
        if isinstance(value, str) and "://" in value:
            return ObjectPath(value)
        return super().convert(value, param, ctx)


def fail(line: str, code: int) -> NoReturn:
    """Print ``Error: line`` once (its first line, bounded in length) and exit ``code``; rank 0 prints.

    Every rank writes the line to torchrun's error file (``TORCHELASTIC_ERROR_FILE``), so the
    launcher's failure report names it instead of a link to its docs; a rank other than 0 waits
    a moment first, so that when every rank fails alike rank 0 is the root cause torchrun reports,
    and an error of that rank alone still appears there.
    """
    line = bounded(f"Error: {line}".splitlines()[0])
    main_rank = is_rank_zero()
    if main_rank:
        click.echo(line, err=True)
    error_file = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if error_file:
        import json

        extra = {"py_callstack": line, "timestamp": str(int(time.time()))}  # torchrun's own format
        with contextlib.suppress(OSError):
            Path(error_file).write_text(json.dumps({"message": {"message": line, "extraInfo": extra}}))
        if not main_rank:
            time.sleep(OTHER_RANKS_WAIT_S)
    sys.exit(code)


params_argument = click.argument("params", type=Location(path_type=Path))
run_argument = click.argument("params", metavar="RUN_DIR|EXP|PARAMS", type=Location(path_type=Path))


class RunPath(Location):
    """A path, or a DVC experiment's name and a path in its run dir (``clip01/rollouts/iter-000002.zarr``)."""

    def convert(
        self, value: str | AnyPath, param: click.Parameter | None, ctx: click.Context | None
    ) -> str | bytes | os.PathLike[str] | AnyPath:
        """Resolve an experiment name first, then check the path as :class:`click.Path` does."""
        from rlpipe.dvc.runs import resolve_path

        if isinstance(value, str) and "://" not in value:
            value = resolve_path(value)
        return super().convert(value, param, ctx)


def load_config(target: Path, overrides: tuple[str, ...] | list[str]) -> RunConfig:
    """Params of a run directory (its ``params.yaml``, placed where the folder is now) or a params file.

    A DVC experiment's name, or a workspace ``data/<exp>`` whose ``run.json`` names an experiment's
    run dir, stands for that run directory (:func:`rlpipe.dvc.runs.resolve_target`). Config is imported
    here, not at the top: ``--help`` and a params error never load torch.
    """
    from rlpipe.artifacts.params import params_file
    from rlpipe.config import load
    from rlpipe.dvc.runs import resolve_target

    path, layout = params_file(resolve_target(target))
    where = (
        []
        if layout is None
        else [f"trainer.data_dir={layout.root.parent}", f"trainer.exp_name={layout.root.name}"]
    )
    return load(path, (*where, *overrides))


def seconds_since_start() -> float:
    """Wall seconds since this process started (Linux ``/proc``; elsewhere since rlpipe was imported)."""
    try:
        ticks = os.sysconf("SC_CLK_TCK")
        started = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19]) / ticks
        return float(Path("/proc/uptime").read_text().split()[0]) - started
    except (OSError, ValueError, IndexError):
        return time.perf_counter() - rlpipe.IMPORTED_AT


set_option = click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a param, VALUE parsed as YAML (like `dvc exp run -S`); repeatable.",
)


checkpoint_option = click.option(
    "--checkpoint",
    type=RunPath(dir_okay=False, path_type=Path),
    default=None,
    help="Checkpoint file (ckpt-NNNNNN.pt) to start from.",
)
rollout_argument = click.argument("rollout", type=RunPath(path_type=Path))
allow_rejected_option = click.option(
    "--allow-rejected",
    is_flag=True,
    help="Use rollouts the non-finite guard rejected (rollouts/rejected/); they must be finite.",
)


def out_option(default: str) -> Callable[[F], F]:
    """``--out PATH``, its help naming where the command writes without it."""
    return click.option(
        "--out", type=Location(path_type=Path), default=None, help=f"Where to write (default: {default})."
    )


def parse_span(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, int] | None:
    """``A:B`` (both included) or ``K`` → ``(A, B)``; anything else names the option."""
    if value is None:
        return None
    first, sep, last = value.partition(":")
    try:
        span = (int(first), int(last) if sep else int(first))
    except ValueError:
        span = (0, 0)
    if not 1 <= span[0] <= span[1]:
        raise click.BadParameter(
            f"{bounded(repr(value), 200)}: expected A:B with 1 <= A <= B (both included) or one "
            "iteration K, e.g. 3:7"
        )
    return span
