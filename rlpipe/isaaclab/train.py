"""Isaac Lab's train command with rlpipe underneath: the task's rsl_rl agent config becomes rlpipe params.

``python -m rlpipe.isaaclab --task Isaac-Cartpole --num_envs 16 --device cpu --max_iterations 5``
takes the flags of ``isaaclab train --rl_library rsl_rl``; trailing ``key=value`` arguments are
Isaac Lab's Hydra overrides (``env.sim.dt=0.01``, ``agent.algorithm.learning_rate=3e-4``,
``presets=newton_mjwarp``), applied to the task's configs as Isaac Lab applies them. The params:

* the task's agent config (``RslRlOnPolicyRunnerCfg.to_dict()``) mapped by
  :func:`rlpipe.rsl_rl.params_from_train_cfg` (algorithm, policy, rollout length, …);
* ``env``: ``{id: <task>, backend: isaaclab, cfg: {overrides: [...]}}``: the run builds the task
  itself (:mod:`rlpipe.envs.backends.isaaclab_env`), so ``rlpipe replay`` and ``--resume`` work
  from the run directory as for any run;
* ``trainer``: ``num_envs``, ``device``, ``seed`` (the agent config's unless ``--seed``),
  ``iterations`` (``max_iterations``), ``exp_name`` (the agent's ``experiment_name``), no
  evaluation (Isaac Lab runs one simulation per process; its play script evaluates);
* then every ``--set key=value``, as ``rlpipe run`` takes them.

``--print-params`` writes those params as YAML and stops: ``rlpipe run`` trains the same run.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import click

from rlpipe.cli.common import set_option, user_errors

__all__ = ["isaaclab_params", "train"]


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--task", required=True, help="Isaac Lab task id (Isaac-Cartpole).")
@click.option("--num_envs", type=click.IntRange(min=1), default=None, help="Envs (default: the task's).")
@click.option("--device", default="cpu", show_default=True, help="cpu, cuda or cuda:<index>.")
@click.option("--max_iterations", type=click.IntRange(min=1), default=None, help="Training iterations.")
@click.option("--seed", type=int, default=None, help="Seed (default: the agent config's).")
@set_option
@click.option("--resume", is_flag=True, help="Continue from the last complete checkpoint.")
@click.option("--overwrite", is_flag=True, help="Replace an earlier run of the same exp_name.")
@click.option("--print-params", is_flag=True, help="Print the params as YAML (for rlpipe run) and stop.")
@click.argument("hydra_overrides", nargs=-1, metavar="[ISAACLAB_OVERRIDE=VALUE]...")
@user_errors
def train(
    task: str,
    num_envs: int | None,
    device: str,
    max_iterations: int | None,
    seed: int | None,
    overrides: tuple[str, ...],
    resume: bool,
    overwrite: bool,
    print_params: bool,
    hydra_overrides: tuple[str, ...],
) -> None:
    """Train an Isaac Lab task with rlpipe: every rollout stored, MLflow, resume, replay."""
    from rlpipe.envs.backends.isaaclab_env import require_isaaclab, task_configs

    require_isaaclab(f"--task {task}")  # before anything else: one line, nothing written
    with contextlib.redirect_stdout(sys.stderr):  # Isaac Lab's notes stay out of --print-params' YAML
        env_cfg, agent_cfg = task_configs(task, list(hydra_overrides))
    params = isaaclab_params(
        task,
        agent_cfg.to_dict(),
        num_envs=num_envs or int(env_cfg.scene.num_envs),
        device=device,
        max_iterations=max_iterations,
        seed=seed,
        hydra_overrides=list(hydra_overrides),
    )
    if print_params:
        import yaml

        click.echo(yaml.safe_dump(params, sort_keys=False), nl=False)
        return
    _train(params, overrides, resume, overwrite)


def isaaclab_params(
    task: str,
    train_cfg: dict[str, Any],
    *,
    num_envs: int,
    device: str,
    max_iterations: int | None = None,
    seed: int | None = None,
    hydra_overrides: list[str] | None = None,
) -> dict[str, Any]:
    """The rlpipe params of Isaac Lab ``task`` trained with its rsl_rl ``train_cfg`` (module docstring)."""
    # the drop-in runner's package maps rsl_rl's train_cfg onto params (the ignore: it merges separately)
    from rlpipe.rsl_rl import params_from_train_cfg

    params = params_from_train_cfg(train_cfg)
    env: dict[str, Any] = {"id": task, "backend": "isaaclab"}
    if hydra_overrides:
        env["cfg"] = {"overrides": list(hydra_overrides)}
    trainer = dict(params.get("trainer") or {})
    trainer.update(
        num_envs=num_envs,
        device=device,
        seed=int(seed if seed is not None else train_cfg.get("seed", trainer.get("seed", 42))),
        iterations=int(max_iterations or train_cfg.get("max_iterations") or trainer.get("iterations", 1)),
        enable_eval=False,
    )
    if train_cfg.get("experiment_name"):
        trainer.setdefault("exp_name", str(train_cfg["experiment_name"]))
    return {**params, "env": env, "trainer": trainer}


def _train(params: dict[str, Any], overrides: tuple[str, ...], resume: bool, overwrite: bool) -> None:
    """Build the run from ``params`` and ``--set`` overrides, train it, print the one-line summary."""
    from rlpipe.trainer import Trainer

    trainer = Trainer.from_params(params, list(overrides), resume=resume, overwrite=overwrite)
    summary = trainer.train()
    click.echo(
        f"done: {summary['iterations']} iterations, {summary['env_steps']} env steps in "
        f"{summary['wall_s']:.1f}s of training → {trainer.cfg.run_dir}"
    )
