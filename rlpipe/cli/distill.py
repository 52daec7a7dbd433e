"""``rlpipe distill``: a student from a teacher's stored rollouts, then optionally online."""

from __future__ import annotations

import shlex
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import click

from rlpipe.cli.common import RESUME_KEY, RunPath, set_option, user_errors

if TYPE_CHECKING:
    from rlpipe.location import AnyPath

__all__ = ["distill", "resume_command"]


@click.command()
@click.argument("teacher", metavar="TEACHER_RUN|CHECKPOINT", type=RunPath(path_type=Path))
@set_option
@click.option(
    "--params",
    "params_file",
    type=RunPath(dir_okay=False, path_type=Path),
    default=None,
    help="The student's params file (default: the teacher run's, with a distillation block).",
)
@click.option(
    "--online-iterations",
    type=click.IntRange(min=0),
    default=None,
    help="Online distillation iterations after the offline passes, as run <exp>-online "
    "(default: algorithm.cfg.online_iterations).",
)
@click.option(
    "--resume",
    is_flag=True,
    help="Continue a stopped distillation (offline, then online) with the same params and stores.",
)
@user_errors
def distill(
    teacher: Path,
    overrides: tuple[str, ...],
    params_file: Path | None,
    online_iterations: int | None,
    resume: bool,
) -> None:
    """Train a student from TEACHER_RUN's stored rollouts (no simulator), relabelled by its teacher.

    The student's run directory (default <teacher>-student beside the teacher) names its teacher
    checkpoint and source stores. Choose what the student sees with
    --set 'policy.actor.obs_keys=[...]'; a store without such a group is refused (exit 2). SIGINT or
    SIGTERM stops it at the next update with a checkpoint and prints the command that resumes it.
    """
    from rlpipe.offline.distill import distill_config, distill_offline, online_config, online_name
    from rlpipe.offline.distill_checks import distillation_of

    cfg = distill_config(teacher, overrides, params_file)
    iterations = distillation_of(cfg).online_iterations if online_iterations is None else online_iterations
    if iterations:
        online_name(cfg)  # a name too long for the online run is refused before the offline one
    click.get_current_context().meta[RESUME_KEY] = resume_command(
        teacher, overrides, params_file, online_iterations
    )
    from rlpipe.trainer.signals import GracefulStop, Interrupted

    env_from = f"--params {params_file}" if params_file is not None else "env.id"
    with GracefulStop() as stop:
        try:
            summary = distill_offline(cfg, resume, stop=stop, env_from=env_from)
        except Interrupted as exc:  # a second signal: stopped at once, the newest checkpoint stands
            raise _naming_checkpoint(exc, cfg.run_dir) from None
    if "interrupted_by" in summary:
        signum = signal.Signals[summary["interrupted_by"]]
        raise Interrupted(signum, summary["iteration"], summary["checkpoint"])
    click.echo(f"distilled {summary['iterations']} store updates → {summary['checkpoint']}")
    if iterations:
        from rlpipe.trainer import Trainer

        online = online_config(cfg, summary["checkpoint"], iterations)
        Trainer(online, resume=resume).train()
        click.echo(f"online distillation → {online.run_dir}")


def resume_command(
    teacher: Path, overrides: tuple[str, ...], params_file: Path | None, online_iterations: int | None
) -> str:
    """The exact ``rlpipe distill … --resume`` that continues this distillation (printed on a stop)."""
    args = ["rlpipe", "distill", str(teacher), *(a for item in overrides for a in ("--set", item))]
    if params_file is not None:
        args += ["--params", str(params_file)]
    if online_iterations is not None:
        args += ["--online-iterations", str(online_iterations)]
    return shlex.join([*args, "--resume"])


def _naming_checkpoint(exc: BaseException, run_dir: AnyPath) -> BaseException:
    """``exc`` (an ``Interrupted`` that named no checkpoint) naming the run's newest checkpoint."""
    from rlpipe.artifacts.checkpoints import latest_checkpoint
    from rlpipe.artifacts.layout import CHECKPOINT_NAME, RunLayout, iteration_from_name
    from rlpipe.trainer.signals import Interrupted

    folder = RunLayout(run_dir).checkpoints
    latest = latest_checkpoint(folder) if folder.is_dir() else None
    if not isinstance(exc, Interrupted) or exc.checkpoint is not None or latest is None:
        return exc
    iteration = iteration_from_name(latest, CHECKPOINT_NAME)
    return Interrupted(exc.signum, iteration, str(latest), at_once=exc.at_once)
