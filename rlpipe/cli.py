"""The ``rlpipe`` command line: each command parses, loads config and calls the pipeline or a stage.

Start-up is kept instant: this module imports only click at the top; config (pydantic), torch,
tensordict, zarr and mlflow are imported inside the command bodies, after the params were
validated, so ``rlpipe --help``, ``rlpipe <command> --help`` and a params error never load them
(tests/test_startup.py).
"""

from __future__ import annotations

import functools
import os
import shlex
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

import rlpipe

if TYPE_CHECKING:
    from rlpipe.config import RunConfig

__all__ = ["main"]

F = TypeVar("F", bound=Callable[..., Any])
RESUME_KEY = "rlpipe.resume_command"
"""``click`` context meta: the exact command that resumes this run (set by ``rlpipe run``)."""


def user_errors(func: F) -> F:
    """Every failure as one ``Error: …`` line on stderr and its exit code (:mod:`rlpipe.exits`).

    2 bad input, 3 refused data, 1 runtime failure, 130/143 stopped by SIGINT/SIGTERM; the
    traceback only with ``rlpipe --debug``.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (SystemExit, click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except BaseException as exc:  # noqa: BLE001  # every failure gets its one line and code
            from rlpipe.exits import describe

            ctx = click.get_current_context(silent=True)
            meta = ctx.meta if ctx is not None else {}
            code, line = describe(exc, meta.get(RESUME_KEY))
            if meta.get("rlpipe.debug") or os.environ.get("RLPIPE_DEBUG") == "1":
                traceback.print_exception(exc)
            click.echo(f"Error: {line}", err=True)
            sys.exit(code)

    return wrapper  # type: ignore[return-value]  # functools.wraps keeps the signature


params_argument = click.argument("params", type=click.Path(path_type=Path))
run_argument = click.argument("params", metavar="RUN_DIR|EXP|PARAMS", type=click.Path(path_type=Path))


class RunPath(click.Path):
    """A path, or a DVC experiment's name and a path in its run dir (``clip01/rollouts/iter-000002.zarr``)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from rlpipe.runs import resolve_path

        return super().convert(resolve_path(value) if isinstance(value, str) else value, param, ctx)


def load_config(target: Path, overrides: tuple[str, ...] | list[str]) -> RunConfig:
    """Params of a run directory (its ``params.yaml``, placed where the folder is now) or a params file.

    A DVC experiment's name, or a workspace ``data/<exp>`` whose ``run.json`` names an experiment's
    run dir, stands for that run directory (:func:`rlpipe.runs.resolve_target`). Config is imported
    here, not at the top: ``--help`` and a params error never load torch.
    """
    from rlpipe.artifacts.params import params_file
    from rlpipe.config import load
    from rlpipe.runs import resolve_target

    path, layout = params_file(resolve_target(target))
    where = [] if layout is None else [f"trainer.data_dir={layout.root.parent}",
                                        f"trainer.exp_name={layout.root.name}"]
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
    "--set", "overrides", multiple=True, metavar="KEY=VALUE",
    help="Override a param, VALUE parsed as YAML (like `dvc exp run -S`); repeatable.",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show the full traceback of a failure (also RLPIPE_DEBUG=1).")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """rlpipe: reproducible PPO/GRPO training with every rollout stored.

    Exit codes: 0 done, 1 runtime failure (disk, memory, a run dir in use), 2 bad input, 3 refused
    data (NaN/Inf, checksum mismatch, rejected rollout), 130/143 stopped by SIGINT/SIGTERM.
    """
    ctx.meta["rlpipe.debug"] = debug


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
    from rlpipe.config import load

    cfg = load(params, (*overrides, *(["trainer.distributed=true"] if distributed else [])))
    from rlpipe.distributed import get_rank, shutdown  # after the params are valid: torch
    from rlpipe.run import EventError
    from rlpipe.trainer import Trainer

    click.get_current_context().meta[RESUME_KEY] = resume_command(params, overrides, distributed)
    try:
        summary = Trainer(cfg, resume=resume, overwrite=overwrite).train()
    except EventError as exc:
        click.echo(f"Error: {exc}".splitlines()[0], err=True)
        sys.exit(1)
    if get_rank() == 0:  # the other ranks of a distributed run stay silent
        stopped = f", stopped: {summary['stopped_by']}" if summary.get("stopped_by") else ""
        click.echo(
            f"done: {summary['iterations']} iterations, {summary['env_steps']} env steps in "
            f"{summary['wall_s']:.1f}s of training, {seconds_since_start():.1f}s since the command"
            f"{stopped} → {cfg.run_dir / 'metrics.json'}"
        )
    shutdown()


def resume_command(params: Path, overrides: tuple[str, ...], distributed: bool) -> str:
    """The exact ``rlpipe run … --resume`` that continues this run (printed when it stops early)."""
    args = ["rlpipe", "run", str(params), *(a for item in overrides for a in ("--set", item))]
    return shlex.join([*args, *(["--distributed"] if distributed else []), "--resume"])


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
    from rlpipe.tracking import compare as compare_mod

    ids = tuple(i for item in run_ids for i in item.replace(",", " ").split())
    comparison = compare_mod.compare(uri, experiments, ids, metrics)
    compare_mod.render_table(comparison)
    if plot is not None:
        click.echo(f"curves → {compare_mod.plot_curves(comparison, plot)}")


# --------------------------------------------------------- one stage on stored data, offline replay

checkpoint_option = click.option(
    "--checkpoint", type=RunPath(dir_okay=False, path_type=Path), default=None,
    help="Checkpoint file (ckpt-NNNNNN.pt) to start from.",
)
rollout_argument = click.argument("rollout", type=RunPath(path_type=Path))
allow_rejected_option = click.option(
    "--allow-rejected", is_flag=True,
    help="Use rollouts the non-finite guard rejected (rollouts/rejected/); they must be finite.",
)


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
@run_argument
@set_option
@checkpoint_option
@_out_option("<run_dir>/collected")
@user_errors
def collect(params: Path, overrides: tuple[str, ...], checkpoint: Path | None, out: Path | None) -> None:
    """Collect one rollout with a checkpoint (default: the run's latest) → iter-NNNNNN.zarr."""
    cfg = load_config(params, overrides)
    from rlpipe.artifacts.layout import RunLayout
    from rlpipe.run import collect_rollout

    click.echo(f"rollout → {collect_rollout(cfg, checkpoint, out or RunLayout(cfg.run_dir).collected)}")


@cli.command()
@run_argument
@rollout_argument
@set_option
@_out_option("<run_dir>/advantages/iter-NNNNNN.zarr")
@user_errors
def advantage(params: Path, rollout: Path, overrides: tuple[str, ...], out: Path | None) -> None:
    """Compute a stored rollout's advantages/returns into a separate store (the rollout is not changed)."""
    cfg = load_config(params, overrides)
    from rlpipe.offline import commands as offline

    click.echo(f"advantages → {offline.compute_advantages(cfg, rollout, out)}")


@cli.command()
@run_argument
@click.argument("rollout", required=False, type=RunPath(path_type=Path))
@set_option
@checkpoint_option
@_out_option("<run_dir>/updated")
@allow_rejected_option
@user_errors
def update(params: Path, rollout: Path | None, overrides: tuple[str, ...], checkpoint: Path | None,
           out: Path | None, allow_rejected: bool) -> None:
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
    path, metrics = offline.update_from_rollout(cfg, rollout, checkpoint, out or layout.updated,
                                                allow_rejected)
    for key in sorted(k for k in metrics if k.startswith("update/")):
        click.echo(f"{key:<28} {metrics[key]:.6g}")
    click.echo(f"checkpoint → {path}")


@cli.command("eval")
@run_argument
@set_option
@checkpoint_option
@click.option("--video", is_flag=True, help="Film the first eval.video_envs envs to <run_dir>/eval/*.mp4.")
@click.option("--policy", "policy_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Evaluate an exported policy.onnx / policy.pt (`rlpipe export`) instead of a checkpoint.")
@_out_option("<run_dir>/eval/metrics.json; with --policy, eval/policy-metrics.json")
@user_errors
def evaluate(params: Path, overrides: tuple[str, ...], checkpoint: Path | None, video: bool,
             policy_file: Path | None, out: Path | None) -> None:
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


@cli.command()
@run_argument
@set_option
@click.option("--checkpoint", default=None, metavar="N|FILE",
              help="Iteration N (checkpoints/ckpt-N.pt) or a checkpoint file (default: the run's latest).")
@click.option("--format", "fmt", type=click.Choice(["onnx", "torchscript"]), default="onnx",
              show_default=True, help="onnx (onnxruntime) or torchscript (libtorch: torch::jit::load).")
@_out_option("<run_dir>/export")
@user_errors
def export(params: Path, overrides: tuple[str, ...], checkpoint: str | None, fmt: str,
           out: Path | None) -> None:
    """Export the deterministic actor (normalizer, action clipping, argmax inside), verified.

    Writes policy.onnx (or policy.pt) and a metadata JSON beside it after running the file on stored
    observations; if any action differs from the checkpoint's by more than 1e-5: exit 3, no file.
    """
    cfg = load_config(params, overrides)
    from rlpipe.offline.shipping import ExportMismatch, export_run

    ref = int(checkpoint) if checkpoint is not None and checkpoint.isdigit() else checkpoint
    try:
        result = export_run(cfg, Path(ref) if isinstance(ref, str) else ref, fmt, out)
    except ExportMismatch as exc:
        click.echo(f"Error: {exc}".splitlines()[0], err=True)
        sys.exit(3)
    click.echo(f"verified on {result.observations} observations ({result.source}): "
               f"max |Δaction| = {result.max_abs_diff:.3g}")
    click.echo(f"policy → {result.path}, metadata → {result.metadata_path}")


@cli.command()
@click.argument("rollout", metavar="RUN_DIR|EXP|ROLLOUT", type=RunPath(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@user_errors
def inspect(rollout: Path, as_json: bool) -> None:
    """Show a run (iterations, stores, checkpoints, params hash, last metrics) or one stored rollout."""
    import json

    from rlpipe.artifacts.layout import RunLayout
    from rlpipe.artifacts.shards import is_sharded, shard_paths
    from rlpipe.offline import commands as offline
    from rlpipe.offline.render import render_rollout, render_run

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


@cli.command()
@run_argument
@set_option
@click.option("--rollouts", type=RunPath(file_okay=False, path_type=Path), default=None,
              help="Folder of iter-NNNNNN.zarr stores (default: <run_dir>/rollouts).")
@click.option("--iterations", "span", callback=_parse_span, default=None, metavar="A:B",
              help="Replay rollouts A to B, both included, or one K (default: every stored one).")
@click.option("--chain", is_flag=True,
              help="Update each rollout from the previous replayed weights, not from its own checkpoint.")
@click.option("--from", "start", type=RunPath(dir_okay=False, path_type=Path), default=None,
              help="Checkpoint the chain starts from (implies --chain; default: the one before A).")
@_out_option("<run_dir>/reupdate")
@allow_rejected_option
@user_errors
def replay(params: Path, overrides: tuple[str, ...], rollouts: Path | None, span: tuple[int, int] | None,
           chain: bool, start: Path | None, out: Path | None, allow_rejected: bool) -> None:
    """Re-run advantage + update over stored rollouts with the params plus replay.algorithm overrides."""
    cfg = load_config(params, overrides)
    from rlpipe.artifacts.layout import RunLayout
    from rlpipe.offline.replay import replay as replay_rollouts

    layout = RunLayout(cfg.run_dir)
    out = out or layout.reupdate
    summary = replay_rollouts(cfg, rollouts or layout.rollouts, out, span,
                              chain=chain or start is not None, start=start, allow_rejected=allow_rejected)
    click.echo(f"replayed {summary['iterations']} rollouts ({summary['transitions']:,} transitions, "
               f"{summary['transitions_per_s']:,.0f}/s) → {out / 'checkpoints'}, {out / 'metrics.json'}")


@cli.command()
@click.option("--dry-run", is_flag=True, help="Only list what would be freed.")
@user_errors
def gc(dry_run: bool) -> None:
    """Free the run dirs (data/exps/<name>) of DVC experiments that no longer exist.

    Kept: every run dir named by a DVC experiment, a branch or tag (`dvc exp branch`), the
    workspace's data/<exp>/run.json, or held by a running experiment. Run after `dvc exp remove`.
    """
    from rlpipe.dvc_exps import gc as collect_garbage

    freed = collect_garbage(dry_run=dry_run)
    for folder, size in freed:
        click.echo(f"{'would free' if dry_run else 'freed'} {folder} ({size / 2**20:.1f} MB)")
    total = sum(size for _, size in freed) / 2**20
    click.echo(f"{len(freed)} experiment run dirs, {total:.1f} MB{' (dry run)' if dry_run else ''}")


@cli.command()
@click.option("--backend", "groups", multiple=True,
              type=click.Choice(("torch", "plugins", "envpool", "gymnasium")),
              help="Only these groups (repeatable; default: all).")
@click.option("--json", "as_json", is_flag=True, help="Print {group: [ids]} as JSON.")
@user_errors
def envs(groups: tuple[str, ...], as_json: bool) -> None:
    """List every env.id available, grouped by backend (in the order backend: auto tries them)."""
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


def main() -> None:
    """Console-script entry point."""
    cli()
