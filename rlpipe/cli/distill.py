"""``rlpipe distill``: a student from a teacher's stored rollouts, then optionally online."""

from __future__ import annotations

from pathlib import Path

import click

from rlpipe.cli.common import RunPath, set_option, user_errors

__all__ = ["distill"]


@click.command()
@click.argument("teacher", metavar="TEACHER_RUN|CHECKPOINT", type=RunPath(path_type=Path))
@set_option
@click.option("--params", "params_file", type=RunPath(dir_okay=False, path_type=Path), default=None,
              help="The student's params file (default: the teacher run's, with a distillation block).")
@click.option("--online-iterations", type=click.IntRange(min=0), default=None,
              help="Online distillation iterations after the offline passes, as run <exp>-online "
                   "(default: algorithm.cfg.online_iterations).")
@click.option("--resume", is_flag=True, help="Continue a stopped distillation (offline, then online).")
@user_errors
def distill(teacher: Path, overrides: tuple[str, ...], params_file: Path | None,
            online_iterations: int | None, resume: bool) -> None:
    """Train a student from TEACHER_RUN's stored rollouts (no simulator), relabelled by its teacher.

    The student's run directory (default <teacher>-student beside the teacher) names its teacher
    checkpoint and source stores. Choose what the student sees with
    --set 'policy.actor.obs_keys=[...]'; a store without such a group is refused (exit 2).
    """
    from rlpipe.offline.distill import distill_config, distill_offline, online_config

    cfg = distill_config(teacher, overrides, params_file)
    summary = distill_offline(cfg, resume)
    click.echo(f"distilled {summary['iterations']} store updates → {summary['checkpoint']}")
    iterations = cfg.algorithm.cfg.online_iterations if online_iterations is None else online_iterations
    if iterations:
        from rlpipe.trainer import Trainer

        online = online_config(cfg, Path(summary["checkpoint"]), iterations)
        Trainer(online, resume=resume).train()
        click.echo(f"online distillation → {online.run_dir}")
